"""`TraceDiff` (+ gate results) -> `Document`, and the stable `opscope.diff/1` JSON payload.

Times are microseconds in JSON and CSV, per step when the diff is per step. The markdown rendering of this
document is meant to be pasted into a pull request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from opscope.analysis.compare.diff import NS, DiffRow, Figure, Side, TraceDiff
from opscope.analysis.compare.gates import GateResult, MinDelta
from opscope.report import names
from opscope.report.document import COUNT, FLOAT, INT, MS, NAME, TEXT, US, Column, Document, Table

CPU_ROWS = 10  # rows of the terminal's CPU self time table (JSON: --top)
SCHEMA = "opscope.diff/1"


@dataclass(frozen=True)
class DiffView:
    """What to show: `top` rows per table (0 = all) and the noise threshold."""

    top: int = 30
    min_delta: MinDelta | None = None
    means: bool = True  # mean-per-call columns in the tables (JSON always has them)


def _us(ns: float | None) -> float | None:
    return None if ns is None else round(ns / 1e3, 3)


def _rounded(value: float | None, digits: int = 6) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, digits)


def _time_text(ns: float | None) -> str:
    if ns is None:
        return "—"
    if abs(ns) >= 1e6:
        return f"{ns / 1e6:,.3f} ms"
    return f"{ns / 1e3:,.1f} us"


def _figure_cells(figure: Figure) -> dict[str, str]:
    if figure.unit == NS:
        before, after = _time_text(figure.before), _time_text(figure.after)
        pct = figure.change_pct
        change = "—" if pct is None else f"{pct:+.1f}%"
    else:
        before = "—" if figure.before is None else f"{figure.before * 100:.1f}%"
        after = "—" if figure.after is None else f"{figure.after * 100:.1f}%"
        change = "—" if figure.delta is None else f"{figure.delta * 100:+.1f} pp"
    return {"figure": figure.label, "before": before, "after": after, "change": change}


def _figure_data(figure: Figure) -> dict[str, Any]:
    scale = 1e3 if figure.unit == NS else 1.0
    value = (lambda v: None if v is None else round(v / scale, 3)) if figure.unit == NS else _rounded
    return {
        "key": figure.key,
        "label": figure.label,
        "unit": "us" if figure.unit == NS else "share",
        "before": value(figure.before),
        "after": value(figure.after),
        "delta": value(figure.delta),
        "change_pct": _rounded(figure.change_pct, 3),
    }


CHART_NAME_WIDTH = 50  # characters of a kernel name on a chart axis


def _row_data(row: DiffRow, with_shape: bool) -> dict[str, Any]:
    data: dict[str, Any] = {"name": row.name, "kind": row.kind}
    if with_shape:
        data["shape"] = row.shape
    data.update(
        {
            "status": row.status,
            "calls_before": _rounded(row.calls_before),
            "calls_after": _rounded(row.calls_after),
            "total_before_us": _us(row.total_before_ns),
            "total_after_us": _us(row.total_after_ns),
            "mean_before_us": _us(row.mean_before_ns),
            "mean_after_us": _us(row.mean_after_ns),
            "delta_us": _us(row.delta_ns),
            "ratio": _rounded(row.ratio),
        }
    )
    if row.cpu_before_ns is not None:
        data.update(
            {"cpu_total_before_us": _us(row.cpu_before_ns), "cpu_total_after_us": _us(row.cpu_after_ns)}
        )
    return data


def _gate_data(result: GateResult, per_step: bool) -> dict[str, Any]:
    return {
        "gate": result.gate.target,
        "pattern": result.gate.pattern,
        "limit_pct": result.gate.limit_pct,
        "before_us": _us(result.before_ns),
        "after_us": _us(result.after_ns),
        "change_pct": _rounded(result.change_pct, 3),
        "new": result.change_pct == math.inf,
        "matched": result.matched,
        "tripped": result.tripped,
        "reason": result.reason(per_step),
    }


def _reference_ns(diff: TraceDiff) -> float:
    return diff.figure("time").before or 0.0


def _shown(
    rows: tuple[DiffRow, ...], diff: TraceDiff, view: DiffView
) -> tuple[tuple[DiffRow, ...], int, float]:
    kept = view.min_delta.keep(rows, _reference_ns(diff)) if view.min_delta is not None else rows
    shown = kept if view.top <= 0 else kept[: view.top]
    kept_set = set(shown)
    hidden = [r for r in rows if r not in kept_set]
    return shown, len(hidden), sum(r.delta_ns for r in hidden)


def diff_data(diff: TraceDiff, gates: tuple[GateResult, ...], view: DiffView) -> dict[str, Any]:
    by_shape = diff.options.by_shape

    def table(rows: tuple[DiffRow, ...], shape: bool) -> dict[str, Any]:
        shown, hidden, hidden_delta = _shown(rows, diff, view)
        out = [_row_data(r, shape) for r in shown]
        for row, short in zip(
            out, names.shorten_all([r["name"] for r in out], CHART_NAME_WIDTH), strict=True
        ):
            row["short_name"] = short  # chart labels: the terminal's shortening (report/names.py)
        return {
            "rows": out,
            "rows_total": len(rows),
            "rows_hidden": hidden,
            "hidden_delta_us": _us(hidden_delta),
        }

    md = view.min_delta
    return {
        "schema": SCHEMA,
        "base": {"path": diff.base.path, "devices": list(diff.base.devices), "steps": diff.base.steps},
        "new": {"path": diff.new.path, "devices": list(diff.new.devices), "steps": diff.new.steps},
        "per_step": diff.per_step,
        "headline": [_figure_data(f) for f in diff.figures],
        "categories": [
            {"category": name, "before_us": _us(b), "after_us": _us(a), "delta_us": _us(a - b)}
            for name, b, a in diff.categories
        ],
        "kernels": table(diff.kernels, False),
        "ops": {"metric": diff.op_metric, **table(diff.ops, by_shape)},
        "cpu_ops": {"metric": "cpu_self", **table(diff.cpu_ops, by_shape)},  # CPU-side causes, next to GPU
        "min_delta": None if md is None else {"us": _us(md.ns), "pct": md.pct},
        "gates": [_gate_data(g, diff.per_step) for g in gates],
        "passed": not any(g.tripped for g in gates),
        "warnings": list(diff.warnings),
        "mismatches": list(
            diff.mismatches
        ),  # the warnings that change what the comparison means, shown first
    }


def _row_cells(row: DiffRow) -> dict[str, Any]:
    return {
        "name": row.name,
        "kind": row.kind,
        "shape": row.shape or "",
        "status": row.status,
        "calls_before": row.calls_before,
        "calls_after": row.calls_after,
        "total_before": row.total_before_ns,
        "total_after": row.total_after_ns,
        "mean_before": row.mean_before_ns,
        "mean_after": row.mean_after_ns,
        "delta": row.delta_ns,
        "ratio": row.ratio,
    }


def _row_columns(shape: bool, per_step: bool, means: bool = True) -> tuple[Column, ...]:
    calls = COUNT if per_step else INT
    label = "Calls/step" if per_step else "Calls"  # a mean over the steps: the title says so
    mean_columns = (Column("mean_before", "Mean B us", US), Column("mean_after", "Mean N us", US))
    return (
        Column("name", "Name", NAME),
        *((Column("shape", "Shape", TEXT),) if shape else ()),
        Column("status", "Status", TEXT),
        Column("calls_before", f"{label} B", calls),
        Column("calls_after", f"{label} N", calls),
        Column("total_before", "Total B ms", MS),
        Column("total_after", "Total N ms", MS),
        Column("delta", "Delta ms", MS),
        Column("ratio", "Ratio", FLOAT),
        *(mean_columns if means else ()),
    )


def _rows_table(
    name: str, title: str, rows: tuple[DiffRow, ...], diff: TraceDiff, view: DiffView, shape: bool
) -> Table:
    shown, hidden, hidden_delta = _shown(rows, diff, view)
    footer: tuple[str, ...] = ()
    if hidden:
        footer = (
            f"{hidden:,} more rows not shown (--top / --min-delta); their net delta: "
            f"{_time_text(hidden_delta)}",
        )
    title = f"{title}, {'means per step, ' if diff.per_step else ''}B = BASE, N = NEW"
    return Table(
        name=name,
        title=title,
        columns=_row_columns(shape, diff.per_step, view.means),
        rows=tuple(_row_cells(r) for r in shown),
        footer=footer,
    )


def _side_text(side: Side) -> str:
    steps = "whole trace" if side.steps == 0 else f"{side.steps} step{'s' if side.steps > 1 else ''}"
    return f"{side.path} ({steps}; {', '.join(side.devices) or 'no GPU activity'})"


def diff_document(
    diff: TraceDiff,
    gates: tuple[GateResult, ...] = (),
    view: DiffView | None = None,
    rows_first: bool = False,
) -> Document:
    """The diff as a document; `rows_first` puts kernels and operators in one first table (for CSV)."""
    v = view or DiffView()
    metric = "GPU time of the kernels launched inside" if diff.op_metric == "gpu" else "inclusive CPU time"
    kernels = _rows_table("kernels", "Kernels", diff.kernels, diff, v, False)
    ops = _rows_table("ops", f"Operators ({metric})", diff.ops, diff, v, diff.options.by_shape)
    headline = Table(
        name="headline",
        title="Headline",
        columns=(
            Column("figure", "Figure", TEXT, wrap=True),
            Column("before", "Before", TEXT),
            Column("after", "After", TEXT),
            Column("change", "Change", TEXT),
        ),
        rows=tuple(_figure_cells(f) for f in diff.figures),
    )
    tables = [headline, kernels, ops]
    if diff.cpu_ops:  # CPU-side causes (a DataLoader, Python overhead) that GPU-ranked operators would hide
        cpu_view = replace(v, top=min(v.top or CPU_ROWS, CPU_ROWS))
        tables.append(
            _rows_table(
                "cpu_ops", "Operators by CPU self time", diff.cpu_ops, diff, cpu_view, diff.options.by_shape
            )
        )
    if gates:
        tables.append(
            Table(
                name="gates",
                title="Regression gates",
                columns=(Column("result", "Result", TEXT), Column("gate", "Gate", TEXT)),
                rows=tuple(
                    {"result": "FAIL" if g.tripped else "pass", "gate": g.reason(diff.per_step)}
                    for g in gates
                ),
            )
        )
    if rows_first:
        both = (
            *(dict(_row_cells(r), table="kernel") for r in _shown(diff.kernels, diff, v)[0]),
            *(dict(_row_cells(r), table="op") for r in _shown(diff.ops, diff, v)[0]),
        )
        columns = (Column("table", "table", TEXT), *_row_columns(True, diff.per_step))
        tables = [Table(name="rows", title="", columns=columns, rows=both)]
    scope = "per step (totals divided by each trace's step count)" if diff.per_step else "whole traces"
    facts = (("BASE", _side_text(diff.base)), ("NEW", _side_text(diff.new)), ("compared", scope))
    notes = [f"warning: {w}" for w in diff.warnings if w not in diff.mismatches]
    if not diff.ops:
        notes.append("No CPU operators in either trace: the operator table is empty.")
    return Document(
        title="opscope diff: NEW vs BASE",
        data=diff_data(diff, gates, v),
        facts=facts,
        tables=tuple(tables),
        notes=tuple(notes),
        alerts=diff.mismatches,
    )
