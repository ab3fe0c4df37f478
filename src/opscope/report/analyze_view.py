"""`Analysis` -> `Document`: the one-screen diagnosis and the stable `opscope.analyze/1` JSON payload.

Every figure is defined in docs/analysis-timeline.md. Times in the JSON are microseconds (3 decimals), shares
are fractions of 1. The CSV format writes the first table (devices).
"""

from __future__ import annotations

from typing import Any

from opscope.analysis.overview import Analysis
from opscope.report.advice_view import finding_facts, findings_data, gpu_facts
from opscope.report.document import FLOAT, INT, MS, NAME, PCT, TEXT, US, Column, Document, Table
from opscope.report.idle_view import causes_data, causes_table, per_step_data, step_causes_table
from opscope.report.linking_view import link_data, link_notes
from opscope.report.numbers import duration, plural
from opscope.report.ops_view import ops_data
from opscope.report.steps_view import steps_data

SCHEMA = "opscope.analyze/1"


def _us(ns: float | None) -> float | None:
    return None if ns is None else round(ns / 1e3, 3)


def _share(value: float) -> float:
    return round(value, 6)


def _idle(result: Analysis) -> dict[int | None, Any]:
    return {d.device: d for d in result.idle.devices}


def _devices_data(result: Analysis) -> list[dict[str, Any]]:
    idle = _idle(result)
    out = []
    for d in result.timeline.devices:
        i = idle.get(d.device)
        out.append(
            {
                "device": d.device,
                "name": d.name,
                "events": d.events,
                "busy_us": _us(d.busy_ns),
                "idle_us": _us(d.idle_ns),
                "utilization": _share(d.utilization),
                "idle_breakdown": {
                    "host_wait_us": _us(i.host_wait_ns if i else 0),
                    "sync_wait_us": _us(i.sync_wait_ns if i else 0),
                    "other_us": _us(i.other_ns if i else 0),
                    "gaps": i.gaps if i else 0,
                    "longest_gap_us": _us(i.longest_gap_ns if i else 0),
                    "causes": causes_data(i) if i else [],
                    "per_step": per_step_data(i, result.idle.steps) if i else [],
                },
                "span_us": _us(d.span_ns),
                "idle_in_span_us": _us(d.idle_in_span_ns),
                "compute_us": _us(d.compute_ns),
                "communication_us": _us(d.communication_ns),
                "memcpy_us": _us(d.memcpy_ns),
                "memset_us": _us(d.memset_ns),
                "compute_comm_overlap_us": _us(d.compute_comm_overlap_ns),
                "exposed_comm_us": _us(d.exposed_comm_ns),
                "compute_memcpy_overlap_us": _us(d.compute_memcpy_overlap_ns),
                "multi_stream_us": _us(d.multi_stream_ns),
                "streams": [
                    {
                        "stream": s.stream,
                        "events": s.events,
                        "busy_us": _us(s.busy_ns),
                        "exclusive_us": _us(s.exclusive_ns),
                        "overlapped_us": _us(s.overlapped_ns),
                        "utilization": _share(s.utilization),
                    }
                    for s in d.streams
                ],
            }
        )
    return out


