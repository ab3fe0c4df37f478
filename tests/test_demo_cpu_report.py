"""`opscope demo` on a CPU shows the tool (issue 30, item 4): it records shapes, memory and Python stacks; its
report's efficiency view measures the sized ops over their CPU time, the memory view has the CPU allocator's
events, the per-step chart splits each step into CPU-operator time and the rest (no GPU "idle"), and "About this
report" lists exactly the panels on the page. Figures are recomputed from the raw trace with the json module
(tests/reference.py), not with opscope's own code. The demo runs once for the module (a capture by the project's
own code, on this machine's CPU)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

import reference as ref
from browser import chromium, open_report, wait_for  # noqa: F401  (fixtures)
from opscope.analysis.bundle import trace_bundle
from opscope.cli.main import main
from opscope.ingest import load
from opscope.report.html.trace_report import GPU_PANELS, PANELS, trace_report

pytest.importorskip("torch", reason="torch is an optional extra (pip install opscope[torch])")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("demo")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["-q", "demo", "--log-dir", str(folder), "--denoise-steps", "3", "--format", "json"])
    assert code == 0
    data = json.loads(out.getvalue())
    if data["device"] != "cpu":
        pytest.skip("this machine ran the demo on a GPU")
    return data


@pytest.fixture(scope="module")
def events(demo: dict[str, Any]) -> list[dict]:
    return ref.load(demo["capture"]["trace"])


@pytest.fixture(scope="module")
def page_data(demo: dict[str, Any]) -> dict[str, Any]:
    """The report's data for the demo's trace, as the demo's page carries it."""
    return trace_report(trace_bundle(load(demo["capture"]["trace"])))


def test_the_demo_records_shapes_memory_and_stacks(events: list[dict]) -> None:
    shaped = [e for e in events if e.get("cat") == "cpu_op" and (e.get("args") or {}).get("Input Dims")]
    memory = [e for e in events if e.get("name") == "[memory]"]
    stacks = [e for e in events if e.get("cat") == "python_function"]
    assert shaped and memory and stacks
    assert any(e["name"] == "aten::conv2d" for e in shaped)


def test_the_page_has_the_cpu_panels_and_about_names_exactly_them(page_data: dict[str, Any]) -> None:
    assert page_data["panels"] == [p for p in PANELS if p not in GPU_PANELS]
    assert list(page_data["sources"]) == page_data["panels"]
    assert "cpu" in page_data["sources"] and "kernels" not in page_data["sources"]


def test_a_gpu_trace_keeps_every_panel(cli, tmp_path: Path) -> None:
    from conftest import corpus_path

    data = trace_report(trace_bundle(load(corpus_path("hta/trace_compare_base_base.json.gz"), cache=False)))
    assert data["panels"] == list(PANELS) and list(data["sources"]) == list(PANELS)
    assert data["efficiency"]["basis"] == "gpu"


def _conv_flops(dims: list[list[int]], concrete: list[str]) -> int:
    """2 * N * K * (C / groups) * prod(kernel) * prod(output), output from stride, padding and dilation."""
    (n, c, h, w), (k, c_per_group, r, s) = dims[0], dims[1]
    stride, padding, dilation = (json.loads(concrete[i]) for i in (3, 4, 5))
    out_h = (h + 2 * padding[0] - dilation[0] * (r - 1) - 1) // stride[0] + 1
    out_w = (w + 2 * padding[1] - dilation[1] * (s - 1) - 1) // stride[1] + 1
    assert c % c_per_group == 0
    return 2 * n * k * c_per_group * r * s * out_h * out_w


