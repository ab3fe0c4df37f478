"""The edges of the critical path's graphs (graph.py's module doc says what each one means), for the events of
one window or of many at once (issue 57: 10,000 short steps laid out one graph at a time cost ~7 ms of
fixed costs each). Every lane (a thread, a stream) and every search is keyed by the window as well: a batch of
windows is the union of their graphs, with no edge between two of them, so every figure of a window is the
same whether it is laid out alone or in a batch.

`cpu` and `gpu` are the batch's events (graph.build_windows): `_e` (event index), `_win` (the window), times,
and the columns the tables carry (`THREAD`, `BLOCKING`, `ASYNC_COPY_CALL`, `WORK_KIND`, ...).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from opscope.analysis.base.arrays import take_or
from opscope.analysis.base.nesting import filled, lexsort
from opscope.analysis.critical_path.kinds import (
    BACKLOG,
    CPU_BOUND,
    KERNEL_KERNEL,
    LAUNCH,
    SYNC_WAIT,
    edge_frame,
    kinds,
    no_edges,
)
from opscope.model.schema import Col

WIN = "_win"  # the window of an event of a batch
BLOCKING, ASYNC_COPY_CALL = "_blocking", "_async_copy"  # cpu_table's flags (graph._with_call_flags)
WORK_KIND = "_work"  # gpu_table: the edge kind of an activity's own duration (graph._with_work_kind)
_LOW = np.iinfo(np.int64).min
_HIGH = np.iinfo(np.int64).max


class TooWide(ValueError):
    """The batch's windows and times do not fit one int64 key per (window, time): lay them out in smaller
    batches (`graph.build_windows`' caller)."""


def pack(win: np.ndarray, t: np.ndarray, base: int, span: int) -> np.ndarray:
    """One int64 per (window, time), ordered by window, then time: a window's times moved to a stretch of the
    axis of its own. `base`, `span`: the batch's earliest time and its extent (`packing`)."""
    return win.astype(np.int64) * span + (t.astype(np.int64) - base)


def packing(windows: int, *times: np.ndarray) -> tuple[int, int]:
    """(base, span) for `pack` over the given times of a batch of `windows` windows; `TooWide` where the keys
    would not fit in int64."""
    present = [t for t in times if len(t)]
    if not present:
        return 0, 1
    base = min(int(t.min()) for t in present)
    span = max(int(t.max()) for t in present) - base + 2
    if span * max(windows, 1) >= 2**62:
        raise TooWide(f"{windows} windows over {span} ns")
    return base, span


def program_order(
    lane: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    parent: np.ndarray,
    blocked: np.ndarray,
    blocking: np.ndarray,
) -> pl.DataFrame:
    """Consecutive start/end points per CPU lane (a thread of a window). Equal times: ends before starts, the
    outer start first and the inner end first, so that the points of nested events come out properly
    nested."""
    n = len(start)
    ev = np.concatenate([np.arange(n), np.arange(n)])
    is_start = np.concatenate([np.ones(n, dtype=bool), np.zeros(n, dtype=bool)])
    ts = np.concatenate([start, end])
    dur = end - start
    inner = np.concatenate([-dur, dur])  # starts: longer first; ends: shorter first
    order = lexsort((inner, is_start, ts, lane[ev]))  # then by event: starts, then ends, each in order
    ev, is_start, ts = ev[order], is_start[order], ts[order]
    node = 2 * ev + (~is_start)
    same = lane[ev[1:]] == lane[ev[:-1]]
    src, dst = node[:-1][same], node[1:][same]
    weight = (ts[1:] - ts[:-1])[same]
    owner = np.where(is_start[:-1], ev[:-1], parent[ev[:-1]])[same]
    # A blocking call that waited for the GPU: its end is bound by the GPU, not by its own CPU time.
    into_end = dst % 2 == 1
    waited = into_end & blocked[dst // 2]
    weight = np.where(waited, 0, weight)
    # Time inside a blocking call is waiting, even when the trace shows no GPU work that explains it.
    kind = kinds(into_end & blocking[dst // 2], SYNC_WAIT, CPU_BOUND)
    return edge_frame(src, dst, weight, kind, owner)


def first_events(ts: np.ndarray, is_gpu: np.ndarray, win: np.ndarray, windows: int) -> np.ndarray:
    """Each window's first node's event: the earliest start, a CPU event before a GPU one on a tie, then the
    first in order; -1 for a window without events."""
    first = np.full(windows, -1, dtype=np.int64)
    if len(ts) == 0:
        return first
    order = lexsort((np.arange(len(ts)), is_gpu, ts, win))
    heads = order[np.r_[True, win[order][1:] != win[order][:-1]]]
    first[win[heads]] = heads
    return first


def stream_prev(device: np.ndarray, stream: np.ndarray, win: np.ndarray) -> np.ndarray:
    """Each GPU event's previous activity on the same device and stream of its window (its position, -1 for
    the first): the events are in start order within a window, so a stable sort by lane keeps that order."""
    order = lexsort((stream, device, win))  # then by position
    prev = np.full(len(device), -1, dtype=np.int64)
    same = (
        (device[order][1:] == device[order][:-1])
        & (stream[order][1:] == stream[order][:-1])
        & (win[order][1:] == win[order][:-1])
    )
    prev[order[1:][same]] = order[:-1][same]
    return prev


def untraced_starts(
    gpu: pl.DataFrame, event_ts: np.ndarray, first: np.ndarray, prev: np.ndarray
) -> pl.DataFrame:
    """An edge from its window's first node to the start of each GPU activity with no launch call in the trace
    and no earlier activity on its stream in the window, weighing the time between them (tight: nothing else
    explains when it began). Without it such an activity starts a chain of its own, and a blocking call that
    waited for that chain would end a path shorter than the span. Kind: `gpu_backlog` when the stream was
    still busy with earlier work at the first node, else `gpu_kernel_launch_overhead` (an untraced launch)."""
    if gpu.height == 0:
        return no_edges()
    ts = gpu[Col.TS_NS].to_numpy()
    launch_ts = filled(gpu["launch_ts"], _LOW)
    unlaunched = (gpu["launch"].to_numpy() < 0) | (ts < launch_ts)  # see `gpu_edges`
    heads = np.flatnonzero(prev < 0)  # the first activity of each device and stream of a window
    head_first = first[gpu[WIN].to_numpy()[heads]]
    first_ts = event_ts[np.maximum(head_first, 0)]
    keep = unlaunched[heads] & (ts[heads] > first_ts) & (head_first >= 0)
    heads, head_first, first_ts = heads[keep], head_first[keep], first_ts[keep]
    e = gpu["_e"].to_numpy()[heads]
    busy = filled(gpu["trace_prev_end"], _LOW)[heads] > first_ts
    return edge_frame(2 * head_first, 2 * e, ts[heads] - first_ts, kinds(busy, BACKLOG, LAUNCH), e)


def carried_over(
    gpu: pl.DataFrame, event_ts: np.ndarray, first: np.ndarray, prev: np.ndarray
) -> pl.DataFrame:
    """An edge from its window's first node to the start of each launched GPU activity that is the first of its
    device and stream in the window while its stream was still busy with work launched before the window
    (`trace_prev_end`, the end of its predecessor in the whole trace, after the first node), weighing the time
    up to the end of that earlier work (never more than up to its own start), as `gpu_backlog`. The launch edge
    weighs the delay relative to the launch call: a what-if that moves the call earlier (a DataLoader wait
    removed) moved the kernel with it, though the stream was busy with the previous step's work until then;
    this edge holds it behind that work, on the window's own clock (issue 59)."""
    if gpu.height == 0:
        return no_edges()
    ts = gpu[Col.TS_NS].to_numpy()
    launched = (gpu["launch"].to_numpy() >= 0) & (ts >= filled(gpu["launch_ts"], _LOW))
    heads = np.flatnonzero((prev < 0) & launched)
    head_first = first[gpu[WIN].to_numpy()[heads]]
    first_ts = event_ts[np.maximum(head_first, 0)]
    busy_until = np.minimum(filled(gpu["trace_prev_end"], _LOW)[heads], ts[heads])
    keep = (head_first >= 0) & (busy_until > first_ts)
    heads, head_first, first_ts, busy_until = heads[keep], head_first[keep], first_ts[keep], busy_until[keep]
    e = gpu["_e"].to_numpy()[heads]
    return edge_frame(
        2 * head_first, 2 * e, busy_until - first_ts, kinds(np.ones(len(e), bool), BACKLOG, LAUNCH), e
    )


def _latest_other(
    keys: np.ndarray,
    lane: np.ndarray,
    win: np.ndarray,
    query: np.ndarray,
    query_lane: np.ndarray,
    query_win: np.ndarray,
    side: str,
) -> np.ndarray:
    """For each query, the event (an index into `keys`' events) with the greatest key before `query` (`side`
    'left': strictly before; 'right': at or before) on another lane of the same window (the keys are packed:
    `pack`), the lowest index among equal keys; -1 where there is none. One sort and two binary searches."""
    n = len(keys)
    order = np.lexsort((-np.arange(n), keys))  # by key; equal keys: the lowest index last
    sorted_keys, sorted_lane = keys[order], lane[order]
    # the nearest earlier position whose lane differs from this position's: the one before its run of a lane
    run_start = np.flatnonzero(np.r_[True, sorted_lane[1:] != sorted_lane[:-1]])
    before_run = np.repeat(run_start - 1, np.diff(np.r_[run_start, n]))
    at = np.searchsorted(sorted_keys, query, side="left" if side == "left" else "right") - 1
    safe = np.maximum(at, 0)
    hit = np.where(at >= 0, np.where(sorted_lane[safe] != query_lane, at, before_run[safe]), -1)
    found = np.where(hit >= 0, order[np.maximum(hit, 0)], -1)
    # a position of an earlier window: nothing of this window lies before the query
    return np.where((found >= 0) & (win[np.maximum(found, 0)] == query_win), found, -1)


def thread_starts(
    lane: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    win: np.ndarray,
    first: np.ndarray,
    event_ts: np.ndarray,
    base: int,
    span: int,
) -> pl.DataFrame:
    """An edge into the first event of every CPU lane (a thread of a window) but that of the window's first
    node, weighing the time up to it, as `cpu_bound` time owned by no event (like the gaps between top-level
    events; a what-if does not scale it). What a thread did before its first event in the window is not traced
    (the autograd thread waits for the main thread's backward call), so the edge comes from the last thing
    another thread of the window did before it: the latest start or end of an event on another thread, else
    the window's first node. Without it a path ending on a thread that started late is shorter than the span
    (issue 28); from the other thread's latest work rather than from the window's start, a what-if that
    shortens the work before the hand-over moves the late thread too. All lanes of all windows at once: a sort
    by start and one by end, two binary searches per lane (`_latest_other`)."""
    if len(start) == 0:
        return no_edges()
    order = lexsort((start, lane))  # then by position: a stable sort
    heads = order[np.r_[True, lane[order][1:] != lane[order][:-1]]]  # each lane's earliest event
    head_first = first[win[heads]]
    first_ts = event_ts[np.maximum(head_first, 0)]
    keep = (start[heads] > first_ts) & (heads != head_first) & (head_first >= 0)
    heads, head_first, first_ts = heads[keep], head_first[keep], first_ts[keep]
    if len(heads) == 0:
        return no_edges()
    t = start[heads]
    query = pack(win[heads], t, base, span)
    w = win[heads]
    last_start = _latest_other(pack(win, start, base, span), lane, win, query, lane[heads], w, "left")
    last_end = _latest_other(pack(win, end, base, span), lane, win, query, lane[heads], w, "right")
    s_ok, e_ok = last_start >= 0, last_end >= 0
    end_at = np.where(e_ok, end[np.maximum(last_end, 0)], _LOW)
    start_at = np.where(s_ok, start[np.maximum(last_start, 0)], _LOW)
    use_end = e_ok & (~s_ok | (end_at >= start_at))
    src = np.where(use_end, 2 * last_end + 1, np.where(s_ok, 2 * last_start, 2 * head_first))
    weight = t - np.where(use_end, end_at, np.where(s_ok, start_at, first_ts))
    return edge_frame(src, 2 * heads, weight, CPU_BOUND, np.full(len(heads), -1))


def cross_stream_pairs(waits: pl.DataFrame, cpu: pl.DataFrame, gpu: pl.DataFrame) -> pl.DataFrame:
    """(producer, consumer) GPU event indices of the cross-stream waits in the windows (see graph.py's module
    doc). Each wait meets one wait call and one record call of the same window (the latest one at or before
    the wait, from the same process: correlation ids are per process and may repeat) and, on each stream of
    that window, the one launch just before the record or just after the wait: as-of joins, where a join on
    the stream followed by a time filter paired every wait with every launch on its stream."""
    empty = pl.DataFrame(schema={"producer": pl.Int64, "consumer": pl.Int64})
    if waits.height == 0 or gpu.height == 0 or cpu.height == 0:
        return empty
    calls = (
        cpu.filter(pl.col(Col.CORRELATION).is_not_null())
        .select(Col.CORRELATION, Col.PID, WIN, pl.col(Col.TS_NS).alias("call_ts"))
        .sort("call_ts", maintain_order=True)
    )
    wait_calls = calls.unique([WIN, Col.CORRELATION], keep="first", maintain_order=True).rename(
        {Col.CORRELATION: "wait_correlation", "call_ts": "wait_ts"}
    )
    found = waits.join(wait_calls, on="wait_correlation").sort("wait_ts", maintain_order=True)
    found = found.join_asof(
        calls.rename({Col.CORRELATION: "record_correlation", "call_ts": "record_ts"}),
        left_on="wait_ts",
        right_on="record_ts",
        by=["record_correlation", Col.PID, WIN],
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
            WIN,
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
            by=[Col.DEVICE, Col.WAIT_ON_STREAM, Col.PID, WIN],
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
        by=[Col.DEVICE, Col.STREAM, Col.PID, WIN],
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


def gpu_edges(gpu: pl.DataFrame, prev: np.ndarray, waits: pl.DataFrame | None = None) -> pl.DataFrame:
    """Duration, launch, stream-order and cross-stream edges of the GPU activities (`prev`: `stream_prev`;
    `waits`: producer and consumer event indices of `cross_stream_pairs`)."""
    if gpu.height == 0:
        return no_edges()
    e = gpu["_e"].to_numpy()
    ts, end = gpu[Col.TS_NS].to_numpy(), gpu["end_ns"].to_numpy()
    frames = [edge_frame(2 * e, 2 * e + 1, end - ts, gpu[WORK_KIND], e)]
    launch = gpu["launch"].to_numpy()
    l_ts = filled(gpu["launch_ts"], _LOW)
    # GPU work with no launch call in the trace has no launch edge; nor has work that appears to start before
    # its launch call (clock skew): a launch edge would reach its start later than it happened and make the
    # path longer than the span. Both hang from the graph's first node when first on their stream.
    linked = (launch >= 0) & (ts >= l_ts)
    l_dur = filled(gpu["launch_end"] - gpu["launch_ts"], 0)
    has_prev = prev >= 0
    p_end = take_or(end, prev, _LOW)
    delay = np.where(linked, np.maximum(ts - np.where(linked, l_ts, ts), 0), 0)
    # The latest end of the activities this one waits for on other streams (cudaStreamWaitEvent).
    x_end = np.full(len(e), _LOW, dtype=np.int64)
    if waits is not None and waits.height:
        producer = waits["producer"].to_numpy() - e[0]
        consumer = waits["consumer"].to_numpy() - e[0]
        np.maximum.at(x_end, consumer, end[producer])
    cross_bound = (x_end > np.where(linked, l_ts, _LOW)) & (x_end > np.where(has_prev, p_end, _LOW))
    launch_bound = linked & (~has_prev | (p_end <= l_ts)) & ~cross_bound
    launch_w = np.where(launch_bound, delay, np.maximum(np.minimum(delay - 1, l_dur), 0))
    # The activity just before this one on its stream in the whole trace may not be in the graph: work launched
    # before the window (or whose launch is not a node of the graph) that ran between the graph's previous
    # activity and this one. Time spent waiting for it is backlog, not a kernel-to-kernel gap (issue 28).
    trace_prev = filled(gpu["trace_prev_end"], _LOW)
    foreign = trace_prev > p_end
    backlog = foreign & (trace_prev > l_ts)
    launch_kind = kinds(backlog[linked], BACKLOG, LAUNCH)
    frames.append(edge_frame(2 * launch[linked], 2 * e[linked], launch_w[linked], launch_kind, e[linked]))
    gap = np.where(launch_bound | cross_bound, 0, ts - p_end)
    gap_kind = kinds(foreign[has_prev], BACKLOG, KERNEL_KERNEL)
    frames.append(
        edge_frame(2 * e[prev[has_prev]] + 1, 2 * e[has_prev], gap[has_prev], gap_kind, e[has_prev])
    )
    if waits is not None and waits.height:
        # Only the binding wait weighs the time since its producer ended; the others weigh 0 (as a stream edge
        # does behind a launch-bound activity), so the longest path stays the observed span.
        binds = cross_bound[consumer] & (end[producer] == x_end[consumer])
        weight = np.where(binds, ts[consumer] - end[producer], 0)
        frames.append(
            edge_frame(
                2 * (producer + e[0]) + 1, 2 * (consumer + e[0]), weight, KERNEL_KERNEL, consumer + e[0]
            )
        )
    return pl.concat(frames)


def _lanes(gpu: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(device, stream) of each GPU event, -1 where missing."""
    return (
        filled(gpu[Col.DEVICE], -1).astype(np.int64),
        filled(gpu[Col.STREAM], -1).astype(np.int64),
    )


def stream_lanes(gpu: pl.DataFrame) -> np.ndarray:
    """`stream_prev` of the batch's GPU events."""
    device, stream = _lanes(gpu)
    return stream_prev(device, stream, gpu[WIN].to_numpy())


def _ranks(*keys: np.ndarray) -> np.ndarray:
    """One int64 per distinct tuple of `keys` (equal tuples, equal numbers)."""
    if len(keys[0]) == 0:
        return np.empty(0, dtype=np.int64)
    return np.unique(np.stack(keys), axis=1, return_inverse=True)[1].reshape(-1).astype(np.int64)


def sync_pairs(cpu: pl.DataFrame, gpu: pl.DataFrame, base: int, span: int) -> tuple[pl.DataFrame, np.ndarray]:
    """(sync event, GPU event, weight_ns) for every blocking call and the last activity per stream it waited
    for (see graph.py's module doc), and the mask of the CPU events that are blocking calls. In numpy over the
    pairs (call, activity of its window that ended while it blocked): a step has a handful of calls, and a
    dozen polars queries over them cost ~3 ms per step."""
    empty = pl.DataFrame(schema={"sync": pl.Int64, "gpu": pl.Int64, "weight_ns": pl.Int64})
    mask = cpu[BLOCKING].to_numpy().copy()
    copy_call = cpu[ASYNC_COPY_CALL].to_numpy()
    calls = np.flatnonzero(mask | copy_call)
    if len(calls) == 0 or gpu.height == 0:
        return empty, mask
    c_win, g_win = cpu[WIN].to_numpy(), gpu[WIN].to_numpy()
    g_end_all = gpu["end_ns"].to_numpy()
    by_end = lexsort((g_end_all, g_win))
    g_key = pack(g_win[by_end], g_end_all[by_end], base, span)
    s_ts, s_end = cpu[Col.TS_NS].to_numpy()[calls], cpu["end_ns"].to_numpy()[calls]
    lo = np.searchsorted(g_key, pack(c_win[calls], s_ts, base, span), side="right")
    hi = np.searchsorted(g_key, pack(c_win[calls], s_end, base, span), side="right")
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
    l_ts = filled(gpu["launch_ts"], _HIGH)
    own = launch[g] == sync
    launched_before = (l_ts[g] <= s_ts[which]) & (l_pid[g] == s_pid)
    # No launch call in the trace: no process to match, so any activity on a device the calling process uses
    # in the window (any device when it launched nothing in the window).
    launched = (launch >= 0) & (l_pid >= 0)
    pair_win = g_win[g]
    # (window, process) and (window, process, device) as numbers, the launches' and the pairs' alike
    n_l, n_p = len(l_pid), len(s_pid)
    proc = _ranks(np.r_[g_win, pair_win], np.r_[l_pid, s_pid])
    proc_dev = _ranks(np.r_[g_win, pair_win], np.r_[l_pid, s_pid], np.r_[device, device[g]])
    launching = np.unique(proc[:n_l][launched])
    on_device = np.unique(proc_dev[:n_l][launched & has_device])
    uses_device = has_device[g] & np.isin(proc_dev[n_l : n_l + n_p], on_device)
    untraced = (launch[g] < 0) & (s_pid >= 0) & (uses_device | ~np.isin(proc[n_l : n_l + n_p], launching))
    waited = np.where(copy_call[calls][which], own, launched_before | untraced)
    if not waited.any():
        return empty, mask
    which, g, sync = which[waited], g[waited], sync[waited]
    # per (call, device, stream): the activity that ended last
    stream_missing = gpu[Col.STREAM].is_null().to_numpy()
    ends = g_end_all[g]
    order = np.lexsort((ends, stream[g], stream_missing[g], device[g], ~has_device[g], sync))
    keys = np.stack([sync, ~has_device[g], device[g], stream_missing[g], stream[g]])[:, order]
    last = order[np.r_[(keys[:, 1:] != keys[:, :-1]).any(axis=0), True]]
    # Every edge weighs the call's return latency after the last of them ended: only that one binds.
    latest = np.full(len(calls), _LOW, dtype=np.int64)
    np.maximum.at(latest, which, ends)
    weight = s_end[which[last]] - latest[which[last]]
    e = gpu["_e"].to_numpy()[g[last]]
    out = np.lexsort((e, sync[last]))
    return pl.DataFrame(
        {"sync": sync[last][out], "gpu": e[out], "weight_ns": weight[out]},
        schema={"sync": pl.Int64, "gpu": pl.Int64, "weight_ns": pl.Int64},
    ), mask
