"""GPU busy / idle time, utilization and overlaps per device and per stream, over the analysed window.

All figures are interval unions (two kernels running at once on two streams count once), computed with
`analysis.base.intervals` and one vectorised sweep for stream concurrency. Definitions (docs/analysis-timeline.md):

- window_ns: length of the analysed window (analysis/base/window.py).
- busy_ns: union of the device's GPU activity (kernels, memcpys, memsets) clipped to the window.
- idle_ns = window_ns - busy_ns; utilization = busy_ns / window_ns.
- span_ns: first start to last end of the device's activity inside the window (what HTA and TraceLens call
  total / kernel time; summed over the pieces of a multi-piece window); idle_in_span_ns = span_ns - busy_ns.
- compute_ns: union of kernels not categorised communication / memcpy / memset; communication_ns: union of
  communication kernels (NCCL / RCCL ...); memcpy_ns, memset_ns likewise.
- compute_comm_overlap_ns = |compute ∩ communication|; exposed_comm_ns = communication_ns - that overlap;
  compute_memcpy_overlap_ns = |compute ∩ memcpy|.
- multi_stream_ns: time during which two or more streams of the device are busy at once.
- per stream: busy_ns (union on that stream), exclusive_ns (the stream is the only busy one),
  overlapped_ns = busy_ns - exclusive_ns (another stream of the device is busy too).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from opscope.analysis.base import intervals
from opscope.analysis.base.window import PIECE
from opscope.analysis.kernels.categories import CATEGORY
from opscope.analysis.kernels.category_rules import COMMUNICATION, MEMCPY, MEMSET
from opscope.analysis.timeline.activity import Activity, TimelineOptions, gpu_activity
from opscope.model.schema import Col
from opscope.model.trace import Trace

NOT_COMPUTE = (COMMUNICATION, MEMCPY, MEMSET)


@dataclass(frozen=True)
class StreamTimeline:
    device: int | None
    stream: int | None
    events: int
    busy_ns: int
    exclusive_ns: int
    overlapped_ns: int
    utilization: float


@dataclass(frozen=True)
class DeviceTimeline:
    device: int | None
    name: str | None
    events: int
    busy_ns: int
    idle_ns: int
    utilization: float
    span_ns: int
    idle_in_span_ns: int
    compute_ns: int
    communication_ns: int
    memcpy_ns: int
    memset_ns: int
    compute_comm_overlap_ns: int
    exposed_comm_ns: int
    compute_memcpy_overlap_ns: int
    multi_stream_ns: int
    streams: tuple[StreamTimeline, ...]


@dataclass(frozen=True)
class Timeline:
    window_start_ns: int | None
    window_end_ns: int | None
    window_ns: int
    window_source: str  # "trace" or "steps"
    pieces: int  # number of disjoint window pieces
    devices: tuple[DeviceTimeline, ...]
    gpu_events: int
    negative_durations: int  # GPU events of the trace with a negative duration (counted as zero)


def _length(merged: pl.DataFrame) -> int:
    return int(merged.select((pl.col(intervals.END) - pl.col(intervals.START)).sum()).item() or 0)


def _overlap(a: pl.DataFrame, b: pl.DataFrame) -> int:
    """|A ∩ B| of two already merged sets."""
    return intervals.intersection_ns(a, b) if a.height and b.height else 0


def _concurrency(merged: pl.DataFrame) -> tuple[int, dict[int | None, int]]:
    """(time with >= 2 busy streams, {stream: time it is the only busy stream}) by one sweep over the
    per-stream merged intervals."""
    if merged.height == 0:
        return 0, {}
    streams = merged[Col.STREAM].unique(maintain_order=True).to_list()
    index = {s: i for i, s in enumerate(streams)}
    merged = merged.with_columns(
        pl.col(Col.STREAM).replace_strict(index, default=None, return_dtype=pl.Int64).alias("_i")
    )
    points = pl.concat(
        [
            merged.select(
                pl.col(intervals.START).alias("t"), pl.lit(1).alias("dc"), pl.col("_i").alias("di")
            ),
            merged.select(
                pl.col(intervals.END).alias("t"), pl.lit(-1).alias("dc"), (-pl.col("_i")).alias("di")
            ),
        ]
    )
    sweep = (
        points.group_by("t")
        .agg(pl.col("dc").sum(), pl.col("di").sum())
        .sort("t")
        .with_columns(
            pl.col("dc").cum_sum().alias("busy"),
            pl.col("di").cum_sum().alias("which"),
            (pl.col("t").shift(-1) - pl.col("t")).fill_null(0).alias("len"),
        )
    )
    multi = int(sweep.filter(pl.col("busy") >= 2)["len"].sum() or 0)
    single = sweep.filter(pl.col("busy") == 1).group_by("which").agg(pl.col("len").sum())
    exclusive = {streams[int(w)]: int(n) for w, n in single.iter_rows()}
    return multi, exclusive


def _device(trace: Trace, device: int | None, events: pl.DataFrame, window_ns: int) -> DeviceTimeline:
    # Each set is merged once; lengths and overlaps are computed on the merged sets.
    category = pl.col(CATEGORY)
    busy = _length(intervals.merge(events))
    compute = intervals.merge(events.filter(~category.is_in(list(NOT_COMPUTE))))
    comm = intervals.merge(events.filter(category == COMMUNICATION))
    memcpy = intervals.merge(events.filter(category == MEMCPY))
    comm_ns = _length(comm)
    compute_comm = _overlap(compute, comm)
    by_stream = intervals.merge(events, by=[Col.STREAM])
    multi, exclusive = _concurrency(by_stream)
    per_stream = by_stream.group_by(Col.STREAM).agg(
        (pl.col(intervals.END) - pl.col(intervals.START)).sum().alias("busy_ns")
    )
    counts = events.group_by(Col.STREAM).len()
    streams = []
    for row in counts.join(per_stream, on=Col.STREAM, how="left", nulls_equal=True).iter_rows(named=True):
        stream_busy = int(row["busy_ns"] or 0)
        only = exclusive.get(row[Col.STREAM], 0)
        streams.append(
            StreamTimeline(
                device=device,
                stream=row[Col.STREAM],
                events=int(row["len"]),
                busy_ns=stream_busy,
                exclusive_ns=only,
                overlapped_ns=stream_busy - only,
                utilization=stream_busy / window_ns if window_ns else 0.0,
            )
        )
    spans = events.group_by(PIECE).agg(
        (pl.col(intervals.END).max() - pl.col(intervals.START).min()).alias("s")
    )
    span = int(spans["s"].sum() or 0)
    return DeviceTimeline(
        device=device,
        name=trace.meta.device_name(device),
        events=events.height,
        busy_ns=busy,
        idle_ns=window_ns - busy,
        utilization=busy / window_ns if window_ns else 0.0,
        span_ns=span,
        idle_in_span_ns=span - busy,
        compute_ns=_length(compute),
        communication_ns=comm_ns,
        memcpy_ns=_length(memcpy),
        memset_ns=_length(intervals.merge(events.filter(category == MEMSET))),
        compute_comm_overlap_ns=compute_comm,
        exposed_comm_ns=comm_ns - compute_comm,
        compute_memcpy_overlap_ns=_overlap(compute, memcpy),
        multi_stream_ns=multi,
        streams=tuple(sorted(streams, key=lambda s: (s.stream is None, s.stream or 0))),
    )


def timeline(
    trace: Trace, options: TimelineOptions | None = None, activity: Activity | None = None
) -> Timeline:
    """Busy, idle, utilization and overlaps per device and stream (see the module doc)."""
    act = activity or gpu_activity(trace, options)
    clipped = act.clipped()
    win = act.window
    devices = sorted(clipped[Col.DEVICE].unique().to_list(), key=lambda d: (d is None, d or 0))
    rows = tuple(
        _device(trace, d, clipped.filter(pl.col(Col.DEVICE).eq_missing(d)), win.total_ns) for d in devices
    )
    return Timeline(
        window_start_ns=win.start_ns,
        window_end_ns=win.end_ns,
        window_ns=win.total_ns,
        window_source=win.source,
        pieces=len(win.bounds),
        devices=rows,
        gpu_events=clipped.height,
        negative_durations=act.link.negative_gpu,
    )
