"""Output formats. Each is `render(document, options) -> str`; registering one is adding it to `FORMATS`."""

from __future__ import annotations

import csv
import io
import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from opscope.report import names
from opscope.report.document import COUNT, FLOAT, INT, LAST_RESORT, MS, NAME, PCT, US, Column, Document, Table
from opscope.report.escape import csv_cell, json_text, md_code, md_text
from opscope.untrusted import visible

NUMERIC = (INT, MS, US, PCT, FLOAT, COUNT)


@dataclass(frozen=True)
class RenderOptions:
    width: int | None = None  # terminal width; None = detect (100 when not a terminal)
    wide: bool = False  # full kernel names instead of shortened ones
    color: bool = False
    # free text (banners, the title, facts, notes, table footers) wrapped at the width, at word boundaries and
    # never inside a word (a path, a kernel name); False (a pipe, no --width): one logical line per line
    wrap_prose: bool = True


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
NAME_READABLE = 28  # a table hides its optional columns (`Column.drop`) before cutting a name below this
WRAP_MIN = 12  # a wrapping text column (`Column.wrap`) is never narrower than this


def _gaps(columns: int) -> int:
    return 2 * (columns - 1) + 2


def _flex_widths(
    cols: list[Column], natural: list[int], total_width: int, name_floor: int, tokens: list[int] | None = None
) -> list[int]:
    """Widths for one set of columns: fixed columns keep their natural width; names and wrapping columns
    start at their floor (never under their label; a wrapping column never under its longest word, `tokens`,
    so it wraps between words, never inside one) and grow, in column order, into what is left of the width."""
    flex = [i for i, c in enumerate(cols) if c.kind == NAME or c.wrap]
    longest = tokens or [0] * len(cols)
    floors = {
        i: max(
            len(cols[i].label),
            min(natural[i], name_floor if cols[i].kind == NAME else max(WRAP_MIN, longest[i])),
        )
        for i in flex
    }
    left = total_width - _gaps(len(cols)) - sum(w for i, w in enumerate(natural) if i not in floors)
    left -= sum(floors.values())
    widths = list(natural)
    for i in flex:
        widths[i] = floors[i] + max(0, min(natural[i] - floors[i], left))
        left -= widths[i] - floors[i]
    return widths


def _layout(
    table: Table,
    natural: list[int],
    options: RenderOptions,
    total_width: int,
    tokens: list[int] | None = None,
) -> tuple[list[int], list[int]]:
    """The columns shown (indices) and their widths. Optional columns are hidden, lowest `drop` first, while the
    table does not fit `total_width` with names of NAME_READABLE; then names go down to NAME_MIN and the
    last-resort columns (`drop` >= LAST_RESORT) are hidden; past that the table is wider than asked. With `wide`
    every column is shown at its full width."""
    kept = list(range(len(table.columns)))
    if options.wide:
        return kept, list(natural)
    droppable = [i for _, i in sorted((c.drop, i) for i, c in enumerate(table.columns) if c.drop)]
    for floor, limit in ((NAME_READABLE, LAST_RESORT), (NAME_MIN, None)):
        while True:
            widths = _flex_widths(
                [table.columns[i] for i in kept],
                [natural[i] for i in kept],
                total_width,
                floor,
                [tokens[i] for i in kept] if tokens else None,
            )
            if sum(widths) + _gaps(len(kept)) <= total_width:
                return kept, widths
            candidates = [
                i for i in droppable if i in kept and (limit is None or table.columns[i].drop < limit)
            ]
            if not candidates:
                break
            kept.remove(candidates[0])
    return kept, widths


@dataclass(frozen=True)
class _LaidOut:
    columns: list[Column]
    cells: list[list[str]]
    widths: list[int]
    hidden: list[str]  # labels of the optional columns left out to fit the width


def _table_cells(table: Table, options: RenderOptions, total_width: int) -> _LaidOut:
    """Format every cell (text with control characters made visible), choose the columns and widths
    (`_layout`), and shorten names to their column's width by `names.shorten_all` (kept distinct). With
    `wide`, names are kept whole."""
    raw = [
        [
            visible(fmt(row.get(c.key), c.kind) if c.kind != NAME else str(row.get(c.key) or ""))
            for c in table.columns
        ]
        for row in table.rows
    ]
    natural = [max([len(c.label)] + [len(str(r[i])) for r in raw]) for i, c in enumerate(table.columns)]
    # the longest word of each wrapping column: it wraps between words (shapes between tensors), not inside
    tokens = [
        max([0] + [len(word) for r in raw for word in str(r[i]).split()]) if c.wrap else 0
        for i, c in enumerate(table.columns)
    ]
    kept, widths = _layout(table, natural, options, total_width, tokens)
    columns = [table.columns[i] for i in kept]
    cells = [[r[i] for i in kept] for r in raw]
    for j, col in enumerate(columns):
        if col.kind == NAME and not options.wide:
            for r, short in zip(cells, names.shorten_all([r[j] for r in cells], widths[j]), strict=True):
                r[j] = short
            widths[j] = max([len(col.label)] + [len(r[j]) for r in cells])
    hidden = [c.label for i, c in enumerate(table.columns) if i not in kept]
    return _LaidOut(columns, cells, widths, hidden)


