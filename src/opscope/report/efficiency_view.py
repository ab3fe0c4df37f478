"""`Efficiency` -> `Document` (and the stable `opscope.efficiency/1` JSON payload)."""

from __future__ import annotations

from typing import Any

from opscope.analysis.efficiency.recorded_roofline import RecordedRoofline
from opscope.analysis.efficiency.table import Efficiency, EfficiencyRow
from opscope.report.document import FLOAT, INT, MS, NAME, TEXT, Column, Document, Table
from opscope.report.linking_view import us

SCHEMA = "opscope.efficiency/1"


def _r(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)


def row_data(r: EfficiencyRow) -> dict[str, Any]:
    return {
        "op": r.op,
        "shape": r.shape,
        "dtype": r.dtype,
        "calls": r.calls,
        "gpu_time_us": round(r.gpu_time_us, 3),
        "flops_per_call": r.flops_per_call,
        "bytes_per_call": r.bytes_per_call,
        "achieved_tflops": _r(r.achieved_tflops),
        "achieved_tbps": _r(r.achieved_tbps),
        "intensity_flops_per_byte": _r(r.intensity_flops_per_byte, 3),
        "peak_tflops": r.peak_tflops,
        "peak_tbps": r.peak_tbps,
        "pct_of_peak_compute": _r(r.pct_of_peak_compute, 3),
        "pct_of_peak_bandwidth": _r(r.pct_of_peak_bandwidth, 3),
        "bound": r.bound,
        "model": r.model,
        "family": r.family,
        "note": r.note,
    }


def efficiency_data(result: Efficiency) -> dict[str, Any]:
    peaks = result.peaks
    return {
        "schema": SCHEMA,
        "trace": {"path": result.path},
        "device": {
            "name": result.device,
            "peaks": peaks.name if peaks else None,
            "source": peaks.source if peaks else None,
            "peak_tflops_override": result.peak_tflops_override,
            "peak_tbps_override": result.peak_tbps_override,
            "gpu": result.gpu.data() if result.gpu else None,
        },
        "by_shape": result.options.by_shape,
        "totals": {
            "gpu_time_us": us(result.gpu_time_ns),
            "sized_gpu_time_us": us(result.sized_gpu_time_ns),
            "unsized_gpu_time_us": us(result.unsized_gpu_time_ns),
            "rows": result.total_rows,
        },
        "rows": [row_data(r) for r in result.rows],
        "unsized": [
            {
                "op": u.op,
                "shape": u.shape,
                "calls": u.calls,
                "gpu_time_us": round(u.gpu_time_us, 3),
                "reason": u.reason,
            }
            for u in result.unsized
        ],
        "warnings": list(result.warnings),
        "recorded_roofline": recorded_data(result.recorded) if result.recorded else None,
    }


def recorded_data(recorded: RecordedRoofline) -> dict[str, Any]:
    return {
        "source": recorded.source,
        "data_types": list(recorded.data_types),
        "roofs": recorded.roofs,
        "compute_roof_gflops": recorded.compute_roof_gflops,
        "compute_roofs": list(recorded.compute_roofs),
        "hbm_gbps": recorded.hbm_gbps,
        "points": [
            {
                "kernel": p.kernel,
                "dispatches": p.dispatches,
                "gpu_time_us": us(p.gpu_time_ns),
                "gflops": p.gflops,
                "intensity_flops_per_byte": p.intensity,
                "hbm_roof_gflops": _r(p.hbm_roof_gflops, 3),
                "attainable_gflops": _r(p.attainable_gflops, 3),
                "pct_of_roof": _r(p.pct_of_roof, 3),
                "bound": p.bound,
            }
            for p in recorded.points
        ],
    }


def _recorded_table(recorded: RecordedRoofline) -> Table:
    shown = [k for k in ("HBMBw", "L2Bw", "L1Bw", "LDSBw") if k in recorded.roofs] + list(
        recorded.compute_roofs
    )
    roofs = ", ".join(f"{k} {recorded.roofs[k]:,.1f}" for k in shown)
    return Table(
        "recorded_roofline",
        f"Roofline as {recorded.source} measured it (counters, not opscope's model)",
        (
            Column("kernel", "Kernel", NAME),
            Column("dispatches", "Dispatches", INT, drop=2),
            Column("gpu_time", "GPU ms", MS),
            Column("gflops", "GFLOP/s", FLOAT),
            Column("ai_hbm", "FLOP/B HBM", FLOAT),
            Column("ai_l2", "FLOP/B L2", FLOAT, drop=1),
            Column("ai_l1", "FLOP/B L1", FLOAT, drop=1),
            Column("pct", "% of roof", FLOAT),
            Column("bound", "Bound", TEXT),
        ),
        tuple(
            {
                "kernel": p.kernel,
                "dispatches": p.dispatches,
                "gpu_time": p.gpu_time_ns,
                "gflops": _r(p.gflops, 3),
                "ai_hbm": _r(p.intensity.get("hbm"), 4),
                "ai_l2": _r(p.intensity.get("l2"), 4),
                "ai_l1": _r(p.intensity.get("l1"), 4),
                "pct": _r(p.pct_of_roof, 3),
                "bound": p.bound or "",
            }
            for p in recorded.points
        ),
        (
            f"Roofs ({recorded.source}'s benchmark of this GPU, GB/s and GFLOP/s): {roofs}. Data types "
            f"analysed: {', '.join(recorded.data_types) or 'not recorded'}. % of roof = GFLOP/s / min(compute "
            "roof, FLOP/B HBM x HBMBw); bound: memory where that HBM roof is below the compute roof "
            "(docs/efficiency.md, Recorded roofline); every roof in --format json.",
        ),
    )


