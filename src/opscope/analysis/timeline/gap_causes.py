"""What the host was doing while each GPU sat idle: every idle instant of a device's analysed window gets exactly
one cause, in this order (the first that holds at that instant; docs/analysis-timeline.md, "Why the GPU was
idle"):

1. `sync_wait`: a host call that waits for the GPU is in progress (a synchronize, a blocking or pageable copy:
   `cudaMemcpy*` including `*MemcpyAsync`, `cudaStreamWaitEvent`), or a Kineto `cuda_sync` record of the device;
2. `queued`: the work that ends the gap was already launched (its launch call had begun): launch latency, a
   wait on another stream or event, GPU scheduling (the idle breakdown's `other`);
3. `runtime_call`: inside a runtime or driver call that neither launches nor copies: memory allocation and
   freeing (`cudaFree` / `hipFree` synchronise implicitly), module loading (Kineto's "Lazy Function Loading"),
   graph instantiation, stream or event creation;
4. `launching`: inside a kernel launch or memset call (the host is busy issuing work one call at a time);
5. `dataloader`: inside a DataLoader `__next__` (the step waits for its batch);
6. `in_op`: inside a CPU operator (its own CPU time: shape checks, dispatch, allocation);
7. `between_ops`: inside a Python frame or a user annotation but in no operator (the framework's or the user's
   Python between operators);
8. `before_first_work` / `after_last_work`: before the device's first activity or after its last in a piece of
   the window (a step's head or tail) and covered by nothing above;
9. `untraced`: none of the above: the host ran code the trace does not record.

Host events count for a device when their process launched work onto it (every process when the trace does
not say who launched what). The causes of a device add up to its idle time exactly (`idle.IdleBreakdown`), and
each names its heaviest call, operator or loader (`top`: the time each overlaps the cause's idle time).
Everything is interval arithmetic over merged sets: sorts and sweeps, linear in the events after sorting.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

import numpy as np
import polars as pl

from opscope.analysis.base import intervals
from opscope.analysis.base import window as win
from opscope.analysis.base.linking import LAUNCH_API, Linkage
from opscope.analysis.base.windows import STEP_NAME
from opscope.analysis.timeline.syncs import SYNC_CALL_PATTERN
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace

S, E = intervals.START, intervals.END

SYNC_WAIT: Final = "sync_wait"
QUEUED: Final = "queued"
RUNTIME_CALL: Final = "runtime_call"
LAUNCHING: Final = "launching"
DATALOADER: Final = "dataloader"
IN_OP: Final = "in_op"
BETWEEN_OPS: Final = "between_ops"
BEFORE_FIRST: Final = "before_first_work"
AFTER_LAST: Final = "after_last_work"
UNTRACED: Final = "untraced"
CAUSES: Final = (
    SYNC_WAIT,
    QUEUED,
    RUNTIME_CALL,
    LAUNCHING,
    DATALOADER,
    IN_OP,
    BETWEEN_OPS,
    BEFORE_FIRST,
    AFTER_LAST,
    UNTRACED,
)
MEANING: Final = {
    SYNC_WAIT: "the host waited for the GPU (synchronize, blocking or pageable copy)",
    QUEUED: "the next work was launched but had not started (launch latency, stream or event waits)",
    RUNTIME_CALL: "inside a runtime call that launches nothing (malloc / free, module loading, graph setup)",
    LAUNCHING: "inside kernel launch calls",
    DATALOADER: "waiting for the DataLoader",
    IN_OP: "inside a CPU operator",
    BETWEEN_OPS: "Python between operators",
    BEFORE_FIRST: "before the GPU's first work in the window (or step)",
    AFTER_LAST: "after the GPU's last work in the window (or step)",
    UNTRACED: "no recorded host event",
}
DATALOADER_PATTERN: Final = r"DataLoader.*__next__|DataLoaderIter.*__next__"
COPY_CALL: Final = r"^(cuda|hip)MemcpyAsync$|^cuMemcpy\w*Async(_v2)?$"
TOP: Final = 5  # names per cause


@dataclass(frozen=True)
class NamedTime:
    name: str
    ns: int  # the time this name's events overlap the cause's idle time


@dataclass(frozen=True)
class IdleCause:
    cause: str  # one of CAUSES
    ns: int
    top: tuple[NamedTime, ...] = ()
    # the cause's idle time inside each step window asked for (`device_causes(steps=...)`), in their order
    per_step: tuple[int, ...] = ()


@dataclass(frozen=True)
class HostSets:
    """The host events a device's idle time is measured against, by cause: name, pid, start_ns, end_ns."""

    sync: pl.DataFrame
    runtime: pl.DataFrame
    launching: pl.DataFrame
    dataloader: pl.DataFrame
    ops: pl.DataFrame
    frames: pl.DataFrame
    leaves: pl.DataFrame  # the Python frames with no frame inside them: what ran (names `between_ops`)


