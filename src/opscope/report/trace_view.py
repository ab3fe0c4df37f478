"""The report payload (`opscope.report/1`) as a `Document`, for `opscope report --format markdown|table|csv|json`:
the headline as facts, then the top kernels, categories, steps and memory copies as tables. The JSON format
is the payload itself (what the HTML page embeds)."""

from __future__ import annotations

from typing import Any

from opscope.report.document import FLOAT, INT, MS, NAME, PCT, TEXT, US, Column, Document, Table

TOP_KERNELS = 20
# `report --metrics`: the joined Nsight Compute means shown beside each kernel (keys of the row's "ncu")
NCU_COLUMNS = (
    ("sm_throughput_pct", "SM %"),
    ("memory_throughput_pct", "Mem %"),
    ("achieved_occupancy_pct", "Ach occ %"),
)


def _ns(us: float | None) -> float | None:
    return None if us is None else us * 1e3


def report_document(data: dict[str, Any]) -> Document:
    strings = data["strings"]
    head = data["headline"]
    facts = [
        ("trace", data["trace"]["path"]),
        ("devices", ", ".join(data["trace"]["devices"]) or "none recorded"),
        ("window", f"{head['window_us'] / 1e3:,.3f} ms"),
        ("GPU busy", f"{head['busy_pct']:.1f}%"),
        ("GPU idle", f"{head['idle_pct']:.1f}%"),
    ]
    if head["top_category"]:
        facts.append(
            ("top category", f"{head['top_category']} ({head['top_category_share'] * 100:.1f}% of GPU time)")
        )
    kernels = data["kernels"]["rows"]
    ncu = data["kernels"].get("ncu")
    ncu_columns = (
        tuple(Column(key, label, FLOAT, drop=1) for key, label in NCU_COLUMNS)
        if ncu and ncu["matched_launches"]
        else ()
    )
    tables = [
        Table(
            "kernels",
            f"Top {min(TOP_KERNELS, len(kernels))} of {len(kernels)} kernels by GPU time",
            (
                Column("name", "Name", NAME),
                Column("category", "Category", TEXT),
                Column("calls", "Calls", INT),
                Column("total", "Total ms", MS),
                Column("avg", "Mean us", US),
                Column("share", "Share", PCT),
                *ncu_columns,
            ),
            tuple(
                {
                    "name": strings[r["name"]],
                    "category": r["category"],
                    "calls": r["calls"],
                    "total": _ns(r["total_us"]),
                    "avg": _ns(r["avg_us"]),
                    "share": r["share"],
                    **{key: (r.get("ncu") or {}).get(key) for key, _ in NCU_COLUMNS},
                }
                for r in kernels[:TOP_KERNELS]
            ),
        ),
        Table(
            "categories",
            "GPU time by category",
            (
                Column("category", "Category", TEXT),
                Column("calls", "Calls", INT),
                Column("total", "Total ms", MS),
                Column("share", "Share", PCT),
            ),
            tuple(
                {
                    "category": c["category"],
                    "calls": c["calls"],
                    "total": _ns(c["total_us"]),
                    "share": c["share"],
                }
                for c in data["categories"]
            ),
        ),
    ]
    if data["steps"]:
        tables.append(
            Table(
                "steps",
                "Steps",
                (
                    Column("name", "Step", TEXT),
                    Column("wall", "Wall ms", MS),
                    Column("busy", "GPU busy ms", MS),
                    Column("busy_share", "Busy", PCT),
                ),
                tuple(
                    {
                        "name": s["name"],
                        "wall": _ns(s["wall_us"]),
                        "busy": _ns(s["busy_us"]),
                        "busy_share": s["busy_us"] / s["wall_us"] if s["wall_us"] else None,
                    }
                    for s in data["steps"]
                ),
            )
        )
    if data["memcpy"]:
        tables.append(
            Table(
                "memcpy",
                "Memory copies",
                (
                    Column("direction", "Dir", TEXT),
                    Column("host_memory", "Host", TEXT),
                    Column("calls", "Calls", INT),
                    Column("bytes", "Bytes", INT),
                    Column("time", "Time ms", MS),
                    Column("bandwidth_gbps", "GB/s", FLOAT),
                    Column("share", "Share", PCT),
                ),
                tuple(
                    {**r, "host_memory": r["host_memory"] or "", "time": _ns(r["total_us"])}
                    for r in data["memcpy"]
                ),
            )
        )
    delay = data["launch_delay"]
    notes = []
    if delay["kernels"]:
        notes.append(
            f"launch delay over {delay['kernels']:,} kernels: median {delay['p50_us']:,.1f} us, "
            f"p95 {delay['p95_us']:,.1f} us, max {delay['max_us']:,.1f} us"
        )
    if ncu is not None:
        notes.append(
            f"Nsight Compute ({ncu['path']}): {ncu['matched_launches']:,} of {ncu['profiled_launches']:,} "
            "profiled launches matched to trace kernels by name and launch order"
        )
    notes.extend(f"warning: {w}" for w in data["warnings"])
    return Document(
        title="opscope report", data=data, facts=tuple(facts), tables=tuple(tables), notes=tuple(notes)
    )
