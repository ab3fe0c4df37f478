"""Critical path (`opscope critical-path`): the path length against the span recomputed from raw events, a
hand-made step whose path and what-ifs are computed by hand, what-if sanity on real traces, the traces where HTA
fails, and the command's formats. The comparison with HTA itself is tests/test_critical_path_hta.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import opscope
import reference as ref
from conftest import corpus_path
from opscope.analysis.base.linking import link
from opscope.analysis.base.windows import step_windows
from opscope.analysis.critical_path.graph import build
from opscope.analysis.critical_path.path import WhatIf, critical_path, what_if
from opscope.analysis.critical_path.stats import SavingModel, critical_path_stats, predict_saving

EVENT_SYNC = "hta/critical_path_cuda_event_sync_event_sync_trace.json.gz"
NS_STEPS = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
QWEN = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
AMD = "hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"
OLD_2021 = "kineto/plugin_samples_resnet50_num_workers_0_worker0.pt.trace.json.gz"
NO_STEPS = "kineto/tb_plugin_samples_resnet50_autograd_api_num_workers_0_worker0.pt.trace.json.gz"
ROCPROF = "omniperf/multikernel_MI200__timestamps.csv"  # GPU only: no launch calls
ALEXNET = "hta/critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz"


# ---- a hand-made step (times in µs) ------------------------------------------------------------------------------
#   CPU  |ProfilerStep#1 0..100                                                          |
#        |   |aten::mm 10..30     |         |cudaDeviceSynchronize 40..90|
#        |   |launch 12..15|launch 15.5..16
#   GPU stream 7:       my_gemm_kernel 12..80 (launched at 12: no launch delay)
#   GPU stream 8:          small_kernel 16..20
# Path: 0-10 step (cpu) 10-12 mm (cpu) 12-80 gemm (gpu) 80-90 sync wait 90-100 step (cpu) = 100.


def _x(name: str, cat: str, ts: float, dur: float, **args: object) -> dict[str, object]:
    gpu = cat == "kernel"
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 0 if gpu else 1,
        "tid": args.get("stream", 7) if gpu else 1,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def hand_made(tmp_path: Path) -> Path:
    """Hand-made fixture (not a recording): the step drawn above."""
    events = [
        _x("ProfilerStep#1", "user_annotation", 0, 100),
        _x("aten::mm", "cpu_op", 10, 20),
        _x("cudaLaunchKernel", "cuda_runtime", 12, 3, correlation=1),
        _x("cudaLaunchKernel", "cuda_runtime", 15.5, 0.5, correlation=2),
        _x("cudaDeviceSynchronize", "cuda_runtime", 40, 50),
        _x("my_gemm_kernel", "kernel", 12, 68, correlation=1, device=0, stream=7),
        _x("small_kernel", "kernel", 16, 4, correlation=2, device=0, stream=8),
    ]
    path = tmp_path / "hand_made_step.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_hand_made_step_path_and_breakdown(tmp_path: Path) -> None:
    stats = critical_path_stats(opscope.load(hand_made(tmp_path)))
    (step,) = stats.steps
    path = step.path
    assert path.length_ns == step.window.dur_ns == 100_000
    assert {k: v for k, v in path.breakdown_ns.items() if v} == {
        "cpu_bound": 22_000,
        "gpu_compute_bound": 68_000,
        "sync_wait": 10_000,
    }
    assert [(t.name, t.on_path_ns) for t in path.top] == [
        ("my_gemm_kernel", 68_000),
        ("ProfilerStep#1", 20_000),
        ("cudaDeviceSynchronize", 10_000),
        ("aten::mm", 2_000),
    ]


@pytest.mark.parametrize(
    ("spec", "predicted_us"),
    [
        (".*:0.5", 50),  # every node halved, and this path has no overhead edge: exactly half
        ("gemm:0.5", 66),  # 12 + 34 on the GPU, 10 of sync latency, 10 of step tail
        ("cudaDeviceSynchronize:0", 80),  # without the sync the step ends when the GEMM ends
        ("small_kernel:0.5", 100),  # not on the path: nothing changes
        ("small_kernel:0", 100),
    ],
)
def test_hand_made_what_if(tmp_path: Path, spec: str, predicted_us: int) -> None:
    (step,) = critical_path_stats(opscope.load(hand_made(tmp_path)), rules=[WhatIf.parse(spec)]).steps
    assert step.predicted is not None
    assert step.predicted.length_ns == predicted_us * 1000
    assert step.saving_ns == (100 - predicted_us) * 1000


def test_predict_saving_is_the_what_if(tmp_path: Path) -> None:
    trace = opscope.load(hand_made(tmp_path))
    assert predict_saving(trace, "gemm", 0.5) == pytest.approx(34.0)
    assert predict_saving(trace, "no_such_event", 0.0) == 0.0
    model = SavingModel(trace)
    assert model.saving_us("gemm", 0.5) == 34.0 and model.saving_us("cudaDeviceSynchronize", 0) == 20.0


# ---- path length against the raw events --------------------------------------------------------------------------


def _raw_span(events: list[dict], start: int, end: int) -> int:
    """From the first start to the last end of the CPU events starting in [start, end] (positive duration) and
    the GPU events whose launch call is one of them (by correlation): what the path length must equal."""
    cpu = [
        e
        for e in events
        if e.get("cat") in ref.OP_CATS | ref.LAUNCH_CATS
        and ref.is_x(e)
        and ref.ns(e.get("dur")) > 0
        and start <= ref.ns(e["ts"]) <= end
    ]
    launched = {ref.args(e).get("correlation") for e in cpu if e.get("cat") in ref.LAUNCH_CATS}
    gpu = [
        e
        for e in events
        if e.get("cat") in ref.GPU_CATS and ref.is_x(e) and ref.args(e).get("correlation") in launched
    ]
    spans = [ref.span(e) for e in cpu + gpu]
    return max(s[1] for s in spans) - min(s[0] for s in spans)


@pytest.mark.parametrize("name", [EVENT_SYNC, NS_STEPS, QWEN])
def test_path_length_is_the_span_of_the_step(name: str) -> None:
    path = corpus_path(name)
    events = ref.load(path)
    stats = critical_path_stats(opscope.load(path))
    assert stats.steps
    for step in stats.steps:
        raw = _raw_span(events, step.window.start_ns, step.window.end_ns)
        assert step.path.length_ns == step.span_ns == raw
        assert sum(step.path.breakdown_ns.values()) == step.path.length_ns
        assert step.path.length_ns >= step.window.dur_ns  # the step's own CPU span is a path


def test_path_equals_wall_time_when_the_gpu_keeps_up() -> None:
    (step,) = critical_path_stats(opscope.load(corpus_path(EVENT_SYNC))).steps
    assert step.path.length_ns == step.window.dur_ns == 3_154_000


def test_gpu_backlog_when_the_gpu_runs_behind() -> None:
    """ns_resolution: the GPU runs ~60 ms behind the CPU, so later steps wait for the earlier steps' work."""
    steps = critical_path_stats(opscope.load(corpus_path(NS_STEPS)), steps="102").steps
    assert steps[0].path.breakdown_ns["gpu_backlog"] > 0.3 * steps[0].path.length_ns
    assert steps[0].path.length_ns > steps[0].window.dur_ns


