"""`LaunchReport` (+ optional `MetricsJoin`) -> `Document` and the stable `opscope.kernels/1` JSON payload."""

from __future__ import annotations

from typing import Any

from opscope.analysis.kernels.launch_config import LaunchReport, LaunchRow
from opscope.analysis.kernels.metrics import LaunchMetrics, MetricsJoin
from opscope.report import names
from opscope.report.document import FLOAT, INT, MS, NAME, TEXT, Column, Document, Table

SCHEMA = "opscope.kernels/1"
FLAG_TEXT = {
    "low_occupancy": "low theoretical occupancy",
    "under_filled": "grid smaller than the SM count",
    "tail_effect": "partial last wave",
    "low_sm_throughput": "SM throughput < 70%",
    "memory_bound": "memory-bound",
    "compute_bound": "compute-bound",
    "latency_bound": "latency-bound",
    "low_achieved_occupancy": "low achieved occupancy",
    "poor_l1_hit_rate": "poor L1 hit rate",
    "poor_l2_hit_rate": "poor L2 hit rate",
}
_NCU_COLUMNS = (
    ("sm_throughput_pct", "SM %"),
    ("dram_throughput_pct", "DRAM %"),
    ("achieved_occupancy_pct", "Ach. occ %"),
    ("l1_hit_rate_pct", "L1 hit %"),
    ("l2_hit_rate_pct", "L2 hit %"),
)


def _r(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def _metrics(row: LaunchRow, join: MetricsJoin | None) -> LaunchMetrics | None:
    return join.by_launch.get(row.key()) if join is not None else None


def _flags(row: LaunchRow, found: LaunchMetrics | None) -> list[str]:
    return [*row.flags, *(found.flags if found else ())]


def _row_data(row: LaunchRow, found: LaunchMetrics | None) -> dict[str, Any]:
    metrics = None
    if found is not None:
        metrics = {
            "launches": found.launches,
            **{k: _r(v) for k, v in found.values.items()},
            "bound": found.bound,
            "occupancy_limiter": found.occupancy_limiter,
        }
    return {
        "name": row.name,
        "device": row.device,
        "grid": list(row.grid),
        "block": list(row.block),
        "registers_per_thread": row.registers_per_thread,
        "shared_memory_bytes": row.shared_memory,
        "calls": row.calls,
        "total_us": round(row.total_ns / 1e3, 3),
        "blocks": row.blocks,
        "threads_per_block": row.threads_per_block,
        "theoretical_occupancy_pct": _r(row.theoretical_occupancy_pct),
        "limiter": row.limiter,
        "est_achieved_occupancy_pct": _r(row.est_achieved_occupancy_pct),
        "waves": _r(row.waves, 3),
        "wave_efficiency": _r(row.wave_efficiency, 3),
        "flags": _flags(row, found),
        "metrics": metrics,
    }


def kernels_data(report: LaunchReport, join: MetricsJoin | None) -> dict[str, Any]:
    metrics = None
    if join is not None:
        metrics = {
            "path": join.path,
            "layout": join.layout,
            "profiled_launches": join.profiled_launches,
            "matched_launches": join.matched_launches,
            "unmatched_kernels": list(join.unmatched_kernels),
        }
    return {
        "schema": SCHEMA,
        "trace": {"path": report.path, "devices": list(report.devices), "kernels": report.kernels},
        "gpu_inferred": report.gpu_note,
        "rows": [_row_data(r, _metrics(r, join)) for r in report.rows],
        "hidden_rows": report.hidden_rows,
        "metrics": metrics,
    }


def _dims(values: tuple[int, int, int]) -> str:
    return "x".join(str(v) for v in values) if any(values) else "—"


def kernels_document(report: LaunchReport, join: MetricsJoin | None = None) -> Document:
    # At a narrow width the launch details go first (in `drop` order, named under the table), then the flags wrap:
    # the name, the time and the occupancy verdict stay.
    columns = [
        Column("name", "Name", NAME),
        Column("calls", "Calls", INT),
        Column("total_ns", "Total ms", MS),
        Column("grid", "Grid", TEXT, drop=6),
        Column("block", "Block", TEXT, drop=5),
        Column("regs", "Regs", INT, drop=3),
        Column("smem", "Smem B", INT, drop=2),
        Column("theo", "Theo occ %", FLOAT),
        Column("limiter", "Limiter", TEXT, drop=4),
        Column("est", "Est occ %", TEXT, drop=1),
        Column("waves", "Waves", FLOAT),
    ]
    if join is not None and join.matched_launches:
        columns += [Column(key, label, FLOAT, drop=7) for key, label in _NCU_COLUMNS]
    columns.append(Column("flags", "Flags", TEXT, wrap=True))
    rows = []
    for r in report.rows:
        found = _metrics(r, join)
        row: dict[str, Any] = {
            "name": r.name,
            "calls": r.calls,
            "total_ns": r.total_ns,
            "grid": _dims(r.grid),
            "block": _dims(r.block),
            "regs": r.registers_per_thread,
            "smem": r.shared_memory,
            "theo": r.theoretical_occupancy_pct,
            "limiter": r.limiter or "—",
            "est": "n/a" if r.est_achieved_occupancy_pct is None else f"{r.est_achieved_occupancy_pct:,.3f}",
            "waves": r.waves,
            "flags": ", ".join(FLAG_TEXT.get(f, f) for f in _flags(r, found)) or "—",
        }
        for key, _ in _NCU_COLUMNS:
            row[key] = found.values.get(key) if found else None
        rows.append(row)
    footer = (
        (f"{report.hidden_rows:,} more launch configurations (--top 0 shows all)",)
        if report.hidden_rows
        else ()
    )
    notes = []
    if not report.has_launch_config:
        notes.append("This trace records no grid/block sizes for its kernels: no occupancy figures.")
    notes.extend(join_notes(join))
    if report.gpu_note:
        notes.append(f"{report.gpu_note}: occupancy from that architecture's limits, no SM count (no waves).")
    facts = (
        ("trace", report.path),
        ("devices", ", ".join(report.devices) or "none recorded"),
        ("kernels", f"{report.kernels:,} launches"),
    )
    return Document(
        title="Kernel launch configuration and occupancy",
        data=kernels_data(report, join),
        facts=facts,
        tables=(Table(name="kernels", title="", columns=tuple(columns), rows=tuple(rows), footer=footer),),
        notes=tuple(notes),
    )


def join_notes(join: MetricsJoin | None) -> list[str]:
    """How many profiled launches the join paired, and which ncu kernels it could not find (shortened); one
    plain line when it paired none."""
    if join is None:
        return []
    if join.matched_launches == 0:
        return [no_match_line(join)]
    notes = [
        f"Nsight Compute: {join.matched_launches:,} of {join.profiled_launches:,} profiled launches "
        f"matched to trace kernels by name and launch order ({join.path})."
    ]
    if join.unmatched_kernels:
        shown = [names.shorten(n, 60) for n in join.unmatched_kernels[:5]]
        notes.append(
            "Not in the trace: " + "; ".join(shown) + (" ..." if len(join.unmatched_kernels) > 5 else "")
        )
    return notes


def no_match_line(join: MetricsJoin) -> str:
    return (
        f"Nsight Compute: none of the {join.profiled_launches:,} profiled launches of {join.path} has a kernel of "
        "this trace's name; no metrics joined (`opscope ncu FILE` reads the export on its own)."
    )
