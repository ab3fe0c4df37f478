"""Synchronisations: the host calls that wait for the GPU, how often, how long, and which operator issued them.

A synchronising call is a runtime or driver call whose name matches `SYNC_CALL_PATTERN`: device / stream /
event / context synchronize, cudaStreamWaitEvent (and HIP / driver-API equivalents), and blocking
(non-Async) memcpy such as cudaMemcpy or hipMemcpyWithStream. The issuing operator is the innermost CPU op or
user annotation on the same thread whose span contains the call (the call tree of `analysis.base.linking`); calls
outside every op are reported under "(no op)". The GPU-side `cuda_sync` records Kineto writes for the same
waits are counted separately (they duplicate the host calls in time, so they are never added to them).
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass

import numpy as np
import polars as pl

from opscope.analysis.base import window as win
from opscope.analysis.base.codetag import code_tag
from opscope.analysis.base.linking import OP_KINDS, ROW, Linkage, link, thread_key
from opscope.analysis.base.names import names_of
from opscope.analysis.base.nesting import at_positions, positions
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace

SYNC_CALL_PATTERN = (
    r"^(cuda|hip)(Device|Stream|Event|Thread|Ctx)Synchronize$|^cu(Ctx|Stream|Event)Synchronize$"
    r"|^(cuda|hip|cu)StreamWaitEvent$"
    r"|^(cuda|hip)Memcpy(2D|3D|ToSymbol|FromSymbol|DtoH|HtoD|DtoD|Peer|WithStream)?$"
    r"|^cuMemcpy(DtoH|HtoD|DtoD|Peer|2D|3D)?(_v2)?$"
)
NO_OP = "(no op)"
END = "end_ns"


@dataclass(frozen=True)
class SyncRow:
    name: str  # call name, or issuing op name
    calls: int
    total_ns: int
    max_ns: int


@dataclass(frozen=True)
class SyncStats:
    calls: int
    total_ns: int
    by_call: tuple[SyncRow, ...]  # per runtime call name, most time first
    by_op: tuple[SyncRow, ...]  # per issuing op name, most time first
    gpu_sync_events: int  # Kineto cuda_sync records in the window (not added to the above)


def sync_calls(trace: Trace) -> pl.DataFrame:
    """Every synchronising host call: name, pid, tid, ts_ns, dur_ns, end_ns (durations below 0 count as 0).
    Computed once per trace and kept beside the trace cache (`Trace.persisted_frame`)."""
    return trace.persisted_frame(f"sync_calls-{_tag()}", lambda: _sync_calls(trace))


@functools.cache
def _tag() -> str:
    """The tag of the code behind the stored sync tables (this module and the name table it reads)."""
    from opscope.analysis.base import names

    return code_tag(sys.modules[__name__], names)


def _sync_calls(trace: Trace) -> pl.DataFrame:
    """Every synchronising host call: name, pid, tid, ts_ns, dur_ns, end_ns (durations below 0 count as 0)."""
    host = trace.lazy().filter(pl.col(Col.KIND).is_in([Kind.RUNTIME, Kind.DRIVER]))
    # Match the pattern on the few distinct call names (the trace's (kind, name) table), not on every event.
    wanted = names_of(trace, [Kind.RUNTIME, Kind.DRIVER], SYNC_CALL_PATTERN)
    calls = (
        host.filter(pl.col(Col.NAME).is_in(wanted) & pl.col(Col.TS_NS).is_not_null())
        .select(
            pl.col(Col.NAME).cast(pl.String),
            pl.col(Col.PID).cast(pl.String),
            pl.col(Col.TID).cast(pl.String),
            Col.TS_NS,
            pl.col(Col.DUR_NS).fill_null(0).clip(lower_bound=0).alias(Col.DUR_NS),
        )
        .with_columns((pl.col(Col.TS_NS) + pl.col(Col.DUR_NS)).alias(END))
    )
    return calls.collect() if wanted else pl.DataFrame(schema=calls.collect_schema())


def gpu_sync_events(trace: Trace) -> pl.DataFrame:
    """Kineto's `cuda_sync` records (GPU lanes): device, ts_ns, end_ns. Read once per trace and kept beside the
    trace cache (`Trace.persisted_frame`: the idle breakdown and the sync table both ask)."""
    return trace.persisted_frame(f"gpu_sync_events-{_tag()}", lambda: _gpu_sync_events(trace))


def _gpu_sync_events(trace: Trace) -> pl.DataFrame:
    return (
        trace.lazy()
        .filter((pl.col(Col.KIND) == Kind.SYNC) & pl.col(Col.TS_NS).is_not_null())
        .select(
            Col.DEVICE,
            Col.TS_NS,
            (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS).fill_null(0).clip(lower_bound=0)).alias(END),
        )
        .collect()
    )


def issuing_ops(calls: pl.DataFrame, linkage: Linkage) -> pl.Series:
    """Name of the innermost CPU op or user annotation containing each call on its thread (null when none)."""
    rows = issuing_op_rows(calls, linkage)
    scopes = linkage.scopes.select(ROW, Col.NAME)
    if not scopes[ROW].is_sorted():
        scopes = scopes.sort(ROW)
    # each row's name by a binary search over the row-ordered scopes, and text for the rows found only
    at = positions(scopes[ROW].to_numpy(), rows.fill_null(-1).to_numpy())
    return at_positions(scopes[Col.NAME], at).cast(pl.String).alias("op")


def issuing_op_rows(calls: pl.DataFrame, linkage: Linkage) -> pl.Series:
    """Row (in the trace's event table) of the innermost CPU op or user annotation containing each call on its
    thread (null when none).

    Reuses the call tree `analysis.base.linking` built: the op that started last at or before the call is the
    innermost container if it still runs at the call's end; otherwise the container is among its ancestors
    (`op_parent_row`), which are walked up, all calls at once, until one contains the call. The ops of the
    callers' threads are found by one integer per thread and searched per thread in numpy (a few thousand
    calls against 1.5 M ops on the 1 GB benchmark trace: no join over the ops, one sort)."""
    key = thread_key()
    caller = thread_key(pl.col(Col.PID).cast(pl.Categorical), pl.col(Col.TID).cast(pl.Categorical))
    queries = calls.select(caller.alias("_key"), Col.TS_NS, END)
    threads = queries["_key"].drop_nulls().unique()
    by_row = (  # the scopes are in row order, and so are these
        linkage.scopes.filter(pl.col(Col.KIND).is_in(list(OP_KINDS)))
        .select(
            ROW,
            key.alias("_key"),
            Col.TS_NS,
            (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS).clip(lower_bound=0)).alias("_end"),
            "op_parent_row",
        )
        .filter(pl.col("_key").is_in(threads.implode()) & pl.col(Col.TS_NS).is_not_null())
    )
    current = np.full(calls.height, -1, dtype=np.int64)
    if by_row.height == 0:
        return pl.Series(ROW, [None] * calls.height, dtype=pl.Int64)
    rows = by_row[ROW].to_numpy()
    ends = by_row["_end"].to_numpy()
    parents = by_row["op_parent_row"].fill_null(-1).to_numpy()
    o_key, o_ts = by_row["_key"].to_numpy(), by_row[Col.TS_NS].to_numpy()
    # by thread, start, and on equal starts the inner (shorter) op last: the last op started at or before a
    # call is the innermost one open at its start
    order = np.lexsort((-ends, o_ts, o_key))
    o_key, o_ts = o_key[order], o_ts[order]
    q_key = queries["_key"].fill_null(-1).to_numpy()
    q_ts = queries[Col.TS_NS].fill_null(0).to_numpy()
    valid = (
        queries.select(pl.col("_key").is_not_null() & pl.col(Col.TS_NS).is_not_null()).to_series().to_numpy()
    )
    for k in np.unique(q_key[valid]):  # the callers' threads: a handful
        lo, hi = np.searchsorted(o_key, k, side="left"), np.searchsorted(o_key, k, side="right")
        mine = np.flatnonzero(valid & (q_key == k))
        at = lo + np.searchsorted(o_ts[lo:hi], q_ts[mine], side="right") - 1
        current[mine] = np.where(at >= lo, rows[order[np.maximum(at, 0)]], -1)
    need = queries[END].fill_null(0).to_numpy()
    last = len(ends) - 1
    while True:  # walk up, every call at once; at most the depth of the tree
        at = np.searchsorted(rows, np.maximum(current, 0))
        outside = (current >= 0) & (ends[np.minimum(at, last)] < need)
        if not outside.any():
            break
        current = np.where(outside, parents[np.minimum(at, last)], current)
    return pl.Series(ROW, current, dtype=pl.Int64).replace(-1, None)


def _rows(frame: pl.DataFrame, key: str) -> tuple[SyncRow, ...]:
    grouped = frame.group_by(key).agg(
        pl.len().alias("calls"),
        pl.col(Col.DUR_NS).sum().alias("total"),
        pl.col(Col.DUR_NS).max().alias("max"),
    )
    grouped = grouped.sort(["total", key], descending=[True, False])
    return tuple(
        SyncRow(name=r[key], calls=int(r["calls"]), total_ns=int(r["total"]), max_ns=int(r["max"]))
        for r in grouped.iter_rows(named=True)
    )


def sync_stats(
    trace: Trace,
    window: win.Window | None = None,
    linkage: Linkage | None = None,
    calls: pl.DataFrame | None = None,
) -> SyncStats:
    """Synchronising calls that start inside the window (whole trace when None), by call and by issuing op.
    `linkage`, `calls`: `link(trace)`, `sync_calls(trace)` when the caller already has them."""
    calls = sync_calls(trace) if calls is None else calls
    gpu = gpu_sync_events(trace)
    if window is not None:
        calls = calls.filter(win.starts_inside(window))
        gpu = gpu.filter(win.starts_inside(window))
    ops = issuing_ops(calls, linkage or link(trace)) if calls.height else pl.Series("op", [], dtype=pl.String)
    calls = calls.with_columns(ops.fill_null(NO_OP).alias("op"))
    return SyncStats(
        calls=calls.height,
        total_ns=int(calls[Col.DUR_NS].sum() or 0),
        by_call=_rows(calls, Col.NAME),
        by_op=_rows(calls, "op"),
        gpu_sync_events=gpu.height,
    )
