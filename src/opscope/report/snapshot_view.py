"""`SnapshotStats` -> `Document` (and the stable `opscope.memory_snapshot/1` JSON payload)."""

from __future__ import annotations

from typing import Any

from opscope.analysis.memory.snapshot import SnapshotStats
from opscope.report.document import FLOAT, INT, NAME, TEXT, Column, Document, Table
from opscope.report.memory_view import mib


def snapshot_data(result: SnapshotStats) -> dict[str, Any]:
    return {
        "schema": "opscope.memory_snapshot/1",
        "snapshot": {"path": result.path, "history_entries": result.history_entries},
        "devices": [
            {
                "device": d.device,
                "segments": d.segments,
                "reserved_bytes": d.reserved_bytes,
                "allocated_bytes": d.allocated_bytes,
                "internal_free_bytes": d.internal_free_bytes,
                "external_free_bytes": d.external_free_bytes,
                "active_blocks": d.active_blocks,
            }
            for d in result.devices
        ],
        "largest_blocks": [
            {
                "device": b.device,
                "address": b.address,
                "size_bytes": b.size,
                "requested_bytes": b.requested_size,
                "stack": list(b.stack),
                "where": b.where or None,
            }
            for b in result.largest_blocks
        ],
        "ooms": [
            {
                "device": o.device,
                "requested_bytes": o.requested_bytes,
                "device_free_bytes": o.device_free_bytes,
                "time_us": o.time_us,
                "stack": list(o.stack),
                "where": o.where or None,
            }
            for o in result.ooms
        ],
        "warnings": list(result.warnings),
    }


def snapshot_document(result: SnapshotStats) -> Document:
    devices = Table(
        "devices",
        "Caching allocator per device",
        (
            Column("device", "Device", TEXT),
            Column("segments", "Segments", INT),
            Column("reserved", "Reserved MiB", FLOAT),
            Column("allocated", "Allocated MiB", FLOAT),
            Column("internal", "Internal free MiB", FLOAT),
            Column("external", "External free MiB", FLOAT),
            Column("blocks", "Live blocks", INT),
        ),
        tuple(
            {
                "device": d.device,
                "segments": d.segments,
                "reserved": mib(d.reserved_bytes),
                "allocated": mib(d.allocated_bytes),
                "internal": mib(d.internal_free_bytes),
                "external": mib(d.external_free_bytes),
                "blocks": d.active_blocks,
            }
            for d in result.devices
        ),
    )
    blocks = Table(
        "largest_blocks",
        "Largest live blocks",
        (
            Column("device", "Device", TEXT),
            Column("mib", "MiB", FLOAT),
            Column("where", "Allocated at", NAME),
        ),
        tuple(
            {
                "device": b.device,
                "mib": mib(b.size),
                "where": b.where or "(no stack recorded)",
            }
            for b in result.largest_blocks
        ),
    )
    tables = [devices, blocks]
    if result.ooms:
        tables.append(
            Table(
                "ooms",
                "Out-of-memory events",
                (
                    Column("device", "Device", TEXT),
                    Column("requested", "Requested MiB", FLOAT),
                    Column("free", "Device free MiB", FLOAT),
                    Column("where", "At", NAME),
                ),
                tuple(
                    {
                        "device": o.device,
                        "requested": mib(o.requested_bytes),
                        "free": mib(o.device_free_bytes),
                        "where": o.where or "(no stack recorded)",
                    }
                    for o in result.ooms
                ),
            )
        )
    notes = [
        "reserved = allocated + internal free (rounding inside live blocks) + external free (cached blocks); "
        "see docs/memory.md."
    ]
    notes.extend(f"warning: {w}" for w in result.warnings)
    return Document(
        title="Memory snapshot",
        data=snapshot_data(result),
        facts=(("snapshot", result.path),),
        tables=tuple(tables),
        notes=tuple(notes),
    )
