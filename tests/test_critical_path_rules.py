"""The critical path's documented rules on HAND-MADE traces (not recordings; times in µs, drawn above each):
backlog from GPU work outside the graph is `gpu_backlog`, never a kernel-to-kernel gap; a thread that starts late
and a kernel that appears to start before its launch call leave the path equal to the span; `--top 0` lists every
event on the path (issue 28). Expected figures are read off the drawings, not computed by opscope."""

from __future__ import annotations

import json
from pathlib import Path

import opscope
from opscope.analysis.critical_path.stats import critical_path_stats


def _x(name: str, cat: str, ts: float, dur: float, tid: int = 1, **args: object) -> dict[str, object]:
    gpu = cat == "kernel"
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 0 if gpu else 1,
        "tid": args.get("stream", 7) if gpu else tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def _write(tmp_path: Path, name: str, events: list[dict[str, object]]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events}))
    return path


# ---- backlog behind work that is not in the graph -------------------------------------------------------------
#   CPU  |ProfilerStep#1 0..100|  launch 10..12 (corr 1) of old_kernel
#        |ProfilerStep#2 100..200|  launch 110..112 (corr 2) of new_kernel   sync 120..2190
#   GPU stream 7: untraced_kernel 105..130 (no launch call in the trace), old_kernel 130..2130 (launched in
#                 step 1, before step 2's window), new_kernel 2130..2180
# Step 2's graph: untraced_kernel, new_kernel (its launch is in the window); old_kernel is not in it. new_kernel was
# launched while untraced_kernel ran, and waited 2000 µs for old_kernel: backlog, not a kernel-to-kernel gap.


def backlog_trace(tmp_path: Path) -> Path:
    return _write(
        tmp_path,
        "hand_made_backlog.json",
        [
            _x("ProfilerStep#1", "user_annotation", 0, 100),
            _x("cudaLaunchKernel", "cuda_runtime", 10, 2, correlation=1),
            _x("ProfilerStep#2", "user_annotation", 100, 100),
            _x("cudaLaunchKernel", "cuda_runtime", 110, 2, correlation=2),
            _x("cudaDeviceSynchronize", "cuda_runtime", 120, 2070),
            _x("untraced_kernel", "kernel", 105, 25, device=0, stream=7),
            _x("old_kernel", "kernel", 130, 2000, correlation=1, device=0, stream=7),
            _x("new_kernel", "kernel", 2130, 50, correlation=2, device=0, stream=7),
        ],
    )


def test_backlog_behind_work_outside_the_graph(tmp_path: Path) -> None:
    step = critical_path_stats(opscope.load(backlog_trace(tmp_path)), steps="2").steps[0]
    path = step.path
    assert path.length_ns == step.span_ns == 2_090_000  # 100 (step start) .. 2190 (sync end)
    assert path.breakdown_ns["gpu_backlog"] == 2_000_000  # untraced_kernel's end (130) .. new_kernel (2130)
    assert path.breakdown_ns["gpu_kernel_kernel_overhead"] == 0


def test_backlog_at_launch_time_is_not_launch_overhead(tmp_path: Path) -> None:
    """The same, with new_kernel launched after untraced_kernel ended: the stream was busy with old_kernel at
    launch time, so the whole launch delay is backlog (the rule for a kernel with no earlier one in the graph)."""
    events = json.loads(backlog_trace(tmp_path).read_text())["traceEvents"]
    for event in events:
        if event["args"].get("correlation") == 2 and event["cat"] == "cuda_runtime":
            event["ts"] = 150  # untraced_kernel ended at 130
        if event["name"] == "cudaDeviceSynchronize":
            event["ts"], event["dur"] = 155, 2035
    step = critical_path_stats(opscope.load(_write(tmp_path, "late.json", events)), steps="2").steps[0]
    assert step.path.length_ns == step.span_ns
    assert step.path.breakdown_ns["gpu_backlog"] == 2130_000 - 150_000
    assert step.path.breakdown_ns["gpu_kernel_launch_overhead"] == 0


# ---- a thread that starts late ---------------------------------------------------------------------------------
#   thread 1 |ProfilerStep#1 0..100|
#   thread 2                  |autograd::engine::evaluate_function 60..130|   (the backward thread)
# The path: 0 .. 60 waiting for the second thread to start (cpu_bound), then its op to 130 = the span, 130.


def test_a_thread_that_starts_late_keeps_path_equal_to_span(tmp_path: Path) -> None:
    trace = _write(
        tmp_path,
        "hand_made_threads.json",
        [
            _x("ProfilerStep#1", "user_annotation", 0, 100),
            _x("aten::mm", "cpu_op", 10, 20),
            _x("autograd::engine::evaluate_function", "cpu_op", 60, 70, tid=2),
        ],
    )
    stats = critical_path_stats(opscope.load(trace))
    (step,) = stats.steps
    assert step.span_ns == 130_000
    assert step.path.length_ns == step.span_ns
    assert step.path.breakdown_ns["cpu_bound"] == 130_000


# ---- clock skew: a kernel that appears to start before its launch call -------------------------------------------
#   CPU  |ProfilerStep#1 0..100|  launch 20..30 (corr 1)
#   GPU  skewed_kernel 15..140 (starts 5 µs before its launch call began)


def test_a_kernel_before_its_launch_keeps_path_equal_to_span(tmp_path: Path) -> None:
    trace = _write(
        tmp_path,
        "hand_made_skew.json",
        [
            _x("ProfilerStep#1", "user_annotation", 0, 100),
            _x("cudaLaunchKernel", "cuda_runtime", 20, 10, correlation=1),
            _x("skewed_kernel", "kernel", 15, 125, correlation=1, device=0, stream=7),
        ],
    )
    (step,) = critical_path_stats(opscope.load(trace)).steps
    assert step.span_ns == 140_000
    assert step.path.length_ns == step.span_ns  # it was 145 µs: 0..20 on the CPU, then 125 µs of kernel


# ---- --top 0 ---------------------------------------------------------------------------------------------------


def test_top_zero_lists_every_event_on_the_path(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    trace = backlog_trace(tmp_path)
    every = json.loads(cli("critical-path", trace, "--top", "0", "--format", "json").out)
    one = json.loads(cli("critical-path", trace, "--top", "1", "--format", "json").out)
    for all_rows, first in zip(every["steps"], one["steps"], strict=True):
        assert len(first["top"]) == 1
        assert len(all_rows["top"]) > 1 and all_rows["top"][0] == first["top"][0]
        assert sum(t["on_path_us"] for t in all_rows["top"]) <= all_rows["path_us"]
