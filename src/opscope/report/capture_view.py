"""Capture results -> `Document`: the summary of a trace just captured (kernel table, or the CPU operator table
for a CPU-only capture), `opscope run`'s status, and the tracing-overhead report."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from opscope.analysis.attribution.cpu_ops import CpuOpTable
from opscope.capture.sampling import overhead_summary
from opscope.capture.timing import Spread
from opscope.report.document import INT, MS, NAME, PCT, US, Column, Document, Table
from opscope.report.render import RenderOptions, render
from opscope.report.summary_view import summary_data, summary_document

if TYPE_CHECKING:
    from opscope.capture.demo import DemoResult
    from opscope.capture.overhead import OverheadResult
    from opscope.capture.runner import RunResult
    from opscope.capture.summary import CaptureSummary

CAPTURE_SCHEMA = "opscope.capture/1"
RUN_SCHEMA = "opscope.run/1"
OVERHEAD_SCHEMA = "opscope.overhead/1"
CPU_ONLY_NOTE = (
    "No GPU kernels in this trace: it ran on the CPU, so the rows are CPU operators (self time), "
    "not GPU kernels."
)


def _us(ns: float) -> float:
    return round(ns / 1e3, 3)


def cpu_ops_data(table: CpuOpTable) -> dict[str, Any]:
    rest = None
    if table.rest is not None:
        rest = {
            "rows": table.rest.rows,
            "calls": table.rest.calls,
            "self_us": _us(table.rest.self_ns),
            "share": round(table.rest.share, 6),
        }
    return {
        "ops": table.ops,
        "threads": table.threads,
        "self_total_us": _us(table.self_total_ns),
        "rows": [
            {
                "name": r.name,
                "calls": r.calls,
                "total_us": _us(r.total_ns),
                "self_us": _us(r.self_ns),
                "avg_us": _us(r.avg_ns),
                "share": round(r.share, 6),
            }
            for r in table.rows
        ],
        "rest": rest,
    }


def cpu_ops_table(table: CpuOpTable) -> Table:
    columns = (
        Column("name", "Operator", NAME),
        Column("calls", "Calls", INT),
        Column("total_ns", "Total ms", MS),
        Column("self_ns", "Self ms", MS),
        Column("avg_ns", "Mean us", US),
        Column("share", "Self share", PCT),
    )
    rows = tuple(
        {
            "name": r.name,
            "calls": r.calls,
            "total_ns": r.total_ns,
            "self_ns": r.self_ns,
            "avg_ns": r.avg_ns,
            "share": r.share,
        }
        for r in table.rows
    )
    footer: tuple[str, ...] = ()
    if table.rest is not None:
        footer = (
            f"{table.rest.rows:,} more operators: {table.rest.self_ns / 1e6:,.3f} ms self, "
            f"{table.rest.share * 100:.1f}% ({table.rest.calls:,} calls)",
        )
    return Table(name="cpu_ops", title="", columns=columns, rows=rows, footer=footer)


def capture_data(result: CaptureSummary) -> dict[str, Any]:
    return {
        "schema": CAPTURE_SCHEMA,
        "trace": result.trace_path,
        "device": result.device,
        "steps": result.steps,
        "gpu_activity": result.has_gpu_activity,
        "summary": summary_data(result.kernels),
        "cpu_ops": cpu_ops_data(result.cpu_ops),
    }


def capture_document(result: CaptureSummary) -> Document:
    """The kernel table (as `opscope summary`) when the trace has GPU activity, else the CPU operator table."""
    facts: tuple[tuple[str, str], ...] = (
        ("device", result.device),
        ("profiled steps", f"{result.steps:,} (step markers)"),
    )
    if result.has_gpu_activity:
        base = summary_document(result.kernels)
        return replace(base, data=capture_data(result), facts=facts + base.facts)
    table = result.cpu_ops
    facts += (
        ("trace", result.trace_path),
        (
            "operator time (self, summed)",
            f"{table.self_total_ns / 1e6:,.3f} ms in {table.ops:,} ops on {table.threads:,} thread(s)",
        ),
    )
    warnings = tuple(f"warning: {w}" for w in result.kernels.warnings)
    return Document(
        title="CPU time by operator",
        data=capture_data(result),
        facts=facts,
        tables=(cpu_ops_table(table),),
        notes=(CPU_ONLY_NOTE, *warnings),
    )


def capture_text(result: CaptureSummary) -> str:
    """`str(prof.summary())`: the capture document as a 100-column terminal table (wired in by the top level)."""
    return render(capture_document(result), "table", RenderOptions(width=100))


_STEP_SOURCES = {"user": "opscope.step() calls", "optimizer": "torch.optim optimizer steps", None: "none"}


def run_document(
    result: RunResult, summary: CaptureSummary | None, overhead: OverheadResult | None = None
) -> Document:
    """`opscope run`: the capture summary plus what ran, how steps were marked, how it ended, and (with
    --overhead) the tracing-overhead table first."""
    status = "completed" if result.exit_status == 0 else f"{result.error} (exit status {result.exit_status})"
    facts: tuple[tuple[str, str], ...] = (
        ("script", " ".join(result.command.argv)),
        ("run", f"{status} in {result.seconds:,.2f} s"),
        ("step marks", f"{result.steps:,} from {_STEP_SOURCES.get(result.step_source, 'none')}"),
    )
    data: dict[str, Any] = {
        "schema": RUN_SCHEMA,
        "command": list(result.command.argv),
        "module": result.command.is_module,
        "exit_status": result.exit_status,
        "error": result.error,
        "seconds": round(result.seconds, 4),
        "steps_marked": result.steps,
        "step_source": result.step_source,
        "trace": result.trace_path,
        "warnings": list(result.warnings),
        "capture": capture_data(summary) if summary is not None else None,
        "overhead": overhead_data(overhead) if overhead is not None else None,
        "sampling": sampling_data(result),
    }
    if result.sampling is not None:
        facts += (("sampling", _sampling_line(result)),)
    cost = overhead_document(overhead) if overhead is not None else None
    if cost is not None:
        facts += cost.facts[:1]
    if summary is None:
        return Document(title="opscope run", data=data, facts=facts, notes=("No trace was captured.",))
    base = capture_document(summary)
    tables = base.tables if cost is None else (*cost.tables, *base.tables)
    notes = base.notes if cost is None else (*cost.notes, *base.notes)
    return replace(base, data=data, facts=facts + base.facts, tables=tables, notes=notes)


def sampling_data(result: RunResult) -> dict[str, Any] | None:
    """`--every`: the sampling run's folder, plan, windows and what tracing them cost (docs/drift.md)."""
    manifest = result.sampling
    if manifest is None:
        return None
    return {
        "run_id": manifest.run_id,
        "folder": result.sampling_folder,
        "plan": manifest.plan,
        "history": manifest.history,
        "windows": manifest.to_json()["windows"],
        "cost": overhead_summary(manifest.windows, manifest.finish_s),
    }


