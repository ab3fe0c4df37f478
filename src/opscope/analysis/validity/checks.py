"""The validity checks (docs/validity.md): each a function of the trace's GPU records, launch calls, steps and
reader's report, linear in the trace: one sort of the GPU records by stream for the overlaps, joins on
correlation ids made unique first (or as-of joins where an id repeats), a search per record for its step."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from opscope.analysis.base.linking import GRAPH_LAUNCH, LAUNCH_API, LAUNCH_KINDS, ROW
from opscope.analysis.base.names import kind_names, names_of
from opscope.analysis.base.windows import marker_windows
from opscope.analysis.validity.found import ERROR, INFO, SEVERITIES, WARN, Check, Validity
from opscope.model.schema import GPU_KINDS, Col
from opscope.model.trace import Trace

# GPU work that runs past the start of the next work on its stream by more than this is flagged: programmatic
# dependent launch (Hopper, Blackwell) overlaps a kernel with the next by a few microseconds by design, and
# timestamps round; every corpus trace stays under 2.5 us
OVERLAP_TOLERANCE_NS = 5_000
OVERLAP_ERROR_SHARE = 0.01  # claiming this share of the GPU time beyond the next starts: error
# a kernel this many times its name's median (with OUTLIER_MIN_CALLS calls of that name) and at least
# OUTLIER_MIN_NS long: one kernel name runs on tensors of very different sizes (a 100x spread is ordinary on
# the corpus), copies by their bytes, and a collective waits for its peers, so neither copies nor
# communication kernels are held to it, nor to their step's length
OUTLIER_FACTOR = 1000
OUTLIER_MIN_CALLS = 5
OUTLIER_MIN_NS = 10_000_000
OUTLIER_ERROR_SHARE = 0.10
MISSING_WARN_SHARE = 0.05  # launches without records at the window's edges: warn from this share of launches
COLLAPSE_MIN_STEPS = 3  # steps needed to tell a collapse
COLLAPSE_SHARE = 0.25  # all GPU work in at most this share of the steps, the others holding none
GRAPH_INFO_SHARE = 0.05  # GPU time in graphs from which it is said (attributed to the graph launch only)
EXAMPLES = 3
# launch calls that have no GPU record of their own: graph launches (their kernels carry the graph launch's
# id: `graph_kernels_hidden`), host functions, and memsets (CUPTI records some memsets and not others: on the
# corpus most `cudaMemsetAsync` calls have none); a record is expected for kernel launches and copies
NOT_LAUNCHES = r"Graph\w*Launch|HostFunc|Launch(Host|Cooperative)?Func\w*$|Memset"
KERNEL_LAUNCH = r"Launch"
CAPTURE = r"StreamBeginCapture|StreamEndCapture"  # launches between them are captured into a graph, not run
COMMUNICATION_KERNEL = r"(?i)nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|sendrecv"


@dataclass(frozen=True)
class _Tables:
    """What the checks read, as lazy queries over the trace: each check collects only the columns it needs and
    mostly only the rows it flags, one check after the other (a 1 M-kernel trace never holds a copy of its
    GPU records with their names as text)."""

    everything: pl.LazyFrame  # every event, with its row
    # the timed GPU records: row, name, kind, device, stream, ts_ns, dur_ns (>= 0), correlation
    gpu: pl.LazyFrame
    calls: pl.LazyFrame  # the launch calls: row, name, ts_ns, dur_ns, correlation, graph (bool)
    captures: np.ndarray  # (start, end) of each stream capture (begin capture .. end capture)
    start_ns: int  # the window: the first start and last end of the timed events
    end_ns: int
    host_ns: int | None  # the host's window: from the first start to the last end of the other timed events
    gpu_ns: int  # GPU time (sum of the records' durations)
    gpu_rows: int
    comm: list[str]  # the names of communication kernels


def _tables(trace: Trace) -> _Tables:
    lazy = trace.lazy().with_row_index(ROW).with_columns(pl.col(ROW).cast(pl.Int64))
    timed = pl.col(Col.TS_NS).is_not_null() & pl.col(Col.DUR_NS).is_not_null()
    launch_names = names_of(trace, list(LAUNCH_KINDS), LAUNCH_API)
    capture_names = names_of(trace, list(LAUNCH_KINDS), CAPTURE)
    gpu = lazy.filter(pl.col(Col.KIND).is_in(list(GPU_KINDS)) & timed).select(
        ROW,
        Col.NAME,
        Col.KIND,
        Col.DEVICE,
        Col.STREAM,
        Col.TS_NS,
        pl.col(Col.DUR_NS).clip(lower_bound=0),
        Col.CORRELATION,
    )

    def named(pattern: str) -> pl.Expr:  # from the trace's distinct names, not a regex over every call
        return pl.col(Col.NAME).is_in([n for n in launch_names if re.search(pattern, n)])

    calls = (
        lazy.filter(pl.col(Col.KIND).is_in(list(LAUNCH_KINDS)) & pl.col(Col.NAME).is_in(launch_names) & timed)
        .select(ROW, Col.NAME, Col.TS_NS, Col.DUR_NS, Col.CORRELATION)
        .with_columns(
            named(GRAPH_LAUNCH).alias("graph"),
            (~named(NOT_LAUNCHES)).alias("launch"),  # a kernel launch or a copy: a GPU record is expected
            (named(KERNEL_LAUNCH) & ~named(NOT_LAUNCHES)).alias("kernel_launch"),
        )
    )
    capture = (
        lazy.filter(
            pl.col(Col.KIND).is_in(list(LAUNCH_KINDS)) & pl.col(Col.NAME).is_in(capture_names) & timed
        )
        .select(
            pl.col(Col.NAME).cast(pl.String),
            Col.TS_NS,
            (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS)).alias("end"),
        )
        .sort(Col.TS_NS)
    )
    totals, captured = pl.collect_all([gpu.select(pl.col(Col.DUR_NS).sum(), pl.len()), capture])
    names = kind_names(trace)
    lo, hi = names.select(pl.col("first_ns").min(), pl.col("last_end_ns").max()).row(0)
    host_lo, host_hi = (
        names.filter(~pl.col(Col.KIND).is_in(list(GPU_KINDS)))
        .select(pl.col("first_ns").min(), pl.col("last_end_ns").max())
        .row(0)
    )
    gpu_ns, rows = totals.row(0)
    return _Tables(
        lazy,
        gpu,
        calls,
        _captures(captured),
        int(lo or 0),
        int(hi or 0),
        None if host_lo is None or host_hi is None else int(host_hi) - int(host_lo),
        int(gpu_ns or 0),
        int(rows),
        names_of(trace, list(GPU_KINDS), COMMUNICATION_KERNEL),
    )


@dataclass(frozen=True)
class _Links:
    """The launch side, collected once for the four checks that pair GPU records with their launch calls by
    correlation id: numpy arrays of the GPU records and launch calls that have one, matched by sorting and
    binary searches (no hash table: a 4.4 M-event trace's 400 k calls and records cost a few MB, given back
    as soon as the checks end)."""

    rec_row: np.ndarray  # GPU records with a correlation id: row, start, duration, correlation
    rec_ts: np.ndarray
    rec_dur: np.ndarray
    rec_id: np.ndarray
    call_row: np.ndarray  # launch calls with a correlation id: row, start, correlation, graph launch, launch
    call_ts: np.ndarray
    call_id: np.ndarray
    call_graph: np.ndarray
    call_launch: np.ndarray  # a kernel launch or a copy: a GPU record is expected
    recorded: np.ndarray  # the records' correlation ids, sorted, each once
    launched: np.ndarray  # the calls' correlation ids, sorted, each once
    kernel_launches: int  # kernel launch calls, with a correlation id or not


def _links(t: _Tables) -> _Links:
    records, calls, kernel_launches = pl.collect_all(
        [
            t.gpu.filter(pl.col(Col.CORRELATION).is_not_null()).select(
                ROW, Col.TS_NS, Col.DUR_NS, Col.CORRELATION
            ),
            t.calls.filter(pl.col(Col.CORRELATION).is_not_null()).select(
                ROW, Col.TS_NS, Col.CORRELATION, "graph", "launch"
            ),
            t.calls.filter(pl.col("kernel_launch")).select(pl.len()),
        ]
    )
    rec_id = records[Col.CORRELATION].to_numpy()
    call_id = calls[Col.CORRELATION].to_numpy()
    return _Links(
        records[ROW].to_numpy(),
        records[Col.TS_NS].to_numpy(),
        records[Col.DUR_NS].to_numpy(),
        rec_id,
        calls[ROW].to_numpy(),
        calls[Col.TS_NS].to_numpy(),
        call_id,
        calls["graph"].to_numpy(),
        calls["launch"].to_numpy(),
        _sorted_unique(rec_id),
        _sorted_unique(call_id),
        int(kernel_launches.item()),
    )


def _sorted_unique(ids: np.ndarray) -> np.ndarray:
    """`ids` sorted, each once (a sort: numpy's `unique` hashes, ~8x slower on 400 k ids)."""
    ordered = np.sort(ids)
    return ordered[np.r_[True, ordered[1:] != ordered[:-1]]] if len(ordered) else ordered


def _member(ids: np.ndarray, sorted_ids: np.ndarray) -> np.ndarray:
    """Whether each id is in `sorted_ids` (sorted, unique): one binary search each."""
    if not len(sorted_ids):
        return np.zeros(len(ids), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_ids, ids), len(sorted_ids) - 1)
    return sorted_ids[at] == ids


