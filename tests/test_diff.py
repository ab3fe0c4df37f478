"""`opscope diff`: figures checked against the raw JSON, self-diff, antisymmetry, per-step normalisation, gates."""

from __future__ import annotations

import json

import pytest

import opscope
import reference as ref
from conftest import corpus_path
from handmade_traces import document, training_steps, write
from opscope.analysis.attribution.ops import OpOptions, op_stats
from opscope.analysis.compare.diff import ADDED, REMOVED, SAME, DiffOptions, diff_traces
from opscope.analysis.kernels.category_rules import CATEGORIES

PT2 = "particle_transformer/run1_chrome_traces__single_epoch_forward_pass_batch_size_2.json"
PT512 = "particle_transformer/run1_chrome_traces__single_epoch_forward_pass_batch_size_512.json"
H100 = "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"
MI300 = "tracelens/mi300__gaunernst_bert-small-uncased__1016001.json.gz"
HTA_BASE = "hta/trace_compare_base_base.json.gz"
HTA_TEST = "hta/trace_compare_test_test.json.gz"
DLRM0 = "param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json"
TRACELENS_PAIRS = [
    (f"tracelens/h100__{m}.json.gz", f"tracelens/mi300__{m}.json.gz")
    for m in (
        "gaunernst_bert-small-uncased__1016001",
        "Falconsai_nsfw_image_detection__1016002",
        "Qwen_Qwen1.5-0.5B-Chat__1016005",
    )
]
PAIRS = [(PT2, PT512), (HTA_BASE, HTA_TEST), *TRACELENS_PAIRS]


def _diff(a: str, b: str, **options: object):
    return diff_traces(opscope.load(corpus_path(a)), opscope.load(corpus_path(b)), DiffOptions(**options))


@pytest.mark.parametrize("name", [PT2, H100, HTA_BASE, DLRM0])
def test_self_diff_is_all_zeros_and_passes_every_gate(cli, name: str) -> None:
    path = corpus_path(name)
    result = cli(
        "diff",
        path,
        path,
        "--format",
        "json",
        "--top",
        "0",
        "--fail-above",
        "0",
        "--fail-kernel",
        ".:0",
        "--fail-category",
        "gemm:0",
        "--fail-category",
        "communication:0",
    )
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["schema"] == "opscope.diff/1"
    assert data["passed"] is True and all(not g["tripped"] for g in data["gates"])
    for figure in data["headline"]:
        assert figure["delta"] in (0, 0.0, None), figure
    for table in ("kernels", "ops"):
        assert data[table]["rows_total"] == len(data[table]["rows"])
        for row in data[table]["rows"]:
            assert row["status"] == SAME and row["delta_us"] == 0 and row["ratio"] in (1.0, None), row
    assert data["kernels"]["rows"], "a GPU trace must have kernel rows"


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_diff_is_antisymmetric(a: str, b: str) -> None:
    forward, backward = _diff(a, b), _diff(b, a)
    assert forward.per_step == backward.per_step
    swap = {ADDED: REMOVED, REMOVED: ADDED}
    for rows_ab, rows_ba in ((forward.kernels, backward.kernels), (forward.ops, backward.ops)):
        ab = {(r.name, r.kind, r.shape): r for r in rows_ab}
        ba = {(r.name, r.kind, r.shape): r for r in rows_ba}
        assert ab.keys() == ba.keys()
        for key, row in ab.items():
            other = ba[key]
            assert row.delta_ns == -other.delta_ns
            assert (row.total_before_ns, row.total_after_ns) == (other.total_after_ns, other.total_before_ns)
            assert swap.get(row.status, row.status) == other.status
        assert [abs(r.delta_ns) for r in rows_ab] == [abs(r.delta_ns) for r in rows_ba]
    for fa, fb in zip(forward.figures[:4], backward.figures[:4]):
        assert (fa.before, fa.after) == (fb.after, fb.before)
    for (name, b1, a1), (_, b2, a2) in zip(forward.categories, backward.categories):
        assert (b1, a1) == (a2, b2), name


