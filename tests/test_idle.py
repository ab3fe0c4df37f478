"""Idle breakdown: a hand-made trace with every case worked out by hand, the partition property on real traces,
and an independent gap-by-gap recomputation from the raw JSON (tests/ref.py)."""

from __future__ import annotations

import json

import pytest

import opscope
import reference as ref
from conftest import corpus_path
from opscope.analysis.timeline.busy import timeline
from opscope.analysis.timeline.idle import idle_breakdown


def _write(tmp_path, evs):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": evs}))
    return opscope.load(path, cache=False)


def _kernel(name, ts, dur, corr):
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": 7, "correlation": corr},
    }


def _launch(ts, corr, name="cudaLaunchKernel"):
    return {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": name,
        "pid": 1,
        "tid": 1,
        "ts": ts,
        "dur": 2,
        "args": {"correlation": corr},
    }


def test_hand_made_trace_every_cause(tmp_path) -> None:
    """Hand-made (times in us): window 0-100 set by a CPU op; kernels A 10-20, B 35-40, C 60-70, D 80-90.
    Leading gap 0-10: A was launched at 0, so other. Gap 20-35: B launched at 30: host 20-30, other 30-35.
    Gap 40-60: a cudaDeviceSynchronize 38-50 then C launched at 55: sync 40-50, host 50-55, other 55-60.
    Gap 70-80: D has no launch call in the trace: other. Trailing gap 90-100: nothing more was submitted,
    host, except 90-95 covered by a cuda_sync record of device 0: sync."""
    evs = [
        {"ph": "X", "cat": "cpu_op", "name": "outer", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        _launch(0, 1),
        _kernel("A", 10, 10, 1),
        _launch(30, 2),
        _kernel("B", 35, 5, 2),
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaDeviceSynchronize",
            "pid": 1,
            "tid": 1,
            "ts": 38,
            "dur": 12,
        },
        _launch(55, 3),
        _kernel("C", 60, 10, 3),
        _kernel("D", 80, 10, 99),
        {
            "ph": "X",
            "cat": "cuda_sync",
            "name": "Context Sync",
            "pid": 0,
            "tid": 7,
            "ts": 85,
            "dur": 10,
            "args": {"device": 0, "stream": 7},
        },
    ]
    trace = _write(tmp_path, evs)
    (dev,) = idle_breakdown(trace).devices
    us = 1000
    assert (dev.idle_ns, dev.host_wait_ns, dev.sync_wait_ns, dev.other_ns) == (
        65 * us,
        20 * us,
        15 * us,
        30 * us,
    )
    assert dev.gaps == 5 and dev.longest_gap_ns == 20 * us
    assert timeline(trace).devices[0].idle_ns == dev.idle_ns


def test_launch_after_gap_start_but_kernel_still_late(tmp_path) -> None:
    """Hand-made: a launch issued before the GPU went idle makes the whole gap 'other' (work was queued)."""
    trace = _write(tmp_path, [_launch(0, 1), _kernel("A", 10, 10, 1), _launch(5, 2), _kernel("B", 30, 10, 2)])
    (dev,) = idle_breakdown(trace).devices
    assert (dev.host_wait_ns, dev.sync_wait_ns, dev.other_ns) == (0, 0, 20_000)


def reference(path) -> dict:
    """Gap-by-gap classification from the raw events, loops only."""
    evs = ref.load(path)
    wlo, whi = ref.window(evs)
    calls = ref.launches(evs)
    syncs_cpu = [
        (ref.ns(e["ts"]), ref.ns(e["ts"]) + max(ref.ns(e.get("dur") or 0), 0))
        for e in evs
        if e.get("cat") in ref.LAUNCH_CATS and ref.SYNC_NAMES.search(e.get("name") or "")
    ]
    out = {}
    for device, items in ref.by_device(ref.gpu(evs)).items():
        merged = ref.merge([(g.start, g.end) for g in items])
        lo, hi = min(wlo, merged[0][0]), max(whi, merged[-1][1])
        edges = [lo] + [p for m in merged for p in m] + [hi]
        gaps = [(edges[i], edges[i + 1]) for i in range(0, len(edges), 2) if edges[i + 1] > edges[i]]
        host, other = [], []
        for g0, g1 in gaps:
            starting = [g for g in items if g.start == g1]
            if not starting:
                host.append((g0, g1))
                continue
            launch_ts = [ref.ns(calls[g.correlation]["ts"]) for g in starting if g.correlation in calls]
            if not launch_ts:
                other.append((g0, g1))
                continue
            cut = min(max(min(launch_ts), g0), g1)
            host.append((g0, cut))
            other.append((cut, g1))
        syncs = syncs_cpu + [
            (ref.ns(e["ts"]), ref.ns(e["ts"]) + ref.ns(e.get("dur") or 0))
            for e in evs
            if e.get("cat") == "cuda_sync" and (e.get("args") or {}).get("device", device) == device
        ]
        win = [(wlo, whi)]
        gaps_w = ref.intersect(gaps, win)
        host_w, other_w = ref.intersect(host, win), ref.intersect(other, win)
        out[device] = {
            "idle": ref.length(gaps_w),
            "sync": ref.length(ref.intersect(gaps_w, syncs)),
            "host": ref.length(host_w) - ref.length(ref.intersect(host_w, syncs)),
            "other": ref.length(other_w) - ref.length(ref.intersect(other_w, syncs)),
        }
    return out


CORPUS = [
    "param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json",
    "hta/critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz",
    "hta/critical_path_cuda_event_sync_multi_stream_event_sync_trace.json.gz",
    "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "tracelens/mi300__Falconsai_nsfw_image_detection__1016002.json.gz",
    "tracelens/mi210__gpu_only_trace__gpu_only_trace.json.gz",
]


@pytest.mark.corpus
@pytest.mark.parametrize("relative", CORPUS)
def test_idle_breakdown_equals_raw_recomputation(relative: str) -> None:
    path = corpus_path(relative)
    trace = opscope.load(path)
    expected = reference(path)
    result = idle_breakdown(trace)
    tl = {d.device: d for d in timeline(trace).devices}
    assert {d.device for d in result.devices} == set(expected)
    for d in result.devices:
        ref = expected[d.device]
        assert (d.idle_ns, d.host_wait_ns, d.sync_wait_ns, d.other_ns) == (
            ref["idle"],
            ref["host"],
            ref["sync"],
            ref["other"],
        )
        assert d.host_wait_ns + d.sync_wait_ns + d.other_ns == d.idle_ns == tl[d.device].idle_ns


@pytest.mark.corpus
def test_sync_heavy_trace_has_sync_wait() -> None:
    trace = opscope.load(
        corpus_path("hta/critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz")
    )
    (dev,) = idle_breakdown(trace).devices
    assert dev.sync_wait_ns > 0 and dev.host_wait_ns > 0


@pytest.mark.corpus
def test_cpu_only_trace_has_no_devices() -> None:
    result = idle_breakdown(
        opscope.load(corpus_path("hta/cpu_only_rank-34.OLDVERSION_b8cce2cd9c.pt.trace.json.gz"))
    )
    assert result.devices == ()
