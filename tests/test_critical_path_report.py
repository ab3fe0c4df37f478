"""The report's critical-path panel: its data equals `opscope critical-path`, and in a real browser the
breakdown bars draw, the path strip paints and follows the GPU timeline, with no console error."""

from __future__ import annotations

import json

import pytest

from browser import chromium, open_report, wait_for  # noqa: F401  (fixtures)
from conftest import corpus_path

QWEN = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
NS_STEPS = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"


@pytest.mark.parametrize("name", [QWEN, NS_STEPS])
def test_panel_data_is_the_command(cli, name: str) -> None:  # type: ignore[no-untyped-def]
    trace = corpus_path(name)
    report = json.loads(cli("report", trace, "--format", "json").out)["critical_path"]
    command = json.loads(cli("critical-path", trace, "--format", "json").out)
    assert [s["name"] for s in report["steps"]] == [s["name"] for s in command["steps"]]
    for mine, theirs in zip(report["steps"], command["steps"], strict=True):
        assert mine["path_us"] == pytest.approx(theirs["path_us"], abs=1e-3)
        for kind, value in theirs["breakdown"].items():
            assert mine["breakdown_us"][kind] == pytest.approx(value, abs=1e-3)
    pieces = report["segments"]
    assert len(pieces["start_ns"]) == report["shipped"] > 0
    # The pieces of the path add up to the path lengths (zero-length pieces are not shipped).
    assert sum(pieces["dur_ns"]) / 1e3 == pytest.approx(sum(s["path_us"] for s in report["steps"]), abs=1e-3)


@pytest.mark.browser
def test_panel_in_the_browser(cli, tmp_path, open_report) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    out = tmp_path / "report.html"
    assert cli("report", corpus_path(QWEN), "-o", out).code == 0
    opened = open_report(out)
    page = opened.page
    assert opened.problems() == [] and opened.dialogs == []
    assert page.locator("#critical-path-chart canvas").count() >= 1
    drawn = page.evaluate("window.opscopeCriticalPath.draw()")
    assert drawn["pieces"] > 0
    # The strip follows the GPU timeline's view.
    page.evaluate("window.opscopeTimeline.zoomTo(1000000, 3000000)")
    wait_for(page, "window.opscopeCriticalPath.draw().v0 === 1000000")
    assert "step(s)" in page.locator("#critical-path-note").inner_text()
    opened.screenshot("critical-path.png", "#critical-path")
