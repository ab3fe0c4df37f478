"""The building blocks: `--steps` parsing and `select.by_steps` (checked on a real trace against plain-Python
clipping), window overlap pairs and vectorised nesting (checked against brute force on random hand-made
intervals)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

import opscope
import reference as ref
from conftest import corpus_path
from opscope.analysis.base import nesting, select
from opscope.analysis.base.nesting import (
    ancestors,
    at_positions,
    chains,
    depths,
    filled,
    has_equal_ancestor,
    innermost_container,
    positions,
    rooted_depths,
    subtree_sums,
)
from opscope.analysis.base.windows import StepWindow, overlap_pairs, parse_steps
from opscope.errors import UsageError
from opscope.model.schema import Col

RESNET_2021 = "kineto/plugin_samples_resnet50_num_workers_0_worker0.pt.trace.json.gz"


@pytest.mark.parametrize(
    ("spec", "steps"), [("3", (3,)), ("3-5", (3, 4, 5)), ("2,4", (2, 4)), (" 2, 4-5 ,4", (2, 4, 5))]
)
def test_parse_steps(spec: str, steps: tuple[int, ...]) -> None:
    assert parse_steps(spec) == steps


@pytest.mark.parametrize(
    "spec", ["", "a", "3-", "5-3", "1;2", "-1", "1-10000000000", "1-600000,700000-1300000"]
)
def test_parse_steps_rejects(spec: str) -> None:
    with pytest.raises(UsageError, match="--steps"):
        parse_steps(spec)


def test_missing_steps_error_is_one_bounded_line(cli) -> None:  # type: ignore[no-untyped-def]
    """Steps the trace lacks are named as ranges, cut at ~200 characters with a count of the rest (a spec of a
    few thousand steps once printed every one of them)."""
    spec = ",".join(str(n) for n in range(1000, 30000, 2))
    r = cli("steps", corpus_path(RESNET_2021), "--steps", spec)
    assert r.code == 2
    line = r.err.strip()
    assert "\n" not in line and len(line) < 700
    assert "--steps: no step 1000,1002," in line and "more)" in line


def test_by_steps_clips_real_trace() -> None:
    path = corpus_path(RESNET_2021)
    events = ref.load(path)
    windows = {
        int(e["name"].split("#")[1]): ref.span(e)
        for e in events
        if e.get("cat") == "Operator" and e.get("name", "").startswith("ProfilerStep#")
    }
    gpu = [ref.span(e) for e in events if e.get("cat") in ref.GPU_CATS and ref.is_x(e)]
    chosen = [windows[6], windows[8]]
    expected = sum(max(min(e, hi) - max(s, lo), 0) for s, e in gpu for lo, hi in chosen)
    starts = sum(1 for s, _ in gpu for lo, hi in chosen if lo <= s < hi)
    trace = opscope.load(path)
    frame = trace.gpu_events().collect()
    clipped = select.by_steps(frame, trace, "6,8")
    assert int(clipped[Col.DUR_NS].sum()) == expected
    assert set(clipped["step"]) == {6, 8}
    assert (clipped[Col.TS_NS] >= min(lo for lo, _ in chosen)).all()
    whole = select.by_steps(frame, trace, "6,8", clip=False)
    assert (
        whole.height == starts
        and whole[Col.DUR_NS].to_list()
        == frame.filter(pl.col(Col.TS_NS).is_in(whole[Col.TS_NS].implode()))[Col.DUR_NS].to_list()
    )
    assert select.by_steps(frame, trace, None).height == frame.height


@pytest.mark.parametrize("near_levels", [1, 6])
def test_innermost_container_matches_brute_force(near_levels: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from opscope.analysis.base import nesting

    monkeypatch.setattr(nesting, "NEAR_LEVELS", near_levels)  # 1: most containers found through the blocks
    rng = np.random.default_rng(0)
    for _ in range(200):  # HAND-MADE random intervals, partial overlaps and ties included
        n = int(rng.integers(1, 40))
        thread = rng.integers(0, 3, n)
        start = rng.integers(0, 50, n)
        end = start + rng.integers(0, 30, n)
        can = rng.random(n) < 0.7
        tie = rng.integers(0, 3, n)
        got = innermost_container(thread, start, end, can, tie)
        order = np.lexsort((np.arange(n), tie, -(end - start), start, thread))
        position = np.empty(n, dtype=int)
        position[order] = np.arange(n)
        for i in range(n):
            candidates = [
                j
                for j in range(n)
                if j != i
                and can[j]
                and thread[j] == thread[i]
                and start[j] <= start[i]
                and end[j] >= end[i]
                and position[j] < position[i]
            ]
            assert got[i] == (max(candidates, key=lambda j: position[j]) if candidates else -1)


@pytest.mark.parametrize("near_levels", [1, 2, 6])
def test_previous_at_least_matches_a_scan(near_levels: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lifting finds the last earlier value reaching each query, near (within 2^NEAR_LEVELS places) or
    through the block table (small NEAR_LEVELS: every path taken; sizes across block edges)."""
    from opscope.analysis.base import nesting

    monkeypatch.setattr(nesting, "NEAR_LEVELS", near_levels)
    rng = np.random.default_rng(2)
    for n in (1, 2, 3, 63, 64, 65, 127, 128, 129, 1000, 3000):  # HAND-MADE random values, zeros and ties
        values = rng.integers(0, 60, n).astype(np.int32)
        values[rng.random(n) < 0.3] = 0
        query = rng.integers(1, 64, n).astype(np.int32)
        got = nesting.previous_at_least(values, query)
        want = [
            int(np.flatnonzero(values[:i] >= query[i])[-1]) if (values[:i] >= query[i]).any() else -1
            for i in range(n)
        ]
        assert got.tolist() == want


