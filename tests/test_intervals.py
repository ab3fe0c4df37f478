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


def _merge_by_brute(rows: list[tuple], keys: int) -> list[tuple]:
    """Plain Python: per group (the first `keys` fields, None sorting first), merge sorted intervals that
    overlap or touch."""
    groups: dict[tuple, list[tuple[int, int]]] = {}
    for row in rows:
        s, e = row[keys], row[keys + 1]
        if s is not None and e is not None and e > s:
            groups.setdefault(row[:keys], []).append((s, e))
    out = []
    for key in sorted(groups, key=lambda k: tuple((v is not None, v or 0) for v in k)):
        merged: list[list[int]] = []
        for s, e in sorted(groups[key]):
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        out += [(*key, s, e) for s, e in merged]
    return out


def test_grouped_merge_against_plain_python_and_the_polars_form(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Hand-made fixture (random): groups with nulls in their keys, missing and inverted intervals, touching
    ones, epoch-nanosecond times; the numpy form (groups moved apart on the time axis) equals a plain-Python
    merge per group and the polars form it replaced."""
    for seed in range(60):
        rng = random.Random(seed)
        base = rng.choice([0, 1_700_000_000_000_000_000])
        rows = []
        for _ in range(rng.randint(0, 80)):
            s = base + rng.randint(0, 300) if rng.random() > 0.05 else None
            rows.append(
                (
                    rng.choice([0, 1, 7, None]),
                    rng.choice([2, None]),
                    s,
                    None if s is None else s + rng.randint(-5, 40),
                )
            )
        frame = pl.DataFrame(rows, schema=["win", "device", "start_ns", "end_ns"], orient="row")
        frame = frame.cast({"win": pl.Int64, "device": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64})
        merged = intervals.merge(frame, by=["win", "device"])
        assert merged.rows() == _merge_by_brute(rows, 2)
        with monkeypatch.context() as m:
            m.setattr(intervals, "_merge_grouped", lambda *a: None)
            assert intervals.merge(frame, by=["win", "device"]).equals(merged)


@given(
    st.lists(st.tuples(_SPAN, _SPAN, st.integers(min_value=0, max_value=2)), max_size=30),
    st.lists(st.tuples(_SPAN, _SPAN), max_size=8),
)
def test_covered_per_window_equals_the_points_covered(
    parts: list[tuple[int, int, int]], windows: list[tuple[int, int]]
) -> None:
    """Per window and group: the integer points [start, end) of the group's intervals inside [lo, hi), counted
    one by one (windows may overlap, be empty or inverted; intervals may be empty, inverted or touch)."""
    start = np.array([a for a, _, _ in parts], dtype=np.int64)
    end = np.array([b for _, b, _ in parts], dtype=np.int64)
    group = np.array([g for _, _, g in parts], dtype=np.int64)
    lo = np.array([a for a, _ in windows], dtype=np.int64)
    hi = np.array([b for _, b in windows], dtype=np.int64)
    got = intervals.covered_per_window(start, end, group, 3, lo, hi)
    assert got is not None
    for w, (q0, q1) in enumerate(windows):
        for g in range(3):
            points = {t for s, e, k in parts if k == g for t in range(s, e)}
            assert got[w, g] == len({t for t in points if q0 <= t < q1})


def test_covered_per_window_declines_what_would_not_fit() -> None:
    """Epoch-nanosecond times over many groups would overflow the shifted axis: None (the caller cuts pieces)."""
    start = np.array([0, 2**61], dtype=np.int64)
    got = intervals.covered_per_window(start, start + 10, np.array([0, 1]), 2, start[:1], start[1:] + 10)
    assert got is None


def _frame(pairs: list[tuple[int, int]], dtype: pl.DataType = pl.Int64) -> pl.DataFrame:
    return pl.DataFrame(
        {"start_ns": [a for a, _ in pairs], "end_ns": [b for _, b in pairs]},
        schema={"start_ns": dtype, "end_ns": dtype},
    )


def _points(pairs: list[tuple[int, int]]) -> set[int]:
    return {t for s, e in pairs for t in range(s, e)}


def _runs(points: set[int]) -> list[tuple[int, int]]:
    """The maximal runs of consecutive points as [start, end) intervals (what a merge gives)."""
    out: list[tuple[int, int]] = []
    for t in sorted(points):
        if out and out[-1][1] == t:
            out[-1] = (out[-1][0], t + 1)
        else:
            out.append((t, t + 1))
    return out


@given(
    st.lists(st.tuples(_SPAN, _SPAN), max_size=30),
    st.lists(st.tuples(_SPAN, _SPAN), max_size=30),
    st.sampled_from([pl.Int64, pl.Int32, pl.UInt64]),
)
def test_merge_and_intersection_equal_the_covered_points(
    a: list[tuple[int, int]], b: list[tuple[int, int]], dtype: pl.DataType
) -> None:
    """The numpy forms (a frame without nulls; the intersection's sweep) against the points each set covers;
    nulls and a lazy frame through the polars form."""
    if dtype == pl.UInt64:
        a = [(s + 50, e + 50) for s, e in a]
        b = [(s + 50, e + 50) for s, e in b]
    merged = intervals.merge(_frame(a, dtype))
    assert list(merged.iter_rows()) == _runs(_points(a)) and merged.schema["start_ns"] == dtype
    assert intervals.merge(_frame(a, dtype).lazy()).equals(merged)
    nulls = pl.DataFrame(
        {"start_ns": [None, 1], "end_ns": [3, None]}, schema={"start_ns": dtype, "end_ns": dtype}
    )
    with_nulls = pl.concat([_frame(a, dtype), nulls])
    assert list(intervals.merge(with_nulls).iter_rows()) == _runs(_points(a))
    both = _points(a) & _points(b)
    assert list(intervals.intersect(_frame(a, dtype), _frame(b, dtype)).iter_rows()) == _runs(both)
    assert intervals.intersection_ns(_frame(a, dtype), _frame(b, dtype)) == len(both)
    assert intervals.covered_ns(merged) == intervals.union_ns(_frame(a, dtype)) == len(_points(a))
