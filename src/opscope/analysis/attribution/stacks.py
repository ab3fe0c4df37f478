"""The Python call stack of every launch: the frames running on the launching thread when each launch call
started, innermost first, for the report's timeline (click a kernel: its launch call and the frames above it).

Stacks are shared, not stored per launch: every Python frame gets a path id (its parent frame's path id and
its own name), level by level from the outermost frames down, so that two launches from the same call path
share one stack; only the distinct stacks of the launches are spelled out. The parent of a frame is the
innermost frame on its thread that contains it, and the frame of a launch the innermost frame holding its start
(`lines.innermost_at`, as `opscope lines`). Work: one nesting pass, then one vectorised step per stack level.
Definitions: docs/analysis-attribution.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from opscope.analysis.attribution.frames import user_frame_names
from opscope.analysis.attribution.lines import innermost_at, python_frames
from opscope.analysis.base.linking import ROW, Linkage, once_per_link
from opscope.model.schema import Col
from opscope.model.trace import Trace


@dataclass(frozen=True)
class LaunchStacks:
    gpu: pl.DataFrame  # row (GPU event), stack (index into `stacks`); only events launched inside a frame
    stacks: tuple[tuple[str, ...], ...]  # frame names, innermost first
    user: frozenset[str]  # the names among them that are the user's code (`frames.FrameFilter()`)


def launch_stacks(trace: Trace, linked: Linkage) -> LaunchStacks:
    """The Python stack of every GPU event's launch call (see the module doc), once per trace and link table."""
    return once_per_link(trace, linked, "launch_stacks", lambda: _launch_stacks(linked))


def _depths(parent: np.ndarray) -> np.ndarray:
    """Levels below the top of each node of a parent array (-1 at the roots): pointer jumping, active nodes
    only, at most one step per level."""
    depth = np.zeros(len(parent), dtype=np.int64)
    up = parent.copy()
    active = np.flatnonzero(up >= 0)
    while active.size:
        depth[active] += 1
        up[active] = parent[up[active]]
        active = active[up[active] >= 0]
    return depth


def _path_ids(parent: np.ndarray, name: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Path id of each node (equal ids: equal names all the way up), and per path id its parent path (-1 at
    the top) and its name. One np.unique per level of the tree."""
    depth = _depths(parent)
    path = np.full(len(parent), -1, dtype=np.int64)
    names = int(name.max()) + 1 if len(name) else 1
    up_of: list[np.ndarray] = []
    name_of: list[np.ndarray] = []
    next_id = 0
    order = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(int(depth.max(initial=0)) + 2))
    for level in range(len(bounds) - 1):
        nodes = order[bounds[level] : bounds[level + 1]]
        up = np.where(parent[nodes] >= 0, path[np.maximum(parent[nodes], 0)], -1)
        keys, inverse = np.unique((up + 1) * names + name[nodes], return_inverse=True)
        path[nodes] = next_id + inverse.reshape(-1)
        up_of.append(keys // names - 1)
        name_of.append(keys % names)
        next_id += len(keys)
    empty = np.empty(0, dtype=np.int64)
    return (
        path,
        np.concatenate(up_of) if up_of else empty,
        np.concatenate(name_of) if name_of else empty,
    )


def _launch_stacks(linked: Linkage) -> LaunchStacks:
    frames = python_frames(linked).sort(ROW)
    none = LaunchStacks(pl.DataFrame(schema={ROW: pl.Int64, "stack": pl.Int64}), (), frozenset())
    if frames.height == 0:
        return none
    launches = (
        linked.gpu.filter(pl.col("launch_row").is_not_null())
        .select(
            "launch_row",
            pl.col("launch_pid").cast(pl.String).alias(Col.PID),
            pl.col("launch_tid").cast(pl.String).alias(Col.TID),
            pl.col("launch_ts_ns").alias(Col.TS_NS),
        )
        .unique("launch_row")
    )
    parent, at = innermost_at(frames, launches)
    distinct = frames[Col.NAME].unique().sort()
    name = frames.select(pl.col(Col.NAME).rank("dense").cast(pl.Int64) - 1).to_series().to_numpy()
    path, path_up, path_name = _path_ids(parent, name)
    launch_path = np.where(at >= 0, path[np.maximum(at, 0)], -1)
    used = np.unique(launch_path[launch_path >= 0])
    # spell out the distinct stacks only: one gather per level, innermost first
    columns = [used]
    while len(columns[-1]) and (columns[-1] >= 0).any() and len(columns) <= len(path_up):
        prev = columns[-1]
        columns.append(np.where(prev >= 0, path_up[np.maximum(prev, 0)], -1))
    table = np.stack(columns, axis=1) if len(used) else np.empty((0, 1), dtype=np.int64)
    texts = distinct.to_list()
    stacks = tuple(tuple(texts[path_name[p]] for p in row if p >= 0) for row in table.tolist())
    index = pl.DataFrame({"_path": used, "stack": np.arange(len(used), dtype=np.int64)})
    gpu = (
        linked.gpu.select(ROW, "launch_row")
        .join(
            launches.select("launch_row").with_columns(pl.Series("_path", launch_path, dtype=pl.Int64)),
            on="launch_row",
        )
        .join(index, on="_path", how="inner")
        .select(ROW, "stack")
    )
    shown = pl.Series(sorted({n for s in stacks for n in s}), dtype=pl.String)
    return LaunchStacks(gpu=gpu, stacks=stacks, user=frozenset(user_frame_names(shown).to_list()))
