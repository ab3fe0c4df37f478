"""Timeline figures (window, busy, idle, spans, streams, compute / communication / memcpy overlaps) against an
independent recomputation from the raw JSON of real traces (tests/ref.py: plain Python sweeps)."""

from __future__ import annotations

import re
from collections import defaultdict

import pytest

import opscope
import reference as ref
from conftest import corpus_path
from opscope.analysis.timeline.activity import TimelineOptions
from opscope.analysis.timeline.busy import timeline

TRACES = [
    "param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json",  # 4 streams, NCCL overlapping compute
    "param/dlrm_kineto/worker3_step_12.1694128201557.pt.trace.json",
    "hta/critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz",  # memcpy, cuda_sync
    "hta/nccl_parser_config_nccl_data.json.gz",  # NCCL, 2 streams
    "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",  # kernels launched before the capture
    "tracelens/mi300__gaunernst_bert-small-uncased__1016001.json.gz",  # AMD
    "tracelens/inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz",  # AMD, 2 streams, no metadata
    "tracelens/mi210__gpu_only_trace__gpu_only_trace.json.gz",  # GPU-only capture
    "kineto/plugin_samples_resnet50_num_workers_0_worker0.pt.trace.json.gz",  # 2021 schema, bare list
]
COMM = re.compile(r"nccl|rccl", re.IGNORECASE)


def reference(path) -> dict:
    evs = ref.load(path)
    lo, hi = ref.window(evs)
    out = {"window": (lo, hi), "devices": {}}
    for device, items in ref.by_device(ref.gpu(evs)).items():
        pairs = [(g.start, g.end) for g in items]
        comm = [(g.start, g.end) for g in items if g.kind == "kernel" and COMM.search(g.name)]
        compute = [(g.start, g.end) for g in items if g.kind == "kernel" and not COMM.search(g.name)]
        memcpy = [(g.start, g.end) for g in items if g.kind == "memcpy"]
        streams: dict[object, list[tuple[int, int]]] = defaultdict(list)
        for g in items:
            streams[g.stream].append((g.start, g.end))
        out["devices"][device] = {
            "busy": ref.length(pairs),
            "span": max(e for _, e in pairs) - min(s for s, _ in pairs),
            "compute": ref.length(compute),
            "comm": ref.length(comm),
            "memcpy": ref.length(memcpy),
            "memset": ref.length([(g.start, g.end) for g in items if g.kind == "memset"]),
            "compute_comm": ref.length(ref.intersect(compute, comm)),
            "compute_memcpy": ref.length(ref.intersect(compute, memcpy)),
            "multi": ref.at_least_two(streams),
            "streams": {s: ref.length(p) for s, p in streams.items()},
            "events": sum(1 for g in items if g.end > g.start or g.kind),
        }
    return out


@pytest.mark.corpus
@pytest.mark.parametrize("relative", TRACES)
def test_timeline_equals_raw_recomputation(relative: str) -> None:
    path = corpus_path(relative)
    expected = reference(path)
    result = timeline(opscope.load(path))
    lo, hi = expected["window"]
    assert (result.window_start_ns, result.window_end_ns, result.window_ns) == (lo, hi, hi - lo)
    assert {d.device for d in result.devices} == set(expected["devices"])
    for d in result.devices:
        ref = expected["devices"][d.device]
        assert d.busy_ns == ref["busy"]
        assert d.idle_ns == result.window_ns - ref["busy"]
        assert d.utilization == pytest.approx(ref["busy"] / result.window_ns)
        assert d.span_ns == ref["span"] and d.idle_in_span_ns == ref["span"] - ref["busy"]
        assert (d.compute_ns, d.communication_ns, d.memcpy_ns, d.memset_ns) == (
            ref["compute"],
            ref["comm"],
            ref["memcpy"],
            ref["memset"],
        )
        assert d.compute_comm_overlap_ns == ref["compute_comm"]
        assert d.exposed_comm_ns == ref["comm"] - ref["compute_comm"]
        assert d.compute_memcpy_overlap_ns == ref["compute_memcpy"]
        assert d.multi_stream_ns == ref["multi"]
        assert {s.stream: s.busy_ns for s in d.streams} == ref["streams"]
        for s in d.streams:
            assert s.exclusive_ns + s.overlapped_ns == s.busy_ns and 0 <= s.overlapped_ns <= d.multi_stream_ns