def analyze_data(result: Analysis) -> dict[str, Any]:
    tl, ld, sy, mc = result.timeline, result.launch_delay, result.syncs, result.memcpy
    return {
        "schema": SCHEMA,
        "trace": {"path": result.path, "devices": list(result.device_names)},
        "gpu": result.gpu.data() if result.gpu else None,
        "window_us": _us(tl.window_ns),
        "window": {
            "start_us": _us(tl.window_start_ns),
            "end_us": _us(tl.window_end_ns),
            "source": tl.window_source,
            "pieces": tl.pieces,
        },
        "devices": _devices_data(result),
        "categories": [
            {
                "category": r.category,
                "total_us": _us(r.total_ns),
                "share": _share(r.share),
                "calls": r.calls,
                "busy_us": _us(r.busy_ns),
                "top_kernel": r.top_kernel,
            }
            for r in result.categories.rows
        ],
        "unattributed_share": _share(result.unattributed_share),
        "launch_delay_us": {
            "p50": _us(ld.p50_ns),
            "p95": _us(ld.p95_ns),
            "max": _us(ld.max_ns),
            "mean": _us(ld.mean_ns),
        },
        "launch_delay": {
            "kernels": ld.kernels,
            "negative_clamped": ld.negative,
            "min_raw_us": _us(ld.min_raw_ns),
            "missing_launch": ld.missing_launch,
            "graph_kernels": ld.graph_kernels,
            "worst_ops": [
                {
                    "op": w.name,
                    "kernels": w.kernels,
                    "mean_us": _us(w.mean_ns),
                    "p95_us": _us(w.p95_ns),
                    "max_us": _us(w.max_ns),
                }
                for w in ld.worst
            ],
        },
        "kernels": [
            {
                "name": k.name,
                "kind": k.kind,
                "category": k.category,
                "calls": k.calls,
                "total_us": _us(k.total_ns),
                "share": _share(k.share),
            }
            for k in result.kernels
        ],
        "ops": ops_data(result.ops)["rows"],
        "syncs": {
            "calls": sy.calls,
            "total_us": _us(sy.total_ns),
            "gpu_sync_events": sy.gpu_sync_events,
            "by_call": [
                {"name": r.name, "calls": r.calls, "total_us": _us(r.total_ns), "max_us": _us(r.max_ns)}
                for r in sy.by_call
            ],
            "by_op": [
                {"op": r.name, "calls": r.calls, "total_us": _us(r.total_ns), "max_us": _us(r.max_ns)}
                for r in sy.by_op[: result.options.top or None]
            ],
        },
        "memcpy": {
            "calls": mc.calls,
            "bytes": mc.bytes,
            "total_us": _us(mc.total_ns),
            "busy_us": _us(mc.busy_ns),
            "share": _share(mc.share),
            "rows": [
                {
                    "direction": r.direction,
                    "host_memory": r.host_memory,
                    "calls": r.calls,
                    "bytes": r.bytes,
                    "calls_without_bytes": r.calls_without_bytes,
                    "total_us": _us(r.total_ns),
                    "busy_us": _us(r.busy_ns),
                    "bandwidth_gbps": None if r.bandwidth_gbps is None else round(r.bandwidth_gbps, 3),
                    "share": _share(r.share),
                }
                for r in mc.rows
            ],
            "memset": {"calls": mc.memset_calls, "bytes": mc.memset_bytes, "total_us": _us(mc.memset_ns)},
        },
        "steps": steps_data(result.steps)["steps"],
        "steps_spec": result.options.steps,
        "linking": link_data(result.link),
        "warnings": list(result.warnings),
        "findings": findings_data(
            result.advice
        ),  # the advice rules (docs/advice.md); opscope advise has more
    }


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def _ms(ns: float | None) -> str:
    return "—" if ns is None else f"{ns / 1e6:,.3f} ms"


def _facts(result: Analysis) -> tuple[tuple[str, str], ...]:
    tl, ld, sy, mc = result.timeline, result.launch_delay, result.syncs, result.memcpy
    facts = [
        *finding_facts(result.advice),
        ("trace", result.path),
        ("devices", ", ".join(result.device_names) or "none recorded"),
        *gpu_facts(result),
        (
            "window",
            f"{_ms(tl.window_ns)} ({'chosen steps' if tl.window_source == 'steps' else 'first to last event'})",
        ),
    ]
    for d in tl.devices:
        facts.append((f"GPU {d.device} busy", f"{_ms(d.busy_ns)} = {_pct(d.utilization)} of the window"))
    delay = (
        f"p50 {duration(ld.p50_ns)}, p95 {duration(ld.p95_ns)}, max {duration(ld.max_ns)} over "
        f"{plural(ld.kernels, 'kernel')}"
        if ld.kernels
        else "no kernel with a launch call"
    )
    facts.append(("launch delay", delay))
    facts.append(("synchronisations", f"{plural(sy.calls, 'call')}, {_ms(sy.total_ns)}"))
    facts.append(
        (
            "memory copies",
            f"{plural(mc.calls, 'copy')}, {plural(mc.bytes, 'byte')}, {_ms(mc.total_ns)} "
            f"({_pct(mc.share)} of GPU time)",
        )
    )
    facts.append(("unattributed GPU time", _pct(result.unattributed_share)))
    return tuple(facts)


