"""`opscope ops`: every figure of every row against a recomputation from the raw JSON, the documented relation
to TraceLens's ops_summary reference CSVs, --by-shape, --steps, and the command's outputs and errors."""

from __future__ import annotations

import csv
import io
import json
import re
from collections import defaultdict

import polars as pl
import pytest

import opscope
import reference as ref
from conftest import TRACES, corpus_path
from opscope.analysis.attribution.ops import OpOptions, op_stats

BERT = "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"
V100 = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
RESNET_2021 = "kineto/plugin_samples_resnet50_num_workers_0_worker0.pt.trace.json.gz"
QWEN = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
STEP = re.compile(r"^ProfilerStep#\d+$")


def raw_ops(
    relative: str, steps: set[int] | None = None, stream: int | None = None
) -> dict[str, dict[str, float]]:
    """Per op name from the raw JSON: calls, cpu_total, cpu_self, gpu_self, gpu_total, kernels (ns / counts).
    With `stream`: the GPU events on that stream (args.stream, else tid), and only the op instances that launched
    one of them, directly or through a child op."""
    events = ref.load(corpus_path(relative))
    raw = ref.link(events)
    if stream is not None:

        def on_stream(g: int) -> bool:
            return ref.args(events[g]).get("stream", events[g].get("tid")) in (stream, str(stream))

        raw.gpu = [g for g in raw.gpu if on_stream(g)]
        launching: set[int] = set()
        for g in raw.gpu:
            op = raw.op[g]
            while op is not None and op not in launching:
                launching.add(op)
                op = raw.op_parent[op]

    def name(i: int) -> str:
        return "ProfilerStep#*" if STEP.match(events[i]["name"]) else events[i]["name"]

    windows = [
        ref.span(e)
        for e in events
        if e.get("cat") in ref.OP_CATS
        and ref.is_x(e)
        and STEP.match(e["name"])
        and (steps is None or int(e["name"].split("#")[1]) in steps)
    ]

    def inside(ts: int) -> bool:
        return steps is None or any(lo <= ts < hi for lo, hi in windows)

    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    children: dict[int, int] = defaultdict(int)
    for op, parent in raw.op_parent.items():
        if parent is not None:
            children[parent] += max(ref.ns(events[op]["dur"]), 0)
    for op in raw.op_parent:
        if not inside(ref.span(events[op])[0]) or (stream is not None and op not in launching):
            continue
        row = out[name(op)]
        dur = max(ref.ns(events[op]["dur"]), 0)
        row["calls"] += 1
        row["cpu_total"] += dur
        row["cpu_self"] += max(dur - children[op], 0)
    for g in raw.gpu:
        launch = raw.launch[g]
        at = ref.span(events[launch] if launch is not None else events[g])[0]
        op = raw.op[g]
        if op is None or not inside(at):
            continue
        dur = ref.gpu_dur(events, g)
        out[name(op)]["gpu_self"] += dur
        seen = set()
        while op is not None:  # walk up the op tree: each name once per GPU event
            if name(op) not in seen:
                seen.add(name(op))
                out[name(op)]["gpu_total"] += dur
                out[name(op)]["kernels"] += 1
            op = raw.op_parent[op]
    return out


@pytest.mark.parametrize(
    "relative",
    [
        BERT,
        V100,
        RESNET_2021,
        "tracelens/mi300__Falconsai_nsfw_image_detection__1016002.json.gz",
        "hta/nccl_parser_config_nccl_data.json.gz",
    ],
)
def test_every_row_matches_raw(relative: str) -> None:
    expected = raw_ops(relative)
    result = op_stats(opscope.load(corpus_path(relative)), OpOptions(top=0))
    assert {r.name for r in result.rows} == set(expected)
    for r in result.rows:
        e = expected[r.name]
        got = (r.calls, r.cpu_total_ns, r.cpu_self_ns, r.gpu_self_ns, r.gpu_total_ns, r.kernels)
        assert got == tuple(
            int(e[k]) for k in ("calls", "cpu_total", "cpu_self", "gpu_self", "gpu_total", "kernels")
        ), r.name
    # GPU self time partitions the attributed GPU time; the rest is the unattributed share.
    assert sum(r.gpu_self_ns for r in result.rows) == result.attributed_ns
    assert result.attributed_ns + result.unattributed_share * result.gpu_time_ns == pytest.approx(
        result.gpu_time_ns
    )


