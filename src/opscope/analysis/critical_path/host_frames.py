"""The host's own time on the critical path, named: the CPU time the path spends inside an annotation but in no
operator (a `ProfilerStep#N`, a `record_function` range, the DataLoader's `__next__`: the Python between the
operators) charged to the innermost frame of the user's code running at each instant (docs/critical-path.md,
"Host time on the path"). Library frames fold into the user frame that called them, as `opscope lines` folds
them (`attribution.frames`: torch, the standard library, builtins and compiled code are skipped).

Exact, per instant: each thread's kept frames cut its time into elementary intervals, each owned by the
innermost kept frame active in it (a frame's start opens it; its end hands it back to its kept parent), and
the on-path time of an interval is read from prefix sums of the path's merged segments on that thread. All
threads at once on one shifted time axis, sorts and binary searches, no pass per step or per frame; a step's
share is the part of its own segments (the hull of its segments per thread cuts the intervals).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl

from opscope.analysis.attribution.frames import FrameFilter
from opscope.analysis.attribution.lines import KeptFrames, kept_frames, python_frames
from opscope.analysis.base import intervals
from opscope.analysis.base.linking import ROW, Linkage
from opscope.analysis.critical_path.host_time import NO_FRAME, FrameTime, StepHostTime
from opscope.analysis.critical_path.kinds import CPU_BOUND
from opscope.analysis.critical_path.stats import CriticalPathStats
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace

TOP_FRAMES = 5  # frames listed per step


def host_frames(
    trace: Trace,
    linkage: Linkage,
    stats: CriticalPathStats,
    frames: FrameFilter | None = None,
    top: int = TOP_FRAMES,
) -> tuple[StepHostTime, ...]:
    """Per step of `stats`, in its order: the path's host time between operators and its `top` frames (0:
    every frame; then a step's frames add up to its time between operators)."""
    parts = [
        s.segments.filter(~pl.col("gpu") & (pl.col("kind").cast(pl.String) == CPU_BOUND))
        .select("src_ts_ns", "dst_ts_ns", "event_row")
        .with_columns(pl.lit(i, dtype=pl.Int64).alias("step"))
        for i, s in enumerate(stats.steps)
    ]
    if not parts:
        return ()
    segments = pl.concat(parts).filter(pl.col("dst_ts_ns") > pl.col("src_ts_ns"))
    owners = (
        trace.lazy()
        .with_row_index(ROW)
        .select(
            pl.col(ROW).cast(pl.Int64),
            pl.col(Col.KIND).cast(pl.String).alias("kind"),
            pl.col(Col.PID).cast(pl.String),
            pl.col(Col.TID).cast(pl.String),
        )
        .filter(pl.col(ROW).is_in(segments["event_row"].unique().cast(pl.Int64).implode()))
        .collect()
    )
    host = segments.with_columns(pl.col("event_row").cast(pl.Int64)).join(
        owners, left_on="event_row", right_on=ROW, how="inner"
    )
    host = host.filter(pl.col("kind") == Kind.USER_ANNOTATION)
    totals = np.zeros(len(stats.steps), dtype=np.int64)
    if host.height:
        np.add.at(totals, host["step"].to_numpy(), (host["dst_ts_ns"] - host["src_ts_ns"]).to_numpy())
    kept = kept_frames(trace, linkage, frames or FrameFilter())
    if host.height == 0 or kept.frames.height == 0:
        return tuple(StepHostTime(int(t), ()) for t in totals)
    named = _by_frame(host, kept, linkage)
    out = []
    for i, total in enumerate(totals):
        mine = named.filter(pl.col("step") == i).sort(["ns", "frame"], descending=[True, False])
        out.append(
            StepHostTime(
                int(total),
                tuple(
                    FrameTime(str(r["frame"]), int(r["ns"]))
                    for r in (mine.head(top) if top else mine).iter_rows(named=True)
                ),
            )
        )
    return tuple(out)