def test_whole_trace_figures_match_raw_json() -> None:
    diff = _diff(PT2, PT512)
    assert not diff.per_step  # no ProfilerStep markers in these traces
    for side, name in (("before", PT2), ("after", PT512)):
        events = ref.load(corpus_path(name))
        totals = ref.kernel_totals(ref.gpu_events(events))
        for row in diff.kernels:
            calls, total = totals.get((row.name, row.kind), (0, 0))
            assert getattr(row, f"total_{side}_ns") == total
            assert getattr(row, f"calls_{side}") == calls
        assert len([r for r in diff.kernels if getattr(r, f"calls_{side}")]) == len(totals)
        ops = ref.op_totals(events, per_step=False)
        gpu = _op_gpu(name, None)
        assert diff.op_metric == "gpu"
        for row in diff.ops:
            assert getattr(row, f"cpu_{side}_ns") == ops.get(row.name, (0, 0))[1]
            assert getattr(row, f"calls_{side}") == ops.get(row.name, (0, 0))[0]
            assert getattr(row, f"total_{side}_ns") == gpu.get(row.name, 0)
        gpu = sum(t for _, t in totals.values())
        assert diff.figure("gpu_time").__getattribute__(side) == gpu
        window = diff.figure("time").__getattribute__(side)
        busy = ref.busy_in(ref.gpu_events(events), [(0, 2**62)])
        assert diff.figure("gpu_busy").__getattribute__(side) == busy
        assert diff.figure("utilization").__getattribute__(side) == pytest.approx(busy / window)


@pytest.mark.parametrize(("a", "b"), [(HTA_BASE, HTA_TEST), *TRACELENS_PAIRS])
def test_per_step_figures_match_raw_json(a: str, b: str) -> None:
    diff = _diff(a, b)
    assert diff.per_step
    for side, name in (("before", a), ("after", b)):
        events = ref.load(corpus_path(name))
        windows = ref.steps(events)
        n = len(windows)
        assert getattr(diff, "base" if side == "before" else "new").steps == n
        scoped = ref.scoped_gpu(events, per_step=True)
        totals = ref.kernel_totals(scoped)
        for row in diff.kernels:
            calls, total = totals.get((row.name, row.kind), (0, 0))
            assert getattr(row, f"total_{side}_ns") == total / n
            assert getattr(row, f"calls_{side}") == calls / n
        assert getattr(diff.figure("gpu_time"), side) == sum(t for _, t in totals.values()) / n
        assert getattr(diff.figure("time"), side) == sum(hi - lo for lo, hi in windows) / n
        busy = ref.busy_in(ref.gpu_events(events), windows)
        assert getattr(diff.figure("gpu_busy"), side) == busy / n
        ops = ref.op_totals(events, per_step=True)
        gpu = _op_gpu(name, ",".join(str(int(w)) for w in _step_numbers(events)))
        for row in diff.ops:
            cpu = row.cpu_before_ns if side == "before" else row.cpu_after_ns
            metric = cpu if diff.op_metric == "cpu" else getattr(row, f"total_{side}_ns")
            if diff.op_metric == "gpu":
                assert cpu == ops.get(row.name, (0, 0))[1] / n
                assert metric == gpu.get(row.name, 0) / n
            else:
                assert getattr(row, f"total_{side}_ns") == ops.get(row.name, (0, 0))[1] / n


def _op_gpu(name: str, steps: str | None) -> dict[str, int]:
    """GPU time per operator from the attribution analysis (`opscope ops`), which diff must agree with."""
    stats = op_stats(opscope.load(corpus_path(name)), OpOptions(top=0, steps=steps))
    return {r.name: r.gpu_total_ns for r in stats.rows}


def _step_numbers(events: list[dict]) -> list[int]:
    return sorted({step for step, _, _ in ref.step_windows(events)})