_HOST = (Col.NAME, Col.PID, S, E)  # the columns of a host set (name and pid as the trace keeps them)


def host_sets(trace: Trace, linkage: Linkage) -> HostSets:
    """The host events by cause (module doc), read once per trace: the runtime and driver calls (name, pid,
    ts, dur: the only columns read), the scopes of the link table (ops, annotations, Python frames). Names and
    processes stay categorical: the patterns are matched on the few distinct names, never per row (a 1 GB
    trace holds a million runtime calls)."""
    calls = (
        trace.lazy()
        .filter(pl.col(Col.KIND).is_in([Kind.RUNTIME, Kind.DRIVER]) & pl.col(Col.TS_NS).is_not_null())
        .select(
            Col.NAME,
            Col.PID,
            pl.col(Col.TS_NS).alias(S),
            (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS).fill_null(0).clip(lower_bound=0)).alias(E),
        )
        .filter(pl.col(E) > pl.col(S))
        .collect()
    )
    names = _distinct(calls)
    sync_re, copy_re, launch_re = (re.compile(p) for p in (SYNC_CALL_PATTERN, COPY_CALL, LAUNCH_API))
    waiting = [n for n in names if sync_re.search(n) or copy_re.search(n)]
    launching = [n for n in names if n not in waiting and launch_re.search(n)]
    scopes = linkage.scopes.filter(pl.col(Col.TS_NS).is_not_null()).select(
        Col.NAME,
        Col.PID,
        Col.KIND,
        Col.TID,
        pl.col(Col.TS_NS).alias(S),
        (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS).fill_null(0).clip(lower_bound=0)).alias(E),
    )
    scope_names = _distinct(scopes)
    loader = pl.col(Col.NAME).is_in([n for n in scope_names if re.search(DATALOADER_PATTERN, n)])
    # a step marker is an annotation whatever kind the trace gives it (older Kineto writes cpu_op)
    markers = [n for n in scope_names if re.search(STEP_NAME, n)]
    is_op = (pl.col(Col.KIND) == Kind.CPU_OP) & ~pl.col(Col.NAME).is_in(markers)
    ops = scopes.filter(is_op & ~loader)
    return HostSets(
        sync=calls.filter(pl.col(Col.NAME).is_in(waiting)),
        runtime=calls.filter(~pl.col(Col.NAME).is_in(waiting + launching)),
        launching=calls.filter(pl.col(Col.NAME).is_in(launching)),
        dataloader=scopes.filter(loader).select(_HOST),
        ops=_outermost(ops).select(_HOST),
        frames=scopes.filter(~is_op & ~loader).select(_HOST),
        leaves=_innermost(scopes.filter(pl.col(Col.KIND) == Kind.PYTHON)).select(_HOST),
    )


def _distinct(frame: pl.DataFrame) -> list[str]:
    """The distinct names of `frame`, as text."""
    return [str(n) for n in frame[Col.NAME].unique().drop_nulls().cast(pl.String).to_list()]


def _outermost(ops: pl.DataFrame) -> pl.DataFrame:
    """The operators no other operator of their thread encloses (their time names the idle time they hold:
    `aten::linear`, not its `aten::addmm` and again its `aten::linear`): sorted by thread and start, an op is
    outermost when it starts at or after the latest end before it on its thread."""
    if ops.height == 0:
        return ops
    thread = [Col.PID, Col.TID]
    ordered = ops.sort([*thread, S, E], descending=[False, False, False, True])
    reach = pl.col(E).cum_max().shift(1).over(thread)
    return ordered.filter(reach.is_null() | (pl.col(S) >= reach))


def _innermost(frames: pl.DataFrame) -> pl.DataFrame:
    """The frames no other frame of their thread starts inside: sorted by thread and start (the longer first),
    a frame is innermost when the next one on its thread starts at or after its end."""
    if frames.height == 0:
        return frames
    thread = [Col.PID, Col.TID]
    ordered = frames.sort([*thread, S, E], descending=[False, False, False, True])
    following = pl.col(S).shift(-1).over(thread)
    return ordered.filter(following.is_null() | (following >= pl.col(E)))


def _for(frame: pl.DataFrame, pids: list[str] | None) -> pl.DataFrame:
    if pids is None:
        return frame
    return frame.filter(pl.col(Col.PID).is_in(pids) | pl.col(Col.PID).is_null())