def _by_frame(host: pl.DataFrame, kept: KeptFrames, linkage: Linkage) -> pl.DataFrame:
    """step, frame, ns: the segments' time by the innermost kept frame on their thread (module doc)."""
    every = python_frames(linkage)
    frames = (
        kept.frames.select(ROW, "name_id")
        .with_row_index("pos")
        .join(every.select(ROW, Col.PID, Col.TID, Col.TS_NS, "end_ns"), on=ROW, how="left")
    )
    threads = (
        pl.concat([frames.select(Col.PID, Col.TID), host.select(Col.PID, Col.TID)])
        .unique()
        .with_row_index("thread")
        .with_columns(pl.col("thread").cast(pl.Int64))
    )
    frames = frames.join(threads, on=[Col.PID, Col.TID], how="left", nulls_equal=True)
    host = host.join(threads, on=[Col.PID, Col.TID], how="left", nulls_equal=True)
    lo = int(min(frames[Col.TS_NS].min() or 0, host["src_ts_ns"].min() or 0))  # type: ignore[arg-type]
    hi = int(max(frames["end_ns"].max() or 0, host["dst_ts_ns"].max() or 0))  # type: ignore[arg-type]
    span = hi - lo + 2
    if span * (threads.height + 1) >= 2**62:  # pragma: no cover - times too far apart for one axis
        return pl.DataFrame(schema={"step": pl.Int64, "frame": pl.String, "ns": pl.Int64})

    def axis(ts: pl.Series, thread: pl.Series) -> np.ndarray:
        return ts.to_numpy().astype(np.int64) - lo + thread.to_numpy().astype(np.int64) * span

    # the elementary intervals: every kept frame's start (owner: the frame) and end (owner: its kept parent)
    parent = kept.parent
    pos = frames["pos"].to_numpy().astype(np.int64)
    starts, ends = axis(frames[Col.TS_NS], frames["thread"]), axis(frames["end_ns"], frames["thread"])
    at = np.concatenate([starts, ends])
    owner = np.concatenate([pos, parent[pos]])
    # at one instant: ends first (inner ends first), then starts (outer starts first): the last boundary at an
    # instant names its owner
    is_start = np.r_[np.ones(len(pos), dtype=np.int64), np.zeros(len(pos), dtype=np.int64)]
    length = np.r_[ends - starts, ends - starts]
    order = np.lexsort((np.where(is_start == 1, -length, length), is_start, at))
    at, owner = at[order], owner[order]
    # the path's segments on the same axis (their union per elementary interval: `covered_per_window` below)
    seg_s, seg_e = axis(host["src_ts_ns"], host["thread"]), axis(host["dst_ts_ns"], host["thread"])

    # cut at each step's hull on each thread, so that every interval lies in one step's segments
    hull = (
        host.with_columns(pl.Series("_s", seg_s), pl.Series("_e", seg_e))
        .group_by("step", "thread")
        .agg(pl.col("_s").min(), pl.col("_e").max())
        .sort("_s")
    )
    cut = hull["_s"].to_numpy()
    before = np.searchsorted(at, cut, side="right")  # the boundaries at or before each cut
    cut_owner = (
        np.where(before > 0, owner[np.maximum(before - 1, 0)], -1) if len(at) else np.full(len(cut), -1)
    )
    all_at = np.concatenate([at, cut])
    all_owner = np.concatenate([owner, cut_owner])
    order = np.argsort(all_at, kind="stable")
    all_at, all_owner = all_at[order], all_owner[order]
    begin, finish = all_at[:-1], all_at[1:]
    union = intervals.covered_per_window(seg_s, seg_e, np.zeros(len(seg_s), dtype=np.int64), 1, begin, finish)
    if union is None:  # pragma: no cover - times too far apart for one axis
        return pl.DataFrame(schema={"step": pl.Int64, "frame": pl.String, "ns": pl.Int64})
    ns = union[:, 0]
    which = np.searchsorted(cut, begin, side="right") - 1
    keep = (ns > 0) & (which >= 0)
    steps = hull["step"].to_numpy()[which[keep]]
    owners = all_owner[:-1][keep]
    # what no interval named (before a thread's first frame, or segments overlapping one another) is charged
    # below, per step, to NO_FRAME: a step's rows add up to its `between_ops_ns`
    outside = int((seg_e - seg_s).sum() - ns[keep].sum())
    names = kept.names.select("name_id", "name")
    name_of = frames.select("pos", "name_id").join(names, on="name_id", how="left").sort("pos")["name"]
    frame_names = np.where(owners >= 0, name_of.gather(np.maximum(owners, 0)).to_numpy(), NO_FRAME)
    table = pl.DataFrame({"step": steps, "frame": frame_names.astype(str), "ns": ns[keep]})
    if outside > 0:  # charged by step through the segments' own steps: the rest of each step
        per_step = table.group_by("step").agg(pl.col("ns").sum().alias("named"))
        whole = host.group_by("step").agg((pl.col("dst_ts_ns") - pl.col("src_ts_ns")).sum().alias("all"))
        rest = whole.join(per_step, on="step", how="left").with_columns(
            (pl.col("all") - pl.col("named").fill_null(0)).clip(lower_bound=0).alias("ns"),
            pl.lit(NO_FRAME).alias("frame"),
        )
        table = pl.concat(
            [table, rest.filter(pl.col("ns") > 0).select("step", "frame", "ns")], how="vertical_relaxed"
        )
    return table.group_by("step", "frame").agg(pl.col("ns").sum())


def with_host_frames(trace: Trace, linkage: Linkage, stats: CriticalPathStats) -> CriticalPathStats:
    """`stats` with its `hosts` (what `critical-path` and `opscope.critical_path` show)."""
    return replace(stats, hosts=host_frames(trace, linkage, stats))