def test_per_step_normalises_different_step_counts(tmp_path, cli) -> None:
    # hand-made: the same work per step, 2 steps in BASE and 4 in NEW
    base = write(tmp_path / "base.json", document(training_steps(2)))
    new = write(tmp_path / "new.json", document(training_steps(4)))
    data = json.loads(cli("diff", base, new, "--format", "json").out)
    assert data["per_step"] is True and (data["base"]["steps"], data["new"]["steps"]) == (2, 4)
    assert all(f["delta"] == 0 for f in data["headline"] if f["unit"] == "us")
    assert [r["status"] for r in data["kernels"]["rows"]] == [SAME]
    assert (
        data["kernels"]["rows"][0]["calls_before"] == 2
        and data["kernels"]["rows"][0]["total_before_us"] == 20
    )
    whole = json.loads(cli("diff", base, new, "--format", "json", "--no-per-step").out)
    assert whole["per_step"] is False
    assert whole["kernels"]["rows"][0]["delta_us"] == 40.0  # 8 kernels of 10 us against 4


def test_by_shape_splits_operators(tmp_path, cli) -> None:
    events = training_steps(1)
    events.append({**events[1], "args": {"Input Dims": [[16, 16], [16, 16]]}, "ts": 1060, "dur": 30})
    path = write(tmp_path / "t.json", document(events))
    data = json.loads(cli("diff", path, path, "--format", "json", "--by-shape").out)
    shapes = sorted(json.loads(r["shape"]) for r in data["ops"]["rows"] if r["name"] == "aten::mm")
    assert shapes == [[[8, 8], [8, 8]], [[16, 16], [16, 16]]]


def test_gates_trip_with_exit_1_and_a_one_line_reason(cli) -> None:
    a, b = corpus_path(PT2), corpus_path(PT512)
    result = cli("diff", a, b, "--fail-above", "5%")
    assert result.code == 1
    assert "Headline" in result.out  # the report is printed before the gate fails
    error = [line for line in result.err.splitlines() if "error" in line]
    assert len(error) == 1 and "regression gate failed: GPU time" in error[0] and "> 5%" in error[0]
    assert cli("diff", a, b, "--fail-above", "100000").code == 0
    assert cli("diff", a, b, "--fail-kernel", "softmax:50").code == 1  # softmax kernels are new in NEW
    assert cli("diff", b, a, "--fail-kernel", "softmax:50").code == 0
    assert cli("diff", a, b, "--fail-category", "Elementwise:10").code == 1
    assert cli("diff", b, a, "--fail-category", "elementwise:10").code == 0


@pytest.mark.parametrize(
    "option",
    [
        ("--fail-above", "x"),
        ("--fail-above", "-3"),
        ("--fail-kernel", "nocolon"),
        ("--fail-kernel", "([:5"),
        ("--fail-category", "tensor:5"),
        ("--min-delta", "50"),
        ("--min-delta", "fast"),
        ("--top", "-1"),
    ],
)
def test_bad_options_are_one_line_usage_errors(cli, option: tuple[str, str]) -> None:
    path = corpus_path(HTA_BASE)
    result = cli("diff", path, path, *option)
    assert result.code == 2
    assert result.err.count("\n") == 1 and "opscope: error:" in result.err


def test_min_delta_hides_small_rows(cli) -> None:
    a, b = corpus_path(PT2), corpus_path(PT512)
    full = json.loads(cli("diff", a, b, "--format", "json", "--top", "0").out)
    cut = json.loads(cli("diff", a, b, "--format", "json", "--top", "0", "--min-delta", "1ms").out)
    assert all(abs(r["delta_us"]) >= 1000 for r in cut["kernels"]["rows"])
    kept = len(cut["kernels"]["rows"])
    assert kept + cut["kernels"]["rows_hidden"] == full["kernels"]["rows_total"]
    assert kept == sum(abs(r["delta_us"]) >= 1000 for r in full["kernels"]["rows"])
    pct = json.loads(cli("diff", a, b, "--format", "json", "--top", "0", "--min-delta", "5%").out)
    window_us = full["headline"][0]["before"]
    assert all(abs(r["delta_us"]) >= 0.05 * window_us for r in pct["ops"]["rows"])


