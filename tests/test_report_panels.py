"""The HTML reports say what the CLI says (issue 28): the CPU panel ranks what `opscope ops` ranks by CPU self
time (it left out the annotation `ops` put first); the diff page has the findings section the terminal and JSON
have; a colour means one thing (a blocking sync is not attention's red); long names never break mid-word."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from browser import chromium, open_report, wait_for  # noqa: F401  (fixtures)
from conftest import REPO, corpus_path

NCCL = "hta/nccl_parser_config_nccl_data.json.gz"  # `ops` ranks the annotation "## backward ##" first
H100 = "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"
MI300 = "tracelens/mi300__gaunernst_bert-small-uncased__1016001.json.gz"
ASSETS = REPO / "src" / "opscope" / "report" / "html" / "assets"


@pytest.mark.corpus
def test_cpu_panel_ranks_what_ops_ranks(cli) -> None:  # type: ignore[no-untyped-def]
    path = corpus_path(NCCL)
    ops = json.loads(cli("ops", path, "--format", "json").out)
    report = json.loads(cli("report", path, "--format", "json").out)
    strings = report["strings"]
    panel = [
        (strings[r["name"]] if isinstance(r["name"], int) else r["name"], r["self_us"])
        for r in report["cpu"]["ops"]
    ]
    want = [(r["name"], r["cpu_self_us"]) for r in ops["cpu_rows"]]
    assert want[0][0] == "## backward ##" and panel[: len(want)] == want


@pytest.mark.corpus
@pytest.mark.browser
def test_diff_page_has_the_findings_section(cli, tmp_path: Path, open_report) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    page_path = tmp_path / "diff.html"
    result = cli("diff", corpus_path(H100), corpus_path(MI300), "--html", page_path, "--format", "json")
    assert result.code == 0, result.err
    findings = json.loads(result.out)["findings"]
    ids = {f["id"] for part in findings.values() for f in part}
    assert ids, "the two traces have findings"
    opened = open_report(page_path)
    wait_for(opened.page, "window.opscopeReady !== undefined")
    assert opened.problems() == [] and opened.dialogs == []
    text = opened.page.locator("#findings-tables").inner_text()
    assert all(i in text for i in ids)
    assert opened.page.locator('#nav a[href="#findings"]').count() == 1


def test_a_colour_means_one_thing() -> None:
    common = (ASSETS / "common.js").read_text(encoding="utf-8")
    categories = set(re.findall(r"#[0-9a-fA-F]{6}", common[common.index("CATEGORY_COLORS") :].split(";")[0]))
    semantic = dict(
        re.findall(r'(\w+): "(#[0-9a-fA-F]{6})"', common[common.index("const SEMANTIC") :].split(";")[0])
    )
    assert semantic["sync"] not in categories and semantic["mark"] not in categories

    def rgb(colour: str) -> tuple[int, ...]:
        return tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))

    def distance(a: str, b: str) -> float:  # "redmean" RGB distance: close to perceived difference, cheap
        (r1, g1, b1), (r2, g2, b2) = rgb(a), rgb(b)
        r = (r1 + r2) / 2
        return float(
            ((2 + r / 256) * (r1 - r2) ** 2 + 4 * (g1 - g2) ** 2 + (2 + (255 - r) / 256) * (b1 - b2) ** 2)
            ** 0.5
        )

    for role, colour in semantic.items():  # no semantic colour can be taken for a category (launch vs conv)
        near = [c for c in categories if distance(colour, c) < 140]
        assert not near, (role, colour, near)
    for name in ("timeline.js", "critical_path.js"):
        text = (ASSETS / name).read_text(encoding="utf-8")
        assert "#d9534f" not in text and "#c0392b" not in text and '"#e15759"' not in text, name
        assert "OPS.SEMANTIC.sync" in text


def test_no_mid_word_breaks() -> None:
    css = (ASSETS / "report.css").read_text(encoding="utf-8")
    assert "break-all" not in css and "overflow-wrap: anywhere" in css
