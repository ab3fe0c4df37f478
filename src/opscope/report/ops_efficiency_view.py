"""`opscope ops --efficiency`: the ops document with the efficiency columns added (TFLOP/s, % of peak compute,
TB/s, % of peak bandwidth, bound), matched on (op, Input Dims) with --by-shape, on the op name without. Ops the
efficiency table does not list (unsized, or nested inside a sized op) get empty cells."""

from __future__ import annotations

import dataclasses

from opscope.analysis.efficiency.table import Efficiency
from opscope.report.document import FLOAT, TEXT, Column, Document
from opscope.report.efficiency_view import efficiency_cells, row_data

COLUMNS = (
    Column("achieved_tflops", "TFLOP/s", FLOAT),
    Column("pct_of_peak_compute", "%pk", FLOAT),
    Column("achieved_tbps", "TB/s", FLOAT),
    Column("pct_of_peak_bandwidth", "%BW", FLOAT),
    Column("bound", "bound", TEXT),
)


def with_efficiency(doc: Document, result: Efficiency) -> Document:
    by_shape = result.options.by_shape
    found = {(r.op, r.shape if by_shape else None): r for r in result.rows}
    table = doc.tables[0]
    rows = []
    for row in table.rows:
        match = found.get((row["name"], row.get("input_dims") if by_shape else None))
        cells = efficiency_cells(match) if match else {}
        rows.append({**row, **{c.key: cells.get(c.key) for c in COLUMNS}})
    data_rows = []
    for row in doc.data["rows"]:
        match = found.get((row["name"], row.get("input_dims") if by_shape else None))
        data_rows.append({**row, "efficiency": row_data(match) if match else None})
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
        "Efficiency columns: as in `opscope efficiency` (docs/efficiency.md); empty where the "
        "model cannot size the op or the op runs inside a sized one.",
    )
    return dataclasses.replace(doc, data=data, tables=tables, notes=notes)
