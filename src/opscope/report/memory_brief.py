"""Peak memory per device added to other commands' documents (analyze, diff, ranks): one fact, one table and
one `memory` key in the JSON payload each, so that those commands change by one line."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from opscope.analysis.memory.peaks import DevicePeak, PeakChange
from opscope.report.document import FLOAT, PCT, TEXT, Column, Document, Table

MIB = 1 << 20


def _mib(nbytes: int | None) -> float | None:
    return None if nbytes is None else nbytes / MIB


def peak_data(p: DevicePeak | None) -> dict[str, Any] | None:
    if p is None:
        return None
    return {
        "device": p.device,
        "peak_allocated_bytes": p.peak_allocated_bytes,
        "peak_reserved_bytes": p.peak_reserved_bytes,
        "relative": p.relative,
    }


def peak_text(peaks: Sequence[DevicePeak]) -> str:
    parts = []
    for p in peaks:
        text = f"{p.device} {p.peak_allocated_bytes / MIB:,.1f} MiB allocated"
        if p.peak_reserved_bytes is not None:
            text += f" / {p.peak_reserved_bytes / MIB:,.1f} MiB reserved"
        parts.append(text + (" (relative)" if p.relative else ""))
    return "; ".join(parts)


def with_peaks(doc: Document, peaks: Sequence[DevicePeak]) -> Document:
    """`analyze`: a "peak memory" fact and `memory.devices` in the JSON (empty without [memory] events)."""
    data = {**doc.data, "memory": {"devices": [peak_data(p) for p in peaks]}}
    facts = doc.facts + ((("peak memory", peak_text(peaks)),) if peaks else ())
    return replace(doc, data=data, facts=facts)


def with_peak_changes(doc: Document, changes: Sequence[PeakChange], limit_pct: float | None) -> Document:
    """`diff`: peak allocated / reserved before and after per device."""
    rows = tuple(
        {
            "device": c.device,
            "base_alloc": _mib(c.base.peak_allocated_bytes) if c.base else None,
            "new_alloc": _mib(c.new.peak_allocated_bytes) if c.new else None,
            "change": c.allocated_change,
            "base_res": _mib(c.base.peak_reserved_bytes) if c.base else None,
            "new_res": _mib(c.new.peak_reserved_bytes) if c.new else None,
        }
        for c in changes
    )
    table = Table(
        "memory",
        "Peak memory per device (BASE -> NEW)",
        (
            Column("device", "Device", TEXT),
            Column("base_alloc", "BASE alloc MiB", FLOAT),
            Column("new_alloc", "NEW alloc MiB", FLOAT),
            Column("change", "Change", PCT),
            Column("base_res", "BASE reserved MiB", FLOAT),
            Column("new_res", "NEW reserved MiB", FLOAT),
        ),
        rows,
    )
    data = {
        **doc.data,
        "memory": {
            "fail_memory_pct": limit_pct,
            "devices": [
                {
                    "device": c.device,
                    "base": peak_data(c.base),
                    "new": peak_data(c.new),
                    "peak_allocated_change": c.allocated_change,
                }
                for c in changes
            ],
        },
    }
    return replace(doc, data=data, tables=doc.tables + ((table,) if changes else ()))


def memory_gate(changes: Sequence[PeakChange], limit_pct: float | None) -> list[str]:
    """The reasons `--fail-memory PCT` trips: a device whose peak allocated grew by more than PCT percent."""
    if limit_pct is None:
        return []
    out = []
    for c in changes:
        change = c.allocated_change
        if change is not None and change * 100 > limit_pct:
            out.append(f"{c.device} peak allocated memory grew by {change * 100:.1f}% (limit {limit_pct:g}%)")
    return out


def with_rank_peaks(doc: Document, ranks: Sequence[tuple[int, str, Sequence[DevicePeak]]]) -> Document:
    """`ranks`: each rank's peak memory per device."""
    rows = tuple(
        {
            "rank": str(rank),
            "device": p.device,
            "alloc": _mib(p.peak_allocated_bytes),
            "reserved": _mib(p.peak_reserved_bytes),
        }
        for rank, _, peaks in ranks
        for p in peaks
    )
    table = Table(
        "memory",
        "Peak memory per rank",
        (
            Column("rank", "Rank", TEXT),
            Column("device", "Device", TEXT),
            Column("alloc", "Peak alloc MiB", FLOAT),
            Column("reserved", "Peak reserved MiB", FLOAT),
        ),
        rows,
    )
    data = {
        **doc.data,
        "memory": [
            {"rank": rank, "path": path, "devices": [peak_data(p) for p in peaks]}
            for rank, path, peaks in ranks
        ],
    }
    return replace(doc, data=data, tables=doc.tables + ((table,) if rows else ()))
