"""`opscope history ...` in-process: every subcommand and output format, the opscope.history.*/1 JSON contracts,
check's exit codes, the Parquet export, and the HTML report (offline, escaped; in a real browser when chromium
is there). The runs are real traces with seeded noise (tests/history_support.py)."""

from __future__ import annotations

import csv
import io
import json
import re

import polars as pl
import pytest

from browser import chromium, open_report  # noqa: F401  (fixtures)
from conftest import corpus_path
from history_support import BERT, TARGET, db, perturbed  # noqa: F401
from opscope.history.api import History
from test_hostile_names import HOSTILE as HOSTILE_NAMES
from test_hostile_names import check_csv, check_html, check_json, check_markdown, check_table, hostile  # noqa: F401

pytestmark = pytest.mark.corpus
HOSTILE = "</script><img src=x onerror=alert(1)>=|cmd"


def build(db_url: str, slow: bool = True) -> list[int]:
    """10 baseline runs, then two with the target kernel 1.5x slower (when `slow`)."""
    with History(db_url) as history:
        ids = [
            history.add(perturbed(s), {"commit": f"c{s:03d}", "branch": "main"}, git=False).run_id
            for s in range(10)
        ]
        ids += [
            history.add(
                perturbed(s, factor=1.5 if slow else 1.0),
                {"commit": HOSTILE if s == 51 else f"c{s:03d}", "branch": "main"},
                git=False,
            ).run_id
            for s in (50, 51)
        ]
    return ids


def as_json(cli, *args: object) -> tuple[int, dict]:
    result = cli("history", *args, "--format", "json")
    assert result.err == "" or result.code != 0
    return result.code, json.loads(result.out)


def test_check_exit_codes_and_json_contract(db, cli) -> None:  # noqa: F811
    ids = build(db)
    code, data = as_json(cli, "check", "--db", db)
    assert code == 1 and data["schema"] == "opscope.history.check/1" and data["status"] == "regression"
    assert {"status", "recent_runs", "baseline_runs", "regressions", "improvements"} <= set(data)
    assert [r["id"] for r in data["recent_runs"]] == ids[-2:] and len(data["baseline_runs"]) == 10
    assert data["recent_runs"][-1]["commit"] == HOSTILE
    found = [r for r in data["regressions"] if r["scope"] == "kernel"]
    assert [r["key"] for r in found] == [TARGET]
    assert set(found[0]) >= {"scope", "key", "metric", "baseline", "values", "ratio"}
    assert len(found[0]["values"]) == 2 and found[0]["ratio"] > 1.4
    assert cli("history", "check", "--db", db, "--threshold", "2.0").code == 0  # 1.5x is under 2x
    code, only_global = as_json(cli, "check", "--db", db, "--scope", "global")
    assert code == 0 and only_global["status"] == "ok"
    table = cli("history", "check", "--db", db, "--width", "200")
    assert (
        table.code == 1 and "status: regression" in table.out and "vectorized_layer_norm_kernel" in table.out
    )
    md = cli("history", "check", "--db", db, "--format", "markdown")
    assert md.code == 1 and "| Scope |" in md.out
    rows = list(csv.DictReader(io.StringIO(cli("history", "check", "--db", db, "--format", "csv").out)))
    assert any(r["scope"] == "kernel" for r in rows)


def test_check_insufficient_data_and_strict(db, cli) -> None:  # noqa: F811
    with History(db) as history:
        history.add(perturbed(1), git=False)
    code, data = as_json(cli, "check", "--db", db)
    assert code == 0 and data["status"] == "insufficient_data" and data["regressions"] == []
    strict = cli("history", "check", "--db", db, "--strict")
    assert strict.code == 2 and strict.err.startswith("opscope: error: insufficient data")


@pytest.mark.parametrize(
    "args",
    [
        ("--policy", "nope"),
        ("--threshold", "0.9"),
        ("--scope", "kernel,bogus"),
        ("--recent", "0"),
        ("--min-share", "2"),
    ],
)
def test_check_bad_options(tmp_path, cli, args) -> None:
    path = tmp_path / "h.sqlite"
    with History(path) as history:
        history.add(perturbed(1), git=False)
    result = cli("history", "check", "--db", path, *args)
    assert result.code == 2 and result.err.count("\n") == 1


