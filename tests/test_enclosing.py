"""The ground floor's containment queries (`analysis.base.enclosing`, issue 57) against a brute-force test of
every (query, container) pair, on hand-made nested spans (edge cases by design: identical spans, zero-length
spans, spans on other threads, missing starts), and the Python context of `sync_in_loop` built on them."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from opscope.analysis.base import enclosing
from opscope.analysis.rules.syncs import python_context


def _nested(draw: st.DrawFn, lanes: int, depth: int) -> list[tuple[int, int, int]]:
    """Properly nested spans per lane (as a profiler writes Python frames), drawn as a random tree."""
    spans: list[tuple[int, int, int]] = []
    for lane in range(lanes):
        stack = [(0, 1000)]
        for _ in range(draw(st.integers(0, 12))):
            lo, hi = stack[-1]
            s = draw(st.integers(lo, hi))
            e = draw(st.integers(s, hi))
            spans.append((lane, s, e))
            if len(stack) < depth and draw(st.booleans()):
                stack.append((s, e))
            elif len(stack) > 1 and draw(st.booleans()):
                stack.pop()
    return spans


@st.composite
def scenes(draw: st.DrawFn) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int]], list[bool]]:
    containers = _nested(draw, draw(st.integers(1, 3)), draw(st.integers(1, 6)))
    queries = [
        (draw(st.integers(0, 3)), s, s + draw(st.integers(0, 60)))
        for s in draw(st.lists(st.integers(-10, 1010), max_size=25))
    ]
    wanted = [draw(st.booleans()) for _ in containers]
    return containers, queries, wanted


def _spans(rows: list[tuple[int, int, int]]) -> enclosing.Spans:
    lane = np.array([r[0] for r in rows], dtype=np.int64)
    start = np.array([r[1] for r in rows], dtype=np.int64)
    end = np.array([r[2] for r in rows], dtype=np.int64)
    return enclosing.Spans(lane=lane, start=start, end=end, valid=np.ones(len(rows), dtype=bool))


def _holders(containers: list[tuple[int, int, int]], q: tuple[int, int, int]) -> list[int]:
    return [i for i, c in enumerate(containers) if c[0] == q[0] and c[1] <= q[1] and c[2] >= q[2]]


def _inner(containers: list[tuple[int, int, int]], held: list[int]) -> int:
    """The innermost of the holders: latest start, then shortest, then listed last."""
    return max(held, key=lambda i: (containers[i][1], -containers[i][2], i)) if held else -1


@settings(max_examples=300, deadline=None)
@given(scenes())
def test_innermost_matches_brute_force(scene) -> None:
    containers, queries, _wanted = scene
    got = enclosing.innermost(_spans(containers), _spans(queries))
    for q, found in zip(queries, got, strict=True):
        assert found == _inner(containers, _holders(containers, q))


@settings(max_examples=300, deadline=None)
@given(scenes())
def test_innermost_where_matches_brute_force(scene) -> None:
    containers, queries, wanted = scene
    got = enclosing.innermost_where(_spans(containers), _spans(queries), np.array(wanted, dtype=bool))
    for q, found in zip(queries, got, strict=True):
        held = _holders(containers, q)
        preferred = [i for i in held if wanted[i]]
        expected = _inner(containers, preferred) if preferred else _inner(containers, held)
        if found != expected:  # of identical spans either may be the inner one: the same span answers
            assert containers[found] == containers[expected]


def test_missing_times_and_other_threads_hold_nothing() -> None:
    """Hand-made edge cases: a frame on another thread, a call with no start, a zero-length call on a frame's
    edge, a frame identical to the call."""
    frames = pl.DataFrame(
        {
            "pid": ["1", "1", "2"],
            "tid": ["7", "7", "7"],
            "ts_ns": [0, 10, 0],
            "dur_ns": [100, 20, 1000],
            "name": ["outer.py(1): f", "torch/nn/x.py(3): g", "other.py(2): h"],
            "kind": ["python_function"] * 3,
        }
    )
    calls = pl.DataFrame(
        {
            "pid": ["1", "1", "1", "2", "3"],
            "tid": ["7", "7", "7", "7", "7"],
            "ts_ns": [15, None, 100, 0, 5],
            "end_ns": [16, None, 100, 1000, 6],
        },
        schema_overrides={"ts_ns": pl.Int64, "end_ns": pl.Int64},
    )
    got = python_context(calls, frames).to_list()
    # the user's own line outer.py wins over torch's frame; an identical span holds; no thread 3 frames
    assert got == ["outer.py(1): f", None, "outer.py(1): f", "other.py(2): h", None]


def test_deep_and_wide_stay_linear_in_shape() -> None:
    """A stack 20,000 frames deep on one thread (each frame inside the one before) and 5,000 threads of one
    frame each: the answers are exact, with no recursion whose depth follows the stack."""
    depth = 20_000
    start = np.arange(depth, dtype=np.int64)
    deep = enclosing.Spans(
        lane=np.zeros(depth, dtype=np.int64), start=start, end=2 * depth - start, valid=np.ones(depth, bool)
    )
    q = enclosing.Spans(
        lane=np.zeros(2, dtype=np.int64),
        start=np.array([depth - 1, 0]),
        end=np.array([depth, 2 * depth]),
        valid=np.ones(2, bool),
    )
    assert enclosing.innermost(deep, q).tolist() == [depth - 1, 0]
    wanted = np.zeros(depth, dtype=bool)
    wanted[3] = True
    assert enclosing.innermost_where(deep, q, wanted).tolist() == [3, 0]
    wide = enclosing.Spans(
        lane=np.arange(5000, dtype=np.int64),
        start=np.zeros(5000, dtype=np.int64),
        end=np.full(5000, 10, dtype=np.int64),
        valid=np.ones(5000, bool),
    )
    assert (enclosing.innermost(wide, wide) == np.arange(5000)).all()


@st.composite
def forests(draw: st.DrawFn) -> list[int]:
    """Parent indices of a random forest (-1 at roots), with the odd cycle of a damaged table."""
    n = draw(st.integers(0, 40))
    parent = [draw(st.integers(-1, i - 1)) if i else -1 for i in range(n)]
    if n >= 3 and draw(st.booleans()):  # a cycle: two nodes each other's parent
        parent[n - 1], parent[n - 2] = n - 2, n - 1
    order = draw(st.permutations(range(n)))  # children before parents too
    where = {old: new for new, old in enumerate(order)}
    return [where[parent[old]] if parent[old] >= 0 else -1 for old in order]


@settings(max_examples=300, deadline=None)
@given(forests())
def test_preorder_numbers_each_subtree_as_one_range(parent: list[int]) -> None:
    """`nesting.preorder` (what `Linkage.under` searches): a node's subtree is exactly the nodes numbered in
    [first, first + size), checked against the ancestors of every node walked one by one."""
    from opscope.analysis.base.nesting import preorder

    first, size = preorder(np.array(parent, dtype=np.int64))
    assert sorted(first.tolist()) == list(range(len(parent)))
    on_cycle = {i for i in range(len(parent)) if i in _walk(parent, i)}
    for a in range(len(parent)):
        for d in range(len(parent)):
            if on_cycle & ({a, d} | _walk(parent, d)):
                continue  # a damaged table: its numbers need only be a permutation
            inside = first[a] <= first[d] < first[a] + size[a]
            assert inside == (a == d or a in _walk(parent, d))


def _walk(parent: list[int], node: int) -> set[int]:
    """The nodes reached by following parents from `node` (itself excluded unless on a cycle)."""
    seen: set[int] = set()
    while parent[node] >= 0 and parent[node] not in seen:
        node = parent[node]
        seen.add(node)
    return seen
