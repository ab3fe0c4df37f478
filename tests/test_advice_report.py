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
    trace = corpus_path(DDP)
    out = tmp_path / "report.html"
    assert cli("report", trace, "-o", out).code == 0
    advise = json.loads(cli("advise", trace, "--format", "json").out)
    data = json.loads(cli("report", trace, "--format", "json").out)

    # the same findings, predicted savings included (the brief above them tells them)
    assert data["findings"] == advise["findings"] and advise["findings"]
    opened = open_report(out)
    page = opened.page
    assert opened.problems() == []
    sections = page.locator("section")
    assert [sections.nth(i).get_attribute("id") for i in range(2)] == ["brief", "findings"]
    brief = json.loads(cli("brief", trace, "--format", "json").out)["lines"]
    shown = page.locator("#brief-lines p")
    assert [shown.nth(i).inner_text() for i in range(shown.count())] == [
        f"{line['label']}: {line['text']}" for line in brief
    ]
    rows = page.locator("#findings-rows tbody tr")
    assert rows.count() == len(advise["findings"])
    assert advise["findings"][0]["id"] in rows.first.inner_text()


def test_findings_of_hostile_names_render_as_text(cli, tmp_path, open_report) -> None:  # noqa: F811
    path = hostile_trace(tmp_path / "hostile <x>.json")  # hand-made fixture: names are HTML injections
    out = tmp_path / "hostile.html"
    assert cli("report", path, "-o", out, "--no-cache").code == 0
    opened = open_report(out)
    assert opened.page.locator("#findings").count() == 1
    assert (
        HOSTILE_OP in opened.page.locator("#findings").inner_text()
    )  # the op in host_bound's evidence, as text
    assert opened.page.locator("#findings script, #findings img").count() == 0
    assert opened.page.locator("img").count() == 0
    assert opened.dialogs == [] and opened.problems() == []
