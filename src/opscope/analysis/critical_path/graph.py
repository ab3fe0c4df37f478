"""The dependency graph of one window (a step or the whole trace), built with vectorised polars/numpy work.

Every event in the window becomes two nodes, its start and its end (node 2e and 2e+1 for event e). CPU events
are ops, user annotations and runtime / driver calls that start inside the window with a positive duration;
GPU events are kernels, memcpys and memsets whose launch call is one of those CPU events (HTA's rule), and those
with no launch call in the trace that start in the window (launch -1). Edges:

- program order: consecutive start/end points on a CPU thread (this also encodes op nesting), weight the time
  between them; owned by the innermost event open over that stretch (none between top-level events);
- GPU activity: start -> end, weight the duration;
- launch: the launch call's start -> the activity's start (`analysis.base.linking` finds the launch);
- stream order: the previous activity's end on the same device and stream -> the next one's start;
- cross-stream wait: where Kineto records a `cudaStreamWaitEvent` (its `cuda_sync` "Stream Wait Event" names
  the stream and the `cudaEventRecord` call waited on), the end of the last activity launched onto the recorded
  stream before that record call -> the start of the first activity launched onto the waiting stream after the
  wait call;
- synchronisation: the end of a GPU activity -> the end of the blocking host call that waited for it (the last
  activity per stream, launched by the same process before the call began, that ended while the call blocked;
  for `*MemcpyAsync` only its own copy, which ends inside it when the copy was in fact blocking; GPU work with no
  launch call in the trace, which no process can be matched to, when it is on a device the calling process
  launched onto in the window, or on any device when it launched nothing); each weighs the call's return
  latency after the last of them ended;
- untraced start: the first node of the graph -> the start of the first activity on a stream that has no launch
  call in the trace (what else would bind it), weight the time between them.

Weights reproduce the observed times: on every node the *binding* incoming edge (what the node really waited
for) weighs exactly the time since its source, the others less (a kernel queued behind another: the launch edge
weighs at most the launch call's duration; a kernel launched onto an idle stream: the stream edge weighs 0; a
blocking call that waited for the GPU: its own program-order edge weighs 0). So the longest path is the observed
span, and shrinking a node on it lets the others take over, which is what the what-if needs.
Definitions and the boundary effects: docs/critical-path.md.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass

import numpy as np
import polars as pl
import polars.selectors as cs

from opscope.analysis.base.arrays import take_or
from opscope.analysis.base.codetag import code_tag
from opscope.analysis.base.linking import LAUNCH_KINDS, ROW, Linkage, thread_key
from opscope.analysis.base.nesting import filled, innermost_container, lexsort, positions
from opscope.analysis.critical_path import edges
from opscope.analysis.critical_path.edges import ASYNC_COPY_CALL, BLOCKING, WIN, WORK_KIND
from opscope.analysis.critical_path.kinds import (
    EDGE_KIND,
    GPU_COMM,
    GPU_COMPUTE,
    MEMCPY,
    SYNC_WAIT,
)
from opscope.analysis.kernels.categories import CATEGORY, with_category
from opscope.analysis.kernels.category_rules import COMMUNICATION
from opscope.analysis.timeline.syncs import SYNC_CALL_PATTERN
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace

CPU_KINDS: tuple[str, ...] = (Kind.CPU_OP, Kind.USER_ANNOTATION, *LAUNCH_KINDS)

# Blocking host calls: the synchronising calls of `timeline.syncs` less cudaStreamWaitEvent (it makes a GPU
# stream wait, not the host), plus *MemcpyAsync, which blocks on pageable memory.
ASYNC_COPY = r"^(cuda|hip)MemcpyAsync$|^cuMemcpy\w*Async(_v2)?$"
# Calls that synchronise the device implicitly: freeing device memory waits for the work that may use it
# (issue 59: 1,360 hipFree calls held 99% of an MI300 DDP step's idle time, each ending when the GPU did)
IMPLICIT_SYNC = r"^(cuda|hip)Free$|^cuMemFree(_v2)?$|^hipFreeAsync$"


@dataclass(frozen=True, eq=False)
class Graph:
    """`events`: one row per event (index e = position): row (trace row), name, kind, is_gpu, ts_ns, end_ns,
    parent (event index of the enclosing CPU event, -1), launch (event index of the launch call, -1), and
    where the trace's tables are categorical the name's and kind's category codes (`CODES`).
    `edges`: src, dst (node ids), weight_ns, kind, owner (event index, -1), sync (the edge enters a blocking call
    from the GPU). Node n is the start (n even) or end (n odd) of event n // 2.
    A graph of several windows (`build_windows`) is the union of theirs, no edge between two of them: `window`
    gives each event's window (an index into `bounds`); a graph of one window may leave it None."""

    start_ns: int
    end_ns: int
    events: pl.DataFrame
    edges: pl.DataFrame
    window: np.ndarray | None = None
    bounds: tuple[tuple[int, int], ...] = ()

    @property
    def nodes(self) -> int:
        return 2 * self.events.height

    @property
    def windows(self) -> int:
        return max(len(self.bounds), 1)

    def event_windows(self) -> np.ndarray:
        """Each event's window (all 0 for a graph of one window)."""
        if self.window is None:
            return np.zeros(self.events.height, dtype=np.int64)
        return self.window

    def node_windows(self) -> np.ndarray:
        """Each node's window."""
        return np.repeat(self.event_windows(), 2)

    def local_edges(self) -> np.ndarray:
        """Each edge's index among its own window's edges: its index in that window's graph built alone
        (`build_from`: a window's edges keep their order in a batch, only others' come between them)."""
        window = self.node_windows()[self.edges["src"].to_numpy()]
        order = np.argsort(window, kind="stable")
        starts = np.searchsorted(window[order], window[order], side="left")
        local = np.empty(len(window), dtype=np.int64)
        local[order] = np.arange(len(window)) - starts
        return local

    def node_ts(self) -> np.ndarray:
        ts = np.empty(self.nodes, dtype=np.int64)
        ts[0::2] = self.events["ts_ns"].to_numpy()
        ts[1::2] = self.events["end_ns"].to_numpy()
        return ts