@pytest.mark.parametrize("stream", [7, 40])
def test_stream_filters_the_cpu_side_too(stream: int) -> None:
    """Issue 18: --stream filtered only the GPU columns; calls and CPU times still counted every instance. Now
    the CPU side is the op instances that launched work on the stream (NCCL stream 40, compute stream 7)."""
    relative = "hta/nccl_parser_config_nccl_data.json.gz"
    expected = {k: v for k, v in raw_ops(relative, stream=stream).items() if v["calls"]}
    result = op_stats(opscope.load(corpus_path(relative)), OpOptions(top=0, streams=(stream,)))
    got = {
        r.name: (r.calls, r.cpu_total_ns, r.cpu_self_ns, r.gpu_self_ns, r.gpu_total_ns, r.kernels)
        for r in result.rows
    }
    assert got == {
        k: tuple(int(v[f]) for f in ("calls", "cpu_total", "cpu_self", "gpu_self", "gpu_total", "kernels"))
        for k, v in expected.items()
    }
    assert all(r.kernels > 0 for r in result.rows)
    if stream == 40:
        assert got["nccl:all_reduce"][0] == 15 and "aten::convolution_backward" not in got


def test_steps_restrict_ops_and_kernels() -> None:
    expected = raw_ops(RESNET_2021, steps={6, 7})
    result = op_stats(opscope.load(corpus_path(RESNET_2021)), OpOptions(top=0, steps="6-7"))
    got = {r.name: (r.calls, r.cpu_total_ns, r.gpu_self_ns) for r in result.rows if r.calls}
    assert got == {
        k: (int(v["calls"]), int(v["cpu_total"]), int(v["gpu_self"]))
        for k, v in expected.items()
        if v["calls"]
    }
    assert next(r for r in result.rows if r.name == "ProfilerStep#*").calls == 2


