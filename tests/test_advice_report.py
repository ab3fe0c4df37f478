"""The brief (`opscope brief`'s lines) and the findings as the first sections of the HTML trace report, in a real
browser (Playwright + Debian Chromium): the same rows as `opscope advise`, text from the trace shown as text."""

from __future__ import annotations

import json

import pytest

from browser import chromium, open_report  # noqa: F401  (fixtures)
from conftest import corpus_path
from rawfixtures import HOSTILE_OP, hostile_trace

pytestmark = pytest.mark.browser

DDP = "hta/nccl_parser_config_nccl_data.json.gz"


def test_findings_first_section_matches_advise(cli, tmp_path, open_report) -> None:  # noqa: F811
    """The report's findings are advise's (the same rows in the same order), every one shown as a card with
    no inner scroll, the largest saving first; clicking an evidence row with a time span zooms the timeline to
    it and marks it."""
    trace = corpus_path(DDP)
    out = tmp_path / "report.html"
    assert cli("report", trace, "-o", out).code == 0
    advise = json.loads(cli("advise", trace, "--format", "json").out)
    data = json.loads(cli("report", trace, "--format", "json").out)
    assert data["findings"] == advise["findings"] and advise["findings"]
    assert [r["id"] for r in data["findings_panel"]["rows"]] == [f["id"] for f in advise["findings"]]
    opened = open_report(out)
    page = opened.page
    assert opened.problems() == []
    sections = page.locator("section")
    assert [sections.nth(i).get_attribute("id") for i in range(2)] == ["brief", "findings"]
    brief = json.loads(cli("brief", trace, "--format", "json").out)["lines"]
    lines = page.locator("#brief-lines p")
    assert [lines.nth(i).inner_text() for i in range(lines.count())] == [
        f"{line['label']}: {line['text']}" for line in brief
    ]
    cards = page.locator("#findings-table > .finding")  # the withheld ones are folded in a <details>
    assert cards.count() == len(advise["findings"])
    assert advise["findings"][0]["id"] in cards.first.inner_text()
    assert "saving about" in cards.first.inner_text()
    box = page.locator("#findings-table")
    assert box.evaluate("b => b.scrollHeight <= b.clientHeight + 1")  # no inner scroll: all of it shown
    assert all(cards.nth(i).is_visible() for i in range(cards.count()))
    # the first finding with a time span in its evidence: click -> the timeline shows and marks that span
    spans = [
        (i, j, item["span"])
        for i, row in enumerate(data["findings_panel"]["rows"])
        for j, item in enumerate(row["evidence"])
        if item["span"]
    ]
    assert spans, "the DDP trace's idle findings carry time spans"
    i, j, (a, b) = spans[0]
    cards.nth(i).locator("table.evidence tr").nth(j).click()
    marked = page.evaluate("window.opscopeTimeline.marked")
    shown = page.evaluate("window.opscopeTimeline.lastDraw")
    assert marked == [a, b] and shown["v0"] <= a and shown["v1"] >= b


def test_findings_of_hostile_names_render_as_text(cli, tmp_path, open_report) -> None:  # noqa: F811
    path = hostile_trace(tmp_path / "hostile <x>.json")  # hand-made fixture: names are HTML injections
    out = tmp_path / "hostile.html"
    assert cli("report", path, "-o", out, "--no-cache").code == 0
    opened = open_report(out)
    assert opened.page.locator("#findings").count() == 1
    assert HOSTILE_OP in (
        opened.page.locator("#findings").text_content() or ""
    )  # the op in host_bound's evidence (folded under "also fired"), as text
    assert opened.page.locator("#findings script, #findings img").count() == 0
    assert opened.page.locator("img").count() == 0
    assert opened.dialogs == [] and opened.problems() == []


def test_evidence_kernel_links_to_its_longest_event(cli, tmp_path, open_report) -> None:  # noqa: F811
    """An evidence row that names a kernel (fp32 GEMMs of the V100 ResNet) zooms the timeline to the longest
    event of that name and marks it; the row shows a shortened name with the full one on hover."""
    trace = corpus_path("hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    out = tmp_path / "report.html"
    assert cli("report", trace, "-o", out).code == 0
    data = json.loads(cli("report", trace, "--format", "json").out)
    rows = data["findings_panel"]["rows"]
    (i,) = [k for k, r in enumerate(rows) if r["id"] == "tensor_cores_unused"]
    item = rows[i]["evidence"][0]
    assert item["name"] is not None and item["span"] is None
    name = data["strings"][item["name"]]
    page = open_report(out).page
    row = page.locator("#findings-table > .finding").nth(i).locator("table.evidence tr").first
    if any(c["full"] for c in item["cells"]):
        assert row.locator("[title]").count() >= 1
    row.click()
    view = "window.opscopeTimeline"
    best = page.evaluate(f"{view}.longestOf({item['name']})")
    assert best >= 0 and page.evaluate(f"{view}.marked") == page.evaluate(f"{view}.span({best})")
    a, b = page.evaluate(f"{view}.marked")
    summary = json.loads(cli("summary", trace, "--format", "json", "--top", "0").out)["rows"]
    (kernel,) = [r for r in summary if r["raw_name"] == name]
    assert (b - a) / 1e3 == pytest.approx(kernel["max_us"], abs=1e-3)  # the longest of them
