"""Interval helpers against a brute-force recomputation on small hand-made sets (edge cases by design)."""

from __future__ import annotations

import random

import numpy as np
import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from opscope.analysis.base import intervals


def brute_union(pairs: list[tuple[int, int]]) -> int:
    covered = set()
    for s, e in pairs:
        covered.update(range(s, e))
    return len(covered)


def test_union_matches_brute_force():
    rng = random.Random(7)
    for _ in range(50):
        pairs = []
        for _ in range(rng.randint(0, 30)):
            s = rng.randint(0, 200)
            pairs.append((s, s + rng.randint(-3, 40)))
        frame = pl.DataFrame(
            {"start_ns": [p[0] for p in pairs], "end_ns": [p[1] for p in pairs]},
            schema={"start_ns": pl.Int64, "end_ns": pl.Int64},
        )
        assert intervals.union_ns(frame) == brute_union(pairs)


def test_union_by_group_and_intersection():
    frame = pl.DataFrame({"g": [1, 1, 2, 2], "start_ns": [0, 5, 0, 100], "end_ns": [10, 20, 50, 150]})
    by = intervals.union_ns(frame, by=["g"])
    assert dict(zip(by["g"], by["busy_ns"])) == {1: 20, 2: 100}
    a = pl.DataFrame({"start_ns": [0, 30], "end_ns": [20, 40]})
    b = pl.DataFrame({"start_ns": [10, 35], "end_ns": [32, 100]})
    assert intervals.intersection_ns(a, b) == 10 + 2 + 5


def test_gaps_and_clip():
    merged = intervals.merge(pl.DataFrame({"start_ns": [10, 40], "end_ns": [20, 50]}))
    g = intervals.gaps(merged, 0, 60)
    assert list(zip(g["start_ns"], g["end_ns"])) == [(0, 10), (20, 40), (50, 60)]
    clipped = intervals.clip(pl.DataFrame({"start_ns": [0, 55], "end_ns": [15, 70]}), 5, 60).collect()
    assert list(zip(clipped["start_ns"], clipped["end_ns"])) == [(5, 15), (55, 60)]


# Coverage and inside_any (issue 25) replace an ops x gaps cross join and per-window scans: each must equal the
# brute-force sum / test it replaced, exactly, on any intervals (overlapping, nested, empty, inverted).
_SPAN = st.integers(min_value=-50, max_value=50)


@given(
    st.lists(st.tuples(_SPAN, _SPAN), max_size=30),
    st.lists(st.tuples(_SPAN, _SPAN), max_size=30),
)
def test_coverage_equals_the_sum_of_clipped_overlaps(
    parts: list[tuple[int, int]], queries: list[tuple[int, int]]
):
    frame = pl.DataFrame(
        {"start_ns": [a for a, _ in parts], "end_ns": [b for _, b in parts]},
        schema={"start_ns": pl.Int64, "end_ns": pl.Int64},
    )
    lo = np.array([a for a, _ in queries], dtype=np.int64)
    hi = np.array([b for _, b in queries], dtype=np.int64)
    got = intervals.Coverage(frame).inside(lo, hi).tolist()
    want = [
        sum(max(0, min(e, q1) - max(s, q0)) for s, e in parts if e > s) if q1 > q0 else 0
        for q0, q1 in queries
    ]
    assert got == want


@given(
    st.lists(st.tuples(_SPAN, _SPAN), max_size=30),
    st.lists(st.tuples(_SPAN, st.integers(min_value=0, max_value=20)), max_size=10),
)
def test_inside_any_equals_testing_every_window(calls: list[tuple[int, int]], windows: list[tuple[int, int]]):
    bounds = [(lo, lo + length) for lo, length in windows]
    start = pl.Series([a for a, _ in calls], dtype=pl.Int64)
    end = pl.Series([b for _, b in calls], dtype=pl.Int64)
    got = intervals.inside_any(start, end, bounds).to_list()
    assert got == [any(lo <= s and e <= hi for lo, hi in bounds) for s, e in calls]


def test_inside_any_is_false_for_missing_times_and_exact_for_epoch_nanoseconds():
    epoch = 1_712_195_495_505_582_988  # beyond float64's exact integers: no float conversion may happen
    start = pl.Series([epoch, None, epoch + 1], dtype=pl.Int64)
    end = pl.Series([epoch + 10, epoch + 5, None], dtype=pl.Int64)
    assert intervals.inside_any(start, end, [(epoch, epoch + 10)]).to_list() == [True, False, False]
    assert intervals.inside_any(start, end, [(epoch + 1, epoch + 10)]).to_list() == [False, False, False]
