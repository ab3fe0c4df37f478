"""Interval helpers against a brute-force recomputation on small hand-made sets (edge cases by design)."""

from __future__ import annotations

import random

import polars as pl

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
