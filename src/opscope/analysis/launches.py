"""GPU work -> the runtime/driver call that launched it, by correlation id (flow events where it is missing).

This is the small matcher the timeline analyses need (launch delay, host-wait idle time): one row per GPU
activity with the start, duration, name and thread of its launch call. A GPU event whose launch is not in the
trace (launched before the profiler started, GPU-only capture) keeps null launch columns and is counted.

Matching rules:
- GPU event and launch call share `correlation` (Kineto writes it on both sides).
- Where an event has no correlation, the `ac2g` / `async_cpu_to_gpu` / old `async` flow whose end (`f`) sits
  on the GPU event (same pid, tid and start) gives the id, and the flow start (`s`) on the CPU side gives the
  launch call (same pid, tid and start).
- Several launch calls with the same id (merged multi-process traces) keep the earliest and are counted.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from opscope.analysis import select
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace

LAUNCH_KINDS = (Kind.RUNTIME, Kind.DRIVER)
# cudaGraphLaunch, cuGraphLaunch, hipGraphLaunch: one call, many kernels.
GRAPH_LAUNCH_PATTERN = r"(?i)graphlaunch"

# Columns of `GpuLaunches.frame`.
LAUNCH_NAME = "launch_name"
LAUNCH_TS = "launch_ts_ns"
LAUNCH_DUR = "launch_dur_ns"
LAUNCH_PID = "launch_pid"
LAUNCH_TID = "launch_tid"
FROM_GRAPH = "from_graph"


@dataclass(frozen=True)
class GpuLaunches:
    """GPU activity with its launch call. `frame` columns: kind, name, device, stream, ts_ns, dur_ns,
    correlation, bytes, launch_name, launch_ts_ns, launch_dur_ns, launch_pid, launch_tid, from_graph."""

    frame: pl.DataFrame
    gpu_events: int
    linked: int  # GPU events with a launch call
    via_flow: int  # of which the id came from a flow event
    missing: int  # GPU events without a launch call in the trace
    duplicate_ids: int  # correlation ids carried by more than one launch call


def _flow_ids(trace: Trace, phase: str) -> pl.LazyFrame:
    """(pid, tid, ts_ns) -> flow id of launch flows with this phase (`s` on the CPU, `f` on the GPU)."""
    return (
        trace.lazy()
        .filter((pl.col(Col.KIND).cast(pl.String) == Kind.FLOW) & (pl.col(Col.PH).cast(pl.String) == phase))
        .select(pl.col(Col.PID).cast(pl.String), pl.col(Col.TID).cast(pl.String), Col.TS_NS,
                pl.col(Col.FLOW_ID).alias("_flow"))
        .drop_nulls()
        .unique(subset=[Col.PID, Col.TID, Col.TS_NS], keep="first")
    )


def _with_flow_fallback(frame: pl.DataFrame, trace: Trace, phase: str) -> pl.DataFrame:
    """`frame` with correlation filled from launch flows where it is null; `_via_flow` marks those rows.
    The flow join only runs when some row lacks a correlation (rare in current traces)."""
    missing = frame[Col.CORRELATION].is_null()
    if not missing.any():
        return frame.with_columns(pl.lit(False).alias("_via_flow"))
    joined = frame.join(_flow_ids(trace, phase).collect(), on=[Col.PID, Col.TID, Col.TS_NS], how="left",
                        maintain_order="left")
    return joined.with_columns(
        (pl.col(Col.CORRELATION).is_null() & pl.col("_flow").is_not_null()).alias("_via_flow"),
        pl.coalesce(Col.CORRELATION, "_flow").alias(Col.CORRELATION),
    ).drop("_flow")


def gpu_launches(trace: Trace, devices: tuple[int, ...] | None = None,
                 streams: tuple[int, ...] | None = None) -> GpuLaunches:
    """Every GPU activity of the selection with its launch call (see the module doc for the rules)."""
    gpu = select.by_streams(select.by_devices(trace.gpu_events(), devices), streams).select(
        pl.col(Col.KIND).cast(pl.String), pl.col(Col.NAME).cast(pl.String), pl.col(Col.PID).cast(pl.String),
        pl.col(Col.TID).cast(pl.String), Col.DEVICE, Col.STREAM, Col.TS_NS, Col.DUR_NS, Col.CORRELATION,
        Col.BYTES,
    ).collect()
    gpu = _with_flow_fallback(gpu, trace, "f")
    calls = (
        trace.lazy()
        .filter(pl.col(Col.KIND).cast(pl.String).is_in(list(LAUNCH_KINDS)))
        .select(pl.col(Col.NAME).cast(pl.String), pl.col(Col.PID).cast(pl.String),
                pl.col(Col.TID).cast(pl.String), Col.TS_NS, Col.DUR_NS, Col.CORRELATION)
        .collect()
    )
    calls = _with_flow_fallback(calls, trace, "s").drop("_via_flow").filter(pl.col(Col.CORRELATION).is_not_null())
    duplicate_ids = int(calls.group_by(Col.CORRELATION).len().filter(pl.col("len") > 1).height)
    calls = calls.sort(Col.TS_NS).unique(subset=[Col.CORRELATION], keep="first").select(
        Col.CORRELATION,
        pl.col(Col.NAME).alias(LAUNCH_NAME),
        pl.col(Col.TS_NS).alias(LAUNCH_TS),
        pl.col(Col.DUR_NS).alias(LAUNCH_DUR),
        pl.col(Col.PID).alias(LAUNCH_PID),
        pl.col(Col.TID).alias(LAUNCH_TID),
    )
    frame = gpu.join(calls, on=Col.CORRELATION, how="left", maintain_order="left").with_columns(
        pl.col(LAUNCH_NAME).str.contains(GRAPH_LAUNCH_PATTERN).fill_null(False).alias(FROM_GRAPH)
    )
    linked = frame.filter(pl.col(LAUNCH_TS).is_not_null())
    return GpuLaunches(
        frame=frame.drop("_via_flow", Col.PID, Col.TID),
        gpu_events=frame.height,
        linked=linked.height,
        via_flow=int(linked["_via_flow"].sum() or 0),
        missing=frame.height - linked.height,
        duplicate_ids=duplicate_ids,
    )
