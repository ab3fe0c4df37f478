"""GPU time by Python source line: every kernel, memcpy and memset charged to the innermost frame of the user's
own code that was running on the launching thread when its launch call started. This is what `opscope lines`
prints, the report's "By source" panel shows and the findings' `frame` names.

Over the link table (`analysis.base.linking`: GPU event -> launch call) and the Python frames of a with_stack
trace (`python_function` events), classified once per distinct name (`attribution.frames`). The frame of a
launch is found for all launches at once by `nesting.innermost_container`, the launch taken as a point (its
start) and only the kept frames allowed to contain it; a frame's kept parent the same way, over the kept
frames. No loop over events. Definitions: docs/analysis-attribution.md.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl

from opscope.analysis.attribution.frames import FrameFilter, classify
from opscope.analysis.base import select
from opscope.analysis.base.arrays import take_or
from opscope.analysis.base.linking import ROW, Linkage, link, once_per_link, selected_gpu
from opscope.analysis.base.nesting import ancestors, innermost_container
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace
from opscope.tables import Tabular

TOP_NAMES = 3  # ops and kernels listed under each row
HOW_TO_RECORD = (
    "record them with opscope.profile(..., with_stack=True) or torch.profiler.profile(with_stack=True)"
)


@dataclass(frozen=True)
class LineOptions:
    top: int = 30  # rows to keep; 0 = all
    depth: int = 1  # a row is the `depth` innermost kept frames (a short call path)
    frames: FrameFilter = field(default_factory=FrameFilter)
    devices: tuple[int, ...] | None = None
    streams: tuple[int, ...] | None = None
    steps: str | None = None


@dataclass(frozen=True)
class NamedTime:
    """An op or kernel name under a row, with the GPU time charged to the row through it."""

    name: str
    gpu_ns: int


@dataclass(frozen=True)
class LineRow:
    frame: str  # the innermost kept frame, as the trace names it: `file(line): function`
    file: str | None
    line: int | None
    function: str
    gpu_ns: int
    share: float  # gpu_ns / all selected GPU time
    kernels: int  # GPU events charged to the row
    top_ops: tuple[NamedTime, ...]  # innermost op enclosing the launch; "(no op)" where none
    top_kernels: tuple[NamedTime, ...]
    cpu_self_ns: int  # the frame's own CPU time: its duration minus what ran directly inside it
    path: tuple[str, ...]  # the row's kept frames, outermost first, `frame` last


@dataclass(frozen=True)
class SourceLines(Tabular):
    path: str
    has_stacks: bool  # the trace has python_function events (with_stack=True)
    gpu_time_ns: int  # all selected GPU activity
    unattributed_ns: int  # gpu_time_ns - the rows (all rows, before `top`)
    missing_launch_ns: int  # of which: launch call not in the trace
    outside_frames_ns: int  # of which: launched outside every kept frame
    rows: tuple[LineRow, ...]
    total_rows: int
    skip_prefixes: tuple[str, ...]
    options: LineOptions
    warnings: tuple[str, ...] = ()

    def _table_rows(self) -> list[dict[str, Any]]:
        return [
            {
                "frame": r.frame,
                "gpu_ns": r.gpu_ns,
                "share": r.share,
                "kernels": r.kernels,
                "cpu_self_ns": r.cpu_self_ns,
                "top_ops": ", ".join(n.name for n in r.top_ops),
                "top_kernels": ", ".join(n.name for n in r.top_kernels),
                "path": " > ".join(r.path),
            }
            for r in self.rows
        ]


def python_frames(linked: Linkage) -> pl.DataFrame:
    """The Python frames of the link table: row, name (String), pid, tid, ts_ns, end_ns."""
    return linked.scopes.filter(pl.col(Col.KIND) == Kind.PYTHON).select(
        ROW,
        pl.col(Col.NAME).cast(pl.String),
        pl.col(Col.PID).cast(pl.String),
        pl.col(Col.TID).cast(pl.String),
        Col.TS_NS,
        (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS).clip(lower_bound=0)).alias("end_ns"),
    )


def launch_points(linked: Linkage) -> pl.DataFrame:
    """Each distinct launch call of the link table as a point on its thread, for `innermost_at`: launch_row,
    pid, tid (String), ts_ns; sorted by launch_row."""
    return (
        linked.gpu.filter(pl.col("launch_row").is_not_null())
        .select(
            "launch_row",
            pl.col("launch_pid").cast(pl.String).alias(Col.PID),
            pl.col("launch_tid").cast(pl.String).alias(Col.TID),
            pl.col("launch_ts_ns").alias(Col.TS_NS),
        )
        .unique("launch_row")
        .sort("launch_row")
    )


def innermost_at(frames: pl.DataFrame, points: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """For each frame (pid, tid, ts_ns, end_ns) its parent, and for each point (pid, tid, ts_ns) the frame that
    holds it: the innermost frame on the same pid/tid with start <= t <= end (innermost: the latest start, the
    shorter on equal starts). Positions into `frames`, -1 where none."""
    n = frames.height
    both = pl.concat(
        [
            frames.select(Col.PID, Col.TID, Col.TS_NS, "end_ns"),
            points.select(Col.PID, Col.TID, Col.TS_NS, pl.col(Col.TS_NS).alias("end_ns")),
        ]
    )
    # one integer per (pid, tid): a hash join against the distinct pairs, no string sort
    threads = both.select(Col.PID, Col.TID).unique().with_row_index("_thread")
    thread = both.join(threads, on=[Col.PID, Col.TID], how="left", nulls_equal=True, maintain_order="left")
    start = both[Col.TS_NS].fill_null(0).to_numpy()
    end = both["end_ns"].fill_null(0).to_numpy()
    container = np.arange(both.height) < n
    found = innermost_container(thread["_thread"].cast(pl.Int64).to_numpy(), start, end, container)
    return found[:n], found[n:]


@dataclass(frozen=True)
class KeptFrames:
    """The kept (user) frames of a trace with their names, kept parents and CPU self time, and the kept frame
    of every launch call: what `source_lines`, the findings' frames and the report share."""

    frames: pl.DataFrame  # row, name, name_id, cpu_self_ns, ts_ns (positions = indices of `parent`)
    parent: np.ndarray  # position of each frame's kept parent, -1 at the top
    names: pl.DataFrame  # name_id, name, file, line, function (the kept names)
    launches: pl.DataFrame  # launch_row, frame (position into `frames`, null: outside every kept frame)


