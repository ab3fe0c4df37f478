"""The report's CPU operator view: the operators by CPU self time (`analysis.attribution.cpu_ops`, the table
`opscope run` and `opscope demo` print for a CPU-only capture), so that a trace without GPU activity still
shows where the time went, and a GPU trace shows its CPU side next to the GPU panels."""

from __future__ import annotations

from typing import Any

from opscope.analysis.attribution.cpu_ops import CpuOpTable


def _us(ns: float) -> float:
    return round(ns / 1e3, 3)


def cpu_panel(table: CpuOpTable) -> dict[str, Any]:
    """{"ops": rows by self time (name, calls, total_us, self_us, avg_us, share), "threads", "self_total_us",
    "rest": the rows left out or None}; `table`: the bundle's CPU operator table (30 rows)."""
    rest = table.rest
    return {
        "ops": [
            {
                "name": r.name,
                "kind": r.kind,
                "calls": r.calls,
                "total_us": _us(r.total_ns),
                "self_us": _us(r.self_ns),
                "avg_us": _us(r.avg_ns),
                "share": round(r.share, 6),
            }
            for r in table.rows
        ],
        "annotations": table.annotations,
        "threads": table.threads,
        "self_total_us": _us(table.self_total_ns),
        "rest": None
        if rest is None
        else {
            "rows": rest.rows,
            "calls": rest.calls,
            "self_us": _us(rest.self_ns),
            "share": round(rest.share, 6),
        },
    }


__all__ = ["cpu_panel"]
