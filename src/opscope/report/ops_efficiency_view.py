"""`opscope ops --efficiency`: the ops document with the efficiency columns added (TFLOP/s, % of peak compute,
TB/s, % of peak bandwidth, bound), matched on (op, Input Dims) with --by-shape, on the op name without. An op
with GPU time that the efficiency table does not list (no model, or nested inside a sized op) shows the figures
of its nearest enclosing sized op, named in the `via` column (`aten::addmm` via `aten::linear`: the same
kernels, sized by the outer op), when all its calls have the same one (`Efficiency.inherited`); otherwise its
cells are empty."""

from __future__ import annotations

import dataclasses
from typing import Any

from opscope.analysis.efficiency.table import Efficiency, EfficiencyRow
from opscope.report.document import FLOAT, TEXT, Column, Document
from opscope.report.efficiency_view import efficiency_cells, row_data

COLUMNS = (
    Column("achieved_tflops", "TFLOP/s", FLOAT),
    Column("pct_of_peak_compute", "%pk", FLOAT),
    Column("achieved_tbps", "TB/s", FLOAT),
    Column("pct_of_peak_bandwidth", "%BW", FLOAT),
    Column("bound", "bound", TEXT),
    Column("via", "via", TEXT),
)
Key = tuple[str, "str | None"]


def _match(
    row: dict[str, Any], by_shape: bool, found: dict[Key, EfficiencyRow], via: dict[Key, Key]
) -> tuple[EfficiencyRow | None, bool]:
    """The efficiency row of an ops row: its own, else (with GPU time) its nearest sized ancestor's; and
    whether it is inherited."""
    key = (row["name"], row.get("input_dims") if by_shape else None)
    if key in found:
        return found[key], False
    up = via.get(key)
    if up is None or not (row.get("gpu_total_us") or row.get("gpu_total")):  # data rows: us, table rows: ns
        return None, False
    return found.get(up), up in found


def with_efficiency(doc: Document, result: Efficiency) -> Document:
    by_shape = result.options.by_shape
    found: dict[Key, EfficiencyRow] = {(r.op, r.shape if by_shape else None): r for r in result.rows}
    via = {(i.op, i.shape): (i.via_op, i.via_shape) for i in result.inherited}
    table = doc.tables[0]
    rows = []
    for row in table.rows:
        match, inherited = _match(row, by_shape, found, via)
        cells = {**efficiency_cells(match), "via": match.op if inherited else None} if match else {}
        rows.append({**row, **{c.key: cells.get(c.key) for c in COLUMNS}})
    data_rows = []
    for row in doc.data["rows"]:
        match, inherited = _match(row, by_shape, found, via)
        data_rows.append(
            {
                **row,
                "efficiency": row_data(match) if match else None,
                "efficiency_via": {"op": match.op, "shape": match.shape} if match and inherited else None,
            }
        )
    peaks = result.peaks
    data = {
        **doc.data,
        "rows": data_rows,
        "efficiency_device": {
            "name": result.device,
            "peaks": peaks.name if peaks else None,
            "source": peaks.source if peaks else None,
        },
    }
    tables = (dataclasses.replace(table, columns=table.columns + COLUMNS, rows=tuple(rows)), *doc.tables[1:])
    notes = (
        *doc.notes,
        "Efficiency columns: as in `opscope efficiency` (docs/efficiency.md); a `via` op means the figures are "
        "those of the sized op enclosing this one (same kernels); empty where no sized op covers the op.",
    )
    return dataclasses.replace(doc, data=data, tables=tables, notes=notes)
