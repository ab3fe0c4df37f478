"""Interim figures for the HTML report, computed directly from the event table while the analyses that own
them (window, busy/idle, categories, steps, launch delay, memcpy in analysis/*) are not in main yet.

Each function matches the definition of the analysis it stands in for (docs/reports.md, "Sources"), in its
simplest form, and is replaced by that analysis when it lands; the report's `sources` field says which one
produced each view, so a reader of the JSON can tell.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import polars as pl

from opscope.analysis import intervals, select
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace

CPU_WORK_KINDS = (Kind.CPU_OP, Kind.RUNTIME, Kind.DRIVER, Kind.USER_ANNOTATION, Kind.PYTHON)
SOURCE = "interim (report/interim.py)"


def trace_window(trace: Trace, devices: Sequence[int] | None = None,
                 streams: Sequence[int] | None = None) -> tuple[int, int] | None:
    """First start to last end of GPU activity (of the selection) and CPU work with a duration."""
    gpu = select.by_streams(select.by_devices(trace.gpu_events(), devices), streams)
    cpu = trace.lazy().filter(pl.col(Col.KIND).cast(pl.String).is_in(list(CPU_WORK_KINDS))
                              & pl.col(Col.DUR_NS).is_not_null())
    span = (
        pl.concat([gpu.select(Col.TS_NS, Col.DUR_NS), cpu.select(Col.TS_NS, Col.DUR_NS)])
        .filter(pl.col(Col.TS_NS).is_not_null())
        .select(pl.col(Col.TS_NS).min().alias("lo"),
                (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS).clip(lower_bound=0)).max().alias("hi"))
        .collect()
    )
    lo, hi = span["lo"][0], span["hi"][0]
    if lo is None or hi is None or hi <= lo:
        return None
    return int(lo), int(hi)


def with_interval(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(pl.col(Col.TS_NS).alias(intervals.START),
                              (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS)).alias(intervals.END))


def busy_by_device(events: pl.DataFrame, lo: int, hi: int) -> dict[int | None, int]:
    """Union of each device's GPU activity clipped to [lo, hi)."""
    clipped = intervals.clip(with_interval(events), lo, hi).collect()
    if clipped.height == 0:
        return {}
    busy = intervals.union_ns(clipped, by=[Col.DEVICE])
    assert isinstance(busy, pl.DataFrame)
    return {d: int(b) for d, b in busy.iter_rows()}


def category_of(frame: pl.DataFrame) -> pl.DataFrame:
    """Stand-in for analysis/categories.py: the category is the kind (kernel, memcpy, memset)."""
    return frame.with_columns(pl.col(Col.KIND).cast(pl.String).alias("category"))


def memcpy_rows(trace: Trace, devices: Sequence[int] | None = None,
                streams: Sequence[int] | None = None) -> list[dict[str, object]]:
    """Stand-in for analysis/memcpy.py: one row per memcpy name (the name carries the direction)."""
    copies = (
        select.by_streams(select.by_devices(trace.gpu_events(), devices), streams)
        .filter(pl.col(Col.KIND).cast(pl.String) == Kind.MEMCPY)
        .select(pl.col(Col.NAME).cast(pl.String), Col.DUR_NS, Col.BYTES).collect()
    )
    if copies.height == 0:
        return []
    sized = pl.when(pl.col(Col.BYTES).is_not_null() & (pl.col(Col.DUR_NS) > 0))
    per = (
        copies.group_by(Col.NAME)
        .agg(pl.len().alias("calls"), pl.col(Col.BYTES).sum().alias("bytes"),
             pl.col(Col.DUR_NS).sum().alias("total_ns"),
             sized.then(pl.col(Col.BYTES)).otherwise(None).sum().alias("_b"),
             sized.then(pl.col(Col.DUR_NS)).otherwise(None).sum().alias("_t"))
        .sort(["total_ns", Col.NAME], descending=[True, False])
    )
    return [
        {"direction": _direction(r[Col.NAME] or ""), "name": r[Col.NAME] or "", "calls": int(r["calls"]),
         "bytes": int(r["bytes"] or 0), "total_us": round(r["total_ns"] / 1e3, 3),
         "bandwidth_gbps": round(r["_b"] / r["_t"], 3) if r["_t"] else None}
        for r in per.iter_rows(named=True)
    ]


def _direction(name: str) -> str:
    for label, pattern in (("P2P", r"PtoP|P2P|Peer"), ("H2D", r"HtoD|H2D"), ("D2H", r"DtoH|D2H"),
                           ("D2D", r"DtoD|D2D")):
        if re.search(pattern, name, re.IGNORECASE):
            return label
    return "unknown"
