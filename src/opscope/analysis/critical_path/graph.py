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
from opscope.analysis.kernels.categories import CATEGORY, with_category
from opscope.analysis.kernels.category_rules import COMMUNICATION
from opscope.analysis.timeline.syncs import SYNC_CALL_PATTERN
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace

CPU_KINDS: tuple[str, ...] = (Kind.CPU_OP, Kind.USER_ANNOTATION, *LAUNCH_KINDS)

# Edge kinds: the breakdown classes (HTA's `bound_by` names plus sync_wait and memcpy).
CPU_BOUND = "cpu_bound"
GPU_COMPUTE = "gpu_compute_bound"
GPU_COMM = "gpu_communication_bound"
KERNEL_KERNEL = "gpu_kernel_kernel_overhead"
LAUNCH = "gpu_kernel_launch_overhead"
SYNC_WAIT = "sync_wait"
MEMCPY = "memcpy"
BACKLOG = "gpu_backlog"  # a launch waiting for GPU work launched before the window (the GPU runs behind)
EDGE_KINDS: tuple[str, ...] = (
    CPU_BOUND,
    GPU_COMPUTE,
    GPU_COMM,
    KERNEL_KERNEL,
    LAUNCH,
    SYNC_WAIT,
    MEMCPY,
    BACKLOG,
)
SCALED_KINDS: tuple[str, ...] = (CPU_BOUND, GPU_COMPUTE, GPU_COMM, SYNC_WAIT, MEMCPY)  # work, not overhead
# An edge's kind: its index in EDGE_KINDS, read as text (a u32 per edge: gathering and concatenating text per
# edge cost ~2 ms a step)
EDGE_KIND = pl.Enum(EDGE_KINDS)

# Blocking host calls: the synchronising calls of `timeline.syncs` less cudaStreamWaitEvent (it makes a GPU
# stream wait, not the host), plus *MemcpyAsync, which blocks on pageable memory.
ASYNC_COPY = r"^(cuda|hip)MemcpyAsync$|^cuMemcpy\w*Async(_v2)?$"


@dataclass(frozen=True, eq=False)
class Graph:
    """`events`: one row per event (index e = position): row (trace row), name, kind, is_gpu, ts_ns, end_ns,
    parent (event index of the enclosing CPU event, -1), launch (event index of the launch call, -1), and
    where the trace's tables are categorical the name's and kind's category codes (`CODES`).
    `edges`: src, dst (node ids), weight_ns, kind, owner (event index, -1), sync (the edge enters a blocking call
    from the GPU). Node n is the start (n even) or end (n odd) of event n // 2."""

    start_ns: int
    end_ns: int
    events: pl.DataFrame
    edges: pl.DataFrame

    @property
    def nodes(self) -> int:
        return 2 * self.events.height

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


BLOCKING, ASYNC_COPY_CALL = "_blocking", "_async_copy"  # cpu_table's flags (`_with_call_flags`)


def _with_call_flags(cpu: pl.DataFrame) -> pl.DataFrame:
    """`cpu` with `BLOCKING` (a blocking host call: `timeline.syncs`' pattern less cudaStreamWaitEvent) and
    `ASYNC_COPY_CALL` (a *MemcpyAsync call), both among the launch / runtime calls only; each distinct name
    matched once per trace, not per window."""
    names = cpu[Col.NAME].unique().drop_nulls().to_list()
    blocking = [n for n in names if re.search(SYNC_CALL_PATTERN, n) and "WaitEvent" not in n]
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


WORK_KIND = "_work"  # gpu_table: the edge kind of an activity's own duration (`_with_work_kind`)


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
    column = table[key]
    valid = column.len() - column.null_count()
    keys = column.slice(0, valid).to_numpy()
    lo = int(np.searchsorted(keys, start_ns, side="left"))
    hi = int(np.searchsorted(keys, end_ns, side="right"))
    return table.slice(lo, max(hi - lo, 0))