CPU_TABLE = "critical_path.cpu_table"


def cpu_table(trace: Trace, span: tuple[int, int] | None = None) -> pl.DataFrame:
    """Every CPU event of the trace with a positive duration (collected once per trace, filtered per window),
    kept beside the trace cache like the link table (`Trace.persisted`: x64, 2.5 M events, computed in ~0.45 s,
    read back in ~0.1 s). With `span` (lo, hi), for a caller that builds the windows inside it only (the
    report's first steps): the events starting in [lo, hi], threads numbered in the whole table's order,
    unless the whole table is already there."""
    key = _cpu_key()
    if span is None or trace.has_derived(key):
        return trace.persisted(key, lambda: _cpu_table(trace), _encode_cpu, _decode_cpu)
    return _cpu_table(trace, span)


@functools.cache
def _cpu_key() -> str:
    """The stored CPU table's key: its name and the tag of the code that computes it (this module and the
    linking whose thread key and launch kinds it uses)."""
    from opscope.analysis.base import linking

    return f"{CPU_TABLE}-{code_tag(sys.modules[__name__], linking)}"


def _encode_cpu(table: pl.DataFrame) -> dict[str, pl.DataFrame]:
    return {"cpu": table}


def _decode_cpu(frames: dict[str, pl.DataFrame]) -> pl.DataFrame:
    return frames["cpu"].rechunk()  # one chunk: `_window_rows` reads its start column without a copy


def _cpu_events(trace: Trace) -> pl.LazyFrame:
    return (
        trace.lazy()
        .with_row_index(ROW)
        .with_columns(pl.col(ROW).cast(pl.Int64))
        .filter(pl.col(Col.KIND).is_in(list(CPU_KINDS)) & (pl.col(Col.DUR_NS) > 0))
    )