@pytest.mark.parametrize(
    "relative", [RESNET_2021, V100, "param/dlrm_kineto/worker1_step_12.1694128201556.pt.trace.json"]
)
@pytest.mark.parametrize("by_shape", [False, True])
def test_step_table_by_difference_equals_the_direct_one(
    monkeypatch: pytest.MonkeyPatch, relative: str, by_shape: bool
) -> None:
    """The steps' GPU figures as the whole trace's less those outside the steps (issue 25) equal the figures
    computed over the steps' GPU events directly, row for row and in the same order."""
    from opscope.analysis.attribution import ops as ops_module
    from opscope.analysis.base.linking import link
    from opscope.analysis.base.windows import step_windows

    trace = opscope.load(corpus_path(relative))
    linked = link(trace)
    steps = [w.step for w in step_windows(trace)]
    for spec in (",".join(map(str, steps[1:] or steps)), str(steps[len(steps) // 2])):
        opts = OpOptions(top=0, by_shape=by_shape, steps=spec)
        by_difference = ops_module._op_stats(trace, opts, linked)
        with monkeypatch.context() as m:
            m.setattr(ops_module, "_gpu_by_difference", lambda *args: None)
            direct = ops_module._op_stats(trace, opts, linked)
        assert by_difference.rows == direct.rows
        assert by_difference.cpu_rows == direct.cpu_rows
        assert (by_difference.gpu_time_ns, by_difference.attributed_ns) == (
            direct.gpu_time_ns,
            direct.attributed_ns,
        )
        assert any(r.kernels for r in direct.rows)


@pytest.mark.parametrize(
    "relative", [RESNET_2021, V100, "param/dlrm_kineto/worker1_step_12.1694128201556.pt.trace.json", QWEN]
)
@pytest.mark.parametrize("by_shape", [False, True])
def test_gpu_figures_by_tree_sums_equal_the_pairs(relative: str, by_shape: bool) -> None:
    """The GPU figures per key summed up the op tree (issue 25) equal those of pairing every GPU event with
    every op enclosing its launch, key for key: totals count each event once per key, also where an op sits
    inside another op of its own name (aten::to in aten::to, ProfilerStep#* in the folded step names)."""
    from opscope.analysis.attribution import ops as ops_module
    from opscope.analysis.base.linking import OP_KINDS, link
    from opscope.analysis.base.windows import fold_steps
    from opscope.model.schema import Col

    trace = opscope.load(corpus_path(relative))
    linked = link(trace)
    scopes = fold_steps(linked.scopes.filter(pl.col(Col.KIND).is_in(list(OP_KINDS))))
    keys = [Col.NAME]
    if by_shape:
        scopes = scopes.with_columns(pl.col(Col.INPUT_DIMS).cast(pl.String).str.replace_all(r"\s+", ""))
        keys.append(Col.INPUT_DIMS)
    launched = ops_module._launched(linked.gpu)
    for got, want in zip(
        ops_module._gpu_part(scopes, launched, keys), ops_module._gpu_part_pairs(scopes, launched, keys)
    ):
        assert got.height == want.height > 0
        assert got.sort(keys, nulls_last=True).equals(want.select(got.columns).sort(keys, nulls_last=True))


def test_by_shape_partitions_each_name() -> None:
    trace = opscope.load(corpus_path(BERT))
    plain = {r.name: r for r in op_stats(trace, OpOptions(top=0)).rows}
    shaped = op_stats(trace, OpOptions(top=0, by_shape=True)).rows
    assert len(shaped) > len(plain)
    sums: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for r in shaped:
        for i, v in enumerate((r.calls, r.cpu_total_ns, r.gpu_self_ns, r.gpu_total_ns)):
            sums[r.name][i] += v
    for name, (calls, cpu, gpu_self, gpu_total) in sums.items():
        p = plain[name]
        assert (calls, cpu, gpu_self) == (p.calls, p.cpu_total_ns, p.gpu_self_ns)
        assert gpu_total >= p.gpu_total_ns  # a kernel under two shapes of one name counts in each
    addmm = [r for r in shaped if r.name == "aten::addmm"]
    assert all(r.input_dims and r.input_dims.startswith("[[") for r in addmm)


def reference_pairs() -> list[tuple[str, str]]:
    folder = TRACES / "tracelens_reference"
    if not folder.is_dir():
        return []
    return [(p.name.split("_perf_report_csvs")[0], p.name) for p in sorted(folder.glob("*ops_summary.csv"))]


@pytest.mark.parametrize(("stem", "reference"), reference_pairs())
def test_tracelens_ops_summary(stem: str, reference: str) -> None:
    """TraceLens ops_summary: `total_direct_kernel_time_sum` is our gpu_self, `total_subtree_kernel_time_sum` our
    gpu_total (same definitions; TraceLens sums float32 microseconds, hence 0.02 us + 1e-6 relative). Its rows
    are the cpu_ops that launch kernels directly; its `Count` counts only the instances that launched kernels,
    so Count <= calls, with equality unless some instances ran no kernel (aten::arange in Qwen)."""
    trace = opscope.load(corpus_path(f"tracelens/{stem}.json.gz"))
    result = op_stats(trace, OpOptions(top=0))
    ours = {r.name: r for r in result.rows}
    with open(TRACES / "tracelens_reference" / reference, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {r["name"] for r in rows} == {
        r.name for r in result.rows if r.kind == "cpu_op" and r.gpu_self_ns > 0
    }
    from opscope.analysis.base.linking import link

    launching = link(trace).gpu.group_by("op_name").agg(__import__("polars").col("op_row").n_unique())
    instances = dict(zip(launching["op_name"], launching["op_row"]))
    for row in rows:
        mine = ours[row["name"]]
        assert mine.gpu_self_ns / 1e3 == pytest.approx(
            float(row["total_direct_kernel_time_sum"]), rel=1e-6, abs=0.02
        )
        assert mine.gpu_total_ns / 1e3 == pytest.approx(
            float(row["total_subtree_kernel_time_sum"]), rel=1e-6, abs=0.02
        )
        assert int(row["Count"]) == instances[row["name"]] <= mine.calls


def test_cpu_only_trace_lists_ops() -> None:
    result = op_stats(
        opscope.load(corpus_path("hta/cpu_only_rank-34.OLDVERSION_b8cce2cd9c.pt.trace.json.gz")),
        OpOptions(top=0),
    )
    assert result.gpu_time_ns == 0 and result.unattributed_share == 0.0
    assert result.rows and all(r.gpu_total_ns == 0 for r in result.rows)
    assert sum(r.calls for r in result.rows) > 7000


def test_gpu_only_trace_is_all_unattributed(cli) -> None:
    result = cli(
        "ops", corpus_path("tracelens/mi210__gpu_only_trace__gpu_only_trace.json.gz"), "--format", "json"
    )
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["unattributed_share"] == 1.0 and data["rows"] == []
    assert data["linking"]["launch_outside_ops"] == 562


def test_cli_json_csv_markdown_table(cli) -> None:
    path = corpus_path(BERT)
    result = cli("ops", path, "--format", "json", "--top", "5", "--by-shape")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["schema"] == "opscope.ops/1" and data["by_shape"] is True
    assert len(data["rows"]) == 5 and data["totals"]["rows"] > 5
    assert set(data["rows"][0]) >= {
        "name",
        "kind",
        "input_dims",
        "calls",
        "cpu_total_us",
        "cpu_self_us",
        "gpu_total_us",
        "gpu_self_us",
        "kernels",
        "self_kernels",
        "kernels_per_call",
        "gpu_share",
    }
    assert data["unattributed_share"] == 0.0
    table = cli("ops", path, "--width", "120", "--no-color")
    assert table.code == 0 and "aten::addmm" in table.out and "GPU self ms" in table.out
    md = cli("ops", path, "--format", "markdown", "--top", "3")
    assert md.code == 0 and md.out.startswith("### GPU time by operator") and "| Op |" in md.out
    rows = list(csv.DictReader(io.StringIO(cli("ops", path, "--format", "csv", "--top", "0").out)))
    addmm = next(r for r in rows if r["name"] == "aten::addmm")
    assert float(addmm["gpu_self_us"]) == pytest.approx(197.598, abs=0.001)
    # by shape, CSV keeps the trace's exact Input Dims (the terminal adds spaces between tensors to wrap there)
    shaped = list(csv.DictReader(io.StringIO(cli("ops", path, "--format", "csv", "--by-shape").out)))
    assert [r["input_dims"] for r in shaped][:5] == [r["input_dims"] for r in data["rows"]]
    assert any("],[" in r["input_dims"] for r in shaped) and not any(
        "], [" in r["input_dims"] for r in shaped
    )
    wrapped = cli("ops", path, "--by-shape", "--width", "120").out
    assert "], [" in wrapped


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--steps", "9"), "no step 9"),
        (("--steps", "x-y"), "--steps: expected"),
        (("--top", "-1"), "--top"),
    ],
)
def test_cli_errors(cli, args: tuple[str, ...], message: str) -> None:
    result = cli("ops", corpus_path(BERT), *args)
    assert result.code == 2
    assert message in result.err and "Traceback" not in result.err
