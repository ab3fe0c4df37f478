"""The report's CPU lanes (`timeline.lanes.cpu_lanes`) on a real trace: every operator, launch call and sync of
the threads that launched GPU work, recounted from the raw events; and the cut beyond MAX_CPU_EVENTS (every
launch and sync kept, then the longest operators, ties by earliest start) against the uncut lanes."""

from __future__ import annotations

from collections import Counter

import polars as pl
import pytest

import opscope
import reference as ref
from conftest import corpus_path
from opscope.analysis.base.linking import link
from opscope.analysis.timeline import lanes
from opscope.analysis.timeline.activity import gpu_activity
from opscope.analysis.timeline.busy import TimelineOptions

V100 = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"


def _lanes(monkeypatch: pytest.MonkeyPatch | None = None, limit: int | None = None) -> lanes.CpuLanes:
    if monkeypatch is not None and limit is not None:
        monkeypatch.setattr(lanes, "MAX_CPU_EVENTS", limit)
    trace = opscope.load(corpus_path(V100))
    act = gpu_activity(trace, TimelineOptions(), link(trace))
    return lanes.cpu_lanes(trace, act, act.window.start_ns or 0, act.window.end_ns or 0)


def test_every_cpu_event_of_the_launching_threads_against_raw_json() -> None:
    got = _lanes()
    events = ref.load(corpus_path(V100))
    raw = ref.link(events)
    launches = [raw.launch[g] for g in raw.gpu if raw.launch[g] is not None]
    threads = sorted({(str(events[i]["pid"]), str(events[i]["tid"])) for i in launches})
    assert got.threads.select("pid", "tid").rows() == threads
    lane = {t: k for k, t in enumerate(threads)}
    ops = Counter(
        (lane[(str(e["pid"]), str(e["tid"]))], ref.ns(e["ts"]), e["name"])
        for e in events
        if e.get("cat") in ("cpu_op", "user_annotation")
        and ref.is_x(e)
        and (str(e["pid"]), str(e["tid"])) in lane
    )
    shown = got.events.filter(pl.col("kind") == lanes.OP)
    assert Counter(shown.select("lane", "ts", "name").rows()) == ops
    assert got.events.filter(pl.col("kind") == lanes.LAUNCH).height == len(launches)
    assert got.total == got.events.height  # under MAX_CPU_EVENTS: nothing cut
    order = got.events.select("lane", "ts", pl.col("dur").neg()).rows()
    assert order == sorted(order)  # by lane, start, longest first


def test_the_cut_keeps_calls_and_the_longest_operators(monkeypatch: pytest.MonkeyPatch) -> None:
    whole = _lanes()
    calls = whole.events.filter(pl.col("kind") != lanes.OP)
    room = 37
    cut = _lanes(monkeypatch, calls.height + room)
    assert cut.total == whole.total == whole.events.height > cut.events.height
    key = ["lane", "ts", "dur", "name", "kind", "gpu_lane", "gpu_start"]
    assert cut.events.filter(pl.col("kind") != lanes.OP).sort(key).equals(calls.sort(key))
    ops = whole.events.filter(pl.col("kind") == lanes.OP).sort(
        ["dur", "ts", "lane"], descending=[True, False, False]
    )
    kept = cut.events.filter(pl.col("kind") == lanes.OP)
    assert kept.sort(key).equals(ops.head(room).sort(key))
    order = cut.events.select("lane", "ts", pl.col("dur").neg()).rows()
    assert order == sorted(order)