@pytest.mark.parametrize("ranked_min", [1, 10**9])
def test_lexsort_by_polars_is_numpys_permutation(ranked_min: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Packed, ranked or sorted by polars (ranked_min 1: every input that needs ranking), the permutation is
    np.lexsort's, ties in index order."""
    from opscope.analysis.base import nesting

    monkeypatch.setattr(nesting, "RANKED_SORT_MIN", ranked_min)
    rng = np.random.default_rng(3)
    for n in (1, 5, 300, 5000):  # HAND-MADE keys: many ties, timestamps that overflow a packed key
        keys = (
            rng.integers(0, 4, n),
            -rng.integers(0, 10**9, n),
            rng.integers(0, 50, n) * 10**11 + 1_712_195_495_502_094_565,
            rng.integers(0, 3, n).astype(np.int32),
        )
        assert nesting.lexsort(keys).tolist() == np.lexsort(keys).tolist()
        assert nesting.lexsort(keys[2:]).tolist() == np.lexsort(keys[2:]).tolist()


def test_ancestors_expands_parent_chains() -> None:
    tree = pl.DataFrame(
        {"row": [0, 1, 2, 3], "parent_row": [None, 0, 1, 0]}, schema={"row": pl.Int64, "parent_row": pl.Int64}
    )
    pairs = ancestors(tree, pl.Series([2, 3], dtype=pl.Int64))
    got = sorted(pairs.select("row", "ancestor", "level").iter_rows())
    assert got == [(2, 0, 2), (2, 1, 1), (2, 2, 0), (3, 0, 1), (3, 3, 0)]
    cycle = pl.DataFrame({"row": [0, 1], "parent_row": [1, 0]})  # malformed input must still terminate
    assert ancestors(cycle).height <= 6


def test_overlap_pairs_matches_brute_force() -> None:
    rng = np.random.default_rng(1)
    for _ in range(300):  # HAND-MADE random windows (overlapping, empty) and events (zero-length included)
        windows = []
        for i in range(int(rng.integers(1, 6))):
            lo = int(rng.integers(0, 100))
            windows.append(StepWindow(i, f"ProfilerStep#{i}", lo, lo + int(rng.integers(0, 40))))
        n = int(rng.integers(0, 30))
        start = rng.integers(0, 140, n).astype(np.int64)
        end = start + (rng.integers(0, 20, n) * (rng.random(n) < 0.8)).astype(np.int64)
        event, window = overlap_pairs(start, end, tuple(windows))
        expected = sorted(
            (i, j)
            for i in range(n)
            for j, w in enumerate(windows)
            if (
                w.start_ns <= start[i] < w.end_ns
                if end[i] <= start[i]
                else start[i] < w.end_ns and end[i] > w.start_ns
            )
        )
        assert sorted(zip(event.tolist(), window.tolist())) == expected


def test_subtree_sums_and_equal_ancestors_match_a_plain_walk() -> None:
    """Hand-made fixture (random forests, parents listed in any order): each node's depth, the sum over the
    nodes it encloses, and whether an enclosing node has its code, against walking up from every node."""
    import random

    for seed in range(60):
        rng = random.Random(seed)
        n = rng.randrange(1, 200)
        order = list(range(n))
        rng.shuffle(order)  # order[k]'s parent is an earlier order[j]: a forest
        parent = [-1] * n
        for k in range(1, n):
            if rng.random() > 0.15:
                parent[order[k]] = order[rng.randrange(0, k)]
        values = [rng.randrange(0, 1000) for _ in range(n)]
        codes = [rng.randrange(0, 4) for _ in range(n)]
        up = np.array(parent, dtype=np.int64)
        want_depth, want_sum, want_equal = [0] * n, list(values), [False] * n
        for i in range(n):
            at = parent[i]
            while at >= 0:
                want_depth[i] += 1
                want_sum[at] += values[i]
                want_equal[i] |= codes[at] == codes[i]
                at = parent[at]
        assert depths(up).tolist() == want_depth
        assert subtree_sums(up, np.array(values)).tolist() == want_sum
        assert has_equal_ancestor(up, np.array(codes)).tolist() == want_equal


def test_chains_are_the_enclosing_nodes_of_the_starts() -> None:
    """Hand-made fixture (random forests): `chains` gives every node on the way from the starts up to their
    roots, sorted, each with its parent as an index into them; against walking up from every start."""
    import random

    for seed in range(60):
        rng = random.Random(seed)
        n = rng.randrange(1, 200)
        order = list(range(n))
        rng.shuffle(order)
        parent = [-1] * n
        for k in range(1, n):
            if rng.random() > 0.15:
                parent[order[k]] = order[rng.randrange(0, k)]
        starts = [rng.randrange(0, n) for _ in range(rng.randrange(0, 30))]
        want: set[int] = set()
        for s in starts:
            while s >= 0 and s not in want:
                want.add(s)
                s = parent[s]
        nodes, up = chains(np.array(parent, dtype=np.int64), np.array(starts, dtype=np.int64))
        assert nodes.tolist() == sorted(want)
        assert [nodes[u] if u >= 0 else -1 for u in up] == [parent[v] for v in nodes]


def test_cyclic_parents_are_refused_not_looped() -> None:
    """Hand-made fixture: parents that close a loop (a malformed trace) give None, and the walk ends."""
    up = np.array([1, 2, 0, -1], dtype=np.int64)
    assert depths(up) is None
    # the depths of the nodes that reach a root, -1 on the loop and below it
    assert rooted_depths(np.array([1, 2, 0, -1, 3, 0], dtype=np.int64)).tolist() == [-1, -1, -1, 0, 1, -1]
    assert subtree_sums(up, np.ones(4, dtype=np.int64)) is None
    # the walk up from a node on the loop comes back to the node itself: it ends there, found
    assert has_equal_ancestor(up, np.array([5, 6, 7, 8])).tolist() == [True, True, True, False]
    nodes, on_chains = chains(up, np.array([3, 0]))  # each node once: the walk ends
    assert nodes.tolist() == [0, 1, 2, 3] and subtree_sums(on_chains, np.ones(4, dtype=np.int64)) is None


def test_positions_answer_a_left_join_on_a_row_ordered_table() -> None:
    """Hand-made fixture: `positions` + `at_positions` give what a left join on the row column gives (null for
    rows the table lacks), with the table empty too."""
    table = pl.DataFrame({"row": [2, 5, 9, 11], "v": ["a", None, "c", "d"]})
    asked = np.array([9, 3, 2, 11, 12, -1, 5], dtype=np.int64)
    joined = pl.DataFrame({"row": asked}).join(table, on="row", how="left", maintain_order="left")["v"]
    got = at_positions(table["v"], positions(table["row"].to_numpy(), asked))
    assert got.to_list() == joined.to_list() == ["c", None, "a", "d", None, None, None]
    empty = table.clear()
    assert at_positions(empty["v"], positions(empty["row"].to_numpy(), asked)).to_list() == [None] * len(
        asked
    )


@given(
    st.lists(
        st.tuples(st.integers(-3, 3), st.integers(-(2**62), 2**62), st.booleans(), st.integers(0, 2**40)),
        max_size=40,
    ),
)
def test_lexsort_is_numpys_permutation(rows: list[tuple[int, int, bool, int]]) -> None:
    """`nesting.lexsort` (packed keys, the widest replaced by dense ranks, np.lexsort when even that does not
    fit) gives np.lexsort's permutation exactly, ties in index order included: narrow keys, keys spanning
    most of int64, booleans."""
    from opscope.analysis.base import nesting

    columns = [np.array([r[i] for r in rows], dtype=bool if i == 2 else np.int64) for i in range(4)]
    saved = nesting.RANKED_SORT_MIN
    try:
        for ranked_min in (saved, 1):  # 1: the keys that need ranking sorted by polars
            nesting.RANKED_SORT_MIN = ranked_min
            for keys in (
                tuple(columns),
                (columns[0], columns[2]),
                (columns[3], columns[1]),
                (columns[1], columns[0]),
            ):
                assert nesting.lexsort(keys).tolist() == np.lexsort(keys).tolist()
    finally:
        nesting.RANKED_SORT_MIN = saved


def test_lexsort_falls_back_where_even_ranks_do_not_fit() -> None:
    """Four keys of 70,000 distinct values each: their ranks multiply past int64, so np.lexsort answers."""
    from opscope.analysis.base.nesting import lexsort

    rng = np.random.default_rng(3)
    keys = tuple(rng.permutation(70_000).astype(np.int64) * 2**40 for _ in range(4))
    assert lexsort(keys).tolist() == np.lexsort(keys).tolist()


@pytest.mark.parametrize("nulls", [[], [0], [3, 4], [0, 1, 2, 3, 4]])
def test_filled_equals_fill_null(nulls: list[int]) -> None:
    """`filled`: the column's buffer where it has no null (no polars query), `fill_null` where it has some;
    int64 values beyond 2**53 stay exact (no float round trip)."""
    values = pl.Series("v", [2**62 + 1, -5, 7, 2**53 + 3, 0], dtype=pl.Int64).scatter(nulls, None)
    out = filled(values, -1)
    assert out.dtype == np.int64
    assert out.tolist() == values.fill_null(-1).to_list()


@given(
    table=st.lists(st.integers(-50, 400), max_size=120),
    asked=st.lists(st.integers(-80, 450), max_size=150),
    dense_from=st.sampled_from([0, 1, 10_000]),
)
def test_positions_by_lookup_table_equal_binary_search(
    table: list[int], asked: list[int], dense_from: int
) -> None:
    """`positions` answers dense questions from a lookup table, others by binary search; both give the
    position of the first equal row or -1 (rows strictly increasing, repeated, sparse, negative; questions
    outside the range). `dense_from` moves the threshold so that both branches see every case."""
    rows = np.sort(np.array(table, dtype=np.int64))
    questions = np.array(asked, dtype=np.int64)
    expected = [table_index(rows, q) for q in questions.tolist()]
    original = nesting.DENSE_LOOKUP_MIN
    nesting.DENSE_LOOKUP_MIN = dense_from
    try:
        assert positions(rows, questions).tolist() == expected
    finally:
        nesting.DENSE_LOOKUP_MIN = original


def table_index(rows: np.ndarray, q: int) -> int:
    """The first position of `q` in `rows`, -1 when absent: a plain scan."""
    found = np.flatnonzero(rows == q)
    return int(found[0]) if len(found) else -1


@given(data=st.data(), n=st.integers(0, 60))
def test_nearest_of_kind_equals_a_walk_up(data: st.DataObject, n: int) -> None:
    """`nearest_of_kind` (pointer doubling) against a plain walk up from each node: random forests (a parent
    always earlier, so no cycle), random wanted nodes."""
    parent = np.array([data.draw(st.integers(-1, i - 1)) for i in range(n)], dtype=np.int64)
    wanted = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    expected = []
    for node in range(n):
        up = int(parent[node])
        while up >= 0 and not wanted[up]:
            up = int(parent[up])
        expected.append(up)
    assert nesting.nearest_of_kind(parent, wanted).tolist() == expected
