"""The plain data every renderer works from: a titled list of tables and notes plus a JSON payload."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

# Column kinds decide formatting: text, int (thousands separators), ms / us (from nanoseconds), pct (from a
# 0..1 share), float.
TEXT, INT, MS, US, PCT, FLOAT, NAME = "text", "int", "ms", "us", "pct", "float", "name"
COUNT = "count"  # a mean count (calls per step): at most one decimal
LAST_RESORT = 100  # `Column.drop` from here up: hidden only when the names are already at their narrowest


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    kind: str = TEXT
    # Terminal tables only: `drop` > 0 marks a column that may be hidden (lowest number first, and said so under
    # the table) when the table would not fit its width with readable names (from LAST_RESORT up: with the
    # narrowest names); `wrap` lets a long text column wrap onto more lines instead of widening the table.
    drop: int = 0
    wrap: bool = False


@dataclass(frozen=True)
class Table:
    name: str  # machine name (CSV file stem, HTML id)
    title: str
    columns: tuple[Column, ...]
    rows: tuple[dict[str, Any], ...]
    footer: tuple[str, ...] = ()
    # columns written only by CSV, after `columns`: the JSON's scalar fields that do not fit a terminal table
    csv_extra: tuple[Column, ...] = ()
    # CSV's own first columns where they differ from the terminal's (a CSV header is an interface: columns
    # are added, never renamed); empty: the same as `columns`
    csv_columns: tuple[Column, ...] = ()
    # without rows, left out of the terminal and Markdown (CSV still writes its header, JSON its empty list)
    hide_when_empty: bool = False
    # the terminal and Markdown show at most this many rows (the first ones) and say how many more there are,
    # and what they are (`rest`, e.g. "steps"); CSV and JSON keep every row. None: every row everywhere
    terminal_rows: int | None = None
    rest: str = "rows"

    def shown(self) -> bool:
        return bool(self.rows) or not self.hide_when_empty

    def for_terminal(self) -> Table:
        """The table as the terminal and Markdown lay it out: cut at `terminal_rows`, with a line under it for
        the rows left out (none is left out silently)."""
        if self.terminal_rows is None or len(self.rows) <= self.terminal_rows:
            return self
        more = len(self.rows) - self.terminal_rows
        line = f"{more:,} more {self.rest} (--format json or csv has every one)"
        return replace(self, rows=self.rows[: self.terminal_rows], footer=(line, *self.footer))


@dataclass(frozen=True)
class Document:
    title: str
    data: dict[str, Any]  # the stable JSON payload, with its "schema" key
    facts: tuple[tuple[str, str], ...] = ()  # headline key figures, in order
    tables: tuple[Table, ...] = ()
    notes: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    # warnings that change what the figures mean (a before/after pair on different GPU models): shown first
    alerts: tuple[str, ...] = ()
    # what the validity checks found on the traces read (docs/validity.md): one line per warn or error check,
    # above everything else, the title included
    banners: tuple[str, ...] = ()
