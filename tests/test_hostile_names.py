"""Trace text never reaches an output as code: terminal control sequences, Rich markup, Markdown, spreadsheet
formulas, HTML. Every subcommand that prints trace text runs in every output format (table, JSON, CSV,
Markdown, HTML, folded stacks) over a hand-made hostile trace; see docs/security.md for the guarantees."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from handmade_traces import cpu_op, document, kernel, launch, step, write
from opscope.report import Column, Document, RenderOptions, Table, render
from opscope.report.document import NAME
from opscope.report.escape import csv_cell, md_code, md_text
from opscope.untrusted import visible

# HAND-MADE edge cases, each reproduced against opscope before the fix (issue 14).
CLEAR = "\x1b[2Jclear\x1b]52;c;aGk=\x1b\\"  # clear the screen, then set the clipboard (OSC 52)
HOSTILE = [
    CLEAR,
    "kernel[/x]",  # Rich markup: made summary/diff/tree exit 3
    "foo[bar]baz",  # Rich markup: shown as "foobaz"
    "[link=https://evil.example]click[/link]",  # Rich markup: a hyperlink
    "\x1b]8;;https://evil.example\x1b\\osc8\x1b]8;;\x1b\\",  # a terminal hyperlink
    '=HYPERLINK("http://evil.example","x")',  # spreadsheet formulas
    "+1+1",
    "-2+3",
    "@SUM(A1)",
    "\tcmd",
    "a|b\n| fake | row |",  # Markdown: a fake table row
    "**bold** [l](http://evil.example) <b>h</b> www.evil.example $x^2$",  # Markdown: emphasis, link, HTML, math
    "back\\|slash",  # a backslash before a pipe
    "c1\x9bx\x7fy\u202eevil",  # C1 CSI, DEL, right-to-left override
    "`tick`` name",  # backticks in a code span
]
DEVICE = "GPU\x1b[31m<b>red</b>|[bold]x[/bold]"
# Raw characters no text output may contain (newlines separate lines; table padding never uses tabs).
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]")
SGR = re.compile(r"\x1b\[[0-9;]*m")


def hostile_doc(names: list[str] = HOSTILE, scale: float = 1.0) -> dict[str, Any]:
    """HAND-MADE: one step; per name an op launching one kernel of that name (the op is named after it too)."""
    events = [step(1, 1000, 10_000)]
    for i, name in enumerate(names):
        at = 1000 + i * 200
        events.append(cpu_op("op " + name, at, 150))
        events.append(launch(at + 1, i + 1))
        events.append(kernel(name, at + 10, (10 + i) * scale, i + 1))
    return document(events, device=DEVICE)


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path]:
    folder = tmp_path / "dir\x1b[2J"  # a hostile path too
    folder.mkdir()
    base = write(folder / "base\x1b]0;title\x07.json", hostile_doc())
    new = write(folder / "new.json", hostile_doc(scale=2.0))
    return base, new


def check_table(out: str) -> None:
    assert not RAW.search(out), out
    assert "evil.example" not in out or "[link=" in out or "\\x1b]8" in out  # links shown as text only


def check_json(out: str) -> Any:
    assert not RAW.search(out)
    return json.loads(out)


def check_csv(out: str) -> list[list[str]]:
    assert not RAW.search(out)
    rows = list(csv.reader(io.StringIO(out)))
    for row in rows:
        for cell in row:
            assert not cell.startswith(("=", "+", "@", "\t", "\r")) and not re.match(r"-(?![\d.]+$)", cell), (
                cell
            )
    return rows


def check_markdown(out: str) -> None:
    assert not RAW.search(out)
    html = MarkdownIt("commonmark").enable("table").render(out)
    for tag in ("<a ", "<strong>bold", "<b>", "<img", "<script", "<del>"):  # labels are **bold** on purpose
        assert tag not in html, (tag, html)
    table_lines = [line for line in out.splitlines() if line.startswith("|")]
    assert html.count("<tr>") == len(table_lines) - html.count("<table>")  # no row added, none merged
    for table in re.findall(r"<table>(.*?)</table>", html, re.S):  # no cell split off or added
        widths = {len(re.findall(r"<t[dh][ >]", row)) for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)}
        assert len(widths) == 1, (widths, table)
    # GFM links bare URLs in text (not in code spans): each must be broken up by an escape in the source.
    plain = md_plain_source(out)
    assert "http://" not in plain and "www.evil" not in plain


def md_plain_source(out: str) -> str:
    """The Markdown source outside code spans, as the parser delimits them."""
    md = MarkdownIt("commonmark").enable("table")
    spans = [
        child.content
        for token in md.parse(out)
        if token.children
        for child in token.children
        if child.type == "code_inline"
    ]
    for span in sorted(spans, key=len, reverse=True):
        out = out.replace(span, "")
    return out


def check_html(page: str) -> Any:
    match = re.search(r'<script type="application/json" id="[^"]*">(.*?)</script>', page, re.S)
    assert match, "no data element"
    assert "<b>" not in match.group(1) and "</script" not in match.group(1)
    return json.loads(match.group(1))


COMMANDS = [
    ("summary",),
    ("analyze",),
    ("ops",),
    ("tree", "--depth", "0"),
    ("lines",),
    ("steps",),
    ("kernels",),
    ("critical-path",),
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_every_format_of_every_one_trace_command(cli, hostile, command) -> None:
    base, _ = hostile
    table = cli(*command, base, "--no-cache", "--width", "200")
    assert table.code == 0, table.err
    check_table(table.out)
    check_table(table.err)
    check_json(cli(*command, base, "--format", "json").out)
    check_csv(cli(*command, base, "--format", "csv").out)
    check_markdown(cli(*command, base, "--format", "markdown").out)


def test_summary_shows_names_as_typed_and_keeps_them_exact_in_json(cli, hostile) -> None:
    base, _ = hostile
    out = cli("summary", base, "--wide", "--top", "0", "--width", "300").out
    for literal in (
        "kernel[/x]",
        "foo[bar]baz",
        "[link=https://evil.example]click[/link]",
        "\\x1b[2Jclear",
        "\\x1b]52;c;aGk=\\x1b\\",
        "a|b\\n| fake | row |",
        "c1\\x9bx\\x7fy\\u202eevil",
        "\\tcmd",
        "GPU\\x1b[31m<b>red</b>|[bold]x[/bold]",
        "dir\\x1b[2J",
        "base\\x1b]0;title\\x07.json",
    ):
        assert literal in out, literal
    data = check_json(cli("summary", base, "--top", "0", "--format", "json").out)
    assert sorted(row["name"] for row in data["rows"]) == sorted(HOSTILE)
    assert data["trace"]["devices"] == [DEVICE]


def test_csv_neutralises_formulas_with_a_quote(cli, hostile) -> None:
    base, _ = hostile
    rows = check_csv(cli("summary", base, "--top", "0", "--format", "csv").out)
    names = {row[0] for row in rows[1:]}
    for expected in (
        '\'=HYPERLINK("http://evil.example","x")',
        "'+1+1",
        "'-2+3",
        "'@SUM(A1)",
        "\\tcmd",
        "kernel[/x]",
    ):
        assert expected in names, (expected, names)
    assert csv_cell(-2.5) == -2.5 and csv_cell("-2") == "'-2" and csv_cell("\tx") == "\\tx"


def test_markdown_cells_are_text(cli, hostile) -> None:
    base, _ = hostile
    out = cli("summary", base, "--top", "0", "--wide", "--format", "markdown").out
    html = MarkdownIt("commonmark").enable("table").render(out)
    body = html.split("<tbody>")[1]
    assert body.count("<tr>") == len(HOSTILE)
    assert "<code>a|b\\n| fake | row |</code>" in body
    assert "back\\|slash" in body  # written as escaped text, since a code span cannot hold it
    assert "<code>`tick`` name</code>" in body
    assert "GPU\\x1b[31m&lt;b&gt;red&lt;/b&gt;|[bold]x[/bold]" in html  # the device name, as text


def test_markdown_helpers() -> None:
    for text in [*HOSTILE, "", "plain", "|", "\\", "a\\", "`", " x ", "12. x", "_a_", "# h", "- item"]:
        cell = f"{md_text(text, line_start=True)}\n\n| {md_text(text)} | {md_code(text)} |\n|---|---|\n"
        html = MarkdownIt("commonmark").enable("table").render(cell)
        assert len(re.findall("<th[ >]", html)) == 2, (text, html)
        assert "<a " not in html and "<strong>" not in html and "<em>" not in html and "<b>" not in html
        assert "<h1>" not in html and "<li>" not in html and "<ol" not in html


@pytest.mark.parametrize("fmt", ["table", "json", "csv", "markdown"])
def test_diff_and_ranks_in_every_format(cli, hostile, fmt) -> None:
    base, new = hostile
    check = {"table": check_table, "json": check_json, "csv": check_csv, "markdown": check_markdown}[fmt]
    for command in (("diff", base, new, "--no-cache"), ("ranks", base, new)):
        result = cli(*command, "--format", fmt, "--width", "200")
        assert result.code == 0, result.err
        check(result.out)
        check_table(result.err)


def test_html_reports_keep_exact_names(cli, hostile, tmp_path) -> None:
    base, new = hostile
    assert cli("report", base, "-o", tmp_path / "r.html").code == 0
    data = check_html((tmp_path / "r.html").read_text(encoding="utf-8"))
    assert set(HOSTILE) <= {data["strings"][row["name"]] for row in data["kernels"]["rows"]}
    assert cli("diff", base, new, "--html", tmp_path / "d.html").code == 0
    check_html((tmp_path / "d.html").read_text(encoding="utf-8"))
    assert cli("ranks", base, new, "--html", tmp_path / "k.html").code == 0
    check_html((tmp_path / "k.html").read_text(encoding="utf-8"))
    for fmt, check in (
        ("markdown", check_markdown),
        ("csv", check_csv),
        ("json", check_json),
        ("table", check_table),
    ):
        check(cli("report", base, "--format", fmt).out)


def test_folded_stacks_one_line_per_stack_no_control_characters(cli, hostile) -> None:
    base, _ = hostile
    out = cli("export", base, "--folded").out
    assert not RAW.search(out)
    lines = out.splitlines()
    assert len(lines) == len(HOSTILE)
    assert all(re.fullmatch(r".+ \d+", line) for line in lines)
    assert any(
        line.startswith("ProfilerStep#*;op a|b\\n| fake | row |;a|b\\n| fake | row | ") for line in lines
    )


def test_colour_output_has_only_colour_sequences() -> None:
    """With colour on, the only escape sequences are SGR colours: no OSC 8 hyperlink from `[link=...]`."""
    rows = tuple({"name": name} for name in HOSTILE)
    doc = Document(
        title="t [red]x[/red]",
        data={},
        facts=(("device", DEVICE),),
        tables=(
            Table(
                "k",
                "[link=https://evil.example]t[/link]",
                (Column("name", "Name", NAME),),
                rows,
                footer=("[/x] footer",),
            ),
        ),
        notes=("[bold]note",),
    )
    out = render(doc, "table", RenderOptions(width=300, wide=True, color=True))
    assert not RAW.search(SGR.sub("", out))
    for literal in (
        "t [red]x[/red]",
        "[link=https://evil.example]t[/link]",
        "[/x] footer",
        "[bold]note",
        "kernel[/x]",
        "foo[bar]baz",
    ):
        assert literal in SGR.sub("", out), literal


def test_error_messages_and_warnings_show_paths_as_text(cli, tmp_path) -> None:
    missing = tmp_path / "gone\x1b[2J\x1b]52;c;aGk=\x07.json"
    result = cli("summary", missing)
    assert result.code == 2 and result.err.count("\n") == 1
    assert not RAW.search(result.err) and "gone\\x1b[2J\\x1b]52;c;aGk=\\x07.json" in result.err
    cut = tmp_path / "cut\x1b[2J.json"
    cut.write_bytes(json.dumps(hostile_doc()).encode()[:-200])  # HAND-MADE: a trace cut off at the end
    result = cli("summary", cut, "--no-cache")
    assert result.code == 0 and "warning" in result.err and not RAW.search(result.err), result.err


def test_visible() -> None:
    assert visible("plain") == "plain"
    assert visible("a\x1bb\nc\td\x7f\x9b\u202e\u2028") == "a\\x1bb\\nc\\td\\x7f\\x9b\\u202e\\u2028"