def _cpu_table(trace: Trace, span: tuple[int, int] | None = None) -> pl.DataFrame:
    events = _cpu_events(trace)
    if span is not None:
        events = events.filter(pl.col(Col.TS_NS).is_between(*span))
    table = (
        events.select(  # text columns stay categorical here (one u32 per row); each window's cut makes them text
            ROW,
            Col.NAME,
            Col.KIND,
            Col.PID,
            Col.TID,
            Col.TS_NS,
            (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS)).alias("end_ns"),
            Col.CORRELATION,
        )
        .sort([Col.TS_NS, ROW], nulls_last=True)  # nulls last: `_window_rows` cuts it
        .collect()
        .pipe(_with_call_flags)
    )
    threads = (
        _with_thread(table)
        if span is None
        else _with_thread_order(table, _thread_order(trace, table, span[0]))
    )
    return threads.rechunk()  # one chunk: `_window_rows` reads its start column without a copy


THREAD = "_thread"  # cpu_table's thread code (`_with_thread`)


def _with_thread(cpu: pl.DataFrame) -> pl.DataFrame:
    """`cpu` with `THREAD`: an integer per (process, thread), ordered by each thread's first row (the row
    number of that row), computed once per trace instead of once per window. Keyed by the categorical codes
    of the process and thread where they are categorical (no text per row), else by their text."""
    if all(isinstance(cpu.schema[c], pl.Categorical) for c in (Col.PID, Col.TID)):
        key = thread_key(missing=-1)
    else:
        key = (
            pl.col(Col.PID).cast(pl.String).fill_null("")
            + "\x00"
            + pl.col(Col.TID).cast(pl.String).fill_null("")
        )
    # the row number counted over the whole table (an int_range inside `over` would count within each thread)
    first = pl.col(THREAD).min().over(key)
    return cpu.with_row_index(THREAD).with_columns(first.cast(pl.Int64)).select(*cpu.columns, THREAD)


def _thread_order(trace: Trace, table: pl.DataFrame, lo: int) -> pl.DataFrame:
    """pid, tid, THREAD for the threads of `table` (the CPU events starting in a span from `lo` on): ranked by
    their first row in the whole table (start, then row), the order `_with_thread` numbers them in. A thread
    of the span has its first row before `lo` or in the span, so only the events before `lo` are read (the
    report's first steps: almost none), not the whole trace."""
    first = pl.col(Col.TS_NS).min()
    at_first = [first.alias("_first"), pl.col(ROW).filter(pl.col(Col.TS_NS) == first).min()]
    before = (
        _cpu_events(trace).filter(pl.col(Col.TS_NS) < lo).group_by(Col.PID, Col.TID).agg(at_first).collect()
    )
    within = table.filter(pl.col(Col.TS_NS).is_not_null()).group_by(Col.PID, Col.TID).agg(at_first)
    return (
        pl.concat([before, within])
        .sort("_first", ROW)
        .unique([Col.PID, Col.TID], keep="first", maintain_order=True)
        .join(within.select(Col.PID, Col.TID), on=[Col.PID, Col.TID], nulls_equal=True, maintain_order="left")
        .with_row_index(THREAD)
        .select(Col.PID, Col.TID, pl.col(THREAD).cast(pl.Int64))
    )


def _with_thread_order(cpu: pl.DataFrame, order: pl.DataFrame) -> pl.DataFrame:
    """`cpu` with `THREAD` from `_thread_order` (the same order as `_with_thread`'s codes, other numbers)."""
    return cpu.join(order, on=[Col.PID, Col.TID], how="left", nulls_equal=True, maintain_order="left")