@pytest.mark.corpus
def test_overlapping_streams_and_communication_on_dlrm() -> None:
    """A trace where NCCL runs beside compute: the overlaps must be non-trivial, not just zero on both sides."""
    result = timeline(opscope.load(corpus_path(TRACES[0])))
    (device,) = result.devices
    assert device.multi_stream_ns > 0 and device.compute_comm_overlap_ns > 0
    assert device.busy_ns < sum(s.busy_ns for s in device.streams)  # union, not sum


@pytest.mark.corpus
def test_step_windows_clip_everything() -> None:
    """With explicit window pieces, busy time is the union clipped to them and the window is their length."""
    path = corpus_path("hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    evs = ref.load(path)
    steps = sorted(
        (ref.ns(e["ts"]), ref.ns(e["ts"]) + ref.ns(e["dur"]))
        for e in evs
        if str(e.get("name", "")).startswith("ProfilerStep#")
    )
    pieces = (steps[1], steps[3])  # two disjoint steps
    result = timeline(opscope.load(path), TimelineOptions(windows=pieces))
    gpu = [(g.start, g.end) for g in ref.gpu(evs)]
    expected = ref.length(ref.intersect(gpu, list(pieces)))
    assert result.window_ns == sum(e - s for s, e in pieces) and result.pieces == 2
    assert result.window_source == "steps"
    (device,) = result.devices
    assert device.busy_ns == expected and device.idle_ns == result.window_ns - expected


@pytest.mark.corpus
def test_cpu_only_trace_has_a_window_and_no_devices() -> None:
    result = timeline(opscope.load(corpus_path("hta/cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")))
    assert result.window_ns > 0 and result.devices == () and result.gpu_events == 0


def test_device_selection(tmp_path) -> None:
    """Hand-made: two devices; --device keeps one, the window still spans the CPU events."""
    import json

    evs = [
        {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k0",
            "pid": 0,
            "tid": 7,
            "ts": 10,
            "dur": 20,
            "args": {"device": 0, "stream": 7},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k1",
            "pid": 1,
            "tid": 7,
            "ts": 50,
            "dur": 30,
            "args": {"device": 1, "stream": 7},
        },
    ]
    path = tmp_path / "two_devices.json"
    path.write_text(json.dumps({"traceEvents": evs}))
    result = timeline(opscope.load(path, cache=False), TimelineOptions(devices=(1,)))
    assert [d.device for d in result.devices] == [1]
    assert result.window_ns == 100_000 and result.devices[0].busy_ns == 30_000


@pytest.mark.corpus
def test_analyze_steps_busy_equals_raw() -> None:
    """analyze's per-step rows: wall time of each ProfilerStep#N and the GPU union inside it (2021 schema, where
    the step markers are Operator events)."""
    path = corpus_path("kineto/plugin_samples_resnet50_num_workers_0_worker0.pt.trace.json.gz")
    evs = ref.load(path)
    gpu = [(g.start, g.end) for g in ref.gpu(evs)]
    marks = sorted(
        (ref.ns(e["ts"]), ref.ns(e["dur"]), e["name"])
        for e in evs
        if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X"
    )
    result = opscope.analyze(opscope.load(path))
    rows = result.steps.rows
    assert [(r.window.name, r.window.start_ns, r.window.dur_ns) for r in rows] == [
        (n, t, d) for t, d, n in marks
    ]
    for row, (t, d, _) in zip(rows, marks):
        assert row.devices[0].busy_ns == ref.length(ref.intersect(gpu, [(t, t + d)]))
