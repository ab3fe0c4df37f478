"""`RanksReport` -> `Document`, and the stable `opscope.ranks/1` JSON payload (times in microseconds)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from opscope.analysis.compare.ranks import DEVICE_MISMATCH, RanksReport, Spread
from opscope.report import names
from opscope.report.document import INT, MS, NAME, PCT, TEXT, US, Column, Document, Table

SCHEMA = "opscope.ranks/1"


def ranges(values: Iterable[int]) -> str:
    """Sorted integers as ranges: 0, 2-127, 130."""
    parts: list[str] = []
    ordered = sorted(set(values))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ", ".join(parts)


def _us(ns: float | None) -> float | None:
    return None if ns is None or (isinstance(ns, float) and math.isnan(ns)) else round(ns / 1e3, 3)


def _frac(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _spread_data(s: Spread) -> dict[str, Any]:
    return {
        "name": s.name,
        "per_rank_us": [_us(v) for v in s.per_rank],
        "mean_us": _us(s.mean_ns),
        "min_us": _us(s.min_ns),
        "max_us": _us(s.max_ns),
        "median_us": _us(s.median_ns),
        "worst_rank": s.worst_rank,
        "excess": _frac(s.excess),
        "flagged": s.flagged,
        "calls": s.calls,
        "total_us": _us(s.total_ns),
        "call_min_us": _us(s.call_min_ns),
        "call_max_us": _us(s.call_max_ns),
        "call_p50_us": _us(s.call_p50_ns),
        "call_p99_us": _us(s.call_p99_ns),
    }


def ranks_data(report: RanksReport) -> dict[str, Any]:
    straggler = report.straggler
    skew = report.skew
    return {
        "schema": SCHEMA,
        "world_size": report.world_size,
        "ranks_found": len(report.ranks),
        "missing_ranks": list(report.missing),
        "missing_ranges": ranges(report.missing),  # the same ranks written as ranges: "2-127"
        "complete": report.complete,
        "per_step": report.per_step,
        "threshold": report.options.threshold,
        "ranks": [
            {
                "rank": r.rank,
                "rank_source": r.rank_source,
                "path": r.path,
                "devices": list(r.devices),
                "steps": r.steps,
                "step_us": _us(r.step_ns),
                "busy_us": _us(r.busy_ns),
                "compute_us": _us(r.compute_ns),
                "communication_us": _us(r.comm_ns),
                "overlap_us": _us(r.overlap_ns),
                "idle_us": _us(r.idle_ns),
                "utilization": _frac(r.utilization),
            }
            for r in report.ranks
        ],
        "kernels": [
            {**_spread_data(s), "short_name": short}
            for s, short in zip(
                report.kernels, names.shorten_all([k.name for k in report.kernels], 50), strict=True
            )
        ],
        "ops": [_spread_data(s) for s in report.ops],
        "straggler": None
        if straggler is None
        else {
            "rank": straggler.rank,
            "reason": straggler.reason,
            "shortest_wait_rank": straggler.shortest_wait_rank,
            "wait_deficit": _frac(straggler.wait_deficit),
            "latest_rank": straggler.latest_rank,
            "latest_share": _frac(straggler.latest_share),
            "slowest_compute_rank": straggler.slowest_compute_rank,
            "compute_excess": _frac(straggler.compute_excess),
        },
        "collective_skew": None
        if skew is None
        else {
            "matched": skew.matched,
            "unmatched": skew.unmatched,
            "p50_us": _us(skew.p50_ns),
            "max_us": _us(skew.max_ns),
            "worst": skew.worst,
            "aligned_with_base_time": skew.aligned,
            "latest_rank_counts": [{"rank": r, "count": c} for r, c in skew.latest_rank_counts],
        },
        "warnings": list(report.warnings),
        "mismatches": list(_mismatches(report)),  # the warnings that change what the comparison means
    }


def _spread_table(name: str, title: str, spreads: tuple[Spread, ...], unit: str) -> Table:
    columns = (
        Column("name", "Name", NAME),
        Column("mean", f"Mean {unit}", MS),
        Column("min", f"Min {unit}", MS),
        Column("max", f"Max {unit}", MS),
        Column("worst", "Worst rank", INT),
        Column("excess", "Over median", PCT),
        Column("flag", "", TEXT),
        Column("calls", "Calls (all)", INT),
        Column("p50", "p50/call us", US),
        Column("p99", "p99/call us", US),
    )
    rows = tuple(
        {
            "name": s.name,
            "mean": s.mean_ns,
            "min": s.min_ns,
            "max": s.max_ns,
            "worst": s.worst_rank,
            "excess": s.excess,
            "flag": "!" if s.flagged else "",
            "calls": s.calls,
            "p50": s.call_p50_ns,
            "p99": s.call_p99_ns,
        }
        for s in spreads
    )
    return Table(name=name, title=title, columns=columns, rows=rows)


def _mismatches(report: RanksReport) -> tuple[str, ...]:
    return tuple(w for w in report.warnings if w.startswith(DEVICE_MISMATCH))


def ranks_document(report: RanksReport) -> Document:
    unit = "ms/step" if report.per_step else "ms"  # times in ms with separators (issue 28)
    per_rank = Table(
        name="ranks",
        title="Per rank" + (" (per step)" if report.per_step else " (whole trace)"),
        columns=(
            Column("rank", "Rank", INT),
            Column("steps", "Steps", INT),
            Column("step", "Step ms" if report.per_step else "Window ms", MS),
            Column("busy", "GPU busy ms", MS),
            Column("compute", "Compute ms", MS),
            Column("comm", "Comm ms", MS),
            Column("overlap", "Overlap ms", MS),
            Column("idle", "Idle ms", MS),
            Column("util", "Util", PCT),
            Column("source", "Rank from", TEXT),
        ),
        rows=tuple(
            {
                "rank": r.rank,
                "steps": r.steps,
                "step": r.step_ns,
                "busy": r.busy_ns,
                "compute": r.compute_ns,
                "comm": r.comm_ns,
                "overlap": r.overlap_ns,
                "idle": r.idle_ns,
                "util": r.utilization,
                "source": r.rank_source,
            }
            for r in report.ranks
        ),
    )
    threshold = f"{report.options.threshold:.0%}"
    tables = (
        per_rank,
        _spread_table(
            "kernels",
            f"Top kernels across ranks (! = worst rank > {threshold} over the median)",
            report.kernels,
            unit,
        ),
        _spread_table("ops", "Top operators across ranks (CPU time)", report.ops, unit),
    )
    facts = [
        (
            "ranks",
            f"{len(report.ranks)} of world size {report.world_size}"
            + ("" if report.complete else f" (missing: {ranges(report.missing)})"),
        )
    ]
    if report.straggler is not None:
        facts.append(("straggler", report.straggler.reason))
    skew = report.skew
    if skew is not None and skew.matched:
        clock = (
            "baseTimeNanoseconds" if skew.aligned else "timestamps as written (host clocks assumed in sync)"
        )
        facts.append(
            (
                "collective skew",
                f"p50 {_us(skew.p50_ns) or 0:,.1f} us, max {_us(skew.max_ns) or 0:,.1f} us "
                f"over {skew.matched} collectives ({skew.worst} worst); clock: {clock}",
            )
        )
    # The missing ranks are listed once, in the facts: the note says what that means, not the list again.
    alerts = _mismatches(report)
    notes = [
        f"warning: {w}" for w in report.warnings if not w.startswith("incomplete job:") and w not in alerts
    ]
    if not report.complete:
        notes.insert(
            0, "INCOMPLETE: not every rank of the job was given; cross-rank figures cover the ranks found."
        )
    return Document(
        title="opscope ranks: one trace per rank",
        data=ranks_data(report),
        facts=tuple(facts),
        tables=tables,
        notes=tuple(notes),
        alerts=alerts,
    )


__all__ = ["SCHEMA", "ranks_data", "ranks_document"]
