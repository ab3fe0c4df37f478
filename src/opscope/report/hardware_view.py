"""`diff` across hardware: the operators matched between two GPUs, as a table, its JSON and the verdict lines.
Lays out a computed `HardwareDiff` (analysis/compare/hardware.py); computes nothing."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from opscope.analysis.compare.hardware import HardwareDiff, HardwareRow, HardwareTable, SideFigures
from opscope.report.document import FLOAT, MS, NAME, TEXT, Column, Document, Table


def _side(figures: SideFigures | None) -> dict[str, Any] | None:
    if figures is None:
        return None
    return {
        "gpu_time_us": round(figures.gpu_ns / 1e3, 3),
        "kernels": figures.kernels,
        "calls": figures.calls,
        "library": figures.library,
        "kernel_arch": figures.kernel_arch,
        "align1": figures.align1,
        "achieved_tflops": figures.tflops,
        "achieved_tbps": figures.tbps,
        "pct_of_peak": figures.pct_of_peak,
        "bound": figures.bound,
    }


def _row_data(row: HardwareRow) -> dict[str, Any]:
    return {
        "op": row.key,
        "shape": row.shape,
        "match": row.match or None,
        "base": _side(row.base),
        "new": _side(row.new),
        "delta_us": round(row.delta_ns / 1e3, 3),
        "ratio": None if row.ratio is None else round(row.ratio, 6),
    }


def hardware_data(hw: HardwareDiff, top: int) -> dict[str, Any]:
    rows = hw.rows if top <= 0 else hw.rows[:top]
    return {
        "base_device": hw.base_device,
        "new_device": hw.new_device,
        "base_gpu_time_us": round(hw.base_gpu_ns / 1e3, 3),
        "new_gpu_time_us": round(hw.new_gpu_ns / 1e3, 3),
        "coverage_base": round(hw.coverage_base, 6),
        "coverage_new": round(hw.coverage_new, 6),
        "rows": [_row_data(r) for r in rows],
        "rows_total": len(hw.rows),
        "verdict": list(hw.verdict),
        "library_notes": list(hw.library_notes),
        "projections": list(hw.projections),
    }


def _pct(figures: SideFigures | None) -> float | None:
    return None if figures is None or figures.pct_of_peak is None else round(figures.pct_of_peak, 1)


def with_hardware(doc: Document, hw: HardwareDiff, top: int) -> Document:
    """`doc` (diff's document) with the operators matched across the two GPUs: a table, `hardware` in its data,
    the verdict and the library notes among its notes."""
    shown = hw.rows if top <= 0 else hw.rows[:top]
    table = Table(
        "hardware",
        f"Operators across hardware (BASE: {hw.base_device}; NEW: {hw.new_device})",
        (
            Column("op", "Op", NAME),
            Column("shape", "Shape", NAME, drop=3),
            Column("match", "Matched by", TEXT, drop=2),
            Column("base", "BASE ms", MS),
            Column("new", "NEW ms", MS),
            Column("ratio", "NEW/BASE", FLOAT),
            Column("base_lib", "BASE kernels", NAME, drop=1),
            Column("new_lib", "NEW kernels", NAME, drop=1),
            Column("base_pct", "BASE %pk", FLOAT, drop=4),
            Column("new_pct", "NEW %pk", FLOAT, drop=4),
        ),
        tuple(
            {
                "op": r.key,
                "shape": r.shape or "",
                "match": r.match or "one side only",
                "base": r.base.gpu_ns if r.base else None,
                "new": r.new.gpu_ns if r.new else None,
                "ratio": None if r.ratio is None else round(r.ratio, 2),
                "base_lib": (r.base.library or "") if r.base else "",
                "new_lib": (r.new.library or "") if r.new else "",
                "base_pct": _pct(r.base),
                "new_pct": _pct(r.new),
            }
            for r in shown
        ),
        (
            f"matched: {100 * hw.coverage_base:.1f}% of BASE's GPU time, {100 * hw.coverage_new:.1f}% of NEW's; "
            "the largest change first"
            + (
                f"; {len(hw.rows) - len(shown):,} more rows (--top 0 shows all)"
                if len(hw.rows) > len(shown)
                else ""
            ),
        ),
    )
    notes = (*hw.verdict, *hw.library_notes, *hw.projections)
    return replace(
        doc,
        data={**doc.data, "hardware": hardware_data(hw, top)},
        tables=(*doc.tables, table),
        notes=doc.notes + notes,
    )


COMPARE_SCHEMA = "opscope.compare/1"


def _letter(i: int) -> str:
    return chr(ord("A") + i) if i < 26 else f"T{i + 1}"


def compare_data(table: HardwareTable, top: int) -> dict[str, Any]:
    rows = table.rows if top <= 0 else table.rows[:top]
    return {
        "schema": COMPARE_SCHEMA,
        "traces": [
            {
                "label": _letter(i),
                "path": path,
                "device": device,
                "gpu_time_us": round(gpu / 1e3, 3),
                "coverage": round(cover, 6),
            }
            for i, (path, device, gpu, cover) in enumerate(
                zip(table.paths, table.devices, table.gpu_ns, table.coverage, strict=True)
            )
        ],
        "rows": [
            {
                "op": r.key,
                "shape": r.shape,
                "match": r.match or None,
                "sides": [_side(s) for s in r.sides],
                "fastest": None if r.fastest is None else _letter(r.fastest),
            }
            for r in rows
        ],
        "rows_total": len(table.rows),
    }


def compare_document(table: HardwareTable, top: int) -> Document:
    """`opscope compare`: one column of GPU time per trace, the fastest named, each trace's coverage."""
    shown = table.rows if top <= 0 else table.rows[:top]
    n = len(table.paths)
    columns = [
        Column("op", "Op", NAME),
        Column("shape", "Shape", NAME, drop=2),
        Column("match", "Matched by", TEXT, drop=1),
        *(Column(f"t{i}", f"{_letter(i)} ms", MS) for i in range(n)),
        Column("fastest", "Fastest", TEXT),
    ]
    rows = tuple(
        {
            "op": r.key,
            "shape": r.shape or "",
            "match": r.match or "not on every trace",
            **{f"t{i}": (s.gpu_ns if s else None) for i, s in enumerate(r.sides)},
            "fastest": "" if r.fastest is None else _letter(r.fastest),
        }
        for r in shown
    )
    facts = tuple(
        (
            _letter(i),
            f"{path} ({device}): {gpu / 1e6:,.3f} ms of GPU time, {100 * cover:.1f}% of it matched on every trace",
        )
        for i, (path, device, gpu, cover) in enumerate(
            zip(table.paths, table.devices, table.gpu_ns, table.coverage, strict=True)
        )
    )
    footer = (
        (f"{len(table.rows) - len(shown):,} more rows (--top 0 shows all)",)
        if len(table.rows) > len(shown)
        else ()
    )
    return Document(
        title="The same work on each trace: operators and shapes, then kernel categories",
        data=compare_data(table, top),
        facts=facts,
        tables=(Table("compare", "", tuple(columns), rows, footer),),
        notes=(
            "Rows: operator and input shapes found on every trace, then what is left by the category of the "
            "kernels carrying its time ('(other work): gemm'); GPU time of the kernels each operator launched "
            "itself (ops --by-shape's GPU self). Definitions: docs/compare.md (Across hardware).",
        ),
    )
