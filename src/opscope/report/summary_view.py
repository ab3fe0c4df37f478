"""`KernelSummary` -> `Document` (and the stable `opscope.summary/1` JSON payload)."""

from __future__ import annotations

from opscope.analysis.kernels.summary import KernelSummary
from opscope.report.document import INT, LAST_RESORT, MS, NAME, PCT, TEXT, US, Column, Document, Table
from opscope.report.numbers import plural

SCHEMA = "opscope.summary/1"


def _us(ns: float) -> float:
    return round(ns / 1e3, 3)


def summary_data(result: KernelSummary) -> dict[str, object]:
    rows = [
        {
            "name": r.name,
            "kind": r.kind,
            "calls": r.calls,
            "total_us": _us(r.total_ns),
            "avg_us": _us(r.avg_ns),
            "min_us": _us(r.min_ns),
            "max_us": _us(r.max_ns),
            "median_us": _us(r.median_ns),
            "share": round(r.share, 6),
            "stddev_us": _us(r.stddev_ns),
            "raw_name": r.raw_name if r.raw_name is not None else r.name,
        }
        for r in result.rows
    ]
    rest = None
    if result.rest is not None:
        rest = {
            "rows": result.rest.rows,
            "calls": result.rest.calls,
            "total_us": _us(result.rest.total_ns),
            "share": round(result.rest.share, 6),
        }
    return {
        "schema": SCHEMA,
        "trace": {
            "path": result.path,
            "devices": list(result.devices),
            "events": result.events,
            "kernels": result.kernels,
        },
        "totals": {"gpu_time_us": _us(result.gpu_time_ns), "calls": result.gpu_calls},
        "selected": {
            "total_us": _us(result.selected_total_ns),
            "calls": result.selected_calls,
            "rows": result.selected_rows,
        },
        "rows": rows,
        "rest": rest,
        "warnings": list(result.warnings),
        "traces": list(result.traces),  # several traces merged into one table: their paths (else empty)
        "median_estimated": result.median_estimated,  # medians from a merged sketch (1% relative accuracy)
        "steps": result.options.steps,  # the --steps spec, or null (the whole trace)
    }


def _rest_line(result: KernelSummary) -> str:
    rest = result.rest
    if rest is None:
        return ""
    kinds = set(result.options.kinds)
    noun = "kernels" if kinds == {"kernel"} else "rows"
    return (
        f"{plural(rest.rows, 'more ' + noun.removesuffix('s'))}: {rest.total_ns / 1e6:,.3f} ms, "
        f"{rest.share * 100:.1f}% ({plural(rest.calls, 'call')})"
    )


def summary_document(result: KernelSummary) -> Document:
    columns = (
        Column("name", "Name", NAME),
        Column("kind", "Kind", TEXT),
        Column("calls", "Calls", INT),
        Column("total_ns", "Total ms", MS),
        Column("avg_ns", "Mean us", US),
        Column("min_ns", "Min us", US, drop=LAST_RESORT + 2),
        Column("max_ns", "Max us", US, drop=LAST_RESORT + 3),
        Column("median_ns", "Median us", US, drop=LAST_RESORT + 1),
        Column("stddev_ns", "StdDev us", US, drop=LAST_RESORT + 0),
        Column("share", "Share", PCT),
    )
    rows = tuple(
        {
            "name": r.name,
            "kind": r.kind,
            "calls": r.calls,
            "total_ns": r.total_ns,
            "avg_ns": r.avg_ns,
            "min_ns": r.min_ns,
            "max_ns": r.max_ns,
            "median_ns": r.median_ns,
            "stddev_ns": r.stddev_ns,
            "share": r.share,
        }
        for r in result.rows
    )
    footer = tuple(line for line in (_rest_line(result),) if line)
    devices = ", ".join(result.devices) if result.devices else "none recorded"
    facts = (
        ("traces" if result.traces else "trace", result.path),
        ("devices", devices),
        (
            "GPU time (sum of activity durations)",
            f"{result.gpu_time_ns / 1e6:,.3f} ms in {plural(result.gpu_calls, 'call')}",
        ),
        ("events", f"{result.events:,} ({plural(result.kernels, 'kernel')})"),
    ) + ((("steps", result.options.steps),) if result.options.steps else ())
    notes = []
    if result.traces:
        notes.append(
            f"{len(result.traces)} traces merged into one table; medians are sketch estimates "
            "(1% relative accuracy), every other column is exact."
        )
    if result.gpu_calls == 0 and result.gpu_ranges:
        notes.append(
            f"No GPU kernels, memcpys or memsets in this trace, but {result.gpu_ranges:,} ranges on the GPU "
            "(gpu_user_annotation, e.g. CUPTI's range profiler): not a CPU-only capture; ranges mark "
            "device work, they are not counted as GPU time."
        )
    elif result.gpu_calls == 0 and not any("look like device work" in w for w in result.warnings):
        notes.append("No GPU kernels, memcpys or memsets in this trace (a CPU-only capture?).")
    notes.extend(f"warning: {w}" for w in result.warnings)
    return Document(
        title="GPU time by kernel",
        data=summary_data(result),
        facts=facts,
        tables=(Table(name="summary", title="", columns=columns, rows=rows, footer=footer),),
        notes=tuple(notes),
    )
