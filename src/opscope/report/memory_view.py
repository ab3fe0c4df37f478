"""`MemoryStats` -> `Document` (and the stable `opscope.memory/1` JSON payload)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from opscope.analysis.memory.summary import DeviceMemory, MemoryStats
from opscope.report.document import FLOAT, INT, NAME, TEXT, Column, Document, Table
from opscope.report.linking_view import us

MIB = 1 << 20
# Per op, `live_at_end_bytes` / `live_at_end_count` (never freed in the window; issue 28) were added beside
# `self_increase_bytes` ("left live": bytes each call still held when it returned, summed over calls), which
# keeps its meaning for existing readers but is deprecated and no longer shown in any table.
SCHEMA = "opscope.memory/1"


def mib(nbytes: int | None) -> float | None:
    return None if nbytes is None else nbytes / MIB


def device_data(d: DeviceMemory) -> dict[str, Any]:
    return {
        "device": d.device,
        "peak_allocated_bytes": d.peak_allocated_bytes,
        "peak_allocated_ts_us": us(d.peak_allocated_ts_ns),
        "peak_allocated_op": d.peak_allocated_op,
        "peak_allocated_step": d.peak_allocated_step,
        "peak_reserved_bytes": d.peak_reserved_bytes,
        "fragmentation_at_peak_bytes": d.fragmentation_at_peak_bytes,
        "max_fragmentation_bytes": d.max_fragmentation_bytes,
        "capacity_bytes": d.capacity_bytes,
        "relative": d.relative,
        "alloc_count": d.alloc_count,
        "alloc_bytes": d.alloc_bytes,
        "free_count": d.free_count,
        "unmatched_free_count": d.unmatched_frees,
        "live_at_end": None
        if d.live_at_end_count is None
        else {"count": d.live_at_end_count, "bytes": d.live_at_end_bytes},
        "lifetime_us": None
        if d.lifetime_ns is None
        else dict(zip(("p50", "p95", "max"), (us(v) for v in d.lifetime_ns), strict=True)),
    }


def memory_data(result: MemoryStats) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "trace": {"path": result.path},
        "devices": [device_data(d) for d in result.devices],
        "top_ops": [
            {
                "op": o.op,
                "device": o.device,
                "self_alloc_bytes": o.self_alloc_bytes,
                "self_alloc_count": o.self_alloc_count,
                "live_at_end_bytes": o.live_at_end_bytes,
                "live_at_end_count": o.live_at_end_count,
                "self_increase_bytes": o.self_increase_bytes,  # deprecated (see SCHEMA)
                "alloc_bytes": o.alloc_bytes,
                "alloc_count": o.alloc_count,
            }
            for o in result.top_ops
        ],
        "steps": [
            {
                "step": s.step,
                "device": s.device,
                "start_allocated_bytes": s.start_allocated_bytes,
                "end_allocated_bytes": s.end_allocated_bytes,
                "peak_allocated_bytes": s.peak_allocated_bytes,
                "growth_bytes": s.growth_bytes,
            }
            for s in result.steps
        ],
        "live_at_end_blocks": [
            {"device": b.device, "addr": b.addr, "bytes": b.nbytes, "ts_us": us(b.ts_ns), "op": b.op}
            for b in result.live_at_end
        ],
        "warnings": list(result.warnings),
    }


def memory_document(result: MemoryStats) -> Document:
    devices = Table(
        "devices",
        "Peak memory per device (frag = reserved - allocated at the peak; live = allocations never freed)",
        (
            Column("device", "Device", TEXT),
            Column("peak", "Peak MiB", FLOAT),
            Column("reserved", "Reserved MiB", FLOAT),
            Column("frag", "Frag MiB", FLOAT),
            Column("capacity", "Capacity MiB", FLOAT),
            Column("step", "Step", TEXT),
            Column("allocs", "Allocs", INT),
            Column("live", "Live", TEXT),
            Column("live_mib", "Live MiB", FLOAT),
            Column("op", "Op at peak", NAME),
        ),
        tuple(
            {
                "device": d.device + (" (relative)" if d.relative else ""),
                "peak": mib(d.peak_allocated_bytes),
                "reserved": mib(d.peak_reserved_bytes),
                "frag": mib(d.fragmentation_at_peak_bytes),
                "capacity": mib(d.capacity_bytes),
                "step": "—" if d.peak_allocated_step is None else str(d.peak_allocated_step),
                "allocs": d.alloc_count,
                "live": "—" if d.live_at_end_count is None else f"{d.live_at_end_count:,}",
                "live_mib": mib(d.live_at_end_bytes),
                "op": d.peak_allocated_op or "—",
            }
            for d in result.devices
        ),
    )
    ops = Table(
        "top_ops",
        "Who allocates (self: the op's own allocations; live at end: of those, never freed in the window; "
        "incl: with the ops it calls)",
        (
            Column("device", "Device", TEXT),
            Column("self", "Self MiB", FLOAT),
            Column("count", "Self allocs", INT),
            Column("live", "Live at end MiB", FLOAT),
            Column("incl", "Incl MiB", FLOAT),
            Column("op", "Operator", NAME),
        ),
        tuple(
            {
                "device": o.device,
                "self": mib(o.self_alloc_bytes),
                "count": o.self_alloc_count,
                "live": mib(o.live_at_end_bytes),
                "incl": mib(o.alloc_bytes),
                "op": o.op,
            }
            for o in result.top_ops
        ),
    )
    tables = [devices, ops]
    if result.steps:
        tables.append(
            Table(
                "steps",
                "Allocated memory per step",
                (
                    Column("step", "Step", INT),
                    Column("device", "Device", TEXT),
                    Column("start", "Start MiB", FLOAT),
                    Column("end", "End MiB", FLOAT),
                    Column("peak", "Peak MiB", FLOAT),
                    Column("growth", "Growth MiB", FLOAT),
                ),
                tuple(
                    {
                        "step": s.step,
                        "device": s.device,
                        "start": mib(s.start_allocated_bytes),
                        "end": mib(s.end_allocated_bytes),
                        "peak": mib(s.peak_allocated_bytes),
                        "growth": mib(s.growth_bytes),
                    }
                    for s in result.steps
                ),
            )
        )
    if result.live_at_end:
        tables.append(
            Table(
                "live_at_end",
                "Largest allocations still live at the end (leak candidates)",
                (
                    Column("device", "Device", TEXT),
                    Column("mib", "MiB", FLOAT),
                    Column("op", "Allocated by", NAME),
                ),
                tuple({"device": b.device, "mib": mib(b.nbytes), "op": b.op} for b in result.live_at_end),
            )
        )
    facts = [("trace", result.path)]
    if result.options.steps:
        facts.append(("steps", result.options.steps))
    notes = [
        "Peak = the largest 'Total Allocated' of the allocator's events; fragmentation = reserved - allocated; "
        "see docs/memory.md."
    ]
    if not result.devices:  # the empty tables say nothing more: the reason first, without them
        notes.insert(
            0,
            "No [memory] events in this selection: record with profile_memory=True "
            "(opscope run --profile-memory).",
        )
        tables = [replace(t, hide_when_empty=True) for t in tables]
    notes.extend(f"warning: {w}" for w in result.warnings)
    return Document(
        title="Memory", data=memory_data(result), facts=tuple(facts), tables=tuple(tables), notes=tuple(notes)
    )
