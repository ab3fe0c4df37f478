"""Size (issue 14): a trace with 300,000 distinct kernel names made a 76 MB report in 80 s, three quarters of
it classifying each name with Python regular expressions, twice. Each distinct name is now classified once, by
one vectorised expression, and the page carries the heaviest rows of its kernel table, with a note and every
row in CSV and JSON files beside it."""

from __future__ import annotations

import csv
import json
import re

import pytest

from opscope.analysis import bundle
from opscope.analysis.kernels import categories
from opscope.analysis.timeline import activity
from rawfixtures import many_kernels_trace

DISTINCT = 300_000


@pytest.mark.slow
def test_300k_distinct_kernel_names(cli, tmp_path, monkeypatch) -> None:
    path = many_kernels_trace(tmp_path / "names.json.gz", DISTINCT, names=DISTINCT)  # hand-made edge case
    classified: list[int] = []
    with_category = categories.with_category

    def counting(frame):  # type: ignore[no-untyped-def]
        classified.append(frame.height)
        return with_category(frame)

    monkeypatch.setattr(activity, "with_category", counting)
    late: list[int] = []
    categories_of = bundle.categories_of
    monkeypatch.setattr(
        bundle, "categories_of", lambda pairs: late.append(len(pairs)) or categories_of(pairs)
    )
    out = tmp_path / "report.html"
    result = cli("report", path, "-o", out, "--no-cache")
    assert result.code == 0, result.err
    assert classified == [DISTINCT] and late == []  # the kernel table reuses the timeline's categories

    page = out.read_text(encoding="utf-8")
    assert len(page) < 40e6  # was 76 MB
    data = json.loads(
        re.search(r'<script type="application/json" id="opscope-data">(.*?)</script>', page, re.S).group(1)
    )
    kernels = data["kernels"]
    assert len(kernels["rows"]) == 5_000 and kernels["rows_total"] == DISTINCT
    assert kernels["rest"]["rows"] == DISTINCT - 5_000
    assert kernels["rest"]["calls"] + sum(r["calls"] for r in kernels["rows"]) == DISTINCT
    assert kernels["full"] == ["report.kernels.csv", "report.kernels.json"]
    with open(tmp_path / "report.kernels.csv", newline="") as handle:
        assert sum(1 for _ in csv.reader(handle)) == DISTINCT + 1
    full = json.loads((tmp_path / "report.kernels.json").read_text())
    assert len(full["rows"]) == DISTINCT and full["rest"] is None


def test_small_reports_ship_every_row(cli, tmp_path) -> None:
    path = many_kernels_trace(tmp_path / "few.json.gz", 600, names=300)  # hand-made
    data = json.loads(cli("report", path, "--format", "json", "--no-cache").out)
    assert len(data["kernels"]["rows"]) == 300 and data["kernels"]["rest"] is None
    capped = json.loads(cli("report", path, "--format", "json", "--max-rows", "100").out)
    assert len(capped["kernels"]["rows"]) == 100 and capped["kernels"]["rest"]["rows"] == 200
    assert capped["kernels"]["full"] is None  # no page, no files beside it
    assert cli("report", path, "--max-rows", "0").code == 2


def test_diff_page_carries_the_biggest_changes(cli, tmp_path) -> None:
    base = many_kernels_trace(
        tmp_path / "base.json.gz", 6_000, names=6_000
    )  # hand-made: 6,000 distinct names
    new = many_kernels_trace(tmp_path / "new.json.gz", 5_500, names=6_000)  # 500 kernels gone
    out = tmp_path / "diff.html"
    assert cli("diff", base, new, "--html", out, "--no-cache").code == 0
    data = json.loads(
        re.search(
            r'<script type="application/json" id="opscope-data">(.*?)</script>',
            out.read_text(encoding="utf-8"),
            re.S,
        ).group(1)
    )
    kernels = data["kernels"]
    assert (
        len(kernels["rows"]) == 5_000 and kernels["rows_total"] == 6_000 and kernels["rows_hidden"] == 1_000
    )
    everything = json.loads(cli("diff", base, new, "--top", "0", "--format", "json").out)["kernels"]
    assert len(everything["rows"]) == 6_000
    shown = sum(r["delta_us"] for r in kernels["rows"]) + kernels["hidden_delta_us"]
    assert shown == pytest.approx(sum(r["delta_us"] for r in everything["rows"]), abs=1e-3)