def _with_call_flags(cpu: pl.DataFrame) -> pl.DataFrame:
    """`cpu` with `BLOCKING` (a blocking host call: `timeline.syncs`' pattern less cudaStreamWaitEvent, and
    the frees that synchronise implicitly, `IMPLICIT_SYNC`) and
    `ASYNC_COPY_CALL` (a *MemcpyAsync call), both among the launch / runtime calls only; each distinct name
    matched once per trace, not per window."""
    names = cpu[Col.NAME].unique().drop_nulls().to_list()
    blocking = [
        n
        for n in names
        if (re.search(SYNC_CALL_PATTERN, n) and "WaitEvent" not in n) or re.search(IMPLICIT_SYNC, n)
    ]
    copies = [n for n in names if re.search(ASYNC_COPY, n)]
    is_call = pl.col(Col.KIND).is_in(list(LAUNCH_KINDS))
    return cpu.with_columns(
        (pl.col(Col.NAME).is_in(blocking) & is_call).fill_null(False).alias(BLOCKING),
        (pl.col(Col.NAME).is_in(copies) & is_call).fill_null(False).alias(ASYNC_COPY_CALL),
    )


def stream_waits(trace: Trace) -> pl.DataFrame:
    """Kineto's records of `cudaStreamWaitEvent` (`cuda_sync` events with a stream, the stream waited on and the
    correlation id of its `cudaEventRecord` call): device, stream (waiting), wait_on_stream, wait_correlation
    (of the cudaStreamWaitEvent call), record_correlation. Read once per trace."""
    return trace.persisted_frame(
        f"critical_path.stream_waits-{code_tag(sys.modules[__name__])}", lambda: _stream_waits(trace)
    )


def _stream_waits(trace: Trace) -> pl.DataFrame:
    return (
        trace.lazy()
        .filter(
            (pl.col(Col.KIND) == Kind.SYNC)
            & (pl.col(Col.STREAM) >= 0)
            & (pl.col(Col.WAIT_ON_STREAM) >= 0)
            & (pl.col(Col.WAIT_ON_CORRELATION) >= 0)
            & pl.col(Col.CORRELATION).is_not_null()
        )
        .select(
            Col.DEVICE,
            Col.STREAM,
            Col.WAIT_ON_STREAM,
            pl.col(Col.CORRELATION).alias("wait_correlation"),
            pl.col(Col.WAIT_ON_CORRELATION).alias("record_correlation"),
        )
        .unique()
        .collect()
    )


def gpu_table(linkage: Linkage) -> pl.DataFrame:
    """Every GPU event of the link table with `trace_prev_end`: the end of the previous activity on the same
    device and stream in the whole trace (to tell a backlog from before a window), and its launch call's row
    and start; sorted by where a window takes it from (`CUT_KEY`: the launch call's start, else its own). It
    does not depend on the window: built once, cut per window."""
    lane = [Col.DEVICE, Col.STREAM]
    return (
        linkage.gpu.select(
            ROW,
            Col.NAME,
            Col.KIND,
            Col.DEVICE,
            Col.STREAM,
            Col.TS_NS,
            (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS)).alias("end_ns"),
            "launch_row",
            "launch_ts_ns",
        )
        .sort([*lane, Col.TS_NS, ROW], nulls_last=True)
        .with_columns(pl.col("end_ns").shift(1).over(lane).alias("trace_prev_end"))
        # then in the order windows cut it (`_window_rows`): by the launch call's start, or the event's own
        # start where it has no launch call
        .with_columns(
            pl.when(pl.col("launch_row").is_null())
            .then(pl.col(Col.TS_NS))
            .otherwise(pl.col("launch_ts_ns"))
            .alias(CUT_KEY)
        )
        .sort(CUT_KEY, nulls_last=True)
        .pipe(_with_work_kind)
        .rechunk()
    )


