"""`compare_strategies` / `opscope bench`: baseline vs variants over batch sizes, with outputs checked, latency
spread, and key-op time / utilization recomputed from each variant's raw trace."""

from __future__ import annotations

import json
import shutil
import textwrap

import pytest

import opscope
import reference as ref
from opscope.capture.compare import check_outputs
from opscope.capture.strategies import TOLERANCES, Strategy, compute_dtype, resolve, tf32_enabled, tolerance
from opscope.errors import UsageError
from opscope.report import RenderOptions, render
from opscope.report.bench_view import bench_document

torch = pytest.importorskip("torch", reason="torch is an optional extra (pip install opscope[torch])")


def setup(batch_size):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 3)
    )
    return model, torch.randn(batch_size, 3, 16, 16, generator=torch.Generator().manual_seed(batch_size))


@pytest.fixture(scope="module")
def comparison(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bench")
    return opscope.compare_strategies(
        setup, ["bf16", "channels_last"], [1, 2], repeats=3, warmup=1, trace_steps=2, log_dir=str(folder)
    )


def test_every_variant_and_batch_size_ran(comparison):
    assert comparison.variants == ("baseline", "bf16", "channels_last")
    assert [(r.variant, r.batch_size) for r in comparison.runs] == [
        ("baseline", 1),
        ("bf16", 1),
        ("channels_last", 1),
        ("baseline", 2),
        ("bf16", 2),
        ("channels_last", 2),
    ]
    for run in comparison.runs:
        assert run.error is None and len(run.latency_s) == 3
        assert run.figures is not None and run.figures.metric == "cpu_op_busy" and run.figures.steps == 2


def test_outputs_match_with_dtype_tolerances_and_the_error_is_recomputed(comparison):
    for batch in (1, 2):
        model, x = setup(batch)
        model.eval()
        with torch.no_grad():
            expected = model(x).double()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                bf16 = model(x).double()
        run = comparison.run("bf16", batch)
        assert run.accuracy.compute_dtype == "bfloat16" and run.accuracy.match
        assert run.accuracy.max_abs_error == pytest.approx(float((bf16 - expected).abs().max()), rel=1e-9)
        assert run.accuracy.max_rel_error == pytest.approx(
            run.accuracy.max_abs_error / float(expected.abs().max())
        )
        last = comparison.run("channels_last", batch).accuracy
        assert last.compute_dtype == "float32" and last.match and last.max_abs_error < 1e-5
        assert comparison.run("baseline", batch).accuracy is None


def test_key_op_and_utilization_match_the_raw_traces(comparison):
    for run in comparison.runs:
        stats = ref.cpu_op_stats(ref.load(run.trace_path))
        top = max(stats, key=lambda name: (stats[name]["self_ns"], [-ord(c) for c in name]))
        assert run.figures.key_op == top
        steps = len(ref.step_windows(ref.load(run.trace_path)))
        assert steps == 2
        assert run.figures.key_op_ns == pytest.approx(stats[top]["self_ns"] / steps)
        assert run.figures.utilization == pytest.approx(ref.cpu_busy_share(ref.load(run.trace_path)))


def test_document_and_json(comparison):
    doc = bench_document(comparison)
    data = doc.data
    assert data["schema"] == "opscope.bench/1" and data["utilization_metric"] == "cpu_op_busy"
    assert [b["batch_size"] for b in data["batches"]] == [1, 2]
    batch = data["batches"][0]
    base, bf16 = batch["runs"][0], batch["runs"][1]
    assert bf16["latency_ms"]["median"] == pytest.approx(
        comparison.run("bf16", 1).latency.median * 1e3, abs=1e-4
    )
    compared = batch["comparisons"][0]
    # against the unrounded medians: the JSON's milliseconds are rounded to 0.1 µs, too coarse for CPU runs
    expected = comparison.run("baseline", 1).latency.median / comparison.run("bf16", 1).latency.median
    assert compared["latency_speedup"] == pytest.approx(expected, rel=1e-4)
    assert compared["utilization_change_pp"] == pytest.approx(
        (bf16["utilization"] - base["utilization"]) * 100, abs=0.02
    )
    text = render(doc, "table", RenderOptions(width=120))
    for expected in (
        "batch 1: bf16 vs baseline",
        "end-to-end latency (ms)",
        "key-op time (ms/step)",
        "utilization (%)",
        "improvement",
        "batch 2 stability: latency IQR/median",
        "outputs: match",
    ):
        assert expected in text
    markdown = render(doc, "markdown", RenderOptions())
    assert "| metric | baseline | bf16 | improvement |" in markdown


def test_failing_and_mismatching_variants_are_reported(tmp_path):
    def broken(model):
        raise RuntimeError("cannot transform this model")

    class Shifted(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x) + 1.0

    result = opscope.compare_strategies(
        setup,
        {"broken": broken, "shifted": Shifted},
        [1],
        repeats=1,
        warmup=0,
        trace_steps=1,
        log_dir=str(tmp_path),
    )
    assert result.run("broken", 1).error == "RuntimeError: cannot transform this model"
    shifted = result.run("shifted", 1).accuracy
    assert not shifted.match and shifted.max_abs_error == pytest.approx(1.0, abs=1e-6)
    text = render(bench_document(result), "table", RenderOptions(width=120))
    assert "broken failed: RuntimeError: cannot transform this model" in text and "outputs: MISMATCH" in text


def test_tolerances_depend_on_dtype():
    base = torch.linspace(-1, 1, 101)
    off = base * (1 + 3e-3)  # 0.3% relative error
    assert not check_outputs(Strategy("x"), base, off, None).match  # float32: rtol 1e-4
    assert check_outputs(Strategy("x"), base, off.half(), None).compute_dtype == "float16"
    assert check_outputs(Strategy("x"), base, off, "bfloat16").match  # bf16: rtol 5e-2
    assert check_outputs(Strategy("x", rtol=1e-2), base, off, None).match  # per-strategy override
    shape = check_outputs(Strategy("x"), base, base[:5], None)
    assert not shape.match and "shape" in shape.problem
    nan = base.clone()
    nan[3] = float("nan")
    assert not check_outputs(Strategy("x"), base, nan, None).match


def test_fp32_on_a_cuda_gpu_with_tf32_is_judged_as_tf32():
    """Found on an H200 (bench/gpu_check.py): cuDNN runs fp32 convolutions in TF32 by default, and the fp32
    channels_last variant differed from its baseline by 4.5e-4 of the output's scale, a mismatch under fp32's
    atol 1e-5. The dtype that picks the tolerance is "tf32" there, and only there."""
    assert compute_dtype("float32", None, on_cuda=True, tf32=True) == "tf32"
    assert compute_dtype("float32", None, on_cuda=True, tf32=False) == "float32"
    assert compute_dtype("float32", None, on_cuda=False, tf32=True) == "float32"  # the CPU has no TF32
    assert compute_dtype("float32", "bfloat16", on_cuda=True, tf32=True) == "bfloat16"  # autocast wins
    assert compute_dtype("float16", None, on_cuda=True, tf32=True) == "float16"
    assert tolerance(Strategy("x"), "tf32") == TOLERANCES["float16"]
    assert tolerance(Strategy("x", atol=1e-6), "tf32") == (
        1e-2,
        1e-6,
    )  # a strategy's own tolerance still wins
    base = torch.linspace(-1, 1, 101)
    measured = base + 4.5e-4  # the H200's difference, as a fraction of the output's scale (1.0 here)
    assert not check_outputs(Strategy("x"), base, measured, None).match  # on the CPU: fp32's tolerance
    # this build's own TF32 switches, as torch reports them (a CUDA build: cuDNN convolutions default to TF32)
    assert tf32_enabled(torch) is bool(torch.version.cuda and not torch.version.hip)


def test_strategy_resolution():
    assert [s.name for s in resolve(["bf16", "compile"])] == ["bf16", "compile"]
    assert resolve({"mine": "fp16"})[0].autocast == "float16"
    with pytest.raises(UsageError, match="unknown strategy"):
        resolve(["fastest"])
    with pytest.raises(UsageError, match="unique"):
        resolve(["bf16", "bf16"])
    with pytest.raises(UsageError, match="unique"):
        resolve({"baseline": lambda m: m})


def test_bench_command(cli, tmp_path):
    module = tmp_path / "models.py"
    module.write_text(
        textwrap.dedent("""
        import torch

        def setup(batch_size):
            torch.manual_seed(0)
            return torch.nn.Conv2d(3, 4, 3), torch.randn(batch_size, 3, 12, 12)
    """)
    )
    args = (
        "bench",
        f"{module}:setup",
        "--variants",
        "channels_last",
        "--batch-sizes",
        "1,2",
        "--repeats",
        "2",
        "--warmup",
        "0",
        "--trace-steps",
        "1",
        "--log-dir",
        tmp_path / "logs",
    )
    result = cli(*args, "--format", "json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["schema"] == "opscope.bench/1" and [b["batch_size"] for b in data["batches"]] == [1, 2]
    assert all(
        run["trace"].startswith(str(tmp_path / "logs" / "bench"))
        for b in data["batches"]
        for run in b["runs"]
    )
    wrote = {line.removeprefix("opscope: wrote ") for line in result.err.splitlines() if "wrote" in line}
    assert wrote == {run["trace"] for b in data["batches"] for run in b["runs"]}  # each named (issue 30)
    table = cli(*args)
    assert table.code == 0 and "batch 2: channels_last vs baseline" in table.out


@pytest.mark.parametrize(
    "entry, message",
    [
        ("no_colon", "expected MODULE:FUNCTION"),
        ("missing_module_xyz:setup", "cannot import"),
        ("json:no_such_function", "has no function"),
    ],
)
def test_bench_bad_entry_points(cli, entry, message):
    result = cli("bench", entry)
    assert result.code == 2 and result.err.count("\n") == 1 and message in result.err


def test_bench_unknown_variant(cli, tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import torch\ndef setup(b):\n    return torch.nn.Linear(2, 2), torch.ones(b, 2)\n")
    result = cli("bench", f"{module}:setup", "--variants", "warp_speed")
    assert result.code == 2 and "unknown strategy 'warp_speed'" in result.err


@pytest.mark.slow
def test_torch_compile_variant(tmp_path):
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("torch.compile on the CPU needs a C/C++ compiler for inductor; none on this machine")
    result = opscope.compare_strategies(
        setup, ["compile"], [1], repeats=1, warmup=0, trace_steps=1, log_dir=str(tmp_path)
    )
    run = result.run("compile", 1)
    assert run.error is None, run.error
    assert run.accuracy.match and run.figures.key_op is not None


def test_a_warm_up_pass_runs_before_the_baseline_is_measured(tmp_path, monkeypatch):
    """Issue 18: the baseline was measured cold (its first profiled step paid the profiler's start-up) while the
    variants after it ran warm. Every call is logged with whether a profiler was running; the first timed call
    and the first saved trace of the baseline must both come after a profiled warm-up call."""
    from opscope.capture import compare

    log: list[str] = []

    class Logged(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = torch.nn.Linear(4, 4)

        def forward(self, x):
            log.append("profiled" if torch.autograd.profiler._is_profiler_enabled else "plain")
            return self.inner(x)

    real_time_call = compare.time_call

    def timed(call, device):
        log.append("timed")
        return real_time_call(call, device)

    monkeypatch.setattr(compare, "time_call", timed)
    result = opscope.compare_strategies(
        lambda b: (Logged(), torch.randn(b, 4)),
        [],
        [1],
        repeats=1,
        warmup=1,
        trace_steps=1,
        log_dir=str(tmp_path),
    )
    assert result.run("baseline", 1).latency_s
    first_timed = log.index("timed")
    assert "profiled" in log[:first_timed], log
    # One saved trace per variant: the warm-up pass writes none.
    assert len(list(tmp_path.rglob("*.json*"))) == 1
