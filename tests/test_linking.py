"""Linking GPU work -> launch call -> enclosing ops, checked against an independent recomputation from the raw
JSON (tests/ref.py) on real traces, plus each edge case of the issue (real trace where the corpus has one,
hand-made fixture, labelled, where it does not)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import polars as pl
import pytest

import opscope
import reference as ref
from conftest import corpus_path
from opscope.analysis.base.linking import LAUNCH_API, link
from opscope.model.schema import Col
from opscope.model.trace import Trace

V100 = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
RESNET_2021 = "kineto/plugin_samples_resnet50_num_workers_0_worker0.pt.trace.json.gz"
QWEN_H100 = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
VLLM_GRAPH = "tracelens/inference__vllm_decode_full__graph_execution.json.gz"
SGLANG_GRAPH = "tracelens/inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz"
GPU_ONLY = "tracelens/mi210__gpu_only_trace__gpu_only_trace.json.gz"
NO_KERNELS = "zoology/trace.json"
CUPTI_RANGE = "hta/cupti_profiler_benchmark_result_924719_1679055439_trace.json.gz"
CPU_ONLY = "hta/cpu_only_rank-34.OLDVERSION_b8cce2cd9c.pt.trace.json.gz"
ZERO_KERNELS = "kineto/tb_plugin_samples_resnet50_autograd_api_num_workers_0_worker0.pt.trace.json.gz"

RAW_CHECKED = [
    V100,
    RESNET_2021,
    QWEN_H100,
    VLLM_GRAPH,
    SGLANG_GRAPH,
    GPU_ONLY,
    ZERO_KERNELS,
    "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz",
    "tracelens/mi300__Falconsai_nsfw_image_detection__1016002.json.gz",
    "tracelens/torch_compile_triton__trace.json.gz",
    "hta/triton_example_triton_example.json.gz",
    "hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "hta/nccl_parser_config_nccl_data.json.gz",
    "param/dlrm_kineto/worker1_step_12.1694128201556.pt.trace.json",
    "hta/trace_compare_base_base.json.gz",
]


def _rows(frame: pl.DataFrame, key: str, value: str) -> dict[int, int | None]:
    return dict(zip(frame[key].to_list(), frame[value].to_list()))


@pytest.mark.parametrize("relative", RAW_CHECKED)
def test_launch_and_ops_match_raw_recomputation(relative: str) -> None:
    path = corpus_path(relative)
    events = ref.load(path)
    raw = ref.link(events)
    linkage = link(opscope.load(path))
    gpu = linkage.gpu
    assert sorted(gpu["row"].to_list()) == raw.gpu
    assert _rows(gpu, "row", "launch_row") == raw.launch
    assert _rows(gpu, "row", "op_row") == raw.op
    assert _rows(gpu, "row", "scope_row") == raw.scope
    assert _rows(gpu, "row", "attributed") == {g: raw.scope[g] is not None for g in raw.gpu}
    # Every GPU event's time is attributed or counted as unattributed, and the two make the total.
    total = sum(ref.gpu_dur(events, g) for g in raw.gpu)
    attributed = sum(ref.gpu_dur(events, g) for g in raw.gpu if raw.scope[g] is not None)
    stats = linkage.stats
    assert stats.gpu_time_ns == total
    assert stats.attributed_ns == attributed
    assert stats.attributed_ns + stats.unattributed_ns == stats.gpu_time_ns
    assert stats.unattributed_share == pytest.approx((total - attributed) / total if total else 0.0)
    assert stats.missing_launch == sum(1 for g in raw.gpu if raw.launch[g] is None)
    assert stats.linked_by_correlation + stats.linked_by_flow + stats.missing_launch == stats.gpu_events
    # op_parent_row of every op is its nearest enclosing op (the self-time denominator).
    ops = linkage.scopes.filter(pl.col(Col.KIND).is_in(["cpu_op", "user_annotation"]))
    assert _rows(ops, "row", "op_parent_row") == raw.op_parent


def test_missing_launches_are_counted_on_real_traces() -> None:
    # Kernels whose launch happened before the profiler started (the launch call is not in the trace).
    for relative, expected in ((RESNET_2021, 765), (QWEN_H100, 509)):
        stats = link(opscope.load(corpus_path(relative))).stats
        assert stats.missing_launch == expected
        assert stats.unattributed_share > 0


def test_stack_is_outermost_first_and_nested() -> None:
    linkage = link(opscope.load(corpus_path("tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz")))
    spans = {r: (ts, ts + d) for r, ts, d in linkage.scopes.select("row", Col.TS_NS, Col.DUR_NS).iter_rows()}
    parents = _rows(linkage.scopes, "row", "parent_row")
    for scope_row, stack in linkage.to_polars().select("scope_row", "stack").iter_rows():
        assert stack[-1] == scope_row
        assert parents[stack[0]] is None
        for outer, inner in itertools.pairwise(stack):
            assert parents[inner] == outer
            assert spans[outer][0] <= spans[inner][0] and spans[inner][1] <= spans[outer][1]


def test_external_id_agrees_with_innermost_op() -> None:
    # Kineto gives a launch call the External id of the op it ran in: an independent check of containment.
    for relative in (
        V100,
        RESNET_2021,
        QWEN_H100,
        "tracelens/mi300__Falconsai_nsfw_image_detection__1016002.json.gz",
    ):
        trace = opscope.load(corpus_path(relative))
        ext = trace.lazy().with_row_index("r").select(pl.col("r").cast(pl.Int64), Col.EXTERNAL_ID).collect()
        gpu = link(trace).gpu.filter(pl.col("op_row").is_not_null())
        joined = gpu.join(
            ext.rename({"r": "launch_row", Col.EXTERNAL_ID: "launch_ext"}), on="launch_row"
        ).join(ext.rename({"r": "op_row", Col.EXTERNAL_ID: "op_ext"}), on="op_row")
        assert joined.height == gpu.height > 0
        assert (joined["launch_ext"] == joined["op_ext"]).all(), relative


def test_nccl_annotation_inside_op_is_innermost() -> None:
    # Documented difference: where a record_function annotation (nccl:all_reduce) sits inside an op
    # (record_param_comms), opscope attributes to the annotation; Kineto's External id names the op. That op
    # is then on the stack, directly above.
    trace = opscope.load(corpus_path("hta/nccl_parser_config_nccl_data.json.gz"))
    ext = trace.lazy().with_row_index("r").select(pl.col("r").cast(pl.Int64), Col.EXTERNAL_ID).collect()
    linkage = link(trace)
    gpu = linkage.gpu.join(
        ext.rename({"r": "launch_row", Col.EXTERNAL_ID: "launch_ext"}), on="launch_row"
    ).join(ext.rename({"r": "op_row", Col.EXTERNAL_ID: "op_ext"}), on="op_row")
    differ = gpu.filter(pl.col("launch_ext") != pl.col("op_ext"))
    assert differ.height > 0 and set(differ["op_kind"]) == {"user_annotation"}
    parents = _rows(linkage.scopes, "row", "op_parent_row")
    by_row = _rows(ext, "r", Col.EXTERNAL_ID)
    for op_row, launch_ext in differ.select("op_row", "launch_ext").iter_rows():
        assert by_row[parents[op_row]] == launch_ext


def test_graph_launch_kernels_go_to_the_launching_op() -> None:
    for relative, kernels in ((VLLM_GRAPH, 421), (SGLANG_GRAPH, 544)):
        events = ref.load(corpus_path(relative))
        linkage = link(opscope.load(corpus_path(relative)))
        graph = linkage.gpu.filter(pl.col("from_graph"))
        assert graph.height == kernels == linkage.stats.from_graph
        assert linkage.stats.graph_launches == 1
        assert set(graph["launch_name"]) == {"hipGraphLaunch"}
        (op_row,) = set(graph["op_row"])
        launch = events[graph["launch_row"][0]]
        op = events[op_row]
        start, end = ref.span(launch)
        assert ref.span(op)[0] <= start and end <= ref.span(op)[1]
        assert graph["attributed"].all()


def test_gpu_only_capture() -> None:
    stats = link(opscope.load(corpus_path(GPU_ONLY))).stats
    assert stats.gpu_events == 562 and stats.missing_launch == 0
    assert stats.launch_outside_ops == 562
    assert stats.unattributed_share == 1.0


@pytest.mark.parametrize("relative", [NO_KERNELS, CUPTI_RANGE])
def test_launches_without_kernels(relative: str) -> None:
    import re

    events = ref.load(corpus_path(relative))
    gpu_corr = {ref.args(e).get("correlation") for e in events if e.get("cat") in ref.GPU_CATS}
    expected = sum(
        1
        for e in events
        if e.get("cat") in ref.LAUNCH_CATS
        and ref.is_x(e)
        and re.search(LAUNCH_API, e.get("name", ""))
        and ref.args(e).get("correlation") not in gpu_corr
    )
    stats = link(opscope.load(corpus_path(relative))).stats
    assert stats.gpu_events == 0 and stats.unattributed_share == 0.0
    assert stats.launches_without_gpu == expected > 0


def test_cpu_only_trace() -> None:
    linkage = link(opscope.load(corpus_path(CPU_ONLY)))
    assert linkage.gpu.height == 0 and linkage.stats.unattributed_share == 0.0
    assert linkage.scopes.height > 7000


def _without_correlation(trace: Trace) -> Trace:
    gpu = pl.col(Col.KIND).cast(pl.String).is_in(["kernel", "memcpy", "memset"])
    frame = trace.events.with_columns(
        pl.when(gpu).then(None).otherwise(pl.col(Col.CORRELATION)).alias(Col.CORRELATION)
    )
    return Trace.from_frame(trace.meta, frame)


@pytest.mark.parametrize("relative", [V100, RESNET_2021, "hta/trace_file_list_inference_rank_1.json.gz"])
def test_flows_reproduce_correlation_links(relative: str) -> None:
    # Real traces with the GPU-side correlation ids removed: the ac2g / async / async_gpu flows alone must give
    # every GPU event the launch its correlation id gave it.
    trace = opscope.load(corpus_path(relative))
    by_corr = link(trace).gpu
    by_flow = link(_without_correlation(trace))
    assert by_flow.stats.without_correlation == by_flow.stats.gpu_events
    assert by_flow.stats.linked_by_flow == by_corr.filter(pl.col("launch_row").is_not_null()).height > 0
    assert _rows(by_flow.gpu, "row", "launch_row") == _rows(by_corr, "row", "launch_row")
    assert _rows(by_flow.gpu, "row", "op_row") == _rows(by_corr, "row", "op_row")


@pytest.mark.parametrize("relative", [V100, RESNET_2021, GPU_ONLY, NO_KERNELS])
def test_dangling_flows_match_raw(relative: str) -> None:
    # A flow id is dangling unless its start lands on a launch call and its finish on GPU activity (raw check
    # by exact timestamp on the same pid/tid, which is where Kineto writes flow ends).
    events = ref.load(corpus_path(relative))
    at = {}
    for e in events:
        if ref.is_x(e):
            at.setdefault((str(e.get("pid")), str(e.get("tid")), ref.ns(e.get("ts"))), set()).add(
                e.get("cat")
            )
    ends: dict[object, set[str]] = {}
    for e in events:
        if e.get("cat") in ref.FLOW_CATS and e.get("ph") in ("s", "f") and e.get("id") is not None:
            cats = at.get((str(e.get("pid")), str(e.get("tid")), ref.ns(e.get("ts"))), set())
            wanted = ref.LAUNCH_CATS if e["ph"] == "s" else set(ref.GPU_CATS)
            ends.setdefault(e["id"], set())
            if cats & wanted:
                ends[e["id"]].add(e["ph"])
    expected = sum(1 for phases in ends.values() if phases != {"s", "f"})
    assert link(opscope.load(corpus_path(relative))).stats.dangling_flows == expected


def _write(tmp_path: Path, events: list[dict]) -> Trace:
    path = tmp_path / "handmade.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return opscope.load(path, cache=False)


def _x(cat: str, name: str, ts: float, dur: float, pid: int = 1, tid: int = 1, **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def test_duplicate_correlation_ids(tmp_path: Path) -> None:
    # HAND-MADE: two launch calls carry correlation 7 (as in traces merged from two processes); each kernel
    # takes the latest launch that started before it.
    trace = _write(
        tmp_path,
        [
            _x("cpu_op", "aten::a", 0, 10),
            _x("cuda_runtime", "cudaLaunchKernel", 2, 1, correlation=7),
            _x("cpu_op", "aten::b", 20, 10),
            _x("cuda_runtime", "cudaLaunchKernel", 22, 1, correlation=7),
            _x("kernel", "k1", 5, 3, pid=0, tid=7, correlation=7, device=0, stream=7),
            _x("kernel", "k2", 25, 3, pid=0, tid=7, correlation=7, device=0, stream=7),
        ],
    )
    linkage = link(trace)
    assert linkage.stats.duplicate_correlations == 1
    assert dict(zip(linkage.gpu[Col.NAME], linkage.gpu["op_name"])) == {"k1": "aten::a", "k2": "aten::b"}
    assert linkage.gpu.height == 2  # the join did not multiply rows


def test_zero_durations_on_real_trace() -> None:
    events = ref.load(corpus_path(ZERO_KERNELS))
    zero_gpu = sum(1 for e in events if e.get("cat") in ref.GPU_CATS and ref.is_x(e) and e["dur"] <= 0)
    zero_cpu = sum(
        1
        for e in events
        if e.get("cat") in ref.SCOPE_CATS | ref.LAUNCH_CATS and ref.is_x(e) and e["dur"] <= 0
    )
    stats = link(opscope.load(corpus_path(ZERO_KERNELS))).stats
    assert stats.nonpositive_gpu == zero_gpu == 259 and stats.negative_gpu == 0
    assert stats.nonpositive_cpu == zero_cpu


def test_negative_durations(tmp_path: Path) -> None:
    # HAND-MADE: a kernel with a negative duration (clock glitch) counts as 0 time; a zero-length launch call
    # is still inside its op. The Kineto readers leave a negative `dur` empty (and warn), so the negative
    # duration is put into the table directly, as a reader of another format could deliver it.
    trace = _write(
        tmp_path,
        [
            _x("cpu_op", "aten::a", 0, 10),
            _x("cuda_runtime", "cudaLaunchKernel", 10, 0, correlation=1),
            _x("cuda_runtime", "cudaLaunchKernel", 3, 1, correlation=2),
            _x("kernel", "bad", 12, 4, pid=0, tid=7, correlation=1, device=0, stream=7),
            _x("kernel", "good", 20, 5, pid=0, tid=7, correlation=2, device=0, stream=7),
        ],
    )
    events = trace.events.with_columns(
        pl.when(pl.col("name") == "bad").then(-pl.col("dur_ns")).otherwise(pl.col("dur_ns")).alias("dur_ns")
    )
    trace = Trace.from_frame(trace.meta, events)
    linkage = link(trace)
    assert linkage.stats.negative_gpu == 1 and linkage.stats.nonpositive_gpu == 1
    assert linkage.stats.nonpositive_cpu == 1
    assert linkage.stats.gpu_time_ns == 5000
    assert set(linkage.gpu["op_name"]) == {"aten::a"}


def test_flow_pointing_nowhere_is_counted(tmp_path: Path) -> None:
    # HAND-MADE: flow 5 starts at a launch and ends at no event; flow 6 has no start at all.
    trace = _write(
        tmp_path,
        [
            _x("cpu_op", "aten::a", 0, 10),
            _x("cuda_runtime", "cudaLaunchKernel", 2, 1),
            {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 5, "pid": 1, "tid": 1, "ts": 2},
            {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 5, "pid": 0, "tid": 7, "ts": 50, "bp": "e"},
            {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 6, "pid": 0, "tid": 7, "ts": 5, "bp": "e"},
            _x("kernel", "k", 5, 3, pid=0, tid=7, device=0, stream=7),
        ],
    )
    stats = link(trace).stats
    assert stats.dangling_flows == 2
    assert stats.missing_launch == 1 and stats.without_correlation == 1
    assert stats.unattributed_share == 1.0


def test_python_ids_agree_with_time_nesting() -> None:
    # Python frames: the parent by `Python parent id` is the parent by time nesting, on every frame.
    for relative in (
        "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz",
        "tracelens/inference__sglang_decode__capture_traces__bs_32_rank0.json.gz",
    ):
        scopes = link(opscope.load(corpus_path(relative))).scopes
        python = scopes.filter(pl.col(Col.KIND) == "python_function")
        by_id = dict(zip(python[Col.PY_ID], python["row"]))
        parents = _rows(scopes, "row", "parent_row")
        kinds = _rows(scopes, "row", Col.KIND)
        checked = 0
        for row, parent_id in python.select("row", Col.PY_PARENT_ID).iter_rows():
            if parent_id is None:
                continue
            ancestor = parents[row]
            while ancestor is not None and kinds[ancestor] != "python_function":
                ancestor = parents[ancestor]
            assert ancestor == by_id[parent_id]
            checked += 1
        assert checked > 1000


def test_the_link_table_is_computed_once_per_trace() -> None:
    # issue 25: every analysis of one command shares one link table, one set of step windows and sync calls
    from opscope.analysis.base.linking import link
    from opscope.analysis.base.windows import marker_windows
    from opscope.analysis.timeline.syncs import sync_calls

    trace = opscope.load(corpus_path("hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"))
    assert link(trace) is link(trace)
    assert marker_windows(trace) is marker_windows(trace)
    assert sync_calls(trace) is sync_calls(trace)
    assert link(
        opscope.load(corpus_path("hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"))
    ) is not link(trace)


def test_event_columns_at_rows_read_once_per_kinds_and_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """`event_columns`: the columns at the asked rows in their order (null for a row of another kind), equal to
    a join on the row number; a second ask for the same kinds and columns reads no events (the efficiency
    table and the rules' op table share one read)."""
    from opscope.analysis.base.linking import OP_KINDS, ROW, event_columns

    trace = opscope.load(corpus_path("tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"))
    events = trace.lazy().with_row_index(ROW).select(pl.col(ROW).cast(pl.Int64), Col.KIND, Col.INPUT_TYPES)
    table = events.collect()
    rows = pl.Series(ROW, [*table.filter(pl.col(Col.KIND) == "cpu_op")[ROW].head(50).to_list()[::-1], 0, 3])
    expected = (
        pl.DataFrame({ROW: rows})
        .join(table, on=ROW, how="left", maintain_order="left")
        .select(pl.when(pl.col(Col.KIND).is_in(list(OP_KINDS))).then(pl.col(Col.INPUT_TYPES)))
        .to_series()
    )
    (first,) = event_columns(trace, rows, OP_KINDS, [Col.INPUT_TYPES])
    assert first.cast(pl.String).to_list() == expected.cast(pl.String).to_list()
    assert first.cast(pl.String).drop_nulls().len() > 0
    monkeypatch.setattr(Trace, "lazy", lambda self: pytest.fail("the events were read again"))
    (again,) = event_columns(trace, rows, OP_KINDS, (Col.INPUT_TYPES,))
    assert again.equals(first)