def test_per_step_needs_markers_in_both(cli) -> None:
    result = cli("diff", corpus_path(PT2), corpus_path(H100), "--per-step")
    assert result.code == 2 and "no ProfilerStep markers" in result.err


def test_warns_about_different_devices_and_models(cli) -> None:
    result = cli("diff", corpus_path(H100), corpus_path(MI300), "--format", "json")
    data = json.loads(result.out)
    assert any("different devices" in w for w in data["warnings"]) and "different devices" in result.err
    assert not any("different models" in w for w in data["warnings"])
    other = json.loads(cli("diff", corpus_path(PT2), corpus_path(DLRM0), "--format", "json").out)
    assert any("different models" in w for w in other["warnings"])


def test_markdown_and_csv(cli) -> None:
    a, b = corpus_path(HTA_BASE), corpus_path(HTA_TEST)
    md = cli("diff", a, b, "--format", "markdown", "--fail-above", "5").out
    banners, _, body = md.partition("### opscope diff")
    assert body and "| Figure | Before | After | Change |" in md
    assert all(line.startswith("> **") for line in banners.splitlines() if line)  # validity banners only
    assert "| pass | GPU time per step" in md
    csv = cli("diff", a, b, "--format", "csv").out.splitlines()
    assert csv[0].startswith("table,name,shape,status,calls_before,calls_after,total_before_us")
    assert {line.split(",")[0] for line in csv[1:]} == {"kernel", "op"}


def test_categories_cover_all_gpu_time() -> None:
    diff = _diff(H100, MI300)
    assert [c for c, _, _ in diff.categories] == list(CATEGORIES)
    assert sum(b for _, b, _ in diff.categories) == diff.figure("gpu_time").before
    assert sum(a for _, _, a in diff.categories) == diff.figure("gpu_time").after


def test_key_op_regex_rows_sum_the_matching_ops(cli) -> None:
    a, b = corpus_path(PT2), corpus_path(PT512)
    data = json.loads(cli("diff", a, b, "--format", "json", "--key-op", r"^aten::(linear|layer_norm)$").out)
    rows = [f for f in data["headline"] if f["key"].startswith("key_op:")]
    assert [f["key"] for f in rows] == [r"key_op:^aten::(linear|layer_norm)$"]
    assert data["ops"]["metric"] == "gpu"
    for side, name in (("before", PT2), ("after", PT512)):
        gpu = _op_gpu(name, None)
        assert rows[0][side] * 1e3 == gpu["aten::linear"] + gpu["aten::layer_norm"]
    default = json.loads(cli("diff", a, b, "--format", "json").out)
    top = sorted(_op_gpu(PT2, None).items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    assert [f["key"] for f in default["headline"] if f["key"].startswith("key_op:")] == [
        f"key_op:{name}" for name, _ in top
    ]


def test_a_kernel_new_in_new_trips_its_gate(tmp_path, cli) -> None:
    # hand-made: NEW runs one more kernel, absent from BASE
    base = write(tmp_path / "base.json", document(training_steps(2)))
    events = training_steps(2)
    events += [
        {**e, "name": "extra_kernel"} for e in training_steps(2, kernels_per_step=1) if e["cat"] == "kernel"
    ]
    new = write(tmp_path / "new.json", document(events))
    result = cli("diff", base, new, "--format", "json", "--fail-kernel", "extra:1000")
    assert result.code == 1 and "kernels /extra/ per step" in result.err
    gates = json.loads(result.out)["gates"]
    assert gates[0]["tripped"] and gates[0]["new"] and gates[0]["change_pct"] is None
    typo = cli("diff", base, new, "--fail-kernel", "extra:1000", "--fail-kernel", "nomatch:1")
    assert typo.code == 2 and "--fail-kernel 'nomatch' matches no kernel" in typo.err
