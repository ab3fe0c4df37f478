"""Launch delay against the raw JSON (kernel ts minus launch ts by correlation, numpy percentiles), the worst
ops against brute-force containment, plus hand-made cases: clock skew (negative delays), graph launches,
kernels without launches, and the flow-event fallback when correlation is missing."""

from __future__ import annotations

import json

import numpy as np
import pytest

import opscope
import reference as ref
from conftest import corpus_path
from opscope.analysis.base.linking import link
from opscope.analysis.timeline.launch_delay import launch_delay

CORPUS = [
    "param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json",
    "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",  # 436 kernels launched before the capture
    "tracelens/inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz",  # hipGraphLaunch
    "hta/triton_example_triton_example.json.gz",  # cuLaunchKernel (driver API)
    "tracelens/mi300__gaunernst_bert-small-uncased__1016001.json.gz",
]


@pytest.mark.corpus
@pytest.mark.parametrize("relative", CORPUS)
def test_delays_equal_raw_recomputation(relative: str) -> None:
    path = corpus_path(relative)
    evs = ref.load(path)
    calls = ref.launches(evs)
    delays, missing, graph, by_op = [], 0, 0, {}
    call_index = {id(e): i for i, e in enumerate(evs)}
    ops = ref.issuing_op(evs, [call_index[id(c)] for c in calls.values()])
    for g in ref.gpu(evs):
        if g.kind != "kernel":
            continue
        call = calls.get(g.correlation)
        if call is None:
            missing += 1
        elif "graphlaunch" in call["name"].lower():
            graph += 1
        else:
            delay = max(0, g.start - ref.ns(call["ts"]))
            delays.append(delay)
            by_op.setdefault(ops[call_index[id(call)]] or "(no op)", []).append(delay)
    result = launch_delay(opscope.load(path), top=0)
    assert (result.kernels, result.missing_launch, result.graph_kernels) == (len(delays), missing, graph)
    assert result.p50_ns == pytest.approx(np.percentile(delays, 50))
    assert result.p95_ns == pytest.approx(np.percentile(delays, 95))
    assert result.max_ns == max(delays) and result.mean_ns == pytest.approx(np.mean(delays))
    assert {w.name: (w.kernels, w.max_ns) for w in result.worst} == {
        op: (len(v), max(v)) for op, v in by_op.items()
    }
    assert [w.max_ns for w in result.worst] == sorted((w.max_ns for w in result.worst), reverse=True)


def _trace(tmp_path, evs):
    path = tmp_path / "hand_made.json"
    path.write_text(json.dumps({"traceEvents": evs}))
    return opscope.load(path, cache=False)


def test_negative_delays_are_clamped_and_counted(tmp_path) -> None:
    """Hand-made: kernel 2 appears to start 3 us before its launch call (clock skew)."""
    evs = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 50},
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 10,
            "dur": 2,
            "args": {"correlation": 1},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": 0,
            "tid": 7,
            "ts": 15,
            "dur": 1,
            "args": {"device": 0, "stream": 7, "correlation": 1},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 20,
            "dur": 2,
            "args": {"correlation": 2},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": 0,
            "tid": 7,
            "ts": 17,
            "dur": 1,
            "args": {"device": 0, "stream": 7, "correlation": 2},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "orphan",
            "pid": 0,
            "tid": 7,
            "ts": 30,
            "dur": 1,
            "args": {"device": 0, "stream": 7, "correlation": 77},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaGraphLaunch",
            "pid": 1,
            "tid": 1,
            "ts": 40,
            "dur": 2,
            "args": {"correlation": 3},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "g1",
            "pid": 0,
            "tid": 7,
            "ts": 41,
            "dur": 1,
            "args": {"device": 0, "stream": 7, "correlation": 3},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "g2",
            "pid": 0,
            "tid": 7,
            "ts": 43,
            "dur": 1,
            "args": {"device": 0, "stream": 7, "correlation": 3},
        },
    ]
    result = launch_delay(_trace(tmp_path, evs))
    assert (result.kernels, result.negative, result.min_raw_ns) == (2, 1, -3000)
    assert (result.max_ns, result.p50_ns) == (5000, 2500.0)
    assert (result.missing_launch, result.graph_kernels) == (1, 2)
    assert [(w.name, w.kernels) for w in result.worst] == [("aten::mm", 2)]


def test_flow_events_link_gpu_work_without_correlation(tmp_path) -> None:
    """Hand-made: the kernel and the launch carry no correlation; an ac2g flow (s on the launch, f on the
    kernel) links them, not the later launch call whose correlation equals the flow id."""
    evs = [
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 10,
            "dur": 2,
        },
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 5, "pid": 1, "tid": 1, "ts": 10},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 5, "pid": 0, "tid": 7, "ts": 14, "bp": "e"},
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": 0,
            "tid": 7,
            "ts": 14,
            "dur": 1,
            "args": {"device": 0, "stream": 7},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 20,
            "dur": 2,
            "args": {"correlation": 5},
        },
    ]
    trace = _trace(tmp_path, evs)
    stats = link(trace).stats
    assert (stats.linked_by_flow, stats.linked_by_correlation, stats.missing_launch) == (1, 0, 0)
    assert launch_delay(trace).max_ns == 4000


@pytest.mark.corpus
def test_gpu_only_and_launches_without_kernels() -> None:
    gpu_only = launch_delay(
        opscope.load(corpus_path("tracelens/mi210__gpu_only_trace__gpu_only_trace.json.gz"))
    )
    assert gpu_only.kernels == 562 and {w.name for w in gpu_only.worst} == {"(no op)"}
    no_kernels = launch_delay(opscope.load(corpus_path("zoology/trace.json")))
    assert no_kernels.kernels == 0 and no_kernels.p50_ns is None and no_kernels.worst == ()
