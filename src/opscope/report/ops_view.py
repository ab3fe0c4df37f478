"""`OpStats` -> `Document` (and the stable `opscope.ops/1` JSON payload)."""

from __future__ import annotations

from opscope.analysis.attribution.ops import SELF, OpRow, OpStats
from opscope.report.document import COUNT, INT, MS, NAME, PCT, TEXT, Column, Document, Table
from opscope.report.linking_view import link_data, link_notes, us
from opscope.report.numbers import shape_text

SCHEMA = "opscope.ops/1"


def _rows_data(rows_in: tuple[OpRow, ...], by_shape: bool) -> list[dict[str, object]]:
    rows = []
    for r in rows_in:
        row: dict[str, object] = {"name": r.name, "kind": r.kind}
        if by_shape:
            row["input_dims"] = r.input_dims
        row.update(
            {
                "calls": r.calls,
                "cpu_total_us": us(r.cpu_total_ns),
                "cpu_self_us": us(r.cpu_self_ns),
                "gpu_total_us": us(r.gpu_total_ns),
                "gpu_self_us": us(r.gpu_self_ns),
                "kernels": r.kernels,
                "self_kernels": r.self_kernels,
                "kernels_per_call": round(r.kernels_per_call, 4),
                "gpu_share": round(r.gpu_share, 6),
            }
        )
        rows.append(row)
    return rows


def ops_data(result: OpStats) -> dict[str, object]:
    by_shape = result.options.by_shape
    return {
        "schema": SCHEMA,
        "trace": {"path": result.path},
        "by_shape": by_shape,
        "steps": result.options.steps,
        "totals": {
            "gpu_time_us": us(result.gpu_time_ns),
            "attributed_us": us(result.attributed_ns),
            "rows": result.total_rows,
        },
        "unattributed_share": round(result.unattributed_share, 6),
        "sort": result.options.sort,
        "rows": _rows_data(result.rows, by_shape),
        "cpu_rows": _rows_data(result.cpu_rows, by_shape),  # the most CPU self time, most first
        "linking": link_data(result.link),
        "warnings": list(result.warnings),
    }


def ops_document(result: OpStats) -> Document:
    by_shape = result.options.by_shape
    columns = [Column("name", "Op", NAME), Column("kind", "Kind", TEXT, drop=2)]
    if by_shape:  # the terminal wraps shapes between tensors; CSV keeps the trace's exact text
        columns.append(Column("input_dims_text", "Input dims", TEXT, wrap=True))
    columns += [
        Column("calls", "Calls", INT),
        Column("cpu_total", "CPU total ms", MS, drop=3),
        Column("cpu_self", "CPU self ms", MS),
        Column("gpu_total", "GPU total ms", MS),
        Column("gpu_self", "GPU self ms", MS),
        Column("kernels_per_call", "Kernels/call (mean)", COUNT, drop=1),
        Column("gpu_share", "GPU share", PCT),
    ]

    rows = _cells(result.rows)
    hidden = result.total_rows - len(result.rows)
    footer = (f"{hidden:,} more rows (--top 0 shows all)",) if hidden > 0 else ()
    facts = (
        ("trace", result.path),
        (
            "GPU time",
            f"{result.gpu_time_ns / 1e6:,.3f} ms, {result.attributed_ns / 1e6:,.3f} ms launched inside ops",
        ),
        ("unattributed", f"{result.unattributed_share * 100:.1f}% of GPU time"),
    ) + ((("steps", result.options.steps),) if result.options.steps else ())
    notes = link_notes(result.link, result.unattributed_share)
    notes.append(
        "GPU total: kernels launched by the op or any op inside it; GPU self: launched directly by it. "
        "GPU share = GPU total / all GPU time, so shares of nested ops overlap."
    )
    notes.append(
        "Ranked by GPU self time, then CPU self time (wrappers such as ProfilerStep#* that only enclose "
        "other ops rank low); --sort total ranks by GPU total."
        if result.options.sort == SELF
        else "Ranked by GPU total time, then CPU total: wrappers (ProfilerStep#*, autograd) come first."
    )
    notes.extend(f"warning: {w}" for w in result.warnings)
    return Document(
        title="GPU time by operator" + (" and input shape" if by_shape else ""),
        data=ops_data(result),
        facts=facts,
        tables=(
            Table(
                "ops",
                "",
                tuple(columns),
                rows,
                footer,
                csv_columns=tuple(
                    Column("input_dims", c.label, TEXT) if c.key == "input_dims_text" else c for c in columns
                ),
            ),
            *_cpu_table(result, columns),
        ),
        notes=tuple(notes),
    )


def _cells(rows_in: tuple[OpRow, ...]) -> tuple[dict[str, object], ...]:
    return tuple(
        {
            "name": r.name,
            "kind": r.kind,
            "input_dims": r.input_dims,
            "input_dims_text": shape_text(r.input_dims),
            "calls": r.calls,
            "cpu_total": r.cpu_total_ns,
            "cpu_self": r.cpu_self_ns,
            "gpu_total": r.gpu_total_ns,
            "gpu_self": r.gpu_self_ns,
            "kernels_per_call": r.kernels_per_call,
            "gpu_share": r.gpu_share,
        }
        for r in rows_in
    )


def _cpu_table(result: OpStats, columns: list[Column]) -> tuple[Table, ...]:
    """Where the CPU time goes (a DataLoader, Python overhead), whatever GPU time those ops launched."""
    if not result.cpu_rows:
        return ()
    rows = _cells(result.cpu_rows)
    return (Table("cpu_ops", "Most CPU self time", tuple(columns), rows),)