def _window_rows(table: pl.DataFrame, key: str, start_ns: int, end_ns: int) -> pl.DataFrame:
    """`span_rows` with the categorical columns made text: the whole-trace tables keep the trace's categorical
    text (sorting and keeping 2.5 M string rows took ~750 MB on the 1 GB benchmark trace, the report's peak);
    the window's rows are text from here on, with the name's and kind's category codes kept beside them
    (`CODES`: what the path's top events group by)."""
    rows = span_rows(table, key, start_ns, end_ns)
    codes = [
        pl.col(c).to_physical().cast(pl.Int64).fill_null(-1).alias(code)
        for c, code in CODES.items()
        if isinstance(rows.schema.get(c), pl.Categorical)
    ]
    return rows.with_columns(*codes, cs.categorical().cast(pl.String))


# A window's events keep the category codes of their name and kind (-1: none), where the whole-trace tables
# are categorical: equal codes, equal text (polars' categories are global), so the path's top events are
# grouped by integers instead of making codes again from a step's text (`path._top`)
CODES = {Col.NAME: "name_code", Col.KIND: "kind_code"}


def _gpu_events(gpu_all: pl.DataFrame, cpu: pl.DataFrame, start_ns: int, end_ns: int) -> pl.DataFrame:
    """The GPU events launched from `cpu`, and those with no launch call in the trace that start in the window
    (a GPU-only capture: launch -1), with `trace_prev_end` (see `gpu_table`) and the launch call's process,
    start and end (`launch_pid`, `launch_ts`, `launch_end`; null without one). `gpu_all`: `gpu_table(linkage)`;
    its rows are first cut to those whose launch call (or, without one, whose own start) lies in the window, so
    the join below is the size of the window, not of the trace."""
    window = _window_rows(gpu_all, CUT_KEY, start_ns, end_ns).drop("launch_ts_ns", CUT_KEY)
    # each event's launch call among `cpu` (its position there, -1): a binary search over cpu's rows
    cpu_rows = cpu[ROW].to_numpy()
    by_row = np.argsort(cpu_rows, kind="stable")
    at = positions(cpu_rows[by_row], filled(window["launch_row"], -1))
    launch = take_or(by_row, at, -1)
    ts = window[Col.TS_NS].to_numpy()
    unlaunched = window["launch_row"].is_null().to_numpy()
    keep = np.flatnonzero((launch >= 0) | (unlaunched & (ts >= start_ns) & (ts <= end_ns)))
    order = keep[lexsort((window[ROW].to_numpy()[keep], ts[keep]))]
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
    cpu = (
        _window_rows(cpu_all, Col.TS_NS, start_ns, end_ns)
        .with_row_index("_e")
        .with_columns(pl.col("_e").cast(pl.Int64))
    )
    gpu = _gpu_events(gpu_all, cpu, start_ns, end_ns)
    n_cpu = cpu.height
    gpu = gpu.with_row_index("_e", offset=n_cpu).with_columns(pl.col("_e").cast(pl.Int64))
    waits = _cross_stream_pairs(waits_all, cpu, gpu)
    thread = (cpu if THREAD in cpu.columns else _with_thread(cpu))[THREAD].to_numpy()
    c_start = cpu[Col.TS_NS].to_numpy()
    c_end = cpu["end_ns"].to_numpy()
    parent = innermost_container(thread, c_start, c_end, np.ones(n_cpu, dtype=bool))
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
    syncs, blocking = _sync_pairs(cpu, gpu)
    first = _first_node_event(events)
    prev = _stream_prev(gpu)
    blocked = np.zeros(n_cpu, dtype=bool)
    blocked[syncs["sync"].to_numpy()] = True
    blocking |= blocked
    edges = pl.concat(
        [
            _program_order(thread, c_start, c_end, parent, blocked, blocking),
            _gpu_edges(gpu, prev, waits),
            _untraced_starts(gpu, events, first, prev),
            _thread_starts(thread, c_start, c_end, events, first),
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
    return Graph(start_ns=start_ns, end_ns=end_ns, events=events, edges=edges)


_KIND_TEXT = pl.Series("kind", EDGE_KINDS, dtype=EDGE_KIND)


def _kinds(mask: np.ndarray, if_true: str, if_false: str) -> pl.Series:
    """The edge kind `if_true` where `mask`, else `if_false`, gathered from one table of the kinds (a numpy
    text array takes ~0.4 us a row to become a polars column: 11 ms for a step's program order)."""
    return _KIND_TEXT.gather(np.where(mask, _code(if_true, len(mask)), _code(if_false, len(mask))))


def _code(kind: str, n: int) -> np.ndarray:
    """`n` times the index of `kind` in `_KIND_TEXT`."""
    return np.full(n, EDGE_KINDS.index(kind), dtype=np.uint32)


def _edge_frame(
    src: np.ndarray, dst: np.ndarray, weight: np.ndarray, kind: str | pl.Series, owner: np.ndarray
) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "src": src.astype(np.int64),
            "dst": dst.astype(np.int64),
            "weight_ns": np.maximum(weight, 0).astype(np.int64),
            "kind": kind if isinstance(kind, pl.Series) else _KIND_TEXT.gather(_code(kind, len(src))),
            "owner": owner.astype(np.int64),
            "sync": np.zeros(len(src), dtype=bool),
        }
    )