def _sampling_line(result: RunResult) -> str:
    manifest = result.sampling
    assert manifest is not None
    cost = overhead_summary(manifest.windows, manifest.finish_s)
    ratio = cost["traced_step_overhead_median"]
    traced = (
        f"traced steps {_pct(float(ratio))} against the untraced ones (median over windows)"
        if ratio is not None
        else "no untraced steps to compare the traced ones with"
    )
    kept = sum(w.trace is not None for w in manifest.windows)
    return (
        f"{len(manifest.windows):,} windows of {manifest.plan} in {result.sampling_folder} ({kept:,} traces on "
        f"disk, every window in the history); {traced}; writing and summarising windows "
        f"{float(cost['export_s_total'] or 0):,.2f} s in all during the run, {float(cost['finish_s'] or 0):,.2f} s "
        f"after it; what drifted: opscope drift {result.sampling_folder}"
    )


def overhead_data(result: OverheadResult) -> dict[str, Any]:
    return {
        "schema": OVERHEAD_SCHEMA,
        "device": result.device,
        "timing": result.timing,
        "capture": result.capture,
        "warmup": result.warmup,
        "repeats": result.repeats,
        "untraced_s": result.untraced.as_dict(digits=6),
        "traced_s": result.traced.as_dict(digits=6),
        "finalize_s": Spread.of(result.finalize_s).as_dict(digits=6),
        "intrusion": result.intrusion.as_dict(digits=6),
        "noisy": result.noisy,
        "samples": {
            "untraced_s": [round(v, 6) for v in result.untraced_s],
            "traced_s": [round(v, 6) for v in result.traced_s],
            "finalize_s": [round(v, 6) for v in result.finalize_s],
        },
        "warnings": list(result.warnings),
    }