def _tables(result: Analysis) -> tuple[Table, ...]:
    idle = _idle(result)
    devices = Table(
        "devices",
        "Busy and idle per device (ms)",
        (
            Column("device", "GPU", TEXT),
            Column("busy", "Busy", MS),
            Column("idle", "Idle", MS),
            Column("utilization", "Util", PCT),
            Column("host_wait", "Host wait", MS),
            Column("sync_wait", "Sync wait", MS),
            Column("other_idle", "Other idle", MS),
            Column("comm", "Comm", MS),
            Column("exposed_comm", "Exposed comm", MS),
            Column("multi_stream", "Multi-stream", MS),
        ),
        tuple(
            {
                "device": str(d.device),
                "busy": d.busy_ns,
                "idle": d.idle_ns,
                "utilization": d.utilization,
                "host_wait": getattr(idle.get(d.device), "host_wait_ns", 0),
                "sync_wait": getattr(idle.get(d.device), "sync_wait_ns", 0),
                "other_idle": getattr(idle.get(d.device), "other_ns", 0),
                "comm": d.communication_ns,
                "exposed_comm": d.exposed_comm_ns,
                "multi_stream": d.multi_stream_ns,
            }
            for d in result.timeline.devices
        ),
    )
    categories = Table(
        "categories",
        "GPU time by kernel category",
        (
            Column("category", "Category", TEXT),
            Column("calls", "Calls", INT),
            Column("total_ns", "Total ms", MS),
            Column("share", "Share", PCT),
        ),
        tuple(
            {"category": r.category, "calls": r.calls, "total_ns": r.total_ns, "share": r.share}
            for r in result.categories.rows
        ),
    )
    kernels = Table(
        "kernels",
        "Top kernels",
        (
            Column("name", "Kernel", NAME),
            Column("category", "Category", TEXT),
            Column("calls", "Calls", INT),
            Column("total_ns", "Total ms", MS),
            Column("share", "Share", PCT),
        ),
        tuple(
            {
                "name": k.name,
                "category": k.category,
                "calls": k.calls,
                "total_ns": k.total_ns,
                "share": k.share,
            }
            for k in result.kernels
        ),
    )
    ops = Table(
        "ops",
        "Top ops by GPU self time (kernels launched directly; GPU ms: inclusive)",
        (
            Column("name", "Op", NAME),
            Column("calls", "Calls", INT),
            Column("kernels", "Kernels", INT),
            Column("gpu", "GPU ms", MS),
            Column("self", "GPU self ms", MS),
            Column("share", "Share", PCT),
        ),
        tuple(
            {
                "name": o.name,
                "calls": o.calls,
                "kernels": o.kernels,
                "gpu": o.gpu_total_ns,
                "self": o.gpu_self_ns,
                "share": o.gpu_share,
            }
            for o in result.ops.rows
        ),
    )
    delays = Table(
        "launch_delay",
        "Worst launch delays by launching op",
        (
            Column("name", "Op", NAME),
            Column("kernels", "Kernels", INT),
            Column("mean", "Mean us", US),
            Column("p95", "p95 us", US),
            Column("max", "Max us", US),
        ),
        tuple(
            {"name": w.name, "kernels": w.kernels, "mean": w.mean_ns, "p95": w.p95_ns, "max": w.max_ns}
            for w in result.launch_delay.worst
        ),
    )
    syncs = Table(
        "syncs",
        "Synchronisations by issuing op",
        (
            Column("name", "Op", NAME),
            Column("calls", "Calls", INT),
            Column("total", "Total ms", MS),
            Column("max", "Max us", US),
        ),
        tuple(
            {"name": r.name, "calls": r.calls, "total": r.total_ns, "max": r.max_ns}
            for r in result.syncs.by_op[: result.options.top or None]
        ),
    )
    copies = Table(
        "memcpy",
        "Memory copies",
        (
            Column("direction", "Direction", TEXT),
            Column("host", "Host memory", TEXT),
            Column("calls", "Calls", INT),
            Column("bytes", "Bytes", INT),
            Column("total", "Total ms", MS),
            Column("bw", "GB/s", FLOAT),
            Column("share", "Share", PCT),
        ),
        tuple(
            {
                "direction": r.direction,
                "host": r.host_memory or "—",
                "calls": r.calls,
                "bytes": r.bytes,
                "total": r.total_ns,
                "bw": r.bandwidth_gbps,
                "share": r.share,
            }
            for r in result.memcpy.rows
        ),
    )
    steps = Table(
        "steps",
        "Steps",
        (
            Column("name", "Step", TEXT),
            Column("device", "GPU", TEXT),
            Column("wall", "Wall ms", MS),
            Column("busy", "GPU busy ms", MS),
            Column("util", "Util", PCT),
        ),
        tuple(
            {
                "name": row.window.name + (" (slowest)" if row.slowest else ""),
                "device": str(d.device),
                "wall": row.window.dur_ns,
                "busy": d.busy_ns,
                "util": d.utilization,
            }
            for row in result.steps.rows
            for d in row.devices
        ),
    )
    causes = causes_table(result)
    step_causes = step_causes_table(result)
    return tuple(
        t
        for t in (devices, causes, categories, kernels, ops, delays, syncs, copies, steps, step_causes)
        if t.rows or t is devices
    )


def _notes(result: Analysis) -> tuple[str, ...]:
    notes = []
    ld = result.launch_delay
    if result.link.missing_launch:
        notes.append("Idle gaps ended by GPU work whose launch call is not in the trace count as 'other'.")
    if ld.negative:
        notes.append(
            f"{ld.negative:,} kernels appear to start before their launch call (clock offset up to "
            f"{_us(-(ld.min_raw_ns or 0))} us); their delay is counted as 0."
        )
    if ld.graph_kernels:
        notes.append(
            f"{ld.graph_kernels:,} kernels came from CUDA/HIP graph launches and are left out of the "
            "launch delay."
        )
    notes.extend(link_notes(result.link, result.unattributed_share))
    notes.append("Definitions: docs/analysis-timeline.md.")
    notes.extend(f"warning: {w}" for w in result.warnings)
    return tuple(notes)


def analyze_document(result: Analysis) -> Document:
    return Document(
        title="Where the GPU time goes",
        data=analyze_data(result),
        facts=_facts(result),
        tables=_tables(result),
        notes=_notes(result),
    )