def _top(events: pl.DataFrame, part: pl.DataFrame) -> tuple[NamedTime, ...]:
    """The names whose events overlap `part` (merged intervals) the most: one sweep (`intervals.Coverage`) to
    keep the events that overlap it at all, then each name's merged events measured again (two threads in one
    call count its time once)."""
    if events.height == 0 or part.height == 0:
        return ()
    cover = intervals.Coverage(part)
    touching = events.filter(pl.Series(cover.inside(events[S].to_numpy(), events[E].to_numpy()) > 0))
    if touching.height == 0:
        return ()
    merged = intervals.merge(
        touching.select(pl.col(Col.NAME).cast(pl.String).fill_null("(unnamed)"), S, E), by=[Col.NAME]
    )
    grouped = (
        pl.DataFrame(
            {"name": merged[Col.NAME], "ns": cover.inside(merged[S].to_numpy(), merged[E].to_numpy())}
        )
        .filter(pl.col("ns") > 0)
        .group_by("name")
        .agg(pl.col("ns").sum())
        .sort(["ns", "name"], descending=[True, False])
        .head(TOP)
    )
    return tuple(NamedTime(str(r["name"]), int(r["ns"])) for r in grouped.iter_rows(named=True))


def _edges(clipped: pl.DataFrame, window: win.Window) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(before, after): per piece of the window, from its start to the device's first activity in it, and
    from its last activity's end to the piece's end (the whole piece, as `before`, when it holds none)."""
    bounds = np.array(window.bounds, dtype=np.int64).reshape(-1, 2)
    first = np.full(len(bounds), np.iinfo(np.int64).max, dtype=np.int64)
    last = np.full(len(bounds), np.iinfo(np.int64).min, dtype=np.int64)
    if clipped.height:
        piece = clipped[win.PIECE].to_numpy().astype(np.int64)
        np.minimum.at(first, piece, clipped[S].to_numpy().astype(np.int64))
        np.maximum.at(last, piece, clipped[E].to_numpy().astype(np.int64))
    empty = last < bounds[:, 0]
    before = pl.DataFrame(
        {S: bounds[:, 0], E: np.where(empty, bounds[:, 1], np.minimum(first, bounds[:, 1]))},
        schema={S: pl.Int64, E: pl.Int64},
    )
    after = pl.DataFrame(
        {S: np.where(empty, bounds[:, 1], last), E: bounds[:, 1]}, schema={S: pl.Int64, E: pl.Int64}
    )
    return before.filter(pl.col(E) > pl.col(S)), after.filter(pl.col(E) > pl.col(S))


def device_causes(
    gaps: pl.DataFrame,
    queued: pl.DataFrame,
    gpu_syncs: pl.DataFrame,
    host: HostSets,
    pids: list[str] | None,
    clipped: pl.DataFrame,
    window: win.Window,
    steps: tuple[tuple[int, int], ...] = (),
) -> tuple[IdleCause, ...]:
    """The causes of one device's idle time (`gaps`: its idle pieces in the window; `queued`: the parts of
    them after the launch call of the work that ends them; `gpu_syncs`: its `cuda_sync` records; `clipped`:
    its activity cut to the window), in CAUSES order, adding up to the length of `gaps`; with `steps` (step
    windows [lo, hi)), each cause's time inside each of them too (`per_step`): a step's causes add up to the
    device's idle time inside that step and the analysed window."""
    lo = np.array([a for a, _ in steps], dtype=np.int64)
    hi = np.array([b for _, b in steps], dtype=np.int64)

    def per_step(part: pl.DataFrame) -> tuple[int, ...]:
        if not steps:
            return ()
        if part.height == 0:
            return (0,) * len(steps)
        start, end = part[S].to_numpy().astype(np.int64), part[E].to_numpy().astype(np.int64)
        inside = intervals.covered_per_window(start, end, np.zeros(len(start), dtype=np.int64), 1, lo, hi)
        if inside is None:  # pragma: no cover - a window over 2**61 ns
            return (0,) * len(steps)
        return tuple(int(v) for v in inside[:, 0])

    left = intervals.merge(gaps)
    before, after = _edges(clipped, window)
    sync, runtime, launching, loader, ops, frames = (
        _for(h, pids)
        for h in (host.sync, host.runtime, host.launching, host.dataloader, host.ops, host.frames)
    )
    sets: list[tuple[str, pl.DataFrame, pl.DataFrame | None]] = [
        (SYNC_WAIT, pl.concat([sync.select(S, E), gpu_syncs.select(S, E)]), sync),
        (QUEUED, queued.select(S, E), None),
        (RUNTIME_CALL, runtime, runtime),
        (LAUNCHING, launching, launching),
        (DATALOADER, loader, loader),
        (IN_OP, ops, ops),
        (BETWEEN_OPS, frames, _for(host.leaves, pids)),
        (BEFORE_FIRST, before, None),
        (AFTER_LAST, after, None),
    ]
    out = []
    for cause, cover, named in sets:
        if left.height == 0:
            out.append(IdleCause(cause, 0, (), per_step(left)))
            continue
        part = intervals.intersect(left, cover.select(S, E)) if cover.height else cover.select(S, E).clear()
        ns = intervals.covered_ns(part)
        out.append(
            IdleCause(cause, ns, _top(named, part) if named is not None and ns else (), per_step(part))
        )
        if ns:
            left = intervals.subtract(left, part)
    out.append(IdleCause(UNTRACED, intervals.covered_ns(left), (), per_step(left)))
    return tuple(out)