def word_lines(text: str, width: int) -> list[tuple[int, int]]:
    """(start, end) offsets of `text` laid out in lines of at most `width` characters, broken between words
    only: a word longer than a line (a path, a kernel name) gets a line of its own, whole. The first line keeps
    the text's leading spaces."""
    out: list[tuple[int, int]] = []
    start: int | None = None
    end = 0
    for word in re.finditer(r"\S+", text):
        if start is None:
            start, end = (0 if not out else word.start()), word.end()
        elif word.end() - start <= width:
            end = word.end()
        else:
            out.append((start, end))
            start, end = word.start(), word.end()
    if start is not None:
        out.append((start, end))
    return out or [(0, 0)]


def render_table(doc: Document, options: RenderOptions) -> str:
    """A terminal table. Everything goes to Rich as `Text` (never a markup string) after `visible`: no text
    from a trace is markup, and none reaches the terminal as a control sequence."""
    from rich.console import Console  # only the table format draws with rich: JSON, CSV, Markdown skip it
    from rich.text import Text

    buf = io.StringIO()
    width = options.width or 100
    tables = [table.for_terminal() for table in doc.tables if table.shown()]
    laid_out = [(table, _table_cells(table, options, width)) for table in tables]
    # Optional columns are hidden (and named under the table) before names get unreadable; when the numbers and
    # the narrowest names still need more than `width` (or, with --wide, the full names do), the output is that
    # much wider instead.
    needed = max((sum(t.widths) + _gaps(len(t.widths)) for _, t in laid_out), default=0)
    console = Console(
        file=buf,
        width=max(width, needed),
        force_terminal=options.color,
        no_color=not options.color,
        highlight=False,
        emoji=False,
        color_system="auto" if options.color else None,
    )

    def prose(text: Any) -> None:
        """One line of free text: wrapped between words on a terminal (a word longer than the line, a path,
        stays whole), written as it is to a pipe."""
        if options.wrap_prose:
            for lo, hi in word_lines(text.plain, console.width):
                console.print(text[lo:hi], soft_wrap=True)
        elif options.color:
            console.print(text, soft_wrap=True)
        else:
            buf.write(text.plain + "\n")

    for banner in doc.banners:
        prose(Text(visible(banner), style="bold red"))
    prose(Text(visible(doc.title), style="bold"))
    for alert in doc.alerts:
        prose(Text(f"WARNING: {visible(alert)}", style="bold red"))
    for label, value in doc.facts:
        prose(Text.assemble((f"  {visible(label)}: ", "dim"), visible(value)))
    for table, shown in laid_out:
        title = Text(visible(table.title), style="bold") if table.title else None
        plain = _plain_table(title, shown, console.width, options.color)
        if plain is not None:  # the same characters Rich would lay out, without its per-cell measuring
            buf.write(plain)
        else:
            console.print(_rich_table(title, shown))
        for line in table.footer:
            prose(Text(visible(line)))
        if shown.hidden:
            prose(
                Text(
                    f"Hidden to fit {width} columns: {', '.join(shown.hidden)} (a larger --width, "
                    "--wide or --format json shows them)",
                    style="dim",
                )
            )
    for note in doc.notes:
        prose(Text(visible(note), style="dim"))
    return buf.getvalue()


def _rich_table(title: Any, shown: _LaidOut) -> Any:
    from rich import box
    from rich.table import Table as RichTable
    from rich.text import Text

    rich = RichTable(
        title=title,
        box=box.SIMPLE_HEAD,
        title_justify="left",
        expand=False,
        pad_edge=False,
        title_style="bold",
        collapse_padding=True,
    )
    for col, col_width in zip(shown.columns, shown.widths, strict=True):
        numeric = col.kind in NUMERIC
        rich.add_column(
            Text(visible(col.label)),
            justify="right" if numeric else "left",
            no_wrap=not col.wrap,
            overflow="fold",
            min_width=col_width,
            max_width=col_width,
        )
    for row in shown.cells:
        rich.add_row(*[Text(c) for c in row])
    return rich


BOLD, RESET = "\x1b[1m", "\x1b[0m"  # the only styles of a table: its title and its header are bold


