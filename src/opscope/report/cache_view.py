"""`opscope cache info / prune / clear` as documents: the cache folder's entries and what was removed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from opscope.report.document import COUNT, NAME, TEXT, Column, Document, Table


@dataclass(frozen=True)
class CachedTrace:
    """One entry of the cache folder, as shown: the trace it was read from (None: unknown) and its bytes."""

    trace: str | None
    table: str  # the table's file name in the cache folder
    table_bytes: int
    derived_bytes: int
    last_used: float  # seconds since the epoch


_COLUMNS = (
    Column("trace", "Trace", NAME),
    Column("table_mb", "Table MB", COUNT),
    Column("derived_mb", "Results MB", COUNT),
    Column("last_used", "Last used (UTC)", TEXT),
)


def _row(entry: CachedTrace) -> dict[str, Any]:
    return {
        "trace": entry.trace,
        "table": entry.table,
        "bytes": entry.table_bytes + entry.derived_bytes,
        "table_bytes": entry.table_bytes,
        "derived_bytes": entry.derived_bytes,
        "last_used": datetime.fromtimestamp(entry.last_used, timezone.utc).isoformat(timespec="seconds"),
    }


def _table(name: str, title: str, rows: Sequence[dict[str, Any]]) -> Table:
    shown = tuple(
        {
            **r,
            "trace": r["trace"] if r["trace"] is not None else f"? ({r['table']})",
            "table_mb": round(r["table_bytes"] / 1e6, 1),
            "derived_mb": round(r["derived_bytes"] / 1e6, 1),
        }
        for r in rows
    )
    return Table(name=name, title=title, columns=_COLUMNS, rows=shown, hide_when_empty=True)


def _bound(max_bytes: int | None) -> str:
    return "none" if max_bytes is None else f"{max_bytes / 1e9:.2f} GB"


def info_document(folder: str, max_bytes: int | None, found: Sequence[CachedTrace]) -> Document:
    """The entries, most recently used first (JSON `opscope.cache.info/1`)."""
    rows = [_row(e) for e in sorted(found, key=lambda e: e.last_used, reverse=True)]
    total = sum(r["bytes"] for r in rows)
    data = {
        "schema": "opscope.cache.info/1",
        "folder": folder,
        "max_bytes": max_bytes,
        "bytes": total,
        "entries": rows,
    }
    return Document(
        title="opscope cache",
        data=data,
        facts=(
            ("folder", folder),
            ("traces", str(len(rows))),
            ("size", f"{total / 1e9:.2f} GB"),
            ("bound", _bound(max_bytes)),
        ),
        tables=(_table("entries", "Cached traces, most recently used first", rows),),
        notes=(
            "Set the bound with $OPSCOPE_CACHE_MAX (e.g. 20G, 500M, none); beyond it, the least recently used "
            "traces' tables are removed when a new one is written (`opscope cache prune` does it now).",
        ),
    )


def removed_document(
    kind: str, folder: str, removed: Sequence[CachedTrace], left_bytes: int, max_bytes: int | None = None
) -> Document:
    """What `prune` or `clear` (`kind`) removed (JSON `opscope.cache.<kind>/1`)."""
    rows = [_row(e) for e in removed]
    freed = sum(r["bytes"] for r in rows)
    data: dict[str, Any] = {
        "schema": f"opscope.cache.{kind}/1",
        "folder": folder,
        "removed": rows,
        "bytes_freed": freed,
        "bytes_left": left_bytes,
    }
    facts = [("folder", folder), ("removed traces", str(len(rows))), ("freed", f"{freed / 1e9:.2f} GB")]
    if kind == "prune":
        data["max_bytes"] = max_bytes
        facts.append(("bound", _bound(max_bytes)))
    facts.append(("left", f"{left_bytes / 1e9:.2f} GB"))
    return Document(
        title=f"opscope cache {kind}",
        data=data,
        facts=tuple(facts),
        tables=(_table("removed", "Removed", rows),),
    )