def kept_frames(trace: Trace, linked: Linkage, frames: FrameFilter) -> KeptFrames:
    """The kept frames of `trace` and the kept frame of every launch call (see `KeptFrames`), once per trace,
    link table and filter."""
    return once_per_link(trace, linked, f"kept_frames:{frames!r}", lambda: _kept_frames(linked, frames))


def _kept_frames(linked: Linkage, frames_filter: FrameFilter) -> KeptFrames:
    every = python_frames(linked)
    classes = classify(every[Col.NAME], frames_filter).filter(pl.col("kept"))
    names = classes.select("name", "file", "line", "function").with_row_index("name_id")
    names = names.with_columns(pl.col("name_id").cast(pl.Int64))
    kept = every.join(names.select(pl.col("name").alias(Col.NAME), "name_id"), on=Col.NAME, how="inner").sort(
        ROW
    )
    parent, _ = innermost_at(kept, kept.clear())
    launches = launch_points(linked)
    _, at = innermost_at(kept, launches)
    launches = launches.select("launch_row").with_columns(
        pl.Series("frame", at, dtype=pl.Int64).replace(-1, None)
    )
    table = kept.select(ROW, Col.NAME, "name_id", Col.TS_NS).with_columns(
        pl.Series("cpu_self_ns", _cpu_self(linked, kept), dtype=pl.Int64)
    )
    return KeptFrames(frames=table, parent=parent, names=names, launches=launches)


def _cpu_self(linked: Linkage, kept: pl.DataFrame) -> np.ndarray:
    """Each kept frame's duration minus the durations of the scopes (frames, ops, annotations) directly inside
    it on its thread (the time-nesting parent of the link table, where it truly contains them), at least 0."""
    scopes = linked.scopes.select(
        ROW,
        "parent_row",
        Col.TS_NS,
        (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS).clip(lower_bound=0)).alias("_end"),
    )
    bounds = kept.select(
        pl.col(ROW).alias("parent_row"), pl.col(Col.TS_NS).alias("_ps"), pl.col("end_ns").alias("_pe")
    )
    inside = (
        scopes.join(bounds, on="parent_row", how="inner")
        .filter((pl.col(Col.TS_NS) >= pl.col("_ps")) & (pl.col("_end") <= pl.col("_pe")))
        .group_by("parent_row")
        .agg((pl.col("_end") - pl.col(Col.TS_NS)).sum().alias("_child"))
    )
    own = kept.select(ROW, (pl.col("end_ns") - pl.col(Col.TS_NS)).alias("_dur")).join(
        inside.rename({"parent_row": ROW}), on=ROW, how="left", maintain_order="left"
    )
    return (
        own.select((pl.col("_dur") - pl.col("_child").fill_null(0)).clip(lower_bound=0))
        .to_series()
        .to_numpy()
    )


