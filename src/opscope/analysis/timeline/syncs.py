"""Synchronisations: the host calls that wait for the GPU, how often, how long, and which operator issued them.

A synchronising call is a runtime or driver call whose name matches `SYNC_CALL_PATTERN`: device / stream /
event / context synchronize, cudaStreamWaitEvent (and HIP / driver-API equivalents), and blocking
(non-Async) memcpy such as cudaMemcpy or hipMemcpyWithStream. The issuing operator is the innermost CPU op or
user annotation on the same thread whose span contains the call (the call tree of `analysis.base.linking`); calls
outside every op are reported under "(no op)". The GPU-side `cuda_sync` records Kineto writes for the same
waits are counted separately (they duplicate the host calls in time, so they are never added to them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from opscope.analysis.base import window as win
from opscope.analysis.base.linking import OP_KINDS, ROW, Linkage, link
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
    Computed once per trace (`Trace.derived`)."""
    return trace.derived("sync_calls", lambda: _sync_calls(trace))


def _sync_calls(trace: Trace) -> pl.DataFrame:
    """Every synchronising host call: name, pid, tid, ts_ns, dur_ns, end_ns (durations below 0 count as 0)."""
    host = trace.lazy().filter(pl.col(Col.KIND).cast(pl.String).is_in([Kind.RUNTIME, Kind.DRIVER]))
    # Match the pattern on the few distinct call names, not on every event.
    names = host.select(pl.col(Col.NAME).cast(pl.String).unique()).collect()[Col.NAME]
    wanted = [n for n in names.drop_nulls().to_list() if re.search(SYNC_CALL_PATTERN, n)]
    return (
        host.filter(pl.col(Col.NAME).cast(pl.String).is_in(wanted) & pl.col(Col.TS_NS).is_not_null())
        .select(
            pl.col(Col.NAME).cast(pl.String),
            pl.col(Col.PID).cast(pl.String),
            pl.col(Col.TID).cast(pl.String),
            Col.TS_NS,
            pl.col(Col.DUR_NS).fill_null(0).clip(lower_bound=0).alias(Col.DUR_NS),
        )
        .with_columns((pl.col(Col.TS_NS) + pl.col(Col.DUR_NS)).alias(END))
        .collect()
    )


def gpu_sync_events(trace: Trace) -> pl.DataFrame:
    """Kineto's `cuda_sync` records (GPU lanes): device, ts_ns, end_ns."""
    return (
        trace.lazy()
        .filter((pl.col(Col.KIND).cast(pl.String) == Kind.SYNC) & pl.col(Col.TS_NS).is_not_null())
        .select(
            Col.DEVICE,
            Col.TS_NS,
            (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS).fill_null(0).clip(lower_bound=0)).alias(END),
        )
        .collect()
    )


def issuing_ops(calls: pl.DataFrame, linkage: Linkage) -> pl.Series:
    """Name of the innermost CPU op or user annotation containing each call on its thread (null when none)."""
    rows = pl.DataFrame({ROW: issuing_op_rows(calls, linkage)})
    names = linkage.scopes.select(ROW, pl.col(Col.NAME).cast(pl.String))
    return rows.join(names, on=ROW, how="left", maintain_order="left")[Col.NAME].alias("op")


def issuing_op_rows(calls: pl.DataFrame, linkage: Linkage) -> pl.Series:
    """Row (in the trace's event table) of the innermost CPU op or user annotation containing each call on its
    thread (null when none).

    Reuses the call tree `analysis.base.linking` built: the op that started last at or before the call is the
    innermost container if it still runs at the call's end; otherwise the container is among its ancestors
    (`op_parent_row`), which are walked up, all calls at once, until one contains the call."""
    queries = calls.select(
        pl.col(Col.PID).cast(pl.Categorical), pl.col(Col.TID).cast(pl.Categorical), Col.TS_NS, END
    ).with_row_index("_q")
    ops = (
        linkage.scopes.filter(pl.col(Col.KIND).is_in(list(OP_KINDS)))
        .join(
            queries.select(Col.PID, Col.TID).unique(), on=[Col.PID, Col.TID], how="semi"
        )  # callers' threads
        .select(
            ROW,
            Col.NAME,
            Col.PID,
            Col.TID,
            Col.TS_NS,
            (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS).clip(lower_bound=0)).alias("_end"),
            "op_parent_row",
        )
        .sort([Col.TS_NS, "_end"], descending=[False, True])  # on equal starts the inner (shorter) op last
    )
    if ops.height == 0:
        return pl.Series(ROW, [None] * calls.height, dtype=pl.Int64)
    found = (
        queries.filter(pl.col(Col.TS_NS).is_not_null())
        .sort(Col.TS_NS)
        .join_asof(
            ops.select(ROW, Col.PID, Col.TID, Col.TS_NS),
            on=Col.TS_NS,
            by=[Col.PID, Col.TID],
            strategy="backward",
            check_sortedness=False,
        )  # both sorted by ts_ns above
    )
    by_row = ops.sort(ROW)
    rows = by_row[ROW].to_numpy()
    ends = by_row["_end"].to_numpy()
    parents = by_row["op_parent_row"].fill_null(-1).to_numpy()
    current = found[ROW].fill_null(-1).to_numpy()
    need = found[END].to_numpy()
    while True:  # walk up, every call at once; at most the depth of the tree
        at = np.searchsorted(rows, np.maximum(current, 0))
        outside = (current >= 0) & (ends[np.minimum(at, len(ends) - 1)] < need)
        if not outside.any():
            break
        current = np.where(outside, parents[np.minimum(at, len(ends) - 1)], current)
    rows_found = pl.DataFrame({"_q": found["_q"], ROW: pl.Series(current, dtype=pl.Int64).replace(-1, None)})
    ordered = queries.select("_q").join(rows_found, on="_q", how="left", maintain_order="left")
    return ordered[ROW]


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
