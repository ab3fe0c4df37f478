"""Innermost enclosing span (binary lifting) against brute force on random call stacks (hand-made by design:
random nesting, ties on start, calls after a child ended, calls outside every span, several threads)."""

from __future__ import annotations

import random

import polars as pl

from opscope.analysis.enclosing import innermost_enclosing


def _stack(rng: random.Random, lo: int, hi: int, depth: int, out: list[tuple[int, int]]) -> None:
    t = lo
    while t < hi and depth < 5:
        start = rng.randint(t, min(hi, t + 20))
        end = rng.randint(start, min(hi, start + 60))
        if rng.random() < 0.2:
            start = t  # same start as the parent or the previous sibling's end
        out.append((start, end))
        if end - start > 2:
            _stack(rng, start, end, depth + 1, out)
        t = end + rng.randint(0, 5)


def brute(spans: list[tuple[str, int, int]], thread: str, start: int, end: int) -> int | None:
    best = None
    for i, (th, s, e) in enumerate(spans):
        inside = th == thread and s <= start and end <= e
        if inside and (best is None or (s, -e, i) > (spans[best][1], -spans[best][2], best)):
            best = i
    return best


def test_matches_brute_force() -> None:
    rng = random.Random(3)
    for _ in range(30):
        spans: list[tuple[str, int, int]] = []
        for thread in ("a", "b", "c"):
            pairs: list[tuple[int, int]] = []
            _stack(rng, 0, 400, 0, pairs)
            spans += [(thread, s, e) for s, e in pairs]
        calls = []
        for _ in range(200):
            s = rng.randint(-5, 410)
            calls.append((rng.choice("abcd"), s, s + rng.randint(0, 8)))
        span_frame = pl.DataFrame({"tid": [s[0] for s in spans], "ts_ns": [s[1] for s in spans],
                                   "end_ns": [s[2] for s in spans]})
        call_frame = pl.DataFrame({"tid": [c[0] for c in calls], "ts_ns": [c[1] for c in calls],
                                   "end_ns": [c[2] for c in calls]})
        got = innermost_enclosing(call_frame, span_frame, by=("tid",)).to_list()
        for (thread, s, e), index in zip(calls, got):
            want = brute(spans, thread, s, e)
            if want is None:
                assert index is None
            else:
                # equal spans (same thread, start and end) are interchangeable
                assert index is not None and spans[index] == spans[want], (thread, s, e)


def test_call_after_child_ended_goes_to_parent_and_nulls_match_nothing() -> None:
    spans = pl.DataFrame({"tid": ["t", "t", "t"], "ts_ns": [0, 10, 40], "end_ns": [100, 20, 45]})
    calls = pl.DataFrame({"tid": ["t", "t", "t", "u"], "ts_ns": [30, 12, None, 30], "end_ns": [35, 15, None, 31]})
    assert innermost_enclosing(calls, spans, by=("tid",)).to_list() == [0, 1, None, None]
