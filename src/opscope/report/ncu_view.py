"""`NcuReport` -> the stable `opscope.ncu/1` JSON payload and a `Document`: the kernels (or launches) table, the
findings (the `advise` finding schema), and ncu's rule results. Definitions: docs/readers.md."""

from __future__ import annotations

from typing import Any

from opscope.analysis.findings import Finding
from opscope.analysis.kernels.ncu_report import ROCPROF_COMPUTE, NcuReport
from opscope.analysis.kernels.ncu_rows import SHARED_MEM, NcuRow
from opscope.report.advice_view import CSV_EXTRA, CSV_EXTRA_KEYS, finding_data, findings_data
from opscope.report.document import FLOAT, INT, MS, NAME, PCT, TEXT, US, Column, Document, Table

SCHEMA = "opscope.ncu/1"
# JSON field -> NcuRow stat (the mean over the row's launches)
JSON_FIELDS = (
    ("sm_throughput_pct", "sm_throughput_pct"),
    ("memory_throughput_pct", "memory_throughput_pct"),
    ("dram_bytes", "dram_bytes"),
    ("l2_hit_pct", "l2_hit_pct"),
    ("l1_hit_pct", "l1_hit_pct"),
    ("achieved_occupancy_pct", "achieved_occupancy_pct"),
    ("theoretical_occupancy_pct", "theoretical_occupancy_pct"),
    ("registers_per_thread", "registers_per_thread"),
    ("shared_mem_per_block_bytes", SHARED_MEM),
    ("block_size", "block_size"),
    ("grid_size", "grid_size"),
    ("waves_per_sm", "waves_per_sm"),
)
RULE_TEXT_IN_TABLE = 240  # characters of an ncu rule text in the tables (JSON has it whole)


def clean(value: float | None) -> float | int | None:
    """A figure for JSON: whole numbers as integers, others to 4 decimals."""
    if value is None:
        return None
    if float(value).is_integer() and abs(value) < 2**53:
        return int(value)
    return round(value, 4)


def _row_data(row: NcuRow, by_launch: bool) -> dict[str, Any]:
    duration = row.mean("duration_ns")
    out: dict[str, Any] = {"name": row.name, "raw_name": row.raw_name}
    if by_launch:
        out["launch"] = row.launch
    out["launches"] = row.launches
    out["duration_us"] = None if duration is None else round(duration / 1e3, 3)
    out.update({key: clean(row.mean(stat)) for key, stat in JSON_FIELDS})
    out["metrics"] = {k: clean(v) for k, v in row.metrics.items()}
    return out


def ncu_data(report: NcuReport) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "file": report.path,
        "device": report.device,
        "kernels": [_row_data(r, report.by == "launch") for r in report.rows],
        "rules": [
            {"kernel": r.kernel, "launch": r.launch, "rule": r.rule, "type": r.type, "message": r.message}
            for r in report.rules
        ],
        "findings": findings_data(report.advice),
        "warnings": list(report.warnings),
        "layout": report.layout,
        "metric_definitions": {
            metric: {"unit": unit, "definition": text} for metric, (unit, text) in report.definitions.items()
        },
    }


# table column: (key (as in the JSON where it is there), label, kind, drop priority (0 = always shown), NcuRow
# stat, which of mean / min / max)
_COLUMNS = (
    ("duration_ns", "Mean us", US, 0, "duration_ns", "mean"),
    ("duration_min_ns", "Min us", US, 3, "duration_ns", "min"),
    ("duration_max_ns", "Max us", US, 3, "duration_ns", "max"),
    ("sm_throughput_pct", "SM %", FLOAT, 0, "sm_throughput_pct", "mean"),
    ("sm_throughput_pct_min", "SM min", FLOAT, 2, "sm_throughput_pct", "min"),
    ("sm_throughput_pct_max", "SM max", FLOAT, 2, "sm_throughput_pct", "max"),
    ("memory_throughput_pct", "Mem %", FLOAT, 0, "memory_throughput_pct", "mean"),
    ("dram_bytes", "DRAM B", INT, 6, "dram_bytes", "mean"),
    ("l2_bytes", "L2 B", INT, 4, "l2_bytes", "mean"),
    ("l1_bytes", "L1 B", INT, 4, "l1_bytes", "mean"),
    ("l2_hit_pct", "L2 hit %", FLOAT, 5, "l2_hit_pct", "mean"),
    ("l1_hit_pct", "L1 hit %", FLOAT, 5, "l1_hit_pct", "mean"),
    ("achieved_occupancy_pct", "Ach occ %", FLOAT, 0, "achieved_occupancy_pct", "mean"),
    ("theoretical_occupancy_pct", "Theo occ %", FLOAT, 0, "theoretical_occupancy_pct", "mean"),
    ("registers_per_thread", "Regs", INT, 8, "registers_per_thread", "mean"),
    ("shared_mem_per_block_bytes", "Smem B", INT, 8, SHARED_MEM, "mean"),
    ("block_size", "Block", INT, 9, "block_size", "mean"),
    ("grid_size", "Grid", INT, 9, "grid_size", "mean"),
    ("waves_per_sm", "Waves", FLOAT, 7, "waves_per_sm", "mean"),
    ("tensor_pipe_pct", "Tensor %", FLOAT, 1, "tensor_pipe_pct", "mean"),
    ("tensor_inst", "Tensor inst", INT, 1, "tensor_inst", "mean"),
)