def _rows_of(t: _Tables, rows: np.ndarray, columns: list[str]) -> pl.DataFrame:
    """A few events by row (the examples), with their name and kind as text, in the order of `rows`."""
    wanted = [int(r) for r in rows]
    found = (
        t.everything.filter(pl.col(ROW).is_in(wanted))
        .select(ROW, pl.col(Col.NAME).cast(pl.String), *columns)
        .collect()
    )
    order = {r: i for i, r in enumerate(wanted)}
    return found.sort(pl.col(ROW).replace_strict(order, return_dtype=pl.Int64))


def _text(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` (a few rows: examples) with its name and kind as text."""
    return frame.with_columns(
        [pl.col(c).cast(pl.String) for c in (Col.NAME, Col.KIND, "next_name") if c in frame.columns]
    )


def _captures(calls: pl.DataFrame) -> np.ndarray:
    """(start, end) of each capture: a begin-capture call and the first end-capture call after it."""
    begins = calls.filter(pl.col(Col.NAME).str.contains("Begin"))[Col.TS_NS].to_numpy()
    ends = calls.filter(pl.col(Col.NAME).str.contains("End"))["end"].to_numpy()
    if not len(begins) or not len(ends):
        return np.empty((0, 2), dtype=np.int64)
    at = np.searchsorted(ends, begins, side="left")
    closed = at < len(ends)
    return np.stack([begins[closed], ends[at[closed]]], axis=1).astype(np.int64)


def _inside(ts: np.ndarray, spans: np.ndarray) -> np.ndarray:
    """Whether each time lies in one of the spans (start, end): a search among the starts and a running
    maximum of the ends."""
    if not len(spans) or not len(ts):
        return np.zeros(len(ts), dtype=bool)
    order = np.argsort(spans[:, 0], kind="stable")
    starts, reach = spans[order, 0], np.maximum.accumulate(spans[order, 1])
    at = np.searchsorted(starts, ts, side="right") - 1
    return (at >= 0) & (reach[np.maximum(at, 0)] >= ts)


def _share(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def _us(ns: float) -> float:
    return round(float(ns) / 1e3, 3)


def _pct(share: float) -> str:
    return f"{100 * share:.1f}%" if share >= 0.001 else f"{100 * share:.2f}%"


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


# ---- stream_overlap -------------------------------------------------------------------------------------------


BLOCK = 1 << 16  # records compared with their next one per numpy pass (bounds the temporaries)


def _lanes(t: _Tables) -> np.ndarray:
    """A small integer per GPU record naming its (device, stream) lane, from those two columns alone (nulls are
    a lane of their own): device and stream combined into one number where that fits, else numbered."""
    frame = t.gpu.select(
        pl.col(Col.DEVICE).cast(pl.Int64).fill_null(-1), pl.col(Col.STREAM).fill_null(-1)
    ).collect()
    device, stream = frame[Col.DEVICE].to_numpy(), frame[Col.STREAM].to_numpy()
    del frame
    if not len(device):
        return np.zeros(0, dtype=np.int64)
    d_lo, s_lo = int(device.min()), int(stream.min())
    d_span, s_span = int(device.max()) - d_lo + 1, int(stream.max()) - s_lo + 1
    if d_span.bit_length() + s_span.bit_length() <= 40:
        lane = (device - d_lo).astype(np.int64)
        lane *= s_span
        lane += stream - s_lo
        return lane
    _, lane = np.unique(np.stack([device, stream], axis=1), axis=0, return_inverse=True)
    return lane.reshape(-1).astype(np.int64)


def _lane_order(lane: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """The order of the records by lane, then start, then row: one stable sort of one key (lane and start
    packed into one integer) where they fit, else a sort by both."""
    t_lo = int(ts.min())
    t_bits = (int(ts.max()) - t_lo + 1).bit_length()
    if (int(lane.max()) + 1).bit_length() + t_bits <= 62:
        key = lane << t_bits
        key += ts
        key -= t_lo
        return np.argsort(key, kind="stable")
    return np.lexsort((ts, lane))


def _overlap_positions(t: _Tables) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The GPU records (positions among `t.gpu`'s rows) that run past the start of the next record on their
    device and stream by more than the tolerance, each with the position of that next record and the time
    beyond its start (at most the record's own duration). One sort of one integer per record, and numpy
    passes of BLOCK records: ~40 bytes a record at the peak, a trace's GPU records are never copied whole."""
    none = np.zeros(0, dtype=np.int64)
    if t.gpu_rows < 2:
        return none, none, none
    lane = _lanes(t)
    times = t.gpu.select(Col.TS_NS, Col.DUR_NS).collect()
    ts, dur = times[Col.TS_NS].to_numpy(), times[Col.DUR_NS].to_numpy()
    del times
    order = _lane_order(lane, ts)
    found, following, beyond = [], [], []
    for at in range(0, len(order) - 1, BLOCK):
        here, after = order[at : at + BLOCK], order[at + 1 : at + BLOCK + 1]
        here = here[: len(after)]
        past = ts[here] + dur[here] - ts[after]
        hit = (past > OVERLAP_TOLERANCE_NS) & (lane[here] == lane[after])
        found.append(here[hit])
        following.append(after[hit])
        beyond.append(np.minimum(past[hit], dur[here[hit]]))
    return np.concatenate(found), np.concatenate(following), np.concatenate(beyond)


def _overlaps(t: _Tables) -> pl.DataFrame:
    """The records `_overlap_positions` finds: row, device, stream, ts_ns, dur_ns, past_ns, next_ts, next_row."""
    at, nxt, past = _overlap_positions(t)
    flagged = pl.DataFrame({"_pos": at, "_next": nxt, "past_ns": past}, schema_overrides={"_pos": pl.UInt32})
    indexed = t.gpu.with_row_index("_pos")
    wanted = np.union1d(at, nxt)
    rows = (
        indexed.filter(pl.col("_pos").is_in(pl.Series(wanted, dtype=pl.UInt32).implode()))
        .select("_pos", ROW, Col.DEVICE, Col.STREAM, Col.TS_NS, Col.DUR_NS)
        .collect()
    )
    following = rows.select(
        pl.col("_pos").alias("_next"), pl.col(ROW).alias("next_row"), pl.col(Col.TS_NS).alias("next_ts")
    )
    return (
        flagged.join(rows, on="_pos", how="left")
        .join(following.with_columns(pl.col("_next").cast(pl.Int64)), on="_next", how="left")
        .drop("_pos", "_next")
    )


def overlap_clips(trace: Trace) -> pl.DataFrame:
    """(row, dur_ns): each flagged record's duration cut to the next start on its stream."""
    return _overlaps(_tables(trace)).select(
        ROW, (pl.col("next_ts") - pl.col(Col.TS_NS)).clip(lower_bound=0).alias(Col.DUR_NS)
    )


def _names_of_rows(t: _Tables, rows: list[int]) -> dict[int, tuple[str, str]]:
    """row -> (name, kind) as text, for a few rows (the examples)."""
    found = (
        t.gpu.filter(pl.col(ROW).is_in(rows))
        .select(ROW, pl.col(Col.NAME).cast(pl.String), pl.col(Col.KIND).cast(pl.String))
        .collect()
    )
    return {r: (n, k) for r, n, k in found.iter_rows()}


def stream_overlap(t: _Tables) -> Check | None:
    flagged_frame = _overlaps(t)
    if flagged_frame.height == 0:
        return None
    claimed = int(flagged_frame["past_ns"].sum())
    share = _share(claimed, t.gpu_ns)
    top = flagged_frame.sort("past_ns", descending=True).head(EXAMPLES)
    kinds = t.gpu.filter(pl.col(ROW).is_in(flagged_frame[ROW].implode())).select(
        pl.col(Col.KIND).cast(pl.String).unique()
    )
    only_kernels = set(kinds.collect().to_series().to_list()) <= {"kernel"}
    names = _names_of_rows(t, [*top[ROW].to_list(), *top["next_row"].drop_nulls().to_list()])
    examples = tuple(
        {
            "name": names.get(r[ROW], ("", ""))[0],
            "device": r[Col.DEVICE],
            "stream": r[Col.STREAM],
            "start_us": _us(r[Col.TS_NS] - t.start_ns),
            "dur_us": _us(r[Col.DUR_NS]),
            "past_next_start_us": _us(r["past_ns"]),
            "next": names.get(r["next_row"], ("", ""))[0],
        }
        for r in top.iter_rows(named=True)
    )
    what = ("kernel", "kernels") if only_kernels else ("GPU record", "GPU records")
    return Check(
        check="stream_overlap",
        severity=ERROR if share >= OVERLAP_ERROR_SHARE else WARN,
        events=flagged_frame.height,
        gpu_time_ns=claimed,
        share=share,
        message=(
            f"{_plural(flagged_frame.height, *what)} run past the start of the next work on their stream "
            f"by {_us(claimed) / 1e3:,.3f} ms ({_pct(share)} of GPU time): their durations look deferred"
        ),
        examples=examples,
    )


# ---- outlier_duration -----------------------------------------------------------------------------------------


def outlier_duration(t: _Tables, steps: np.ndarray) -> Check | None:
    """A GPU record longer than the host's window (the profiled run: the other events' first start to last
    end); a kernel or copy longer than the step it starts in; a kernel
    OUTLIER_FACTOR times its name's median (OUTLIER_MIN_CALLS calls or more, OUTLIER_MIN_NS or longer).
    Communication kernels (a collective waits for its peers) are held to the window only, copies (their
    length follows their bytes) to the window and their step. `steps`: (start, end) pairs. Only the records
    longer than the shortest step, or than OUTLIER_MIN_NS, are looked at beyond the per-name medians."""
    if t.gpu_rows == 0:
        return None
    # no host events (a GPU-only capture): no window to hold the records to
    window = t.host_ns if t.host_ns is not None else np.iinfo(np.int64).max
    kernel = pl.col(Col.KIND) == "kernel"
    comm = pl.col(Col.NAME).is_in(t.comm)
    lengths = steps[:, 1] - steps[:, 0]
    shortest = int(lengths[lengths > 0].min()) if (lengths > 0).any() else window
    window = max(window, 0)
    candidates = t.gpu.filter(
        (pl.col(Col.DUR_NS) > window)
        | (pl.col(Col.DUR_NS) > shortest)
        | (kernel & (pl.col(Col.DUR_NS) >= OUTLIER_MIN_NS))
    ).collect()
    if candidates.height == 0:
        return None
    # the medians of the candidates' names only: most records are of names no candidate has
    names = candidates.filter(pl.col(Col.KIND) == "kernel")[Col.NAME].unique()
    medians = (
        t.gpu.filter(kernel & ~comm & pl.col(Col.NAME).is_in(names.implode()))
        .group_by(Col.NAME)
        .agg(pl.col(Col.DUR_NS).median().alias("_median"), pl.len().alias("_calls"))
        .collect()
    )
    candidates = candidates.join(medians, on=Col.NAME, how="left").with_columns(
        comm.alias("_comm"), kernel.alias("_kernel")
    )
    ts, dur = candidates[Col.TS_NS].to_numpy(), candidates[Col.DUR_NS].to_numpy()
    is_comm = candidates["_comm"].to_numpy()
    step_len = _step_lengths(ts, steps)
    longer_than_window = dur > window
    longer_than_step = ~is_comm & (step_len > 0) & (dur > step_len)
    spread = (
        candidates["_kernel"].to_numpy()
        & ~is_comm
        & (candidates["_calls"].fill_null(0).to_numpy() >= OUTLIER_MIN_CALLS)
        & (dur >= OUTLIER_MIN_NS)
        & (dur > OUTLIER_FACTOR * candidates["_median"].fill_null(np.inf).to_numpy())
    )
    hit = longer_than_window | longer_than_step | spread
    if not hit.any():
        return None
    why = np.where(
        longer_than_window,
        "longer than the profiled run",
        np.where(longer_than_step, "longer than its step", f"over {OUTLIER_FACTOR}x its name's median"),
    )
    found = _text(candidates.filter(pl.Series(hit)).with_columns(pl.Series("why", why[hit])))
    held = int(found[Col.DUR_NS].sum())
    share = _share(held, t.gpu_ns)
    examples = tuple(
        {
            "name": r[Col.NAME],
            "start_us": _us(r[Col.TS_NS] - t.start_ns),
            "dur_us": _us(r[Col.DUR_NS]),
            "median_us": _us(r["_median"] or 0),
            "why": r["why"],
        }
        for r in found.sort(Col.DUR_NS, descending=True).head(EXAMPLES).iter_rows(named=True)
    )
    return Check(
        check="outlier_duration",
        severity=ERROR if share >= OUTLIER_ERROR_SHARE else WARN,
        events=found.height,
        gpu_time_ns=held,
        share=share,
        message=(
            f"{_plural(found.height, 'GPU record')} longer than possible or usual (longer than the profiled run or "
            f"their step, or {OUTLIER_FACTOR}x their kernel's median) hold {_pct(share)} of GPU time"
        ),
        examples=examples,
        detail={
            "longer_than_window": int(longer_than_window.sum()),
            "longer_than_step": int((longer_than_step & ~longer_than_window).sum()),
            "over_median": int((spread & ~longer_than_step & ~longer_than_window).sum()),
        },
    )


def _step_index(ts: np.ndarray, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each time: the index of the step it starts in (among the steps sorted by start: the last one that
    starts at or before it) and whether it lies in that step; the order that sorts the steps."""
    order = np.argsort(steps[:, 0], kind="stable")
    lo, hi = steps[order, 0], steps[order, 1]
    at = np.searchsorted(lo, ts, side="right") - 1
    inside = (at >= 0) & (ts <= hi[np.maximum(at, 0)])
    return at, inside, order


def _step_lengths(ts: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """The length of the step each time starts in; 0 outside every step."""
    if not len(steps) or not len(ts):
        return np.zeros(len(ts), dtype=np.int64)
    at, inside, order = _step_index(ts, steps)
    length = (steps[order, 1] - steps[order, 0])[np.maximum(at, 0)]
    return np.where(inside, length, 0)


# ---- launches and records -------------------------------------------------------------------------------------


def _split(ids: np.ndarray, other: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Masks of `ids` below every id of the other side (`other`: sorted), above every one, and between:
    correlation ids count up over a process's calls, so an id below the other side's is from before its first
    item (the profiler started on one side first), above from after its last, and between is a gap (records
    dropped). Without any other id, all are between."""
    if not len(other):
        none = np.zeros(len(ids), dtype=bool)
        return none, ~none, none
    start, end = ids < other[0], ids > other[-1]
    return start, ~start & ~end, end


def launch_without_record(t: _Tables, links: _Links) -> Check | None:
    """Kernel launches and copies (not memsets, graph launches, host functions, nor launches captured into a
    graph) whose correlation id matches no GPU record, by where the id lies among the records' ids: at the
    start (the GPU side started late), at the end (still running when the profiler stopped), in the middle
    (dropped)."""
    launch = links.call_launch
    captured = launch & _inside(links.call_ts, t.captures)
    launches = int(launch.sum() - captured.sum())
    missing = launch & ~captured & ~_member(links.call_id, links.recorded)
    count = int(missing.sum())
    if count == 0 or launches == 0:
        return None
    start, middle, end = (int((missing & m).sum()) for m in _split(links.call_id, links.recorded))
    nothing = t.gpu_rows == 0
    share = _share(count, launches)
    severity = ERROR if nothing else WARN if middle or share >= MISSING_WARN_SHARE else INFO
    shown = missing & _split(links.call_id, links.recorded)[1] if middle else missing
    examples = tuple(
        {"name": r[Col.NAME], "start_us": _us(r[Col.TS_NS] - t.start_ns), "correlation": r[Col.CORRELATION]}
        for r in _rows_of(t, links.call_row[shown][:EXAMPLES], [Col.TS_NS, Col.CORRELATION]).iter_rows(
            named=True
        )
    )
    if nothing:
        message = f"{_plural(count, 'launch call')} and no GPU records at all: every GPU figure is missing"
    else:
        message = (
            f"{_plural(count, 'launch call')} ({_pct(share)} of kernel launches and copies) without a "
            f"GPU record: {start:,} at the start, {middle:,} in the middle (dropped), {end:,} at the end"
        )
    return Check(
        check="launch_without_record",
        severity=severity,
        events=count,
        gpu_time_ns=0,
        share=0.0,
        message=message,
        examples=examples,
        detail={
            "start": start,
            "middle": middle,
            "end": end,
            "launches": launches,
            "captured": int(captured.sum()),
        },
    )


def record_without_launch(t: _Tables, links: _Links) -> Check | None:
    """GPU records whose correlation id matches no launch call, split like `launch_without_record` (by where the
    id lies among the calls' ids: kernels launched before the profiler started have ids below every call's).
    Where the trace records no kernel launch at all (a GPU-only capture, an xplane that records copies only),
    it is said, not warned."""
    missing = ~_member(links.rec_id, links.launched)
    count = int(missing.sum())
    if count == 0:
        return None
    parts = _split(links.rec_id, links.launched)
    start, middle, end = (int((missing & m).sum()) for m in parts)
    held = int(links.rec_dur[missing].sum())
    share = _share(held, t.gpu_ns)
    shown = missing & parts[1] if middle else missing
    examples = tuple(
        {"name": r[Col.NAME], "start_us": _us(r[Col.TS_NS] - t.start_ns), "dur_us": _us(r[Col.DUR_NS])}
        for r in _rows_of(t, links.rec_row[shown][:EXAMPLES], [Col.TS_NS, Col.DUR_NS]).iter_rows(named=True)
    )
    if links.kernel_launches == 0:
        message = (
            f"{_plural(count, 'GPU record')} without a launch call, and the trace records no kernel launch calls "
            "(a GPU-only capture, or a profiler that does not record them): nothing is attributed to operators"
        )
    else:
        message = (
            f"{_plural(count, 'GPU record')} ({_pct(share)} of GPU time) without their launch call: {start:,} at "
            f"the start (launched before the profiler started), {middle:,} in the middle, {end:,} at the end"
        )
    return Check(
        check="record_without_launch",
        severity=WARN if middle and links.kernel_launches else INFO,
        events=count,
        gpu_time_ns=held,
        share=share,
        message=message,
        examples=examples,
        detail={"start": start, "middle": middle, "end": end},
    )


def kernel_before_launch(t: _Tables, links: _Links) -> Check | None:
    """GPU records that start before the launch call that launched them began: the GPU clock runs behind the
    host's. A record's launch is the latest call of its correlation id at or before it, else the earliest
    after (as the link table picks), so a record is before its launch exactly when it starts before the first
    call of its id. The offset: how far the earliest such record would have to move (the largest gap), and
    the median gap."""
    if not len(links.launched) or not len(links.rec_id):
        return None
    order = np.lexsort((links.call_ts, links.call_id))  # by id, then start: each id's first call first
    ids = links.call_id[order]
    first_of = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    first_ts = links.call_ts[order][first_of]  # the first call of each id, in the order of `links.launched`
    at = np.minimum(np.searchsorted(links.launched, links.rec_id), len(links.launched) - 1)
    found = links.launched[at] == links.rec_id
    gap = np.where(found, first_ts[at] - links.rec_ts, 0)
    early = found & (gap > 0)
    count = int(early.sum())
    if count == 0:
        return None
    held = int(links.rec_dur[early].sum())
    share = _share(held, t.gpu_ns)
    gaps = gap[early]
    offset = int(gaps.max())
    top = np.argsort(-gaps, kind="stable")[:EXAMPLES]
    rows = links.rec_row[early][top]
    examples = tuple(
        {"name": r[Col.NAME], "start_us": _us(r[Col.TS_NS] - t.start_ns), "before_launch_us": _us(g)}
        for r, g in zip(_rows_of(t, rows, [Col.TS_NS]).iter_rows(named=True), gaps[top], strict=True)
    )
    return Check(
        check="kernel_before_launch",
        severity=WARN,
        events=count,
        gpu_time_ns=held,
        share=share,
        message=(
            f"{_plural(count, 'GPU record')} start before their launch call (by up to {_us(offset):,.3f} us): "
            "the GPU clock is off from the host's; launch delays and the critical path near them are not exact"
        ),
        examples=examples,
        detail={"offset_us": _us(offset), "median_offset_us": _us(float(np.median(gaps)))},
    )


def graph_kernels_hidden(t: _Tables, links: _Links) -> Check | None:
    """Graph launches (cudaGraphLaunch, hipGraphLaunch) whose kernels are absent from the trace (no GPU record of
    their correlation id), and the GPU time of the kernels they did launch, which the trace attributes to the
    graph launch, not to the operators that captured the graph."""
    graphs = links.call_graph
    if not graphs.any():
        return None
    ids = _sorted_unique(links.call_id[graphs])
    recorded = _member(links.rec_id, ids)
    absent = graphs & ~_member(links.call_id, links.recorded)
    held = int(links.rec_dur[recorded].sum())
    share = _share(held, t.gpu_ns)
    n_absent = int(absent.sum())
    if n_absent == 0 and share < GRAPH_INFO_SHARE:
        return None
    shown = links.call_row[absent if n_absent else graphs][:EXAMPLES]
    examples = tuple(
        {"name": r[Col.NAME], "start_us": _us(r[Col.TS_NS] - t.start_ns), "correlation": r[Col.CORRELATION]}
        for r in _rows_of(t, shown, [Col.TS_NS, Col.CORRELATION]).iter_rows(named=True)
    )
    parts = []
    if n_absent:
        parts.append(
            f"{_plural(n_absent, 'graph launch', 'graph launches')} with no kernels in the trace (their GPU work is in no figure)"
        )
    if held:
        parts.append(
            f"{_pct(share)} of GPU time ran in graphs, attributed to the graph launch, not to the ops that captured it"
        )
    return Check(
        check="graph_kernels_hidden",
        severity=WARN if n_absent else INFO,
        events=n_absent + int(recorded.sum()),
        gpu_time_ns=held,
        share=share,
        message="; ".join(parts),
        examples=examples,
        detail={
            "graph_launches": int(graphs.sum()),
            "without_kernels": n_absent,
            "graph_kernels": int(recorded.sum()),
        },
    )


# ---- steps, and what the reader lost ----------------------------------------------------------------------------


def step_collapse(t: _Tables, steps: np.ndarray, names: list[str]) -> Check | None:
    """With COLLAPSE_MIN_STEPS steps or more: steps that hold no GPU work (no record starts in them) while the
    others, at most COLLAPSE_SHARE of the steps, hold it all."""
    if len(steps) < COLLAPSE_MIN_STEPS or t.gpu_rows == 0:
        return None
    records = t.gpu.select(Col.TS_NS, Col.DUR_NS).collect()
    ts, dur = records[Col.TS_NS].to_numpy(), records[Col.DUR_NS].to_numpy()
    at, inside, order = _step_index(ts, steps)
    count = np.bincount(at[inside], minlength=len(steps))
    busy = np.bincount(at[inside], weights=dur[inside], minlength=len(steps))
    empty = count == 0
    holding = int((~empty).sum())
    if not empty.any() or holding == 0 or holding > COLLAPSE_SHARE * len(steps):
        return None
    held = int(busy.sum())
    share = _share(held, t.gpu_ns)
    shown = [names[i] for i in order[~empty][:EXAMPLES]]
    return Check(
        check="step_collapse",
        severity=WARN,
        events=int(empty.sum()),
        gpu_time_ns=held,
        share=share,
        message=(
            f"{int(empty.sum()):,} of {len(steps):,} steps hold no GPU work while {holding:,} hold it all: per-step "
            "figures (and anything averaged over steps) describe the steps' wall time, not their GPU work"
        ),
        examples=tuple({"step": name} for name in shown),
        detail={"steps": len(steps), "empty": int(empty.sum()), "holding": holding},
    )


_SKIPPED = re.compile(r"skipped ([\d,]+) events")
_LOSS_KEY = re.compile(r"drop|overflow|lost|discard", re.IGNORECASE)


def dropped_events(trace: Trace) -> Check | None:
    """What was lost before the analysis: a trace cut off mid-write (salvaged up to the cut), events the reader
    had to skip, and what the profiler recorded itself (a top-level counter named like dropped / overflow /
    lost records)."""
    meta = trace.meta
    skipped = sum(int(m.group(1).replace(",", "")) for w in meta.warnings if (m := _SKIPPED.search(w)))
    counters = {
        k: int(v)
        for k, v in meta.extra.items()
        if _LOSS_KEY.search(k) and isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
    }
    if not meta.truncated and not skipped and not counters:
        return None
    parts = []
    if meta.truncated:
        parts.append(
            "the trace was cut off mid-write (salvaged up to the cut: the end of the run is missing)"
        )
    if skipped:
        parts.append(f"{skipped:,} events the reader could not read were skipped")
    parts += [f"the profiler reports {k} = {v:,}" for k, v in counters.items()]
    return Check(
        check="dropped_events",
        severity=WARN,
        events=skipped + sum(counters.values()),
        gpu_time_ns=0,
        share=0.0,
        message="; ".join(parts),
        detail={
            "truncated": meta.truncated,
            "skipped": skipped,
            **{f"reported:{k}": v for k, v in counters.items()},
        },
    )


ORDER = (
    "stream_overlap",
    "outlier_duration",
    "launch_without_record",
    "record_without_launch",
    "kernel_before_launch",
    "graph_kernels_hidden",
    "step_collapse",
    "dropped_events",
)


def run_all(trace: Trace) -> Validity:
    """Every check of the trace, the fired ones most severe first (then in ORDER). The four that pair records
    with launches share one collection of the launch side, given back before the others run."""
    t = _tables(trace)
    links = _links(t)
    fired = [
        launch_without_record(t, links),
        record_without_launch(t, links),
        kernel_before_launch(t, links),
        graph_kernels_hidden(t, links),
    ]
    del links
    windows = marker_windows(trace)
    steps = np.array([(w.start_ns, w.end_ns) for w in windows], dtype=np.int64).reshape(-1, 2)
    fired += [
        stream_overlap(t),
        outlier_duration(t, steps),
        step_collapse(t, steps, [w.name for w in windows]),
        dropped_events(trace),
    ]
    found = sorted(
        (c for c in fired if c is not None),
        key=lambda c: (-SEVERITIES.index(c.severity), ORDER.index(c.check)),
    )
    return Validity(checks=tuple(found))