def _path_columns(parent: np.ndarray, start: np.ndarray, depth: int) -> list[np.ndarray]:
    """For positions `start` (-1: none), the positions of the frame and its kept ancestors: column k holds the
    k-th ancestor (0: the frame itself), -1 past the top."""
    columns = [start]
    for _ in range(depth - 1):
        prev = columns[-1]
        columns.append(take_or(parent, prev, -1))
    return columns


def _keyed(ids: np.ndarray, columns: list[np.ndarray], frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with key columns p0..p{depth-1}: the name ids of the row's frames (innermost first), -1 past the
    top; `ids` maps frame positions to name ids."""
    keys = {f"p{k}": take_or(ids, col, -1) for k, col in enumerate(columns)}
    return frame.with_columns(pl.Series(k, v, dtype=pl.Int64) for k, v in keys.items())


def source_lines(
    trace: Trace, options: LineOptions | None = None, linkage: Linkage | None = None
) -> SourceLines:
    """GPU time of `trace` by the user's source line that launched it (see the module doc)."""
    opts = options or LineOptions()
    linked = linkage or link(trace)
    gpu = selected_gpu(trace, linked, opts.devices, opts.streams, opts.steps)
    total = int(gpu[Col.DUR_NS].sum() or 0)
    missing = int(gpu.filter(pl.col("launch_row").is_null())[Col.DUR_NS].sum() or 0)
    has_stacks = bool(linked.scopes.select((pl.col(Col.KIND) == Kind.PYTHON).any()).item())
    empty = SourceLines(
        path=trace.path,
        has_stacks=has_stacks,
        gpu_time_ns=total,
        unattributed_ns=total,
        missing_launch_ns=missing,
        outside_frames_ns=total - missing,
        rows=(),
        total_rows=0,
        skip_prefixes=tuple(opts.frames.skipped()),
        options=opts,
        warnings=trace.meta.warnings,
    )
    if not has_stacks:
        return empty
    kept = kept_frames(trace, linked, opts.frames)
    depth = max(opts.depth, 1)
    ids = kept.frames["name_id"].to_numpy()
    charged = (
        gpu.select(ROW, "launch_row", Col.NAME, "op_name", Col.DUR_NS)
        .join(kept.launches, on="launch_row", how="inner")
        .filter(pl.col("frame").is_not_null())
    )
    charged = _keyed(ids, _path_columns(kept.parent, charged["frame"].to_numpy(), depth), charged)
    keys = [f"p{k}" for k in range(depth)]
    by_row = charged.group_by(keys).agg(pl.col(Col.DUR_NS).sum().alias("gpu_ns"), pl.len().alias("kernels"))
    top_ops = _top_names(
        charged.with_columns(pl.col("op_name").cast(pl.String).fill_null("(no op)")), keys, "op_name"
    )
    top_kernels = _top_names(charged.with_columns(pl.col(Col.NAME).cast(pl.String)), keys, Col.NAME)
    own = kept.frames
    if opts.steps is not None:
        own = select.by_steps(
            own.with_columns(pl.lit(0).alias("_zero")), trace, opts.steps, clip=False, dur="_zero"
        )
    at = np.searchsorted(kept.frames[ROW].to_numpy(), own[ROW].to_numpy())
    cpu = _keyed(ids, _path_columns(kept.parent, at, depth), own.select("cpu_self_ns"))
    cpu_by_row = cpu.group_by(keys).agg(pl.col("cpu_self_ns").sum())
    table = (
        by_row.join(cpu_by_row, on=keys, how="left")
        .join(top_ops, on=keys, how="left")
        .join(top_kernels, on=keys, how="left")
        .join(kept.names.select(pl.col("name_id").alias("p0"), pl.col("name").alias("_frame")), on="p0")
        .with_columns(pl.col("cpu_self_ns").fill_null(0))
        .sort(["gpu_ns", "_frame", *keys], descending=[True, False, *[False] * depth])
    )
    attributed = int(table["gpu_ns"].sum() or 0)
    shown = table if opts.top <= 0 else table.head(opts.top)
    rows = _rows(shown, kept.names, keys, total)
    return replace(
        empty,
        unattributed_ns=total - attributed,
        outside_frames_ns=total - attributed - missing,
        rows=rows,
        total_rows=table.height,
    )


def _top_names(charged: pl.DataFrame, keys: list[str], column: str) -> pl.DataFrame:
    """Per row key: the TOP_NAMES values of `column` with the most GPU time (ties by name), as two lists."""
    per = charged.group_by([*keys, column]).agg(pl.col(Col.DUR_NS).sum().alias("_ns"))
    best = (
        per.sort([*keys, "_ns", column], descending=[*[False] * len(keys), True, False])
        .group_by(keys, maintain_order=True)
        .head(TOP_NAMES)
    )
    return best.group_by(keys).agg(
        pl.col(column).alias(f"{column}_names"), pl.col("_ns").alias(f"{column}_ns")
    )


def _rows(table: pl.DataFrame, names: pl.DataFrame, keys: list[str], total: int) -> tuple[LineRow, ...]:
    """The result rows (a loop over the rows kept, not over events)."""
    by_id = {int(r["name_id"]): r for r in names.iter_rows(named=True)}
    out = []
    for r in table.iter_rows(named=True):
        frame = by_id[int(r["p0"])]
        path = tuple(by_id[int(r[k])]["name"] for k in reversed(keys) if int(r[k]) >= 0)
        out.append(
            LineRow(
                frame=frame["name"],
                file=frame["file"],
                line=frame["line"],
                function=frame["function"],
                gpu_ns=int(r["gpu_ns"]),
                share=int(r["gpu_ns"]) / total if total else 0.0,
                kernels=int(r["kernels"]),
                top_ops=_named(r["op_name_names"], r["op_name_ns"]),
                top_kernels=_named(r[f"{Col.NAME}_names"], r[f"{Col.NAME}_ns"]),
                cpu_self_ns=int(r["cpu_self_ns"]),
                path=path,
            )
        )
    return tuple(out)


def _named(names: list[str] | None, times: list[int] | None) -> tuple[NamedTime, ...]:
    return tuple(NamedTime(n, int(t)) for n, t in zip(names or [], times or [], strict=True))


def gpu_frames(trace: Trace, linked: Linkage, frames: FrameFilter | None = None) -> pl.DataFrame:
    """Every GPU event of the link table that a kept frame launched: row, frame (the frame's name: the
    innermost frame of the user's code running on the launching thread when the launch call started). Empty
    on a trace without Python stacks."""
    if not linked.scopes.select((pl.col(Col.KIND) == Kind.PYTHON).any()).item():
        return pl.DataFrame(schema={ROW: pl.Int64, "frame": pl.String})
    kept = kept_frames(trace, linked, frames or FrameFilter())
    names = kept.frames.select(Col.NAME).with_row_index("frame").with_columns(pl.col("frame").cast(pl.Int64))
    return (
        linked.gpu.select(ROW, "launch_row")
        .join(kept.launches.drop_nulls("frame"), on="launch_row", how="inner")
        .join(names, on="frame", how="inner")
        .select(ROW, pl.col(Col.NAME).alias("frame"))
    )


def launch_sites(
    trace: Trace, linked: Linkage, kernels: Collection[str], ops: Collection[str]
) -> tuple[dict[str, str], dict[str, str]]:
    """For each of the kernel names `kernels`, and each of the op names `ops` (a CPU op enclosing the launch,
    at any depth), the frame of the user's code that launched the most of its GPU time (ties: the first frame
    name): what the findings' evidence names as `frame`. Empty on a trace without Python stacks."""
    frames = gpu_frames(trace, linked)
    if frames.height == 0 or not (kernels or ops):
        return {}, {}
    charged = frames.join(
        linked.gpu.select(ROW, pl.col(Col.NAME).cast(pl.String).alias("name"), "op_row", Col.DUR_NS), on=ROW
    )
    # CPU ops only: a user annotation (ProfilerStep#N) encloses everything, its busiest frame says nothing
    wanted = linked.scopes.filter(
        (pl.col(Col.KIND) == Kind.CPU_OP) & pl.col(Col.NAME).is_in(list(ops))
    ).select(pl.col(ROW).alias("ancestor"), pl.col(Col.NAME).cast(pl.String).alias("name"))
    starts = charged["op_row"].drop_nulls().unique()
    pairs = ancestors(linked.scopes.select(ROW, "op_parent_row"), starts, up="op_parent_row")
    under = (
        pairs.join(wanted, on="ancestor", how="inner")
        .join(charged.drop("name").rename({"op_row": ROW, ROW: "_gpu"}), on=ROW, how="inner")
        .unique(["_gpu", "name"])
    )

    def best(frame: pl.DataFrame) -> dict[str, str]:
        per = frame.group_by("name", "frame").agg(pl.col(Col.DUR_NS).sum())
        top = per.sort(["name", Col.DUR_NS, "frame"], descending=[False, True, False]).unique(
            "name", keep="first", maintain_order=True
        )
        return dict(top.select("name", "frame").iter_rows())

    return best(charged.filter(pl.col("name").is_in(list(kernels)))), best(under)