def test_add_list_show_prune(tmp_path, cli, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # the default database: .opscope/history.sqlite here
    monkeypatch.delenv("OPSCOPE_HISTORY", raising=False)
    code, added = as_json(
        cli, "add", corpus_path(BERT), "--tag", "model=bert", "--tag", "commit=abc", "--no-git"
    )
    assert code == 0 and added["schema"] == "opscope.history.add/1" and added["runs"][0]["new"] is True
    assert (tmp_path / ".opscope" / "history.sqlite").exists()
    again = cli("history", "add", corpus_path(BERT))
    assert again.code == 0 and "already present" in again.out
    assert cli("history", "add", corpus_path(BERT), "--tag", "novalue").code == 2
    with History() as history:
        for seed in range(3):
            history.add(perturbed(seed), {"model": "other", "commit": f"d{seed}"}, git=False)
    code, listed = as_json(cli, "list", "--tag", "model=bert")
    assert listed["schema"] == "opscope.history.list/1" and [r["tags"]["model"] for r in listed["runs"]] == [
        "bert"
    ]
    assert (
        listed["runs"][0]["gpu_name"] == "NVIDIA H100 80GB HBM3"
        and listed["runs"][0]["cuda_version"] == "12.4"
    )
    code, last = as_json(cli, "list", "--last", "2")
    assert [r["tags"]["commit"] for r in last["runs"]] == ["d1", "d2"]
    assert "bert" in cli("history", "list").out

    code, shown = as_json(cli, "show", "--kernel", "layer_norm", "--metric", "calls")
    assert shown["schema"] == "opscope.history.show/1" and shown["metric"] == "calls"
    (series,) = shown["series"]
    assert series["key"] == TARGET and [p["value"] for p in series["points"]] == [10.0] * 4
    assert [p["commit"] for p in series["points"]] == ["abc", "d0", "d1", "d2"]
    text = cli("history", "show", "--global", "gpu_time_us")
    assert text.code == 0 and "Sparkline" in text.out and any(c in text.out for c in "▁▂▃▄▅▆▇█")
    code, cats = as_json(cli, "show", "--category", "gemm", "--last", "2")
    assert [len(s["points"]) for s in cats["series"]] == [2]
    assert cli("history", "show", "--kernel", "(").code == 2  # a bad regular expression: one line
    assert cli("history", "show").code == 2  # one of --kernel / --op / --category / --global

    code, pruned = as_json(cli, "prune", "--keep", "1")
    assert (
        pruned["schema"] == "opscope.history.prune/1" and len(pruned["removed"]) == 3 and pruned["kept"] == 1
    )


def test_export_parquet(db, cli, tmp_path) -> None:  # noqa: F811
    build(db, slow=False)
    out = tmp_path / "history.parquet"
    result = cli("history", "export", "--db", db, "--parquet", out, "--format", "json")
    assert result.code == 0, result.err
    written = json.loads(result.out)
    assert written["schema"] == "opscope.history.export/1" and written["runs"] == 12
    frame = pl.read_parquet(out)
    assert frame["run_id"].n_unique() == 12
    assert {
        "run_id",
        "added_at",
        "commit",
        "scope",
        "key",
        "name",
        "metric",
        "value",
        "gpu_name",
        "tags",
    } <= set(frame.columns)
    with History(db) as history:
        series = history.series("kernel", "layer_norm")
    mine = frame.filter(
        (pl.col("scope") == "kernel") & (pl.col("key") == TARGET) & (pl.col("metric") == "total_us")
    )
    assert mine.sort("run_id")["value"].to_list() == series["value"].to_list()


def test_output_never_overwrites_the_database(tmp_path, cli) -> None:
    path = tmp_path / "h.sqlite"
    with History(path) as history:
        history.add(perturbed(1), git=False)
    before = path.read_bytes()
    assert cli("history", "list", "--db", path, "-o", path).code == 2
    assert cli("history", "report", "--db", path, "-o", path).code == 2
    assert cli("history", "export", "--db", path, "--parquet", path).code == 2
    assert path.read_bytes() == before


def test_report_html_is_offline_and_escaped(db, cli, tmp_path) -> None:  # noqa: F811
    build(db)
    out = tmp_path / "history.html"
    result = cli("history", "report", "--db", db, "-o", out)
    assert result.code == 0, result.err
    html = out.read_text()
    assert "<img src=x" not in html and HOSTILE not in html  # the hostile commit only travels escaped
    assert not re.search(r"""<(script|link|img|iframe)[^>]*(src|href)=["']?(https?:)?//""", html)  # no CDN
    payload = html.split('id="opscope-data">', 1)[1].split("</script>", 1)[0]
    data = json.loads(payload)
    assert data["schema"] == "opscope.history.report/1" and data["check"]["status"] == "regression"
    assert data["runs"][-1]["commit"] == HOSTILE
    kernels = next(c for c in data["charts"] if c["scope"] == "kernel")
    marked = [s for s in kernels["series"] if s["state"] == "regression"]
    assert [s["key"] for s in marked] == [TARGET] and len(kernels["series"]) == 8
    assert {c["metric"] for c in data["charts"] if c["scope"] == "global"} >= {
        "step_time_us",
        "gpu_time_per_step_mean_us",
    }


@pytest.mark.browser
def test_report_in_a_browser(tmp_path, cli, open_report) -> None:  # noqa: F811
    path = tmp_path / "h.sqlite"
    build(str(path))
    out = tmp_path / "history.html"
    assert cli("history", "report", "--db", path, "-o", out).code == 0
    opened = open_report(out)
    page = opened.page
    assert opened.problems() == [] and opened.dialogs == []
    assert page.locator('[data-card="status"] .value').inner_text() == "regression"
    assert page.locator("#trend-charts canvas").count() >= 4
    assert page.locator("#run-rows tbody tr").count() == 12
    assert page.locator("#run-rows tbody tr").first.get_attribute("id") == "run-12"
    assert HOSTILE in page.locator("#run-rows").inner_text()  # shown as text, never run
    assert "layer_norm" in page.locator("#regression-rows").inner_text()


def test_hostile_names_tags_and_devices_stay_inert(cli, hostile, tmp_path) -> None:  # noqa: F811
    """The hand-made hostile trace of tests/test_hostile_names.py, with a hostile tag: every output of list,
    show and check keeps them as text (no raw control characters, no Markdown rows, no CSV formulas)."""
    base, new = hostile
    path = tmp_path / "h.sqlite"
    tag = "=cmd|' /C calc'!A0\x1b[2J"
    for trace in (base, new):
        assert cli("history", "add", trace, "--db", path, "--tag", f"note={tag}", "--no-git").code == 0
    for args in (("list",), ("show", "--kernel", "."), ("show", "--op", "."), ("check", "--min-share", "0")):
        table = cli("history", *args, "--db", path, "--width", "200", "--wide")
        assert table.code == 0, table.err
        check_table(table.out)
        check_json(cli("history", *args, "--db", path, "--format", "json").out)
        check_csv(cli("history", *args, "--db", path, "--format", "csv").out)
        check_markdown(cli("history", *args, "--db", path, "--format", "markdown").out)
    shown = check_json(cli("history", "show", "--kernel", ".", "--db", path, "--format", "json").out)
    assert {s["name"] for s in shown["series"]} >= {HOSTILE_NAMES[1], HOSTILE_NAMES[3]}  # kept exact in JSON
    listed = check_json(cli("history", "list", "--db", path, "--format", "json").out)
    assert listed["runs"][0]["tags"]["note"] == tag
    out = tmp_path / "h.html"
    assert cli("history", "report", "--db", path, "-o", out).code == 0
    check_html(out.read_text())
