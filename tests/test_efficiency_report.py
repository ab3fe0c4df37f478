"""The HTML report's efficiency view (issue 12): its data equals `opscope efficiency`, and in a real browser
the roofline and the table draw with no console errors, the numbers the same as the CLI's."""

from __future__ import annotations

import json

import pytest

import opscope
from browser import chromium, open_report, wait_for  # noqa: F401  (fixtures)
from conftest import corpus_path
from opscope.analysis.efficiency.table import EfficiencyOptions, efficiency
from opscope.report.trace_report import trace_report

QWEN_H100 = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"


@pytest.mark.corpus
def test_report_efficiency_data_matches_the_command() -> None:
    trace = opscope.load(corpus_path(QWEN_H100))
    data = trace_report(trace)
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
    page_path = tmp_path / "qwen.html"
    assert cli("report", path, "-o", page_path).code == 0
    opened = open_report(page_path)
    wait_for(opened.page, "window.opscopeReady !== undefined")
    assert opened.problems() == [] and opened.dialogs == []
    assert opened.page.locator("#efficiency-chart canvas").count() >= 1  # the roofline is drawn
    first = opened.page.locator("#efficiency-rows tbody tr").first.inner_text()
    res = cli("efficiency", path, "--format", "json", "--top", "1")
    top = json.loads(res.out)["rows"][0]
    assert top["op"] in first and f"{top['achieved_tflops']:.3f}" in first
    assert "H100 SXM" in opened.page.locator("#efficiency-facts").inner_text()
    opened.screenshot("efficiency-roofline.png", "#efficiency")