def _kernels_table(report: NcuReport) -> Table:
    by_launch = report.by == "launch"
    rows = []
    for r in report.rows:
        row: dict[str, Any] = {"name": r.name, "launch": r.launch, "launches": r.launches}
        for key, _, _, _, stat, which in _COLUMNS:
            row[key] = clean(getattr(r.stats[stat], which))
        row["limiter"] = r.limiter
        rows.append(row)
    # A column no row has a value in is hidden first at a narrow width (it stays in CSV and Markdown).
    empty = {key for key, *_ in _COLUMNS if all(row[key] is None for row in rows)}
    columns = [
        Column("name", "Name", NAME),
        Column("launch" if by_launch else "launches", "Launch" if by_launch else "Launches", INT),
    ]
    for key, label, kind, drop, _, _ in _COLUMNS:
        columns.append(Column(key, label, kind, drop=1 if key in empty else drop))
        if key == "theoretical_occupancy_pct":
            columns.append(Column("limiter", "Limiter", TEXT, drop=7))
    footer = (f"{report.hidden_rows:,} more rows (--top 0 shows all)",) if report.hidden_rows else ()
    return Table("kernels", "", tuple(columns), tuple(rows), footer=footer)


def _rules_table(report: NcuReport) -> Table:
    """ncu's rule results, each distinct (kernel, rule, type, text) once with its launches."""
    grouped: dict[tuple[str, str, str, str], list[int]] = {}
    names = {r.raw_name: r.name for r in report.rows}
    for rule in report.rules:
        grouped.setdefault((rule.kernel, rule.rule, rule.type, rule.message), []).append(rule.launch)
    rows = []
    for (kernel, name, kind, message), launches in grouped.items():
        text = message if len(message) <= RULE_TEXT_IN_TABLE else message[:RULE_TEXT_IN_TABLE] + "…"
        shown = ", ".join(str(i) for i in launches[:8]) + (" ..." if len(launches) > 8 else "")
        rows.append(
            {
                "kernel": names.get(kernel, kernel),
                "launches": shown,
                "rule": name,
                "type": kind,
                "message": text,
            }
        )
    columns = (
        Column("kernel", "Kernel", NAME),
        Column("launches", "Launches", TEXT),
        Column("rule", "Rule", TEXT),
        Column("type", "Type", TEXT),
        Column("message", "Nsight Compute says (verbatim)", TEXT, wrap=True),
    )
    return Table("rules", "Nsight Compute rule results", columns, tuple(rows), hide_when_empty=True)


def _findings_table(report: NcuReport) -> Table:
    """The findings with the kernel in a column of its own (shortened like every name) and, where the export
    has durations, the time at stake; the CSV-only columns of `advise` after them."""
    timed = report.has_duration
    rows = []
    for f in report.advice.findings:
        rows.append(
            {
                "severity": f.severity,
                "id": f.id,
                "kernel": next((e["kernel"] for e in f.evidence if "kernel" in e), ""),
                "value": f.value,
                "threshold": f.threshold,
                "time": f.time_at_stake_ns,
                "share": f.share,
                "title": f.title.rsplit(": ", 1)[0],
                **{k: v for k, v in finding_data(f).items() if k in CSV_EXTRA_KEYS},
            }
        )
    order = (
        "the most GPU time at stake first" if timed else "furthest from the threshold first (no durations)"
    )
    columns = [
        Column("severity", "Sev", TEXT),
        Column("id", "Rule", TEXT),
    ]
    if timed:
        columns += [Column("time", "At stake ms", MS), Column("share", "Share", PCT)]
    # the finding first: the table's spare width goes to the first flexible column, and the kernel's name is
    # shortened by structure where the finding's text would only wrap
    columns += [Column("title", "Finding", TEXT, wrap=True), Column("kernel", "Kernel", NAME)]
    return Table(
        "findings",
        f"Findings, {order}",
        tuple(columns),
        tuple(rows),
        csv_extra=CSV_EXTRA,
        hide_when_empty=True,
    )


def ncu_document(report: NcuReport) -> Document:
    advice = report.advice
    amd = report.layout == ROCPROF_COMPUTE
    duration = (
        f"{report.total_duration_ns / 1e6:,.3f} ms summed over the profiled launches"
        if report.total_duration_ns is not None
        else "not in this export"
    )
    facts = (
        ("file", report.path),
        ("layout", "rocprof-compute analysis database" if amd else f"{report.layout} page"),
        ("device", report.device or "not in this export"),
        (
            "launches",
            f"{report.launches:,} profiled, {report.kernels:,} kernel{'' if report.kernels == 1 else 's'}",
        ),
        ("duration", duration),
        ("findings", f"{len(advice.findings)} ({advice.worst() or 'none'} at worst)"),
    )
    first_of_each: dict[str, Finding] = {}
    for f in advice.findings:
        first_of_each.setdefault(f.id, f)
    notes = (
        *(f"{f.title}: {f.advice}" for f in first_of_each.values()),
        "Definitions and thresholds: docs/readers.md (Nsight Compute on its own).",
        *(
            (
                f"Metrics: {len(report.definitions):,} of the shown kernels, each with its unit and "
                "rocprof-compute's definition, in --format json (metrics, metric_definitions).",
            )
            if amd
            else ()
        ),
        *(f"warning: {w}" for w in report.warnings),
    )
    return Document(
        title=("rocprof-compute" if amd else "Nsight Compute")
        + ": per-kernel metrics and what they say"
        + (" (by launch)" if report.by == "launch" else ""),
        data=ncu_data(report),
        facts=facts,
        tables=(_kernels_table(report), _findings_table(report), _rules_table(report)),
        notes=notes,
    )
