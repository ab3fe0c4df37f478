"""Output formats. Each is `render(document, options) -> str`; registering one is adding it to `FORMATS`."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from opscope.report import names
from opscope.report.document import COUNT, FLOAT, INT, MS, NAME, PCT, US, Column, Document, Table
from opscope.report.escape import csv_cell, json_text, md_code, md_text
from opscope.untrusted import visible

NUMERIC = (INT, MS, US, PCT, FLOAT, COUNT)


@dataclass(frozen=True)
class RenderOptions:
    width: int | None = None  # terminal width; None = detect (100 when not a terminal)
    wide: bool = False  # full kernel names instead of shortened ones
    color: bool = False


def fmt(value: Any, kind: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if kind == INT:
        return f"{int(value):,}"
    if kind == MS:
        return f"{value / 1e6:,.3f}"
    if kind == US:
        return f"{value / 1e3:,.2f}"
    if kind == PCT:
        return f"{value * 100:.1f}%"
    if kind == FLOAT:
        return f"{value:,.3f}"
    if kind == COUNT:
        return f"{value:,.1f}".removesuffix(".0")
    return str(value)


NAME_MIN = 16  # a shortened name is never narrower than this; the table grows past --width instead


def _gaps(table: Table) -> int:
    return 2 * (len(table.columns) - 1) + 2


def _table_cells(table: Table, options: RenderOptions, total_width: int) -> tuple[list[list[str]], list[int]]:
    """Format every cell (text with control characters made visible); the name column gets whatever width the
    other columns leave (at least NAME_MIN), its names shortened by `names.shorten_all` (kept distinct). With
    `wide`, names are kept whole."""
    raw = [[visible(fmt(row.get(c.key), c.kind) if c.kind != NAME else str(row.get(c.key) or ""))
            for c in table.columns] for row in table.rows]
    widths = [max([len(c.label)] + [len(str(r[i])) for r in raw]) for i, c in enumerate(table.columns)]
    for i, col in enumerate(table.columns):
        if col.kind == NAME and not options.wide:
            others = sum(w for j, w in enumerate(widths) if j != i)
            widths[i] = max(NAME_MIN, min(widths[i], total_width - others - _gaps(table)))
            for r, short in zip(raw, names.shorten_all([str(r[i]) for r in raw], widths[i]), strict=True):
                r[i] = short
            widths[i] = max([len(col.label)] + [len(r[i]) for r in raw])
    return raw, widths


def render_table(doc: Document, options: RenderOptions) -> str:
    """A terminal table. Everything goes to Rich as `Text` (never a markup string) after `visible`: no text
    from a trace is markup, and none reaches the terminal as a control sequence."""
    from rich import box  # only the table format draws with rich: JSON, CSV and Markdown runs skip its import
    from rich.console import Console
    from rich.table import Table as RichTable
    from rich.text import Text

    buf = io.StringIO()
    width = options.width or 100
    laid_out = [(table, *_table_cells(table, options, width)) for table in doc.tables]
    # Never drop or squeeze a column: when the numbers and the narrowest names need more than `width` (or, with
    # --wide, the full names do), the output is that much wider instead.
    needed = max((sum(w) + _gaps(t) for t, _, w in laid_out), default=0)
    console = Console(file=buf, width=max(width, needed), force_terminal=options.color, no_color=not options.color,
                      highlight=False, emoji=False, color_system="auto" if options.color else None)
    console.print(Text(visible(doc.title), style="bold"))
    for alert in doc.alerts:
        console.print(Text(f"WARNING: {visible(alert)}", style="bold red"))
    for label, value in doc.facts:
        console.print(Text.assemble((f"  {visible(label)}: ", "dim"), visible(value)))
    for table, cells, widths in laid_out:
        title = Text(visible(table.title), style="bold") if table.title else None
        rich = RichTable(title=title, box=box.SIMPLE_HEAD, title_justify="left", expand=False,
                         pad_edge=False, title_style="bold", collapse_padding=True)
        for col, col_width in zip(table.columns, widths):
            numeric = col.kind in NUMERIC
            rich.add_column(Text(visible(col.label)), justify="right" if numeric else "left", no_wrap=True,
                            overflow="fold", min_width=col_width, max_width=col_width)
        for row in cells:
            rich.add_row(*[Text(c) for c in row])
        console.print(rich)
        for line in table.footer:
            console.print(Text(visible(line)))
    for note in doc.notes:
        console.print(Text(visible(note), style="dim"))
    return buf.getvalue()


def render_markdown(doc: Document, options: RenderOptions) -> str:
    """GitHub-flavoured Markdown for a pull-request comment. Every text cell, fact, title and note goes through
    `md_text` (names through `md_code`): a trace cannot add rows, links, emphasis or HTML to the comment."""
    lines = [f"### {md_text(doc.title)}", ""]
    for alert in doc.alerts:
        lines.extend([f"> **Warning:** {md_text(alert)}", ""])
    for label, fact in doc.facts:
        lines.append(f"- **{md_text(label)}**: {md_text(fact)}")
    if doc.facts:
        lines.append("")
    for table in doc.tables:
        if table.title:
            lines.extend([f"**{md_text(table.title)}**", ""])
        lines.append("| " + " | ".join(md_text(c.label) for c in table.columns) + " |")
        lines.append("|" + "|".join("---:" if c.kind in NUMERIC else "---" for c in table.columns) + "|")
        short = {}
        for c in table.columns:
            if c.kind == NAME and not options.wide:
                full = sorted({str(r[c.key]) for r in table.rows if isinstance(r.get(c.key), str)})
                short[c.key] = dict(zip(full, names.shorten_all(full, 80), strict=True))
        for row in table.rows:
            cells = []
            for col in table.columns:
                value: Any = row.get(col.key)
                if col.key in short and isinstance(value, str):
                    value = short[col.key][value]
                text = fmt(value, col.kind)
                cells.append(md_code(text) if col.kind == NAME else text if col.kind in NUMERIC else md_text(text))
            lines.append("| " + " | ".join(cells) + " |")
        lines.extend(["", *[md_text(f, line_start=True) for f in table.footer]])
        lines.append("")
    for note in doc.notes:
        lines.append(f"_{md_text(note)}_")
    return "\n".join(lines).rstrip() + "\n"


def render_csv(doc: Document, options: RenderOptions) -> str:
    """The document's first table, one row per line, raw values (full names, nanoseconds as microseconds).
    Text cells go through `csv_cell`: control characters visible, formula starts neutralised with `'`."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    if not doc.tables:
        return ""
    table = doc.tables[0]
    columns = (*table.columns, *table.csv_columns)
    header = []
    for col in columns:
        key = col.key
        if col.kind in (MS, US):  # values are written in microseconds: say so in the header
            key = key[:-3] + "_us" if key.endswith("_ns") else key if key.endswith("_us") else key + "_us"
        header.append(key)
    writer.writerow([csv_cell(key) for key in header])
    for row in table.rows:
        out = []
        for col in columns:
            value = row.get(col.key)
            if value is not None and col.kind in (MS, US):
                value = round(value / 1e3, 3)
            out.append("" if value is None else csv_cell(value) if isinstance(value, str) else value)
        writer.writerow(out)
    return buf.getvalue()


def render_json(doc: Document, options: RenderOptions) -> str:
    """The stable JSON payload: exact text (only its spelling is made terminal-safe, see `escape.json_text`)."""
    return json_text(msgspec.json.format(msgspec.json.encode(doc.data), indent=2).decode()) + "\n"


FORMATS: dict[str, Callable[[Document, RenderOptions], str]] = {
    "table": render_table,
    "json": render_json,
    "csv": render_csv,
    "markdown": render_markdown,
}


def render(doc: Document, fmt_name: str, options: RenderOptions | None = None) -> str:
    return FORMATS[fmt_name](doc, options or RenderOptions())


__all__ = ["FORMATS", "Column", "RenderOptions", "render"]
