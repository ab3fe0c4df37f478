"""Launch / queue delay per kernel: kernel start minus the start of its launch call.

It measures how long a kernel waited between the host asking for it and the GPU starting it: the launch
overhead plus the time spent queued behind earlier work. Definitions (docs/analysis-timeline.md):

- Kernels measured: events of kind kernel whose start lies in the analysed window and whose launch call is in
  the trace. Kernels launched by a graph launch (cudaGraphLaunch / hipGraphLaunch) are excluded and counted:
  one call starts many kernels one after another, so "start minus call" would add up the graph's own run time.
- delay = max(0, kernel.ts - launch.ts). Kineto converts GPU timestamps to the host clock; the conversion can
  be off by a few microseconds, so a kernel may appear to start before its launch call. Such raw delays are
  clamped to 0, counted (`negative`) and the most negative one is reported (`min_raw_ns`, a bound on the clock
  offset). No per-trace offset is subtracted: estimating one from the data would shift every figure by a
  guess.
- p50 / p95: linear-interpolation percentiles of the clamped delays; max; mean.
- worst: groups of kernels by the op that launched them (the innermost CPU op or user annotation containing
  the launch call on its thread, from `analysis.base.linking`), ordered by their largest delay.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from opscope.analysis.base import window as win
from opscope.analysis.timeline.activity import (
    FROM_GRAPH,
    LAUNCH_OP,
    LAUNCH_TS,
    Activity,
    TimelineOptions,
    gpu_activity,
)
from opscope.analysis.timeline.syncs import NO_OP
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace

DELAY = "delay_ns"


@dataclass(frozen=True)
class DelayGroup:
    name: str  # launching op (or "(no op)")
    kernels: int
    mean_ns: float
    p95_ns: float
    max_ns: int


@dataclass(frozen=True)
class LaunchDelay:
    kernels: int  # kernels with a measured delay
    p50_ns: float | None
    p95_ns: float | None
    max_ns: int | None
    mean_ns: float | None
    negative: int  # raw delays below zero, clamped to 0
    min_raw_ns: int | None  # the most negative raw delay (None when none is negative)
    missing_launch: int  # kernels in the window without a launch call in the trace
    graph_kernels: int  # kernels launched by a graph launch (excluded)
    worst: tuple[DelayGroup, ...]


def kernel_delays(activity: Activity) -> tuple[pl.DataFrame, int, int]:
    """(measured kernels with raw and clamped delay, kernels without launch, graph kernels) in the window."""
    kernels = activity.events.filter(pl.col(Col.KIND) == Kind.KERNEL)
    kernels = kernels.filter(win.starts_inside(activity.window, Col.TS_NS))
    missing = int(kernels.filter(pl.col(LAUNCH_TS).is_null()).height)
    graph = int(kernels.filter(pl.col(FROM_GRAPH)).height)
    measured = (
        kernels.filter(pl.col(LAUNCH_TS).is_not_null() & ~pl.col(FROM_GRAPH))
        .with_columns((pl.col(Col.TS_NS) - pl.col(LAUNCH_TS)).alias("raw_ns"))
        .with_columns(pl.col("raw_ns").clip(lower_bound=0).alias(DELAY))
    )
    return measured, missing, graph


def launch_delay(
    trace: Trace, options: TimelineOptions | None = None, activity: Activity | None = None, top: int = 10
) -> LaunchDelay:
    """Distribution of launch delays and the ops whose kernels waited longest (see the module doc)."""
    act = activity or gpu_activity(trace, options)
    measured, missing, graph = kernel_delays(act)
    if measured.height == 0:
        return LaunchDelay(
            kernels=0,
            p50_ns=None,
            p95_ns=None,
            max_ns=None,
            mean_ns=None,
            negative=0,
            min_raw_ns=None,
            missing_launch=missing,
            graph_kernels=graph,
            worst=(),
        )
    delay = pl.col(DELAY)
    stats = measured.select(
        delay.quantile(0.5, "linear").alias("p50"),
        delay.quantile(0.95, "linear").alias("p95"),
        delay.max().alias("max"),
        delay.mean().alias("mean"),
        (pl.col("raw_ns") < 0).sum().alias("neg"),
        pl.col("raw_ns").min().alias("min_raw"),
    ).row(0, named=True)
    grouped = (
        measured.with_columns(pl.col(LAUNCH_OP).fill_null(NO_OP).alias("op"))
        .group_by("op")
        .agg(
            pl.len().alias("n"),
            delay.mean().alias("mean"),
            delay.quantile(0.95, "linear").alias("p95"),
            delay.max().alias("max"),
        )
        .sort(["max", "mean", "op"], descending=[True, True, False])
    )
    grouped = grouped.head(top) if top > 0 else grouped
    worst = tuple(
        DelayGroup(
            name=r["op"],
            kernels=int(r["n"]),
            mean_ns=float(r["mean"]),
            p95_ns=float(r["p95"]),
            max_ns=int(r["max"]),
        )
        for r in grouped.iter_rows(named=True)
    )
    negative = int(stats["neg"])
    return LaunchDelay(
        kernels=measured.height,
        p50_ns=float(stats["p50"]),
        p95_ns=float(stats["p95"]),
        max_ns=int(stats["max"]),
        mean_ns=float(stats["mean"]),
        negative=negative,
        min_raw_ns=int(stats["min_raw"]) if negative else None,
        missing_launch=missing,
        graph_kernels=graph,
        worst=worst,
    )