def _with_work_kind(gpu: pl.DataFrame) -> pl.DataFrame:
    """`gpu` with `WORK_KIND`: memcpy for copies and memsets, communication for `analyze`'s communication
    category (one rule table for every view, issue 28), else compute. Classified once per trace, not per
    window (each distinct name once)."""
    categories = with_category(gpu.select(Col.NAME, Col.KIND))[CATEGORY]
    comm = (categories == COMMUNICATION).fill_null(False)
    kind = (
        pl.when(pl.col(Col.KIND) != Kind.KERNEL)
        .then(pl.lit(MEMCPY, dtype=EDGE_KIND))
        .when(pl.lit(comm))
        .then(pl.lit(GPU_COMM, dtype=EDGE_KIND))
        .otherwise(pl.lit(GPU_COMPUTE, dtype=EDGE_KIND))
    )
    return gpu.with_columns(kind.alias(WORK_KIND))


CUT_KEY = "_cut_ts"  # gpu_table's sort key: where a window takes the event from


def span_rows(table: pl.DataFrame, key: str, start_ns: int, end_ns: int) -> pl.DataFrame:
    """The rows of `table` (sorted by `key`, nulls last) whose `key` lies in [start_ns, end_ns]: two binary
    searches and a zero-copy slice, so cutting every step of a long trace costs O(steps log n), not a scan of
    the whole table per step (issue 25: a per-window re-scan). Cut from such a cut, a window gets the same
    rows as from the whole table (the batches a worker process gets: `stats.StepTables.cut`)."""
    lo, count = _spans(table, key, np.array([start_ns]), np.array([end_ns]))
    return table.slice(int(lo[0]), int(count[0]))