def test_efficiency_is_measured_over_cpu_time(page_data: dict[str, Any], events: list[dict]) -> None:
    eff = page_data["efficiency"]
    strings = page_data["strings"]
    assert eff["basis"] == "cpu" and eff["peaks"] is None
    convs = [r for r in eff["rows"] if strings[r["op"]] == "aten::conv2d"]
    assert convs, [strings[r["op"]] for r in eff["rows"]]
    for row in convs:
        calls = [
            e
            for e in events
            if e.get("name") == "aten::conv2d"
            and ref.is_x(e)
            and json.dumps(e["args"]["Input Dims"], separators=(",", ":")) == row["shape"]
        ]
        cpu_ns = sum(max(ref.ns(e["dur"]), 0) for e in calls)
        flops = sum(_conv_flops(e["args"]["Input Dims"], e["args"]["Concrete Inputs"]) for e in calls)
        assert row["calls"] == len(calls) and row["gpu_time_us"] == 0
        assert row["time_us"] == pytest.approx(cpu_ns / 1e3, abs=1e-3)
        assert row["flops_per_call"] == pytest.approx(flops / len(calls))
        assert row["achieved_tflops"] == pytest.approx(flops / (cpu_ns / 1e9) / 1e12, rel=1e-5)
        assert row["pct_of_peak_compute"] is None  # no CPU in the peak table
    # the denominator: the self time of every CPU operator (as `opscope ops` defines self time)
    self_ns = sum(s["self_ns"] for s in ref.cpu_op_stats(events).values())
    assert eff["time_us"] == pytest.approx(self_ns / 1e3, abs=1e-3)
    assert eff["sized_time_us"] == pytest.approx(sum(r["time_us"] for r in eff["rows"]), abs=0.01)
    # (not bounded by the denominator: an op sometimes nested in a sized op keeps its row, all calls counted)
    assert eff["sized_time_us"] > 0.5 * eff["time_us"]  # the convolutions and norms are most of the time


def test_steps_split_into_cpu_operator_time_and_the_rest(
    page_data: dict[str, Any], events: list[dict]
) -> None:
    ops = ref.cpu_ops(events)
    windows = ref.step_windows(events)
    assert [s["wall_us"] for s in page_data["steps"]] == [round((hi - lo) / 1e3, 3) for _, lo, hi in windows]
    for step, (_, lo, hi) in zip(page_data["steps"], windows, strict=True):
        busy = ref.union_length([(max(o["ts"], lo), min(o["ts"] + o["dur"], hi)) for o in ops])
        assert step["cpu_busy_us"] == round(busy / 1e3, 3)
        assert 0 < step["cpu_busy_us"] <= step["wall_us"]


def test_the_memory_panel_has_the_cpu_allocations(page_data: dict[str, Any], events: list[dict]) -> None:
    memory = [e["args"] for e in events if e.get("name") == "[memory]"]
    (device,) = page_data["memory"]["devices"]
    assert device["alloc_count"] == sum(1 for m in memory if m["Bytes"] > 0)
    assert device["peak_allocated_bytes"] == max(m["Total Allocated"] for m in memory)
    assert page_data["memory"]["top_ops"]


@pytest.mark.browser
def test_the_demo_page_on_a_cpu(demo: dict[str, Any], open_report) -> None:  # noqa: F811
    opened = open_report(Path(demo["report"]))
    page = opened.page
    wait_for(page, "window.opscopeReady !== undefined")
    assert opened.problems() == []
    shown = page.evaluate(
        "() => [...document.querySelectorAll('main > section[id]')].filter((s) => !s.hidden)"
        ".map((s) => s.id).filter((id) => id !== 'about')"
    )
    about = page.locator("#sources tbody tr td:first-child").all_inner_texts()
    assert [p.replace("_", "-") for p in about] == shown  # About names exactly the panels on the page
    nav = page.evaluate(
        "() => [...document.querySelectorAll('#nav a')].filter((a) => !a.hidden).map((a) => a.hash)"
    )
    assert set(nav) == {f"#{s}" for s in shown} | {"#about"}
    legend = page.evaluate(
        "() => echarts.getInstanceByDom(document.getElementById('steps-chart')).getOption().series.map((s) => s.name)"
    )
    assert legend == ["CPU operators", "between operators (Python, framework)"]  # not a GPU's "idle"
    headers = page.locator("#efficiency-rows thead th").all_inner_texts()
    assert "CPU time" in " ".join(headers) and "GFLOP/s" in " ".join(headers)
    assert page.locator("#efficiency-rows tbody tr").count() > 0
    assert page.locator("#memory table").count() > 0
    # the brief says there was no GPU; the CPU, steps, efficiency and memory views do not say it again
    for section in ("cpu", "steps", "efficiency", "memory"):
        assert "no gpu" not in page.locator(f"#{section}").inner_text().lower(), section
    opened.screenshot("demo-cpu-report.png")
