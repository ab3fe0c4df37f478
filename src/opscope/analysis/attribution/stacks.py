"""The Python call stack of every launch: the frames running on the launching thread when each launch call
started, innermost first, for the report's timeline (click a kernel: its launch call and the frames above it).

Stacks are shared, not stored per launch: every Python frame gets a path id (its parent frame's path id and
its own name), level by level from the outermost frames down (breadth first), so that two launches from the same call path
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
from opscope.analysis.attribution.lines import innermost_at, launch_points, python_frames
from opscope.analysis.base.arrays import take_or
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


def _children(parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The nodes ordered by parent, and for each node the start of its children in that order (CSR: node k's
    children are by_parent[first[k] : first[k + 1]])."""
    by_parent = np.argsort(parent, kind="stable")
    first = np.searchsorted(parent[by_parent], np.arange(len(parent) + 1))
    return by_parent, first


def _path_ids(parent: np.ndarray, name: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Path id of each node (equal ids: equal names all the way up), and per path id its parent path (-1 at
    the top) and its name. Breadth first from the roots: per level one gather of the children and one np.unique
    of (parent path, name) keys, so the work is O(n log n) whatever the depth."""
    by_parent, first = _children(parent)
    path = np.full(len(parent), -1, dtype=np.int64)
    names = int(name.max()) + 1 if len(name) else 1
    up_of: list[np.ndarray] = []
    name_of: list[np.ndarray] = []
    next_id = 0
    level = np.flatnonzero(parent < 0)
    for _ in range(len(parent) + 1):  # at most one pass per level; bounded even on a malformed array
        if not level.size:
            break
        up = take_or(path, parent[level], -1)
        keys, inverse = np.unique((up + 1) * names + name[level], return_inverse=True)
        path[level] = next_id + inverse.reshape(-1)
        up_of.append(keys // names - 1)
        name_of.append(keys % names)
        next_id += len(keys)
        lo, hi = first[level], first[level + 1]
        counts = hi - lo
        offsets = np.repeat(lo - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
        level = by_parent[np.arange(int(counts.sum())) + offsets]
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
    launches = launch_points(linked)
    parent, at = innermost_at(frames, launches)
    # a hash join, no string sort; first-seen order, so the report's string table is the same on every run
    distinct = frames.select(Col.NAME).unique(maintain_order=True).with_row_index("_name")
    name = (
        frames.select(Col.NAME)
        .join(distinct, on=Col.NAME, how="left", maintain_order="left")["_name"]
        .cast(pl.Int64)
        .to_numpy()
    )
    path, path_up, path_name = _path_ids(parent, name)
    launch_path = take_or(path, at, -1)
    used = np.unique(launch_path[launch_path >= 0])
    # spell out the distinct stacks only: one gather per level, innermost first
    columns = [used]
    while len(columns[-1]) and (columns[-1] >= 0).any() and len(columns) <= len(path_up):
        prev = columns[-1]
        columns.append(take_or(path_up, prev, -1))
    table = np.stack(columns, axis=1) if len(used) else np.empty((0, 1), dtype=np.int64)
    texts = distinct[Col.NAME].to_list()
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
