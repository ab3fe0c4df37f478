"""Memory copies: direction, bytes, achieved bandwidth, pageable vs pinned host memory, share of GPU time.

Direction and host-memory kind come from the copy's name, e.g. Kineto's "Memcpy HtoD (Pageable -> Device)",
"Memcpy DtoH (Device -> Pinned)", "Memcpy DtoD (Device -> Device)", "Memcpy PtoP (Device -> Device)"; AMD and
rocprof spellings (CopyHostToDevice, MEMORY_COPY_DEVICE_TO_HOST, ...) are covered by the same table. ROCm blit
kernels that implement copies (category memcpy, analysis/kernels/category_rules.py) have direction "unknown".

Definitions (docs/analysis-timeline.md), over copies that start inside the analysed window:
- bytes: sum of the recorded sizes (copies without a size are counted in `calls_without_bytes`).
- bandwidth_gbps = bytes / duration over the copies that have both (1 byte/ns = 1 GB/s, decimal units).
- share = the copies' summed duration / summed duration of all GPU activity starting in the window.
- busy_ns: union of the copies' intervals.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

from opscope.analysis.base import window as win
from opscope.analysis.kernels.categories import CATEGORY
from opscope.analysis.kernels.category_rules import MEMCPY, MEMSET
from opscope.analysis.timeline.activity import Activity, TimelineOptions, gpu_activity
from opscope.model.schema import Col
from opscope.model.trace import Trace

DIRECTIONS: tuple[tuple[str, str], ...] = (
    ("P2P", r"PtoP|P2P|Peer"),
    ("H2D", r"HtoD|H2D|Host_?To_?Device"),
    ("D2H", r"DtoH|D2H|Device_?To_?Host"),
    ("D2D", r"DtoD|D2D|Device_?To_?Device"),
)
HOST_MEMORY: tuple[tuple[str, str], ...] = (("pageable", r"Pageable"), ("pinned", r"Pinned"))
UNKNOWN = "unknown"


def direction(name: str) -> str:
    for label, pattern in DIRECTIONS:
        if re.search(pattern, name, re.IGNORECASE):
            return label
    return UNKNOWN


def host_memory(name: str, copy_direction: str) -> str | None:
    """pageable / pinned / unknown for copies touching the host, None for device-only copies."""
    if copy_direction not in ("H2D", "D2H"):
        return None
    for label, pattern in HOST_MEMORY:
        if re.search(pattern, name, re.IGNORECASE):
            return label
    return UNKNOWN


@dataclass(frozen=True)
class CopyRow:
    direction: str  # H2D, D2H, D2D, P2P, unknown
    host_memory: str | None  # pageable, pinned, unknown; None for device-side copies
    calls: int
    bytes: int
    calls_without_bytes: int
    total_ns: int
    busy_ns: int
    bandwidth_gbps: float | None
    share: float


@dataclass(frozen=True)
class MemcpyStats:
    rows: tuple[CopyRow, ...]  # largest total first
    calls: int
    bytes: int
    total_ns: int
    busy_ns: int
    share: float
    memset_calls: int
    memset_bytes: int
    memset_ns: int


def _bandwidth(frame: pl.DataFrame) -> float | None:
    sized = frame.filter(pl.col(Col.BYTES).is_not_null() & (pl.col(Col.DUR_NS) > 0))
    dur = int(sized[Col.DUR_NS].sum() or 0)
    return int(sized[Col.BYTES].sum() or 0) / dur if dur else None


def memcpy_stats(
    trace: Trace, options: TimelineOptions | None = None, activity: Activity | None = None
) -> MemcpyStats:
    act = activity or gpu_activity(trace, options)
    events = act.events.filter(win.starts_inside(act.window, Col.TS_NS))
    gpu_total = int(events[Col.DUR_NS].sum() or 0)
    copies = events.filter(pl.col(CATEGORY) == MEMCPY)
    names = copies.select(Col.NAME).unique()
    labels = names.with_columns(
        pl.col(Col.NAME).map_elements(direction, return_dtype=pl.String).alias("direction"),
    ).with_columns(
        pl.struct(Col.NAME, "direction")
        .map_elements(lambda r: host_memory(r[Col.NAME], r["direction"]), return_dtype=pl.String)
        .alias("host")
    )
    copies = copies.join(labels, on=Col.NAME, how="left")
    rows = []
    for (dir_label, host), part in copies.group_by(["direction", "host"]):
        total = int(part[Col.DUR_NS].sum() or 0)
        rows.append(
            CopyRow(
                direction=str(dir_label),
                host_memory=host if host is None else str(host),
                calls=part.height,
                bytes=int(part[Col.BYTES].sum() or 0),
                calls_without_bytes=int(part[Col.BYTES].null_count()),
                total_ns=total,
                busy_ns=win.covered_ns(part),
                bandwidth_gbps=_bandwidth(part),
                share=total / gpu_total if gpu_total else 0.0,
            )
        )
    rows.sort(key=lambda r: (-r.total_ns, r.direction, r.host_memory or ""))
    memsets = events.filter(pl.col(CATEGORY) == MEMSET)
    total = int(copies[Col.DUR_NS].sum() or 0)
    return MemcpyStats(
        rows=tuple(rows),
        calls=copies.height,
        bytes=int(copies[Col.BYTES].sum() or 0),
        total_ns=total,
        busy_ns=win.covered_ns(copies),
        share=total / gpu_total if gpu_total else 0.0,
        memset_calls=memsets.height,
        memset_bytes=int(memsets[Col.BYTES].sum() or 0),
        memset_ns=int(memsets[Col.DUR_NS].sum() or 0),
    )
