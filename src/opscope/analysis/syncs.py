"""Synchronisations: the host calls that wait for the GPU, how often, how long, and which operator issued them.

A synchronising call is a runtime or driver call whose name matches `SYNC_CALL_PATTERN`: device / stream /
event / context synchronize, cudaStreamWaitEvent (and HIP / driver-API equivalents), and blocking
(non-Async) memcpy such as cudaMemcpy or hipMemcpyWithStream. The issuing operator is the innermost CPU op or
user annotation on the same thread whose span contains the call (`nesting.innermost_container`); calls
outside every op are reported under "(no op)". The GPU-side `cuda_sync` records Kineto writes for the same
waits are counted separately (they duplicate the host calls in time, so they are never added to them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from opscope.analysis import window as win
from opscope.analysis.nesting import innermost_container
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace

SYNC_CALL_PATTERN = (
    r"^(cuda|hip)(Device|Stream|Event|Thread|Ctx)Synchronize$|^cu(Ctx|Stream|Event)Synchronize$"
    r"|^(cuda|hip|cu)StreamWaitEvent$"
    r"|^(cuda|hip)Memcpy(2D|3D|ToSymbol|FromSymbol|DtoH|HtoD|DtoD|Peer|WithStream)?$"
    r"|^cuMemcpy(DtoH|HtoD|DtoD|Peer|2D|3D)?(_v2)?$"
)
SPAN_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION)
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
    """Every synchronising host call: name, pid, tid, ts_ns, dur_ns, end_ns (durations below 0 count as 0)."""
    host = trace.lazy().filter(pl.col(Col.KIND).cast(pl.String).is_in([Kind.RUNTIME, Kind.DRIVER]))
    # Match the pattern on the few distinct call names, not on every event.
    names = host.select(pl.col(Col.NAME).cast(pl.String).unique()).collect()[Col.NAME]
    wanted = [n for n in names.drop_nulls().to_list() if re.search(SYNC_CALL_PATTERN, n)]
    return (
        host.filter(pl.col(Col.NAME).cast(pl.String).is_in(wanted) & pl.col(Col.TS_NS).is_not_null())
        .select(pl.col(Col.NAME).cast(pl.String), pl.col(Col.PID).cast(pl.String),
                pl.col(Col.TID).cast(pl.String), Col.TS_NS,
                pl.col(Col.DUR_NS).fill_null(0).clip(lower_bound=0).alias(Col.DUR_NS))
        .with_columns((pl.col(Col.TS_NS) + pl.col(Col.DUR_NS)).alias(END))
        .collect()
    )


def gpu_sync_events(trace: Trace) -> pl.DataFrame:
    """Kineto's `cuda_sync` records (GPU lanes): device, ts_ns, end_ns."""
    return (
        trace.lazy()
        .filter((pl.col(Col.KIND).cast(pl.String) == Kind.SYNC) & pl.col(Col.TS_NS).is_not_null())
        .select(Col.DEVICE, Col.TS_NS,
                (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS).fill_null(0).clip(lower_bound=0)).alias(END))
        .collect()
    )


def cpu_spans(trace: Trace) -> pl.DataFrame:
    """CPU ops and user annotations: name, pid, tid, ts_ns, end_ns (the candidates for "issuing op")."""
    return (
        trace.lazy()
        .filter(pl.col(Col.KIND).cast(pl.String).is_in(list(SPAN_KINDS)) & pl.col(Col.DUR_NS).is_not_null()
                & pl.col(Col.TS_NS).is_not_null())
        .select(pl.col(Col.NAME).cast(pl.String), pl.col(Col.PID).cast(pl.String),
                pl.col(Col.TID).cast(pl.String), Col.TS_NS,
                (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS).clip(lower_bound=0)).alias(END))
        .collect()
    )


def issuing_ops(calls: pl.DataFrame, spans: pl.DataFrame) -> pl.Series:
    """Name of the innermost op containing each call on its thread (null when none). Both frames have pid, tid,
    ts_ns and end_ns; `spans` also a name. Uses the call-tree nesting of `analysis.nesting`."""
    cols = [Col.PID, Col.TID, Col.TS_NS, END]
    both = pl.concat([spans.select(cols), calls.select(cols)])
    thread = both.select(
        pl.concat_str([pl.col(Col.PID).fill_null(""), pl.col(Col.TID).fill_null("")], separator="\x00")
        .rank("dense").cast(pl.Int64)
    ).to_series().to_numpy()
    n = spans.height
    is_span = np.arange(both.height) < n
    start = both[Col.TS_NS].fill_null(0).to_numpy()
    end = np.maximum(both[END].fill_null(0).to_numpy(), start)
    parent = innermost_container(thread, start, end, is_span, tiebreak=(~is_span).astype(np.int64))[n:]
    known = calls[Col.TS_NS].is_not_null().to_numpy()
    index = pl.Series("i", np.where((parent >= 0) & known, parent, -1)).replace(-1, None)
    return spans[Col.NAME].gather(index).alias("op")


def _rows(frame: pl.DataFrame, key: str) -> tuple[SyncRow, ...]:
    grouped = frame.group_by(key).agg(pl.len().alias("calls"), pl.col(Col.DUR_NS).sum().alias("total"),
                                      pl.col(Col.DUR_NS).max().alias("max"))
    grouped = grouped.sort(["total", key], descending=[True, False])
    return tuple(SyncRow(name=r[key], calls=int(r["calls"]), total_ns=int(r["total"]), max_ns=int(r["max"]))
                 for r in grouped.iter_rows(named=True))


def sync_stats(trace: Trace, window: win.Window | None = None, spans: pl.DataFrame | None = None,
               calls: pl.DataFrame | None = None) -> SyncStats:
    """Synchronising calls that start inside the window (whole trace when None), by call and by issuing op.
    `spans`, `calls`: `cpu_spans(trace)`, `sync_calls(trace)` when the caller already has them."""
    calls = sync_calls(trace) if calls is None else calls
    gpu = gpu_sync_events(trace)
    if window is not None:
        calls = calls.filter(win.starts_inside(window))
        gpu = gpu.filter(win.starts_inside(window))
    ops = issuing_ops(calls, cpu_spans(trace) if spans is None else spans) if calls.height else pl.Series("op", [], dtype=pl.String)
    calls = calls.with_columns(ops.fill_null(NO_OP).alias("op"))
    return SyncStats(
        calls=calls.height,
        total_ns=int(calls[Col.DUR_NS].sum() or 0),
        by_call=_rows(calls, Col.NAME),
        by_op=_rows(calls, "op"),
        gpu_sync_events=gpu.height,
    )
