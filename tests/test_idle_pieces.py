"""The report's idle pieces (`timeline.lanes.idle_gaps`): the cut of each idle gap at the synchronising calls
against a plain-Python walk, and on a real trace, every piece against the raw intervals it was cut from."""

from __future__ import annotations

import itertools
import random

import numpy as np
import polars as pl

import opscope
import reference as ref
from conftest import corpus_path
from opscope.analysis.timeline.activity import gpu_activity
from opscope.analysis.timeline.busy import TimelineOptions
from opscope.analysis.timeline.lanes import SYNC_WAIT, _split, idle_gaps
from opscope.analysis.timeline.syncs import sync_calls
from opscope.model.schema import Col

ALEXNET = "hta/critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz"


def _walk(parts: list[tuple[int, int]], syncs: list[tuple[int, int]]) -> list[tuple[int, int, bool]]:
    """Plain Python: each part, in order of start, cut at every sync interval it meets."""
    out = []
    for lo, hi in sorted(parts):
        at = lo
        for s, e in syncs:
            s, e = max(s, lo), min(e, hi)
            if e <= s or e <= at:
                continue
            if s > at:
                out.append((at, s, False))
            out.append((s, e, True))
            at = e
        if hi > at:
            out.append((at, hi, False))
    return out


def test_split_against_a_plain_python_walk() -> None:
    """Hand-made fixture (random, not a recording): disjoint parts, some touching or empty, and disjoint
    sync intervals."""
    for seed in range(500):
        rng = random.Random(seed)
        ends = sorted(rng.sample(range(300), 2 * rng.randrange(0, 25)))
        parts = [(ends[i], ends[i + 1]) for i in range(0, len(ends), 2)]
        if parts and rng.random() < 0.3:
            parts.append((parts[-1][1], parts[-1][1] + rng.randrange(0, 5)))  # touching, maybe empty
        cuts = sorted(rng.sample(range(300), 2 * rng.randrange(0, 15)))
        syncs = [(cuts[i], cuts[i + 1]) for i in range(0, len(cuts), 2)]

        def arr(pairs: list[tuple[int, int]], k: int) -> np.ndarray:
            return np.array([p[k] for p in pairs], dtype=np.int64)

        start, end, inside = _split(arr(parts, 0), arr(parts, 1), arr(syncs, 0), arr(syncs, 1))
        got = list(zip(start.tolist(), end.tolist(), inside.tolist(), strict=True))
        assert got == _walk(parts, syncs), seed


def test_pieces_against_the_raw_intervals() -> None:
    trace = opscope.load(corpus_path(ALEXNET))
    act = gpu_activity(trace, TimelineOptions())
    found = idle_gaps(trace, act)
    assert found.pieces
    syncs = ref.merge(
        [(int(a), int(b)) for a, b in sync_calls(trace).select(Col.TS_NS, "end_ns").iter_rows() if b > a]
    )
    busy = {
        d: ref.merge([(int(s), int(e)) for s, e in g.select(Col.TS_NS, "end_ns").iter_rows()])
        for (d,), g in act.events.with_columns(
            (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS)).alias("end_ns")
        ).group_by([Col.DEVICE])
    }
    assert any(cause == SYNC_WAIT for *_, cause in found.pieces)
    for device, lo, hi, cause in found.pieces:
        assert hi > lo
        assert not ref.intersect([(lo, hi)], busy[device])  # idle: no GPU work of its device
        in_sync = sum(e - s for s, e in ref.intersect([(lo, hi)], syncs))
        assert in_sync == ((hi - lo) if cause == SYNC_WAIT else 0), (lo, hi, cause)
    keys = [(lo, hi) for d, lo, hi, _ in found.pieces]
    assert keys == sorted(keys)  # one device: in order of start, disjoint
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(keys))
