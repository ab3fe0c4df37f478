"""`opscope demo`: the tiny denoiser end to end on the CPU, its figures recomputed from the raw trace, and the
diagnosis rules on hand-made inputs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import reference as ref
from opscope.capture.demo import diagnose

torch = pytest.importorskip("torch", reason="torch is an optional extra (pip install opscope[torch])")


def test_demo_on_cpu_says_what_ran_and_shows_cpu_operators(cli, tmp_path):
    result = cli("demo", "--log-dir", tmp_path)  # the defaults: 10 steps, the first 3 profiled
    assert result.code == 0, result.err
    out = result.out
    assert "ran on: cpu (no GPU: the rows are CPU operators)" in out
    assert "10 denoising steps of a tiny UNet on 1x4x32x32 latents; the first 3 profiled" in out
    assert "CPU time by operator" in out and "aten::" in out
    assert len(re.findall(r"(?i)\bno gpu", out)) == 1  # the no-GPU note once (issue 30), in "ran on"
    assert "diagnosis: " in out
    traces = list(tmp_path.glob("*.pt.trace.json.gz"))
    assert len(traces) == 1
    assert [s for s, _, _ in ref.step_windows(ref.load(traces[0]))] == [0, 1, 2]
    # every file the demo wrote is named on standard error (issue 30): the trace, and the report with jinja2
    wrote = [
        line.removeprefix("opscope: wrote ")
        for line in result.err.splitlines()
        if line.startswith("opscope: wrote ")
    ]
    assert wrote[0] == str(traces[0]) and all(Path(p).is_file() for p in wrote)


def test_demo_json_figures_match_the_raw_trace(cli, tmp_path):
    result = cli(
        "demo", "--log-dir", tmp_path, "--denoise-steps", "4", "--profile-steps", "2", "--format", "json"
    )
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["schema"] == "opscope.demo/1" and data["device"] == "cpu"
    assert data["total_steps"] == 4 and data["profiled_steps"] == 2
    if data["report"] is not None:  # written when the html extra (jinja2) is installed
        page = Path(data["report"]).read_text()
        assert page.startswith("<!DOCTYPE html>") or "<html" in page[:500]
    trace = data["capture"]["trace"]
    windows = ref.step_windows(ref.load(trace))
    assert data["step_ms"] == [round((hi - lo) / 1e6, 4) for _, lo, hi in windows]
    assert data["busy"] == pytest.approx(ref.cpu_busy_share(ref.load(trace)), abs=1e-4)
    assert data["capture"]["gpu_activity"] is False and data["diagnosis"]
    # the diagnosis starts with the rule engine's findings, the same as `opscope advise` on the trace
    advise = json.loads(cli("advise", trace, "--format", "json").out)
    lines = [f"[{f['severity']}] {f['id']}: " for f in advise["findings"]]
    assert [d[: len(p)] for d, p in zip(data["diagnosis"], lines, strict=False)] == lines
    # one definition of CPU self time: the demo's operator rows are the rows `opscope ops` prints for its trace
    ops = json.loads(cli("ops", trace, "--top", "0", "--format", "json").out)
    by_name = {r["name"]: (r["calls"], r["cpu_total_us"], r["cpu_self_us"]) for r in ops["rows"]}
    shown = data["capture"]["cpu_ops"]["rows"]
    assert shown and all(by_name[r["name"]] == (r["calls"], r["total_us"], r["self_us"]) for r in shown)
    # by self time the convolution shows as aten::mkldnn_convolution / aten::_convolution / aten::conv2d,
    # depending on the build; which wrapper ranks in the top rows varies with load, so match any of them
    unet = [r for r in data["capture"]["cpu_ops"]["rows"] if "conv" in r["name"]]
    assert unet, [r["name"] for r in data["capture"]["cpu_ops"]["rows"]]


def test_demo_rejects_bad_step_counts(cli, tmp_path):
    result = cli("demo", "--log-dir", tmp_path, "--denoise-steps", "2", "--profile-steps", "3")
    assert result.code == 2 and "profiled steps <= total steps" in result.err


def test_diagnosis_rules():
    cpu = diagnose(
        False,
        [("aten::mkldnn_convolution", 0.5), ("aten::add", 0.2), ("aten::mul", 0.1)],
        [30_000_000, 10_000_000, 10_000_000],
        0.9,
    )
    assert (
        cpu[0]
        == "aten::mkldnn_convolution is the largest item: 50.0% of CPU operator self time (top 3: 80.0%)."
    )
    assert any(f.startswith("Convolutions take 50.0%") for f in cpu)
    assert any("Step 0 took 30.0 ms vs 10.0 ms" in f and "(3.0x)" in f for f in cpu)
    assert cpu[-1].startswith("At least one CPU operator was running 90.0%")
    gpu = diagnose(True, [("gemm", 0.9)], [10, 10], 0.3)
    # no advice here: the busy share is the demo's own line (with advice, the idle rules say it)
    assert [f for f in gpu if "busy" in f] == [
        "The GPU was busy 30.0% of the profiled step time: it mostly waits for the host."
    ]
    assert not any("Step 0" in f for f in gpu) and not any("Convolutions" in f for f in gpu)


def test_diagnosis_on_gpu_comes_from_the_advice_rules(tmp_path):
    """On a GPU run the demo's advice is the rule engine's findings (hand-made trace: the GPU busy 30% of a step,
    the idle time waiting for the host)."""
    import opscope
    from handmade_traces import document, kernel, launch, step, write
    from opscope.analysis.rules.advise import advise

    events = [step(0, 0, 1000), launch(0, 1), kernel("k", 1, 300, 1), launch(900, 2), kernel("k", 902, 10, 2)]
    advice = advise(opscope.load(write(tmp_path / "handmade.json", document(events)), cache=False)).advice
    gpu = diagnose(True, [("k", 1.0)], [1_000_000], 0.31, advice)
    idle = ("host_bound", "low_utilization_windows", "gpu_gaps")  # one idle period, said once (its cause)
    assert advice is not None and [f.id for f in advice.findings if f.id in idle]
    assert gpu[0].startswith("[crit] ") and gpu[0].split(":")[0].split()[1] in idle
    # the findings come first, in the engine's order, the idle time said by the first idle rule only
    first_idle = next(f.id for f in advice.findings if f.id in idle)
    said = [f for f in advice.findings if f.id not in idle or f.id == first_idle]
    assert gpu[: len(said)] == [
        f"[{f.severity}] {f.id}: {f.title} (saving about {(f.predicted_saving_ns or 0) / 1e6:.2f} ms). "
        f"{f.advice}"
        for f in said
    ]
    assert len(gpu) == 1 + len(said)  # + the largest item; the busy share is the rule's


def test_old_steps_spelling_is_refused_with_the_new_names(cli, tmp_path):  # type: ignore[no-untyped-def]
    """Issue 28: `--steps` names step numbers in the analysing commands; the demo's are --denoise-steps and
    --profile-steps (refused before anything runs)."""
    result = cli("demo", "--log-dir", tmp_path, "--steps", "4")
    assert result.code == 2 and result.err.count("\n") == 1
    assert "--denoise-steps" in result.err and "--profile-steps" in result.err