def _pct(value: float) -> str:
    return f"{value * 100:+.1f}%"


def overhead_document(result: OverheadResult) -> Document:
    intrusion, untraced, traced = result.intrusion, result.untraced, result.traced
    headline = (
        f"{_pct(intrusion.median)} (median of {result.repeats} pairs; IQR {_pct(intrusion.q1)} to "
        f"{_pct(intrusion.q3)}, range {_pct(intrusion.min)} to {_pct(intrusion.max)})"
    )
    facts = (
        ("tracing intrusion", headline),
        ("device", result.device),
        ("timing", result.timing),
        ("captured", result.capture),
    )
    columns = (
        Column("run", "Run"),
        Column("median", "Median ms", MS),
        Column("q1", "Q1 ms", MS),
        Column("q3", "Q3 ms", MS),
        Column("min", "Min ms", MS),
        Column("max", "Max ms", MS),
    )

    def row(label: str, samples: tuple[float, ...]) -> dict[str, Any]:
        spread = Spread.of(samples)
        return {
            "run": label,
            "median": spread.median * 1e9,
            "q1": spread.q1 * 1e9,
            "q3": spread.q3 * 1e9,
            "min": spread.min * 1e9,
            "max": spread.max * 1e9,
        }

    table = Table(
        name="overhead",
        title="Tracing overhead: untraced vs traced runs",
        columns=columns,
        rows=(
            row("untraced", result.untraced_s),
            row("traced", result.traced_s),
            row("profiler stop + processing", result.finalize_s),
        ),
    )
    notes = []
    if result.noisy:
        notes.append(
            f"The untraced runs alone vary by {untraced.relative_iqr * 100:.1f}% (IQR / median), more than "
            "the measured intrusion: treat the figure as noise; use more repeats or a longer workload."
        )
    if traced.median < 1e-3:
        notes.append("The workload takes under 1 ms: timer resolution and profiler bookkeeping dominate.")
    notes.extend(f"warning: {w}" for w in result.warnings)
    return Document(
        title="Tracing overhead", data=overhead_data(result), facts=facts, tables=(table,), notes=tuple(notes)
    )


DEMO_SCHEMA = "opscope.demo/1"


def demo_document(result: DemoResult) -> Document:
    """`opscope demo`: what ran, the capture summary, and the diagnosis."""
    shape = "x".join(str(d) for d in result.latent_shape)
    ran = f"{result.device}" + (
        "" if result.summary.has_gpu_activity else " (no GPU: the rows are CPU operators)"
    )
    facts = (
        ("ran on", ran),
        (
            "loop",
            f"{result.total_steps} denoising steps of a tiny UNet on {shape} latents; the first "
            f"{result.profiled_steps} profiled ({result.seconds:.2f} s with profiling)",
        ),
        ("step times (ms)", ", ".join(f"{ns / 1e6:.2f}" for ns in result.step_ns) or "—"),
    )
    base = capture_document(result.summary)
    findings = tuple(f"diagnosis: {f}" for f in result.diagnosis)
    report = (f"HTML report: {result.report_path}",) if result.report_path else ()
    data = {
        "schema": DEMO_SCHEMA,
        "device": result.device,
        "total_steps": result.total_steps,
        "profiled_steps": result.profiled_steps,
        "latent_shape": list(result.latent_shape),
        "seconds": round(result.seconds, 4),
        "step_ms": [round(ns / 1e6, 4) for ns in result.step_ns],
        "busy": None if result.busy is None else round(result.busy, 4),
        "diagnosis": list(result.diagnosis),
        "report": result.report_path,
        "capture": capture_data(result.summary),
    }
    return Document(
        title="opscope demo: a tiny diffusion denoiser",
        data=data,
        facts=facts + tuple(f for f in base.facts if f[0] != "device"),
        tables=tuple(replace(t, title=t.title or base.title) for t in base.tables),
        # the "ran on" fact already says a CPU-only run shows CPU operators: the note once, not twice
        notes=(*(n for n in base.notes if n != CPU_ONLY_NOTE), *findings, *report),
    )