def _program_order(
    thread: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    parent: np.ndarray,
    blocked: np.ndarray,
    blocking: np.ndarray,
) -> pl.DataFrame:
    """Consecutive start/end points per CPU thread. Equal times: ends before starts, the outer start first and
    the inner end first, so that the points of nested events come out properly nested."""
    n = len(start)
    ev = np.concatenate([np.arange(n), np.arange(n)])
    is_start = np.concatenate([np.ones(n, dtype=bool), np.zeros(n, dtype=bool)])
    ts = np.concatenate([start, end])
    dur = end - start
    inner = np.concatenate([-dur, dur])  # starts: longer first; ends: shorter first
    order = lexsort((inner, is_start, ts, thread[ev]))  # then by event: starts, then ends, each in order
    ev, is_start, ts = ev[order], is_start[order], ts[order]
    node = 2 * ev + (~is_start)
    same = thread[ev[1:]] == thread[ev[:-1]]
    src, dst = node[:-1][same], node[1:][same]
    weight = (ts[1:] - ts[:-1])[same]
    owner = np.where(is_start[:-1], ev[:-1], parent[ev[:-1]])[same]
    # A blocking call that waited for the GPU: its end is bound by the GPU, not by its own CPU time.
    into_end = dst % 2 == 1
    waited = into_end & blocked[dst // 2]
    weight = np.where(waited, 0, weight)
    # Time inside a blocking call is waiting, even when the trace shows no GPU work that explains it.
    kind = _kinds(into_end & blocking[dst // 2], SYNC_WAIT, CPU_BOUND)
    return _edge_frame(src, dst, weight, kind, owner)


def _first_node_event(events: pl.DataFrame) -> int:
    """The event whose start is the graph's first node: the earliest start, a CPU event before a GPU one on a
    tie, then the first in order (what a stable sort by (start, is_gpu) puts first, in O(n)); -1 without
    events."""
    if events.height == 0:
        return -1
    starts = events[Col.TS_NS].to_numpy()
    earliest = np.flatnonzero(starts == starts.min())
    cpu = earliest[~events["is_gpu"].to_numpy()[earliest]]
    return int(cpu[0] if len(cpu) else earliest[0])


def _untraced_starts(gpu: pl.DataFrame, events: pl.DataFrame, first: int, prev: np.ndarray) -> pl.DataFrame:
    """An edge from the first node of the graph to the start of each GPU activity with no launch call in the
    trace and no earlier activity on its stream in the window, weighing the time between them (tight: nothing
    else explains when it began). Without it such an activity starts a chain of its own, and a blocking call
    that waited for that chain would end a path shorter than the span. Kind: `gpu_backlog` when the stream was
    still busy with earlier work at the first node, else `gpu_kernel_launch_overhead` (an untraced launch)."""
    none = np.empty(0, dtype=np.int64)
    if gpu.height == 0:
        return _edge_frame(none, none, none, LAUNCH, none)
    first_ts = int(events[Col.TS_NS].to_numpy()[first])
    ts = gpu[Col.TS_NS].to_numpy()
    launch_ts = filled(gpu["launch_ts"], np.iinfo(np.int64).min)
    unlaunched = (gpu["launch"].to_numpy() < 0) | (ts < launch_ts)  # see `_gpu_edges`
    heads = np.flatnonzero(prev < 0)  # the first activity of each device and stream (`_stream_prev`)
    heads = heads[unlaunched[heads] & (ts[heads] > first_ts)]
    e = gpu["_e"].to_numpy()[heads]
    busy = filled(gpu["trace_prev_end"], np.iinfo(np.int64).min)[heads] > first_ts
    kind = _kinds(busy, BACKLOG, LAUNCH)
    return _edge_frame(np.full(len(e), 2 * first), 2 * e, ts[heads] - first_ts, kind, e)


def _lanes(gpu: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(device, stream) of each GPU event, -1 where missing."""
    return (
        filled(gpu[Col.DEVICE], -1).astype(np.int64),
        filled(gpu[Col.STREAM], -1).astype(np.int64),
    )


def _stream_prev(gpu: pl.DataFrame) -> np.ndarray:
    """Each GPU event's previous activity on the same device and stream (its position in `gpu`, -1 for the
    first of its stream): `gpu` is in start order, so a stable sort by stream keeps that order within one."""
    device, stream = _lanes(gpu)
    order = lexsort((stream, device))  # then by position
    prev = np.full(gpu.height, -1, dtype=np.int64)
    same = (device[order][1:] == device[order][:-1]) & (stream[order][1:] == stream[order][:-1])
    prev[order[1:][same]] = order[:-1][same]
    return prev


def _thread_starts(
    thread: np.ndarray, start: np.ndarray, end: np.ndarray, events: pl.DataFrame, first: int
) -> pl.DataFrame:
    """An edge into the first event of every CPU thread but the first one's, weighing the time up to it, as
    `cpu_bound` time owned by no event (like the gaps between top-level events; a what-if does not scale it).
    What a thread did before its first event in the window is not traced (the autograd thread waits for the main
    thread's backward call), so the edge comes from the last thing another thread did before it: the latest
    start or end of an event on another thread, else the graph's first node. Without it a path ending on a
    thread that started late is shorter than the span (issue 28); from the other thread's latest work rather
    than from the window's start, a what-if that shortens the work before the hand-over moves the late thread
    too."""
    none = np.empty(0, dtype=np.int64)
    if len(start) == 0:
        return _edge_frame(none, none, none, CPU_BOUND, none)
    first_ts = int(events[Col.TS_NS].to_numpy()[first])
    order = lexsort((start, thread))  # then by position: a stable sort
    heads = order[np.r_[True, thread[order][1:] != thread[order][:-1]]]  # each thread's earliest event
    heads = heads[(start[heads] > first_ts) & (heads != first)]
    src, weight = np.empty(len(heads), dtype=np.int64), np.empty(len(heads), dtype=np.int64)
    for k, h in enumerate(heads):  # one per thread (a handful), each a vectorised search over the events
        t = start[h]
        other = thread != thread[h]
        began = np.flatnonzero(other & (start < t))
        ended = np.flatnonzero(other & (end <= t))
        last_start = began[np.argmax(start[began])] if len(began) else -1
        last_end = ended[np.argmax(end[ended])] if len(ended) else -1
        if last_end >= 0 and (last_start < 0 or end[last_end] >= start[last_start]):
            src[k], weight[k] = 2 * last_end + 1, t - end[last_end]
        elif last_start >= 0:
            src[k], weight[k] = 2 * last_start, t - start[last_start]
        else:
            src[k], weight[k] = 2 * first, t - first_ts
    return _edge_frame(src, 2 * heads, weight, CPU_BOUND, np.full(len(heads), -1))


def _cross_stream_pairs(waits: pl.DataFrame, cpu: pl.DataFrame, gpu: pl.DataFrame) -> pl.DataFrame:
    """(producer, consumer) GPU event indices of the cross-stream waits in the window (see the module doc).
    Each wait meets one wait call and one record call (the latest one at or before the wait, from the same
    process: correlation ids are per process and may repeat) and, on each stream, the one launch just before
    the record or just after the wait: as-of joins, where a join on the stream followed by a time filter
    paired every wait with every launch on its stream."""
    empty = pl.DataFrame(schema={"producer": pl.Int64, "consumer": pl.Int64})
    if waits.height == 0 or gpu.height == 0 or cpu.height == 0:
        return empty
    calls = (
        cpu.filter(pl.col(Col.CORRELATION).is_not_null())
        .select(Col.CORRELATION, Col.PID, pl.col(Col.TS_NS).alias("call_ts"))
        .sort("call_ts", maintain_order=True)
    )
    wait_calls = calls.unique(Col.CORRELATION, keep="first", maintain_order=True).rename(
        {Col.CORRELATION: "wait_correlation", "call_ts": "wait_ts"}
    )
    found = waits.join(wait_calls, on="wait_correlation").sort("wait_ts", maintain_order=True)
    found = found.join_asof(
        calls.rename({Col.CORRELATION: "record_correlation", "call_ts": "record_ts"}),
        left_on="wait_ts",
        right_on="record_ts",
        by=["record_correlation", Col.PID],
        strategy="backward",
        check_sortedness=False,
    ).filter(pl.col("record_ts").is_not_null())
    if found.height == 0:
        return empty
    found = found.with_row_index("_w")
    launched = (
        gpu.filter(pl.col("launch") >= 0)
        .select(
            "_e",
            Col.DEVICE,
            Col.STREAM,
            pl.col("launch_pid").alias(Col.PID),
            pl.col("launch_ts").alias("l_ts"),
        )
        .filter(pl.col("l_ts").is_not_null())
        .sort("l_ts", maintain_order=True)
    )
    producer = (
        found.sort("record_ts", maintain_order=True)
        .join_asof(
            launched.rename({Col.STREAM: Col.WAIT_ON_STREAM, "_e": "producer"}),
            left_on="record_ts",
            right_on="l_ts",
            by=[Col.DEVICE, Col.WAIT_ON_STREAM, Col.PID],
            strategy="backward",
            allow_exact_matches=False,
            check_sortedness=False,
        )
        .select("_w", "producer")
    )
    consumer = found.join_asof(
        launched.rename({"_e": "consumer"}),
        left_on="wait_ts",
        right_on="l_ts",
        by=[Col.DEVICE, Col.STREAM, Col.PID],
        strategy="forward",
        allow_exact_matches=False,
        check_sortedness=False,
    ).select("_w", "consumer")
    return (
        producer.join(consumer, on="_w")
        .drop_nulls(["producer", "consumer"])
        .select("producer", "consumer")
        .unique()
        .sort(["consumer", "producer"])
    )


def _gpu_edges(gpu: pl.DataFrame, prev: np.ndarray, waits: pl.DataFrame | None = None) -> pl.DataFrame:
    """Duration, launch, stream-order and cross-stream edges of the GPU activities (`prev`: `_stream_prev`;
    `waits`: producer and consumer event indices of `_cross_stream_pairs`)."""
    if gpu.height == 0:
        return _edge_frame(*(np.empty(0, dtype=np.int64),) * 3, CPU_BOUND, np.empty(0, dtype=np.int64))
    e = gpu["_e"].to_numpy()
    ts, end = gpu[Col.TS_NS].to_numpy(), gpu["end_ns"].to_numpy()
    kind = gpu[WORK_KIND] if WORK_KIND in gpu.columns else _with_work_kind(gpu)[WORK_KIND]
    frames = [_edge_frame(2 * e, 2 * e + 1, end - ts, kind, e)]
    launch = gpu["launch"].to_numpy()
    l_ts = filled(gpu["launch_ts"], np.iinfo(np.int64).min)
    # GPU work with no launch call in the trace has no launch edge; nor has work that appears to start before
    # its launch call (clock skew): a launch edge would reach its start later than it happened and make the
    # path longer than the span. Both hang from the graph's first node when first on their stream.
    linked = (launch >= 0) & (ts >= l_ts)
    l_dur = filled(gpu["launch_end"] - gpu["launch_ts"], 0)
    has_prev = prev >= 0
    p_end = take_or(end, prev, np.iinfo(np.int64).min)
    delay = np.where(linked, np.maximum(ts - np.where(linked, l_ts, ts), 0), 0)
    # The latest end of the activities this one waits for on other streams (cudaStreamWaitEvent).
    x_end = np.full(len(e), np.iinfo(np.int64).min, dtype=np.int64)
    if waits is not None and waits.height:
        producer = waits["producer"].to_numpy() - e[0]
        consumer = waits["consumer"].to_numpy() - e[0]
        np.maximum.at(x_end, consumer, end[producer])
    cross_bound = (x_end > np.where(linked, l_ts, np.iinfo(np.int64).min)) & (
        x_end > np.where(has_prev, p_end, np.iinfo(np.int64).min)
    )
    launch_bound = linked & (~has_prev | (p_end <= l_ts)) & ~cross_bound
    launch_w = np.where(launch_bound, delay, np.maximum(np.minimum(delay - 1, l_dur), 0))
    # The activity just before this one on its stream in the whole trace may not be in the graph: work launched
    # before the window (or whose launch is not a node of the graph) that ran between the graph's previous
    # activity and this one. Time spent waiting for it is backlog, not a kernel-to-kernel gap (issue 28).
    trace_prev = filled(gpu["trace_prev_end"], np.iinfo(np.int64).min)
    foreign = trace_prev > p_end
    backlog = foreign & (trace_prev > l_ts)
    launch_kind = _kinds(backlog[linked], BACKLOG, LAUNCH)
    frames.append(_edge_frame(2 * launch[linked], 2 * e[linked], launch_w[linked], launch_kind, e[linked]))
    gap = np.where(launch_bound | cross_bound, 0, ts - p_end)
    gap_kind = _kinds(foreign[has_prev], BACKLOG, KERNEL_KERNEL)
    frames.append(
        _edge_frame(2 * e[prev[has_prev]] + 1, 2 * e[has_prev], gap[has_prev], gap_kind, e[has_prev])
    )
    if waits is not None and waits.height:
        # Only the binding wait weighs the time since its producer ended; the others weigh 0 (as a stream edge
        # does behind a launch-bound activity), so the longest path stays the observed span.
        binds = cross_bound[consumer] & (end[producer] == x_end[consumer])
        weight = np.where(binds, ts[consumer] - end[producer], 0)
        frames.append(
            _edge_frame(
                2 * (producer + e[0]) + 1, 2 * (consumer + e[0]), weight, KERNEL_KERNEL, consumer + e[0]
            )
        )
    return pl.concat(frames)


def _sync_pairs(cpu: pl.DataFrame, gpu: pl.DataFrame) -> tuple[pl.DataFrame, np.ndarray]:
    """(sync event, GPU event, weight_ns) for every blocking call and the last activity per stream it waited
    for (see the module doc), and the mask of the CPU events that are blocking calls. In numpy over the
    pairs (call, activity that ended while it blocked): a step has a handful of calls, and a dozen polars
    queries over them cost ~3 ms per step."""
    empty = pl.DataFrame(schema={"sync": pl.Int64, "gpu": pl.Int64, "weight_ns": pl.Int64})
    if BLOCKING not in cpu.columns:
        cpu = _with_call_flags(cpu)
    mask = cpu[BLOCKING].to_numpy().copy()
    copy_call = cpu[ASYNC_COPY_CALL].to_numpy()
    calls = np.flatnonzero(mask | copy_call)
    if len(calls) == 0 or gpu.height == 0:
        return empty, mask
    by_end = np.argsort(gpu["end_ns"].to_numpy(), kind="stable")
    g_end = gpu["end_ns"].to_numpy()[by_end]
    s_ts, s_end = cpu[Col.TS_NS].to_numpy()[calls], cpu["end_ns"].to_numpy()[calls]
    lo = np.searchsorted(g_end, s_ts, side="right")
    hi = np.searchsorted(g_end, s_end, side="right")
    counts = np.maximum(hi - lo, 0)
    which = np.repeat(np.arange(len(calls)), counts)  # the call of each pair
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    g = by_end[np.repeat(lo, counts) + offsets]  # the activity of each pair (its position in `gpu`)
    # processes as integer codes (-1: none), the calls' and the launches' alike
    pids = (
        pl.concat([cpu[Col.PID].cast(pl.String), gpu["launch_pid"].cast(pl.String)])
        .cast(pl.Categorical)
        .to_physical()
        .cast(pl.Int64)
        .fill_null(-1)
        .to_numpy()
    )
    s_pid, l_pid = pids[: cpu.height][calls][which], pids[cpu.height :]
    launch = gpu["launch"].to_numpy()
    device, stream = _lanes(gpu)
    has_device = gpu[Col.DEVICE].is_not_null().to_numpy()
    sync = calls[which]  # cpu's `_e` is its position
    l_ts = filled(gpu["launch_ts"], np.iinfo(np.int64).max)
    own = launch[g] == sync
    launched_before = (l_ts[g] <= s_ts[which]) & (l_pid[g] == s_pid)
    # No launch call in the trace: no process to match, so any activity on a device the calling process uses
    # (any device when it launched nothing in the window).
    launched = (launch >= 0) & (l_pid >= 0)
    launching = np.unique(l_pid[launched])
    on_device = np.unique(_pid_device(l_pid, device)[launched & has_device])
    uses_device = has_device[g] & np.isin(_pid_device(s_pid, device[g]), on_device)
    untraced = (launch[g] < 0) & (s_pid >= 0) & (uses_device | ~np.isin(s_pid, launching))
    waited = np.where(copy_call[calls][which], own, launched_before | untraced)
    if not waited.any():
        return empty, mask
    which, g, sync = which[waited], g[waited], sync[waited]
    # per (call, device, stream): the activity that ended last
    stream_missing = gpu[Col.STREAM].is_null().to_numpy()
    ends = gpu["end_ns"].to_numpy()[g]
    order = np.lexsort((ends, stream[g], stream_missing[g], device[g], ~has_device[g], sync))
    keys = np.stack([sync, ~has_device[g], device[g], stream_missing[g], stream[g]])[:, order]
    last = order[np.r_[(keys[:, 1:] != keys[:, :-1]).any(axis=0), True]]
    # Every edge weighs the call's return latency after the last of them ended: only that one binds.
    latest = np.full(len(calls), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(latest, which, ends)
    weight = s_end[which[last]] - latest[which[last]]
    e = gpu["_e"].to_numpy()[g[last]]
    out = np.lexsort((e, sync[last]))
    return pl.DataFrame(
        {"sync": sync[last][out], "gpu": e[out], "weight_ns": weight[out]},
        schema={"sync": pl.Int64, "gpu": pl.Int64, "weight_ns": pl.Int64},
    ), mask


def _pid_device(pid: np.ndarray, device: np.ndarray) -> np.ndarray:
    """One integer per (process code, device)."""
    return pid.astype(np.int64) * (1 << 32) + (device.astype(np.int64) & 0xFFFFFFFF)