def test_untraced_gpu_work_explains_a_sync() -> None:
    """Qwen H100: a 14.1 ms cudaDeviceSynchronize waits for ~500 kernels whose launch calls are not in the trace;
    they feed its sync edges, so the wait is GPU work on the path, and the path is still the span."""
    trace = opscope.load(corpus_path(QWEN))
    window = step_windows(trace)[0]
    graph = build(trace, link(trace), window.start_ns, window.end_ns)
    path = critical_path(graph, top=5)
    events = graph.events
    (sync,) = events.with_row_index("e").filter(pl.col("name") == "cudaDeviceSynchronize")["e"].to_list()
    into = graph.edges.filter(pl.col("sync") & (pl.col("dst") == 2 * sync + 1))
    launch = events["launch"].to_numpy()
    assert into.height >= 1 and (launch[into["src"].to_numpy() // 2] < 0).all()
    on = graph.edges[path.edges]
    assert on.filter(pl.col("dst") == 2 * sync + 1)["kind"].to_list() == ["sync_wait"]
    assert path.breakdown_ns["sync_wait"] < 0.01 * path.length_ns  # was 28.6 %: the wait is the GPU's work
    assert path.breakdown_ns["gpu_compute_bound"] > 0.8 * path.length_ns
    ts = graph.node_ts()
    assert path.length_ns == ts.max() - ts.min()
    # Removing the sync no longer saves its 14.1 ms: the kernels launched after it queue behind that GPU work.
    saved = path.length_ns - what_if(graph, [WhatIf("cudaDeviceSynchronize", 0)], top=0).length_ns
    assert 0 <= saved < 1_000_000


# ---- what-if sanity on real traces -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [QWEN, NS_STEPS, AMD])
def test_what_if_sanity(name: str) -> None:
    trace = opscope.load(corpus_path(name))
    linkage = link(trace)
    window = step_windows(trace)[0]
    graph = build(trace, linkage, window.start_ns, window.end_ns)
    base = critical_path(graph, top=0)
    half = what_if(graph, [WhatIf(".*", 0.5)], top=0).length_ns
    assert base.length_ns / 2 <= half <= base.length_ns
    # Removing every synchronisation never lengthens the step; no factor <= 1 does.
    assert what_if(graph, [WhatIf("Synchronize|Memcpy", 0.0)], top=0).length_ns <= base.length_ns
    for rule in (WhatIf("aten::", 0.0), WhatIf("gemm|cutlass|sgemm", 0.5), WhatIf("Launch", 0.0)):
        assert what_if(graph, [rule], top=0).length_ns <= base.length_ns
    # A GPU activity whose every edge is off the path: speeding it up changes nothing.
    on_path = set(graph.edges[base.edges]["owner"].to_list())
    events = graph.events.with_row_index("e")
    names_on = set(events.filter(events["e"].is_in(list(on_path)))["name"].to_list())
    off = [n for n in events.filter(events["is_gpu"])["name"].unique().to_list() if n not in names_on]
    if off:
        pattern = "^(" + "|".join(re.escape(n) for n in off[:20]) + ")$"
        assert what_if(graph, [WhatIf(pattern, 0.25)], top=0).length_ns == base.length_ns


# ---- traces where HTA fails --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [OLD_2021, NO_STEPS, AMD, ALEXNET, ROCPROF])
def test_a_path_where_hta_fails(name: str) -> None:
    stats = critical_path_stats(opscope.load(corpus_path(name)))
    assert stats.steps
    for step in stats.steps:
        # Several CPU threads: the last work may chain back to a thread that began after the first event.
        assert 0.99 * step.span_ns <= step.path.length_ns <= step.span_ns
        assert step.path.top
    if name in (NO_STEPS, ALEXNET):
        assert not stats.from_markers and len(stats.steps) == 1


XPLANE = (
    "tracelens/mi300__jax08_attention__tw003.xplane.pb",
    "tracelens/mi300__jax08_gemm__tw003.xplane.pb",
    "tracelens/mi300__jax_conv_minimal_legacy__chi-mi300x-013.ord.vultr.cpe.ice.amd.com.xplane.pb",
)


@pytest.mark.parametrize("name", XPLANE)
def test_xplane_window_is_the_graph_span(name: str) -> None:
    """JAX xplane: the whole-trace window is the span of the graph's events (the trace's extent also counts the
    Python frames, up to 230x longer); launches (hip* runtime events) are linked to their kernels by correlation.
    The GPU is on the path only when its work ends last or a blocking call in the graph waited for it: JAX waits
    in `block_until_ready`, a Python frame, so on these traces the path is the host's (docs/critical-path.md)."""
    trace = opscope.load(corpus_path(name))
    (step,) = critical_path_stats(trace).steps
    assert step.window.dur_ns == step.span_ns
    assert 0.99 * step.span_ns <= step.path.length_ns <= step.span_ns  # several host threads
    graph = build(trace, link(trace), step.window.start_ns, step.window.end_ns)
    events = graph.events
    gpu = events.filter(pl.col("is_gpu"))
    assert gpu.height > 0 and (gpu["launch"] >= 0).all()
    gpu_last = gpu["end_ns"].max() == events["end_ns"].max()
    waited = graph.edges["sync"].any()
    on_gpu = sum(step.path.breakdown_ns[k] for k in ("gpu_compute_bound", "memcpy"))
    assert (on_gpu > 0) == (gpu_last or waited)


# ---- the command -------------------------------------------------------------------------------------------------


def test_cli_json(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result = cli(
        "critical-path",
        hand_made(tmp_path),
        "--format",
        "json",
        "--what-if",
        "gemm:0.5",
        "--what-if",
        "cudaDeviceSynchronize:0",
    )
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["schema"] == "opscope.critical_path/1"
    (step,) = data["steps"]
    assert {"step", "wall_us", "path_us", "breakdown", "top"} <= set(step)
    assert step["step"] == 1 and step["wall_us"] == 100.0 and step["path_us"] == 100.0
    assert step["breakdown"]["gpu_compute_bound"] == 68.0
    assert step["top"][0] == {
        "name": "my_gemm_kernel",
        "kind": "kernel",
        "on_path_us": 68.0,
        "total_us": 68.0,
    }
    # gemm halved and the sync removed: the GEMM (12..46) is the last work; the CPU's own span is 0..100 minus
    # the sync's 50 us.
    assert step["what_if"]["predicted_us"] == 50.0 and step["what_if"]["saving_us"] == 50.0
    assert "model" in data["model"]


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv"])
def test_cli_formats(cli, fmt: str) -> None:  # type: ignore[no-untyped-def]
    result = cli("critical-path", corpus_path(EVENT_SYNC), "--format", fmt, "--what-if", "aten::empty:0")
    assert result.code == 0, result.err
    if fmt == "csv":  # CSV carries the first table: one row per step, the breakdown as shares of the path
        header, row = result.out.splitlines()
        assert header.split(",")[:4] == ["step", "wall_us", "path_us", "cpu_bound"]
        assert row.split(",")[:3] == ["100", "3154.0", "3154.0"]
        # ... then in µs, after the existing columns: each kind's share times the path, summing to the path.
        cells = dict(zip(header.split(","), row.split(","), strict=True))
        kinds = [k for k in header.split(",") if k + "_us" in cells]
        assert (
            kinds and "cpu_bound" in kinds and header.split(",")[-len(kinds) :] == [k + "_us" for k in kinds]
        )
        assert sum(float(cells[k + "_us"]) for k in kinds) == pytest.approx(3154.0, abs=0.01)
        for k in kinds:
            assert float(cells[k + "_us"]) == pytest.approx(float(cells[k]) * 3154.0, abs=0.01)
    else:
        assert "aten::empty" in result.out


@pytest.mark.parametrize(
    "spec", ["gemm", "gemm:-1", "gemm:x", ":0.5", "(:0.5", "a(?=b):0.5", "gemm:nan", "gemm:inf"]
)
def test_cli_bad_what_if(cli, tmp_path: Path, spec: str) -> None:  # type: ignore[no-untyped-def]
    result = cli("critical-path", hand_made(tmp_path), "--what-if", spec)
    assert result.code == 2
    assert "--what-if" in result.err and "Traceback" not in result.err


def test_cli_steps(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli("critical-path", corpus_path(NS_STEPS), "--steps", "102-103", "--format", "json")
    assert result.code == 0, result.err
    assert [s["step"] for s in json.loads(result.out)["steps"]] == [102, 103]
    assert cli("critical-path", corpus_path(NS_STEPS), "--steps", "999").code == 2


# ---- a hand-made cross-stream wait (times in µs) -------------------------------------------------------------------
#   CPU  |ProfilerStep#1 0..200                                                          |
#        |launch 10..12 (corr 1)|record 20..21 (corr 2)|wait 30..31 (corr 3)|launch 40..42 (corr 4)|sync 50..190|
#   GPU stream 7: producer_kernel 12..150
#   GPU stream 8: consumer_kernel 152..180 (waits for the event recorded on stream 7 after producer_kernel)
# Path: 0-10 step, 10-12 launch, 12-150 producer (gpu), 150-152 cross-stream wait, 152-180 consumer (gpu),
# 180-190 sync wait, 190-200 step (cpu) = 200. Without the wait edge the consumer's start would be explained by its
# launch at 40 (110 µs of "launch overhead") instead of the producer.


def cross_stream(tmp_path: Path) -> Path:
    """Hand-made fixture (not a recording), with Kineto's cuda_sync "Stream Wait Event" record."""
    events = [
        _x("ProfilerStep#1", "user_annotation", 0, 200),
        _x("cudaLaunchKernel", "cuda_runtime", 10, 2, correlation=1),
        _x("cudaEventRecord", "cuda_runtime", 20, 1, correlation=2),
        _x("cudaStreamWaitEvent", "cuda_runtime", 30, 1, correlation=3),
        _x("cudaLaunchKernel", "cuda_runtime", 40, 2, correlation=4),
        _x("cudaDeviceSynchronize", "cuda_runtime", 50, 140),
        _x("producer_kernel", "kernel", 12, 138, correlation=1, device=0, stream=7),
        _x("consumer_kernel", "kernel", 152, 28, correlation=4, device=0, stream=8),
        {
            "ph": "X",
            "cat": "cuda_sync",
            "name": "Stream Wait Event",
            "pid": 0,
            "tid": 8,
            "ts": 31,
            "dur": 0,
            "args": {
                "cuda_sync_kind": "Stream Wait Event",
                "wait_on_stream": 7,
                "wait_on_cuda_event_record_corr_id": 2,
                "stream": 8,
                "correlation": 3,
                "device": 0,
            },
        },
    ]
    path = tmp_path / "hand_made_cross_stream.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_cross_stream_wait_is_on_the_path(tmp_path: Path) -> None:
    (step,) = critical_path_stats(opscope.load(cross_stream(tmp_path))).steps
    path = step.path
    assert path.length_ns == step.window.dur_ns == 200_000
    assert {k: v for k, v in path.breakdown_ns.items() if v} == {
        "cpu_bound": 20_000,  # 0-10 and 190-200
        "gpu_kernel_launch_overhead": 2_000,  # the launch call's start (10) to the producer's start (12)
        "gpu_compute_bound": 166_000,  # producer 138 + consumer 28
        "gpu_kernel_kernel_overhead": 2_000,  # 150-152: the consumer starts 2 µs after the producer ends
        "sync_wait": 10_000,
    }
    assert {t.name for t in path.top} >= {"producer_kernel", "consumer_kernel"}
    (halved,) = critical_path_stats(
        opscope.load(cross_stream(tmp_path)), rules=[WhatIf.parse("producer:0.5")]
    ).steps
    # the consumer follows the producer: halving the producer moves both (the step ends 69 µs earlier)
    assert halved.predicted is not None and halved.predicted.length_ns == 200_000 - 69_000


@pytest.mark.corpus
@pytest.mark.parametrize(
    "name", [ALEXNET, "hta/critical_path_cuda_event_sync_multi_stream_event_sync_trace.json.gz"]
)
def test_cross_stream_waits_of_real_traces(name: str) -> None:
    """Every `Stream Wait Event` of the raw trace whose wait and record calls and both activities lie in the window
    gives one edge from the recorded stream to the waiting one, never back in time."""
    from opscope.analysis.critical_path.graph import stream_waits

    trace = opscope.load(corpus_path(name))
    raw = [
        e
        for e in ref.load(corpus_path(name))
        if e.get("cat") == "cuda_sync"
        and (e.get("args") or {}).get("stream", -1) >= 0
        and (e.get("args") or {}).get("wait_on_stream", -1) >= 0
    ]
    assert (
        stream_waits(trace).height
        == len({(e["args"]["correlation"], e["args"]["wait_on_cuda_event_record_corr_id"]) for e in raw})
        > 0
    )
    window = step_windows(trace)[0]
    graph = build(trace, link(trace), window.start_ns, window.end_ns)
    ev = graph.events
    src, dst = graph.edges["src"].to_numpy(), graph.edges["dst"].to_numpy()
    is_gpu = ev["is_gpu"].to_numpy()
    cross = is_gpu[src // 2] & is_gpu[dst // 2] & (src % 2 == 1) & (dst % 2 == 0)
    streams = trace.lazy().select("stream").collect()["stream"].to_numpy()
    rows = ev["row"].to_numpy()
    other_stream = cross & (streams[rows[src // 2]] != streams[rows[dst // 2]])
    assert other_stream.sum() > 0
    ts = graph.node_ts()
    assert (ts[dst[other_stream]] >= ts[src[other_stream]]).all()


DLRM_TWO_THREADS = "param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json"  # main + autograd thread


def test_thread_codes_of_the_whole_table_keep_threads_apart() -> None:
    """`cpu_table` codes each (process, thread) once per trace; a window's graph built from those codes is the
    graph built from the window's own process and thread text (a code shared by two threads nested the
    autograd thread's ops inside the main thread's and changed the path)."""
    from opscope.analysis.critical_path.graph import THREAD, cpu_table, gpu_table

    trace = opscope.load(corpus_path(DLRM_TWO_THREADS))
    linkage = link(trace)
    cpu_all, gpu_all = cpu_table(trace), gpu_table(linkage)
    threads = cpu_all.select(pl.col("pid").cast(pl.String), pl.col("tid").cast(pl.String), THREAD).unique()
    assert threads.height == 2
    assert threads[THREAD].n_unique() == 2
    for w in step_windows(trace):
        coded = build(trace, linkage, w.start_ns, w.end_ns, cpu_all, gpu_all)
        own = build(trace, linkage, w.start_ns, w.end_ns, cpu_all.drop(THREAD), gpu_all)
        assert coded.events.equals(own.events)
        assert coded.edges.equals(own.edges)


RESNET_WORKERS = "kineto/tb_plugin_samples_resnet50_profiler_api_num_workers_4_worker0.pt.trace.json.gz"
NCCL = "hta/nccl_parser_config_nccl_data.json.gz"


@pytest.mark.parametrize("name", [NS_STEPS, RESNET_WORKERS, NCCL])  # 3 threads, 2 threads, 3 threads
def test_first_windows_from_their_span_equal_the_whole_table(name: str) -> None:
    """The report's panel builds the first steps only, from the CPU events of their span (threads numbered in
    the whole table's order without sorting it): each step's path, breakdown, top events and segments equal
    those built from the whole table, and the span's thread codes keep the whole table's order."""
    from opscope.analysis.critical_path.graph import THREAD, cpu_table

    whole = critical_path_stats(opscope.load(corpus_path(name)), top=5)
    assert len(whole.steps) > 2
    for k in (1, 2):
        trace = opscope.load(corpus_path(name))
        first = critical_path_stats(trace, top=5, max_windows=k)
        assert not trace.has_derived("critical_path.cpu_table")  # the span's table, not the whole one
        assert first.windows_total == whole.windows_total and len(first.steps) == k
        for got, want in zip(first.steps, whole.steps[:k]):
            assert (got.window, got.span_ns) == (want.window, want.span_ns)
            assert (got.path.length_ns, got.path.breakdown_ns, got.path.top) == (
                want.path.length_ns,
                want.path.breakdown_ns,
                want.path.top,
            )
            assert got.path.edges.tolist() == want.path.edges.tolist()
            assert got.segments.equals(want.segments)
    trace = opscope.load(corpus_path(name))
    windows = step_windows(trace)
    span = cpu_table(trace, (windows[1].start_ns, windows[-1].end_ns))
    full = cpu_table(trace)

    def order(table: pl.DataFrame) -> list[tuple[str, str]]:
        pairs = table.select(pl.col("pid").cast(pl.String), pl.col("tid").cast(pl.String), THREAD).unique()
        return [(p, t) for p, t, _ in pairs.sort(THREAD).rows()]

    assert order(span) == [pair for pair in order(full) if pair in set(order(span))]


def _top_by_walk(graph: object, path: object) -> tuple[dict[str, int], list[tuple[str, str, int, int]]]:
    """The breakdown by kind and the top events of a path, by a plain walk over the path's edges and the
    graph's events (rows as Python dicts): the reference for `path._result`."""
    from opscope.analysis.critical_path.kinds import EDGE_KINDS
    from opscope.analysis.critical_path.path import TOP_KINDS

    edges = graph.edges.to_dicts()  # type: ignore[attr-defined]
    events = graph.events.to_dicts()  # type: ignore[attr-defined]
    breakdown = dict.fromkeys(EDGE_KINDS, 0)
    on: dict[tuple[str | None, str | None], int] = {}
    for i in path.edges.tolist():  # type: ignore[attr-defined]
        e = edges[i]
        breakdown[e["kind"]] += e["weight_ns"]
        if e["kind"] in TOP_KINDS and e["owner"] >= 0:
            ev = events[e["owner"]]
            on[(ev["name"], ev["kind"])] = on.get((ev["name"], ev["kind"]), 0) + e["weight_ns"]
    total: dict[tuple[str | None, str | None], int] = {}
    for ev in events:
        key = (ev["name"], ev["kind"])
        total[key] = total.get(key, 0) + ev["end_ns"] - ev["ts_ns"]
    # most time first, then by name with the unnamed first (polars' order), then by kind
    ordered = sorted(
        ((n, k, ns) for (n, k), ns in on.items() if ns > 0),
        key=lambda r: (-r[2], r[0] is not None, r[0] or "", r[1] or ""),
    )
    rows = [
        (str(n), str(k), ns, total[(n, k)] if n is not None and k is not None else 0) for n, k, ns in ordered
    ]
    return breakdown, rows


@pytest.mark.parametrize("name", [NS_STEPS, QWEN, AMD])
def test_breakdown_and_top_equal_a_walk_over_the_graph(name: str) -> None:
    """Each step's breakdown and top events (every one: top 0) equal a plain walk over its graph's edges and
    events: the on-path time per (name, kind) of the own-time edges, the total duration of every event of
    that name and kind in the step's graph, ordered by on-path time, then name, then kind."""
    trace = opscope.load(corpus_path(name))
    linkage = link(trace)
    for window in step_windows(trace)[:3]:
        graph = build(trace, linkage, window.start_ns, window.end_ns)
        path = critical_path(graph, top=0)
        breakdown, rows = _top_by_walk(graph, path)
        assert path.breakdown_ns == breakdown
        assert [(t.name, t.kind, t.on_path_ns, t.total_ns) for t in path.top] == rows
        assert len(critical_path(graph, top=2).top) == min(2, len(rows))


def test_an_unnamed_event_on_the_path_has_no_total(tmp_path: Path) -> None:
    """Hand-made fixture (not a recording): the hand-made step with its GEMM kernel's name removed. The
    unnamed kernel is still on the path (its time counted under the name "None", ordered before the named
    ones of equal time) but has no total, as the named events' totals are taken by name."""
    events = json.loads(hand_made(tmp_path).read_text())["traceEvents"]
    for event in events:
        if event["name"] == "my_gemm_kernel":
            del event["name"]
    path = tmp_path / "unnamed.json"
    path.write_text(json.dumps({"traceEvents": events}))
    (step,) = critical_path_stats(opscope.load(path), top=0).steps
    graph = build(opscope.load(path), link(opscope.load(path)), step.window.start_ns, step.window.end_ns)
    assert graph.events["name"].null_count() == 1
    top = {t.name: (t.on_path_ns, t.total_ns) for t in step.path.top}
    assert top["None"] == (68_000, 0)
    assert top["aten::mm"] == (2_000, 20_000)


# Steps laid out together (issue 57): a batch of windows is the union of their graphs, each window's events,
# edges and paths as when it is laid out alone. Real traces with several steps, and generated shapes (labelled
# hand-made in tests/unkind_traces.py) that exercise every kind of edge across windows: cross-stream waits,
# synchronisations, reused correlation ids, many threads.
BATCHED = [
    NS_STEPS,
    RESNET_WORKERS,
    NCCL,
    "kineto/tb_plugin_samples_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz",
]


def _window_graph(graph, events: np.ndarray) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A window's events and edges out of a graph, renumbered from 0 in their order (as built alone)."""
    remap = np.full(graph.events.height, -1)
    remap[events] = np.arange(len(events))
    mine = graph.events[events].select("row", "is_gpu", "ts_ns", "end_ns", "parent", "launch")
    for column in ("parent", "launch"):
        values = mine[column].to_numpy()
        mine = mine.with_columns(pl.Series(column, np.where(values >= 0, remap[np.maximum(values, 0)], -1)))
    src, dst = graph.edges["src"].to_numpy(), graph.edges["dst"].to_numpy()
    owner = graph.edges["owner"].to_numpy()
    inside = np.isin(src // 2, events)
    edges = pl.DataFrame(
        {
            "src": (2 * remap[src // 2] + src % 2)[inside],
            "dst": (2 * remap[dst // 2] + dst % 2)[inside],
            "weight": graph.edges["weight_ns"].to_numpy()[inside],
            "kind": graph.edges["kind"].cast(pl.String).to_numpy()[inside],
            "owner": np.where(owner >= 0, remap[np.maximum(owner, 0)], -1)[inside],
            "sync": graph.edges["sync"].to_numpy()[inside],
        }
    )
    return mine, edges


def _batched_equals_alone(trace: opscope.Trace) -> int:
    from opscope.analysis.critical_path.graph import (
        build_from,
        build_windows,
        cpu_table,
        gpu_table,
        stream_waits,
    )
    from opscope.analysis.critical_path.stats import StepTables, step_path, step_paths

    windows = step_windows(trace)
    tables = StepTables(cpu_table(trace), gpu_table(link(trace)), stream_waits(trace))
    batch = build_windows(
        tables.cpu, tables.gpu, tables.waits, tuple((w.start_ns, w.end_ns) for w in windows)
    )
    rules = (WhatIf("gemm|sgemm|Synchronize|mul|add", 0.5),)
    together = step_paths(tables, windows, rules, top=5)
    for k in range(0, len(windows), max(1, len(windows) // 100)):  # a hundred of them, spread out
        w = windows[k]
        alone = build_from(tables.cpu, tables.gpu, tables.waits, w.start_ns, w.end_ns)
        assert batch.window is not None
        for got_part, want_part in zip(
            _window_graph(batch, np.flatnonzero(batch.window == k)),
            _window_graph(alone, np.arange(alone.events.height)),
            strict=True,
        ):
            assert got_part.equals(want_part)
        one = step_path(tables, w, rules, top=5)
        got = together[k]
        assert (got.span_ns, got.path.length_ns, got.path.breakdown_ns, got.path.top) == (
            one.span_ns,
            one.path.length_ns,
            one.path.breakdown_ns,
            one.path.top,
        )
        assert got.path.edges.tolist() == one.path.edges.tolist()
        assert got.predicted is not None and one.predicted is not None
        assert (got.predicted.length_ns, got.predicted.edges.tolist()) == (
            one.predicted.length_ns,
            one.predicted.edges.tolist(),
        )
        assert got.segments.equals(one.segments)
    return len(windows)


@pytest.mark.parametrize("name", BATCHED)
def test_steps_laid_out_together_equal_each_alone(name: str) -> None:
    assert _batched_equals_alone(opscope.load(corpus_path(name))) > 1


@pytest.mark.parametrize(
    "shape",
    [
        "many_steps",
        "stream_waits",
        "syncs_among_frames",
        "reused_correlations",
        "many_threads",
        "identical_timestamps",
    ],
)
def test_generated_steps_laid_out_together_equal_each_alone(shape: str, tmp_path: Path) -> None:
    from unkind_traces import SHAPES

    doc = SHAPES[shape](2 if shape != "many_steps" else 1)
    path = tmp_path / f"{shape}.json"
    path.write_text(json.dumps(doc))
    assert _batched_equals_alone(opscope.load(path, cache=False)) >= 1
