"""The HTML report's efficiency view (issue 12): its data equals `opscope efficiency`, and in a real browser
the roofline and the table draw with no console errors, the numbers the same as the CLI's."""

from __future__ import annotations

import json

import pytest

import opscope
from browser import chromium, open_report, wait_for  # noqa: F401  (fixtures)
from conftest import corpus_path
from opscope.analysis.bundle import trace_bundle
from opscope.analysis.efficiency.table import EfficiencyOptions, efficiency
from opscope.report.html.trace_report import trace_report

QWEN_H100 = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"


@pytest.mark.corpus
def test_report_efficiency_data_matches_the_command() -> None:
    trace = opscope.load(corpus_path(QWEN_H100))
    data = trace_report(trace_bundle(trace))
    view = data["efficiency"]
    rows = efficiency(trace, EfficiencyOptions(top=0)).rows
    assert view["peaks"]["name"] == "NVIDIA H100 SXM" and view["peaks"]["bandwidth_tbps"] == 3.35
    assert view["rows_total"] == len(rows)
    for shipped, row in zip(view["rows"], rows):
        assert data["strings"][shipped["op"]] == row.op
        assert shipped["shape"] == row.shape and shipped["gpu_time_us"] == round(row.gpu_time_us, 3)
    assert "efficiency" in data["sources"]


@pytest.mark.browser
@pytest.mark.corpus
def test_roofline_and_table_in_the_browser(cli, tmp_path, open_report) -> None:  # noqa: F811
    path = corpus_path(QWEN_H100)
    opened = _open_qwen_report(cli, tmp_path, open_report)
    assert opened.problems() == [] and opened.dialogs == []
    assert opened.page.locator("#efficiency-chart canvas").count() >= 1  # the roofline is drawn
    rows = opened.page.locator("#efficiency-rows tbody tr").all_inner_texts()
    first = next(r for r in rows if "not sized" not in r)  # unsized ops (and "(no op)") share the table
    res = cli("efficiency", path, "--format", "json", "--top", "1")
    top = json.loads(res.out)["rows"][0]
    assert top["op"] in first and f"{top['achieved_tflops']:.3f}" in first
    assert "H100 SXM" in opened.page.locator("#efficiency-facts").inner_text()
    opened.screenshot("efficiency-roofline.png", "#efficiency")


@pytest.mark.corpus
def test_report_ops_table_payload_carries_gpu_time_and_efficiency() -> None:
    """The report's ops table (the Efficiency section's table) = the sized rows, each with GPU time and the
    efficiency columns, plus every unsized op with its GPU time and reason: together the GPU time of the ops."""
    trace = opscope.load(corpus_path(QWEN_H100))
    view = trace_report(trace_bundle(trace))["efficiency"]
    columns = ("achieved_tflops", "achieved_tbps", "pct_of_peak_compute", "pct_of_peak_bandwidth", "bound")
    for row in view["rows"]:
        assert row["gpu_time_us"] > 0 and all(c in row for c in columns)
        assert row["achieved_tbps"] is not None and row["bound"] in ("compute", "memory")
    assert view["unsized"] and all(u["gpu_time_us"] > 0 and u["reason"] for u in view["unsized"])
    listed = sum(r["gpu_time_us"] for r in view["rows"]) + sum(u["gpu_time_us"] for u in view["unsized"])
    assert listed == pytest.approx(view["gpu_time_us"], abs=1e-3 * (len(view["rows"]) + len(view["unsized"])))
    assert view["sized_gpu_time_us"] + view["unsized_gpu_time_us"] == pytest.approx(
        view["gpu_time_us"], abs=2e-3
    )


@pytest.mark.browser
@pytest.mark.corpus
def test_ops_table_columns_render_in_the_browser(cli, tmp_path, open_report) -> None:  # noqa: F811
    opened = _open_qwen_report(cli, tmp_path, open_report)
    assert opened.problems() == []
    header = opened.page.locator("#efficiency-rows thead").inner_text()
    for label in ("GPU time", "TFLOP/s", "% peak FLOP/s", "TB/s", "% peak BW", "Bound"):
        assert label in header
    body = opened.page.locator("#efficiency-rows tbody").inner_text()
    assert "aten::cat" in body  # sized since this branch (memory-bound, bf16)
    unsized = opened.page.locator("#efficiency-rows tbody tr", has_text="not sized").all_inner_texts()
    assert any(
        "aten::all" in u or "no model" in u for u in unsized
    )  # an unsized op keeps its row, with the reason
    # GPU work launched outside every op is a row too: sized + unsized = the trace's GPU time
    assert any(u.startswith("(no op)") and "outside every operator" in u for u in unsized)


def _open_qwen_report(cli, tmp_path, opener):  # type: ignore[no-untyped-def]
    """The Qwen H100 trace's HTML report, written by the CLI and opened in Chromium, ready."""
    page_path = tmp_path / "qwen.html"
    assert cli("report", corpus_path(QWEN_H100), "-o", page_path).code == 0
    opened = opener(page_path)
    wait_for(opened.page, "window.opscopeReady !== undefined")
    return opened