def _plain_table(title: Any, shown: _LaidOut, console_width: int, color: bool = False) -> str | None:
    """The table as Rich draws it (SIMPLE_HEAD box, fixed column widths, one space of edge, two between
    columns; with `color`, the title and the header bold as Rich writes them), or None where only Rich can lay
    it out the same: a header wider than its column, a character that is not one terminal cell wide, a line
    break, a title longer than the table or a table wider than the console. Body cells wider than their
    column wrap as Rich wraps them. `tests/test_render_plain.py` checks it against Rich, byte for byte, on
    every command's tables over real traces and on random tables. Rich measured and rendered each cell (a
    millisecond per row: 1.2 s of an 880-row critical-path table)."""
    from rich.cells import cell_len

    widths = [max(w, 1) for w in shown.widths]  # Rich gives an empty column one cell
    inner = sum(widths) + 2 * (len(widths) - 1)
    total = inner + 2
    if total > console_width or not widths:
        return None
    right = [c.kind in NUMERIC for c in shown.columns]
    rows = [[visible(c.label) for c in shown.columns], *shown.cells]
    text = "".join(cell for row in rows for cell in row)
    if not _one_cell_each(text, cell_len):
        return None
    lines = []
    if title is not None:
        heading = title.plain
        if len(heading) > total or not _one_cell_each(heading, cell_len):
            return None
        lines.append(f"{BOLD}{heading.ljust(total)}{RESET}" if color else heading.ljust(total))
    wraps = [c.wrap for c in shown.columns]
    blank = " " * total
    lines.append(blank)
    for i, row in enumerate(rows):
        cells: list[list[str]] = []
        for cell, width, numeric, wrap in zip(row, widths, right, wraps, strict=True):
            if numeric:  # Rich strips the end of a right-justified cell, then pads it on the left
                cell = cell.rstrip()
            if len(cell) <= width:
                cells.append([cell.rjust(width) if numeric else cell.ljust(width)])
            elif wrap and not numeric:
                cells.append(_wrapped(cell, width))
            else:
                return None
        if i == 0 and color:  # each header cell bold, and its right padding bold apart from it
            if any(len(c) > 1 for c in cells):
                return None
            bold = [f"{BOLD}{c[0]}{RESET}" for c in cells]
            lines.append(" " + f"{BOLD} {RESET} ".join(bold) + " ")
            lines.append(" " + "\u2500" * inner + " ")
            continue
        height = max(len(c) for c in cells)
        for k in range(height):
            parts = [c[k] if k < len(c) else " " * w for c, w in zip(cells, widths, strict=True)]
            lines.append(" " + "  ".join(parts) + " ")
        if i == 0:
            lines.append(" " + "\u2500" * inner + " ")
    lines.append(blank)
    return "\n".join(lines) + "\n"


def _wrapped(cell: str, width: int) -> list[str]:
    """A left-justified cell wrapped to `width` as Rich's `Text.wrap` does (its own line breaking: between
    words, a word longer than the width folded), each line padded to the width."""
    from rich._wrap import divide_line

    bounds = [0, *divide_line(cell, width, fold=True), len(cell)]
    out = []
    for a, b in itertools.pairwise(bounds):
        piece = cell[a:b]
        if len(piece) > width:  # Rich's rstrip_end: whitespace past the width goes
            piece = piece[:width] + piece[width:].rstrip()
        out.append(piece[:width].ljust(width))
    return out


def _one_cell_each(text: str, cell_len: Callable[[str], int]) -> bool:
    """Every character of `text` printable and one terminal cell wide (so `len` is its width, as for Rich)."""
    return text.isprintable() and (text.isascii() or cell_len(text) == len(text))


def render_markdown(doc: Document, options: RenderOptions) -> str:
    """GitHub-flavoured Markdown for a pull-request comment. Every text cell, fact, title and note goes through
    `md_text` (names through `md_code`): a trace cannot add rows, links, emphasis or HTML to the comment."""
    lines: list[str] = []
    for banner in doc.banners:
        lines.extend([f"> **{md_text(banner)}**", ""])
    lines += [f"### {md_text(doc.title)}", ""]
    for alert in doc.alerts:
        lines.extend([f"> **Warning:** {md_text(alert)}", ""])
    for label, fact in doc.facts:
        lines.append(f"- **{md_text(label)}**: {md_text(fact)}")
    if doc.facts:
        lines.append("")
    for table in (t.for_terminal() for t in doc.tables if t.shown()):
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
                cells.append(
                    md_code(text) if col.kind == NAME else text if col.kind in NUMERIC else md_text(text)
                )
            lines.append("| " + " | ".join(cells) + " |")
        lines.extend(["", *[md_text(f, line_start=True) for f in table.footer]])
        lines.append("")
    for note in doc.notes:
        lines.append(f"_{md_text(note)}_")
    return "\n".join(lines).rstrip() + "\n"


def render_csv(doc: Document, options: RenderOptions) -> str:
    """The document's first table, one row per line, raw values (full names, nanoseconds as microseconds), with
    its CSV-only columns (`Table.csv_extra`) after the shown ones (or after `Table.csv_columns`, where set).
    Text cells go through `csv_cell`: control characters visible, formula starts neutralised with `'`."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    if not doc.tables:
        return ""
    table = doc.tables[0]
    columns = (*(table.csv_columns or table.columns), *table.csv_extra)
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