def _spans(
    table: pl.DataFrame, key: str, starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(first row, row count) of each window [start, end] in `table` (sorted by `key`, nulls last)."""
    column = table[key]
    valid = column.len() - column.null_count()
    keys = column.slice(0, valid).to_numpy()
    lo = np.searchsorted(keys, starts, side="left")
    hi = np.searchsorted(keys, ends, side="right")
    return lo, np.maximum(hi - lo, 0)


def window_counts(table: pl.DataFrame, key: str, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """How many rows of `table` (sorted by `key`) each window [start, end] takes (`span_rows`)."""
    return _spans(table, key, starts, ends)[1]


def _window_rows(table: pl.DataFrame, key: str, starts: np.ndarray, ends: np.ndarray) -> pl.DataFrame:
    """The rows of each window [start, end] (`span_rows`; a row in two windows twice), with `WIN`, the window,
    and the categorical columns made text: the whole-trace tables keep the trace's categorical text (sorting
    and keeping 2.5 M string rows took ~750 MB on the 1 GB benchmark trace, the report's peak); the windows'
    rows are text from here on, with the name's and kind's category codes kept beside them (`CODES`: what the
    path's top events group by). One window is a zero-copy slice; several, one gather."""
    lo, count = _spans(table, key, starts, ends)
    if len(starts) == 1:
        rows = table.slice(int(lo[0]), int(count[0]))
        win = np.zeros(rows.height, dtype=np.int64)
    else:
        total = int(count.sum())
        win = np.repeat(np.arange(len(starts), dtype=np.int64), count)
        rows = table[np.repeat(lo - np.cumsum(count) + count, count) + np.arange(total)]
    codes = [
        pl.col(c).to_physical().cast(pl.Int64).fill_null(-1).alias(code)
        for c, code in CODES.items()
        if isinstance(rows.schema.get(c), pl.Categorical)
    ]
    return rows.with_columns(*codes, cs.categorical().cast(pl.String), pl.Series(WIN, win, dtype=pl.Int64))


# A window's events keep the category codes of their name and kind (-1: none), where the whole-trace tables
# are categorical: equal codes, equal text (polars' categories are global), so the path's top events are
# grouped by integers instead of making codes again from a step's text (`path._top`)
CODES = {Col.NAME: "name_code", Col.KIND: "kind_code"}
_ROW_BITS = 40  # a trace row fits 40 bits: (window, row) in one int64


def _gpu_events(
    gpu_all: pl.DataFrame, cpu: pl.DataFrame, starts: np.ndarray, ends: np.ndarray
) -> pl.DataFrame:
    """The GPU events launched from `cpu` (the windows' CPU events), and those with no launch call in the trace
    that start in a window (a GPU-only capture: launch -1), with `trace_prev_end` (see `gpu_table`), the launch
    call's process, start and end (`launch_pid`, `launch_ts`, `launch_end`; null without one) and `WIN`.
    `gpu_all`: `gpu_table(linkage)`; its rows are first cut to those whose launch call (or, without one, whose
    own start) lies in a window, so the search below is the size of the windows, not of the trace. By window,
    then start, then row."""
    window = _window_rows(gpu_all, CUT_KEY, starts, ends).drop("launch_ts_ns", CUT_KEY)
    win = window[WIN].to_numpy()
    # each event's launch call among `cpu` of its window (its position there, -1): a binary search over
    # (window, row) keys
    cpu_keys = (cpu[WIN].to_numpy() << _ROW_BITS) + cpu[ROW].to_numpy()
    by_row = np.argsort(cpu_keys, kind="stable")
    launch_row = filled(window["launch_row"], -1)
    wanted = np.where(launch_row >= 0, (win << _ROW_BITS) + launch_row, -1)
    launch = take_or(by_row, positions(cpu_keys[by_row], wanted), -1)
    ts = window[Col.TS_NS].to_numpy()
    unlaunched = launch_row < 0
    keep = np.flatnonzero((launch >= 0) | (unlaunched & (ts >= starts[win]) & (ts <= ends[win])))
    order = keep[lexsort((window[ROW].to_numpy()[keep], ts[keep], win[keep]))]
    launch = launch[order]
    # the launch call's process, start and end (null without one: a null index gathers a null)
    index = pl.Series("i", launch, dtype=pl.Int64).scatter(np.flatnonzero(launch < 0), None)
    call = cpu.select(
        pl.col(Col.PID).alias("launch_pid"),
        pl.col(Col.TS_NS).alias("launch_ts"),
        pl.col("end_ns").alias("launch_end"),
    ).select(pl.all().gather(index))
    return pl.concat(
        [
            window.gather(order).drop("launch_row"),
            pl.DataFrame(pl.Series("launch", launch, dtype=pl.Int64)),
            call,
        ],
        how="horizontal",
    )


def build(
    trace: Trace,
    linkage: Linkage,
    start_ns: int,
    end_ns: int,
    cpu_all: pl.DataFrame | None = None,
    gpu_all: pl.DataFrame | None = None,
) -> Graph:
    """The dependency graph of the events of `trace` in [start_ns, end_ns] (see the module doc). `cpu_all`,
    `gpu_all`: `cpu_table(trace)`, `gpu_table(linkage)` when the caller builds several windows."""
    cpu_all = cpu_table(trace) if cpu_all is None else cpu_all
    gpu_all = gpu_table(linkage) if gpu_all is None else gpu_all
    return build_from(cpu_all, gpu_all, stream_waits(trace), start_ns, end_ns)


def build_from(
    cpu_all: pl.DataFrame, gpu_all: pl.DataFrame, waits_all: pl.DataFrame, start_ns: int, end_ns: int
) -> Graph:
    """`build` from the tables it cuts the window from (`cpu_table`, `gpu_table`, `stream_waits`; or cuts of
    the first two covering the window: `span_rows`), without the trace: what a worker process runs."""
    return build_windows(cpu_all, gpu_all, waits_all, ((start_ns, end_ns),))


def build_windows(
    cpu_all: pl.DataFrame,
    gpu_all: pl.DataFrame,
    waits_all: pl.DataFrame,
    bounds: tuple[tuple[int, int], ...],
) -> Graph:
    """The graphs of the windows `bounds` at once (`build_from` of each, as one graph: the union of theirs,
    every event's window in `Graph.window`): a batch of short steps costs a few vectorised passes in all
    instead of a few dozen queries each (issue 57). `edges.TooWide` where the batch's times do not fit one
    key per (window, time): smaller batches then."""
    starts = np.array([lo for lo, _ in bounds], dtype=np.int64)
    ends = np.array([hi for _, hi in bounds], dtype=np.int64)
    cpu = (
        _window_rows(cpu_all, Col.TS_NS, starts, ends)
        .with_row_index("_e")
        .with_columns(pl.col("_e").cast(pl.Int64))
    )
    if BLOCKING not in cpu.columns:
        cpu = _with_call_flags(cpu)
    gpu = _gpu_events(gpu_all, cpu, starts, ends)
    if WORK_KIND not in gpu.columns:
        gpu = _with_work_kind(gpu)
    n_cpu = cpu.height
    gpu = gpu.with_row_index("_e", offset=n_cpu).with_columns(pl.col("_e").cast(pl.Int64))
    waits = edges.cross_stream_pairs(waits_all, cpu, gpu)
    c_win = cpu[WIN].to_numpy()
    thread = (cpu if THREAD in cpu.columns else _with_thread(cpu))[THREAD].to_numpy()
    lane = c_win * (int(thread.max(initial=0)) + 1) + thread  # a thread of a window
    c_start = cpu[Col.TS_NS].to_numpy()
    c_end = cpu["end_ns"].to_numpy()
    base, span = edges.packing(
        len(bounds), c_start, c_end, gpu[Col.TS_NS].to_numpy(), gpu["end_ns"].to_numpy()
    )
    parent = innermost_container(lane, c_start, c_end, np.ones(n_cpu, dtype=bool))
    codes = [c for c in CODES.values() if c in cpu.columns and c in gpu.columns]
    events = pl.concat(
        [
            cpu.select(
                ROW,
                Col.NAME,
                Col.KIND,
                pl.lit(False).alias("is_gpu"),
                Col.TS_NS,
                "end_ns",
                pl.Series("parent", parent, dtype=pl.Int64),
                pl.lit(-1, dtype=pl.Int64).alias("launch"),
                *codes,
            ),
            gpu.select(
                ROW,
                Col.NAME,
                Col.KIND,
                pl.lit(True).alias("is_gpu"),
                Col.TS_NS,
                "end_ns",
                pl.lit(-1, dtype=pl.Int64).alias("parent"),
                "launch",
                *codes,
            ),
        ]
    )
    window = np.concatenate([c_win, gpu[WIN].to_numpy()])
    event_ts = events[Col.TS_NS].to_numpy()
    syncs, blocking = edges.sync_pairs(cpu, gpu, base, span)
    first = edges.first_events(event_ts, events["is_gpu"].to_numpy(), window, len(bounds))
    prev = edges.stream_lanes(gpu)
    blocked = np.zeros(n_cpu, dtype=bool)
    blocked[syncs["sync"].to_numpy()] = True
    blocking |= blocked
    graph_edges = pl.concat(
        [
            edges.program_order(lane, c_start, c_end, parent, blocked, blocking),
            edges.gpu_edges(gpu, prev, waits),
            edges.untraced_starts(gpu, event_ts, first, prev),
            edges.carried_over(gpu, event_ts, first, prev),
            edges.thread_starts(lane, c_start, c_end, c_win, first, event_ts, base, span),
            syncs.select(
                (pl.col("gpu") * 2 + 1).alias("src"),
                (pl.col("sync") * 2 + 1).alias("dst"),
                "weight_ns",
                pl.lit(SYNC_WAIT, dtype=EDGE_KIND).alias("kind"),
                pl.col("sync").alias("owner"),
                pl.lit(True).alias("sync"),
            ),
        ],
        how="vertical_relaxed",
    )
    return Graph(
        start_ns=int(starts.min()),
        end_ns=int(ends.max()),
        events=events,
        edges=graph_edges,
        window=window,
        bounds=tuple(bounds),
    )