def efficiency_columns(by_shape: bool) -> tuple[Column, ...]:
    """Terminal / Markdown / CSV columns; the keys name the CSV header (units in the names)."""
    shape = (Column("shape", "Shape", NAME),) if by_shape else ()
    return (
        Column("op", "Op", NAME),
        *shape,
        Column("dtype", "dtype", TEXT),
        Column("calls", "Calls", INT),
        Column("gpu_time", "GPU ms", MS),
        Column("achieved_tflops", "TFLOP/s", FLOAT),
        Column("pct_of_peak_compute", "%pk", FLOAT),
        Column("achieved_tbps", "TB/s", FLOAT, drop=2),
        Column("pct_of_peak_bandwidth", "%BW", FLOAT),
        Column("bound", "bound", TEXT),
        Column("model", "model", TEXT, drop=1),
    )


# the JSON's scalar fields that the table leaves out, as CSV-only columns (names as in the JSON)
CSV_EXTRA = (
    Column("gpu_time_us", "GPU us", FLOAT),
    Column("flops_per_call", "FLOPs/call", FLOAT),
    Column("bytes_per_call", "Bytes/call", FLOAT),
    Column("intensity_flops_per_byte", "FLOP/B", FLOAT),
    Column("peak_tflops", "Peak TFLOP/s", FLOAT),
    Column("peak_tbps", "Peak TB/s", FLOAT),
    Column("family", "Family", TEXT),
    Column("note", "Note", NAME),
)


def efficiency_cells(r: EfficiencyRow) -> dict[str, Any]:
    data = row_data(r)
    return {
        **{c.key: data[c.key] for c in CSV_EXTRA},
        "op": r.op,
        "shape": r.shape,
        "dtype": r.dtype,
        "calls": r.calls,
        "gpu_time": round(r.gpu_time_us * 1e3),
        "achieved_tflops": r.achieved_tflops,
        "pct_of_peak_compute": r.pct_of_peak_compute,
        "achieved_tbps": r.achieved_tbps,
        "pct_of_peak_bandwidth": r.pct_of_peak_bandwidth,
        "bound": r.bound,
        "model": r.model,
    }


def efficiency_document(result: Efficiency) -> Document:
    by_shape = result.options.by_shape
    rows = tuple(efficiency_cells(r) for r in result.rows)
    hidden = result.total_rows - len(result.rows)
    footer = (f"{hidden:,} more rows (--top 0 shows all)",) if hidden > 0 else ()
    tables = [
        Table(
            "efficiency",
            "",
            efficiency_columns(by_shape),
            rows,
            footer,
            csv_extra=CSV_EXTRA,
            hide_when_empty=True,
        )
    ]  # nothing sized: the note says why
    if result.unsized:
        tables.append(
            Table(
                "unsized",
                "Ops the model cannot size (not guessed)",
                (
                    Column("op", "Op", NAME),
                    *((Column("shape", "Shape", NAME),) if by_shape else ()),
                    Column("calls", "Calls", INT),
                    Column("gpu_time", "GPU ms", MS),
                    Column("reason", "Why", TEXT, wrap=True),
                ),
                tuple(
                    {
                        "op": u.op,
                        "shape": u.shape,
                        "calls": u.calls,
                        "gpu_time": round(u.gpu_time_us * 1e3),
                        "reason": u.reason,
                    }
                    for u in result.unsized
                ),
            )
        )
    if result.recorded:
        tables.append(_recorded_table(result.recorded))
    peaks = result.peaks
    if peaks:
        device = f"{result.device} -> {peaks.name} ({peaks.source})"
    else:
        device = f"{result.device or 'not recorded'}: not in the peak table, no percentages of peak"
    facts: list[tuple[str, str]] = [("trace", result.path), ("device", device)]
    if result.peak_tflops_override or result.peak_tbps_override:
        facts.append(
            (
                "peaks given",
                f"{result.peak_tflops_override or '-'} TFLOP/s, {result.peak_tbps_override or '-'} TB/s",
            )
        )
    gpu = result.gpu_time_ns or 1
    facts.append(
        (
            "GPU time",
            f"{result.gpu_time_ns / 1e6:,.3f} ms; sized ops {result.sized_gpu_time_ns / 1e6:,.3f}"
            f" ms ({100 * result.sized_gpu_time_ns / gpu:.1f}%), unsized ops "
            f"{result.unsized_gpu_time_ns / 1e6:,.3f} ms",
        )
    )
    notes = [
        "%pk, %BW: percent of the peak FLOP/s and memory bandwidth. GPU ms: kernels launched inside the op's calls that no "
        "sized call encloses (each GPU event counted once: sized + unsized = GPU time). TFLOP/s = FLOPs per call x "
        "calls / GPU time. Bound: the roofline side (intensity against peak FLOP/s / peak bandwidth). "
        "FLOPs and bytes per call, and what an estimate assumed: --format json. Definitions: docs/efficiency.md."
    ]
    if result.why_nothing_sized:
        notes.insert(0, result.why_nothing_sized)
    notes.extend(f"warning: {w}" for w in result.warnings)
    return Document(
        title="Efficiency per operator" + (" and input shape" if by_shape else ""),
        data=efficiency_data(result),
        facts=tuple(facts),
        tables=tuple(tables),
        notes=tuple(notes),
    )
