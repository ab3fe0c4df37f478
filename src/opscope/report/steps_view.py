"""`StepStats` -> `Document` (and the stable `opscope.steps/1` JSON payload)."""

from __future__ import annotations

from typing import Any

from opscope.analysis.attribution.steps import StepStats
from opscope.report.document import INT, MS, PCT, TEXT, Column, Document, Table
from opscope.report.linking_view import link_data, link_notes, us


def steps_data(result: StepStats) -> dict[str, Any]:
    steps = []
    for row in result.rows:
        w = row.window
        steps.append(
            {
                "step": w.step,
                "name": w.name,
                "start_us": us(w.start_ns),
                "end_us": us(w.end_ns),
                "wall_us": us(w.dur_ns),
                "gpu_events": row.gpu_events,
                "slowest": row.slowest,
                "devices": [
                    {
                        "device": d.device,
                        "busy_us": us(d.busy_ns),
                        "kernel_us": us(d.kernel_ns),
                        "memcpy_us": us(d.memcpy_ns),
                        "memset_us": us(d.memset_ns),
                        "comm_us": us(d.comm_ns),
                        "idle_us": us(d.idle_ns),
                        "utilization": round(d.utilization, 6),
                    }
                    for d in row.devices
                ],
            }
        )
    slowest = next((r.window.step for r in result.rows if r.slowest), None)
    return {
        "schema": "opscope.steps/1",
        "trace": {"path": result.path},
        "from_markers": result.from_markers,
        "devices": list(result.devices),
        "steps": steps,
        "slowest_step": slowest,
        "overlapping_steps": result.overlapping_steps,
        "overlap_us": us(result.overlap_ns),
        "outside": {"gpu_events": result.outside_events, "gpu_us": us(result.outside_ns)},
        "gpu_time_us": us(result.gpu_time_ns),
        "unattributed_share": round(result.unattributed_share, 6),
        "linking": link_data(result.link) if result.link is not None else None,
        "warnings": list(result.warnings),
    }


def steps_document(result: StepStats) -> Document:
    columns = (
        Column("step", "Step", TEXT),
        Column("device", "GPU", TEXT),
        Column("wall", "Wall ms", MS),
        Column("busy", "Busy ms", MS),
        Column("kernel", "Kernel ms", MS),
        Column("memcpy", "Memcpy ms", MS),
        Column("memset", "Memset ms", MS, drop=2),
        Column("comm", "Comm ms", MS),
        Column("idle", "Idle ms", MS),
        Column("utilization", "Busy %", PCT),
        Column("gpu_events", "GPU events", INT, drop=1),
        Column("mark", "", TEXT),
    )
    rows: list[dict[str, Any]] = []
    for row in result.rows:
        label = row.window.name if row.window.step is None else str(row.window.step)
        base = {
            "step": label,
            "wall": row.wall_ns,
            "gpu_events": row.gpu_events,
            "mark": "slowest" if row.slowest else "",
        }
        if not row.devices:
            rows.append({**base, "device": "—"})
        for d in row.devices:
            rows.append(
                {
                    **base,
                    "device": "—" if d.device is None else str(d.device),
                    "busy": d.busy_ns,
                    "kernel": d.kernel_ns,
                    "memcpy": d.memcpy_ns,
                    "memset": d.memset_ns,
                    "comm": d.comm_ns,
                    "idle": d.idle_ns,
                    "utilization": d.utilization,
                }
            )
    facts = [
        ("trace", result.path),
        (
            "windows",
            f"{len(result.rows)} step window(s) (ProfilerStep#N or step_num)"
            if result.from_markers
            else "no ProfilerStep markers: one window over the whole trace",
        ),
    ]
    if result.options.steps:
        facts.append(("steps", result.options.steps))
    facts.append(("unattributed", f"{result.unattributed_share * 100:.1f}% of GPU time"))
    notes = []
    if result.outside_events or result.outside_ns:
        notes.append(
            f"{result.outside_events:,} GPU events lie outside every step window; "
            f"{result.outside_ns / 1e6:,.3f} ms of GPU time falls outside them."
        )
    if result.overlapping_steps:
        notes.append(
            f"{result.overlapping_steps} step window(s) overlap an earlier one by {result.overlap_ns / 1e6:,.3f}"
            " ms in total; each step is measured over its own window."
        )
    if result.link is not None:
        notes.extend(link_notes(result.link, result.unattributed_share))
    elif not result.devices:
        notes.append("No GPU kernels, memcpys or memsets in this selection: wall time only.")
    notes.append(
        "Busy, kernel, memcpy, memset and comm are unions of intervals inside the window "
        "(overlapping streams count once); idle = wall - busy."
    )
    notes.extend(f"warning: {w}" for w in result.warnings)
    return Document(
        title="Time per step",
        data=steps_data(result),
        facts=tuple(facts),
        tables=(Table("steps", "", columns, tuple(rows)),),
        notes=tuple(notes),
    )
