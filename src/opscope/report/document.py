"""The plain data every renderer works from: a titled list of tables and notes plus a JSON payload."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Column kinds decide formatting: text, int (thousands separators), ms / us (from nanoseconds), pct (from a
# 0..1 share), float.
TEXT, INT, MS, US, PCT, FLOAT, NAME = "text", "int", "ms", "us", "pct", "float", "name"
COUNT = "count"  # a mean count (calls per step): at most one decimal


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    kind: str = TEXT


@dataclass(frozen=True)
class Table:
    name: str  # machine name (CSV file stem, HTML id)
    title: str
    columns: tuple[Column, ...]
    rows: tuple[dict[str, Any], ...]
    footer: tuple[str, ...] = ()
    csv_columns: tuple[Column, ...] = ()  # written after `columns` by the CSV renderer only (too wide for a terminal)


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
