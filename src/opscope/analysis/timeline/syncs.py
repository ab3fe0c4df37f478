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

import polars as pl

from opscope.analysis.base import enclosing
from opscope.analysis.base import window as win
from opscope.analysis.base.codetag import code_tag
from opscope.analysis.base.linking import OP_KINDS, ROW, Linkage, link
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
    thread (null when none): one sweep over the ops of the callers' threads and the calls
    (`enclosing.innermost`), whatever the number of threads or the depth of the call tree."""
    ops = linkage.scopes.filter(pl.col(Col.KIND).is_in(list(OP_KINDS)) & pl.col(Col.TS_NS).is_not_null())
    if ops.height == 0 or calls.height == 0:
        return pl.Series(ROW, [None] * calls.height, dtype=pl.Int64)
    op_lanes, call_lanes = enclosing.lanes(ops, calls)
    found = enclosing.innermost(
        enclosing.Spans.of(ops, op_lanes), enclosing.Spans.of(calls, call_lanes, end=END)
    )
    return at_positions(ops[ROW], found).alias(ROW)


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
