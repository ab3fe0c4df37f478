"""Memory per device from the allocator's events: peak, fragmentation, counts, what stays live, lifetimes,
who allocates and how each step grows. Every figure is defined in `docs/memory.md`.

Pure function over a `Trace`: `memory_stats(trace, options) -> MemoryStats`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from opscope.analysis.base import windows
from opscope.analysis.base.stages import stage
from opscope.analysis.memory.events import Pairing, device_order, is_gpu, memory_events, pair_frees, peak_of
from opscope.analysis.memory.owners import Owners, find_owners
from opscope.analysis.memory.steps import StepMemory, growth_warnings, step_memory
from opscope.errors import UsageError
from opscope.model.schema import Col
from opscope.model.trace import Trace
from opscope.tables import Tabular, dataclass_rows

CAPACITY_TYPES = ("cuda", "hip")  # devices whose deviceProperties entry (by index) gives the capacity


@dataclass(frozen=True)
class MemoryOptions:
    devices: tuple[str, ...] | None = None  # device names ("cuda:0") or bare indices ("0": any GPU with it)
    steps: str | None = None  # ProfilerStep selection ("3-5"), as for the other commands
    top: int = 20  # rows of `top_ops` (0 = all)


@dataclass(frozen=True)
class DeviceMemory:
    device: str
    peak_allocated_bytes: int
    peak_allocated_ts_ns: int
    peak_allocated_op: str | None
    peak_allocated_step: int | None
    peak_reserved_bytes: int | None
    fragmentation_at_peak_bytes: int | None
    max_fragmentation_bytes: int | None
    capacity_bytes: int | None
    relative: bool
    alloc_count: int
    alloc_bytes: int
    free_count: int
    unmatched_frees: int
    live_at_end_count: int | None
    live_at_end_bytes: int | None
    lifetime_ns: tuple[float, float, float] | None  # p50, p95, max


@dataclass(frozen=True)
class OpMemory:
    op: str
    device: str
    self_alloc_bytes: int
    self_alloc_count: int
    # Of the op's own allocations, those never freed in the window: still live at its end (issue 28: this
    # replaced "left live", the bytes still held when each call returned, summed over calls). None when the
    # trace records no addresses (frees cannot be paired). Summed over the ops of a device: its live_at_end.
    live_at_end_bytes: int | None
    live_at_end_count: int | None
    alloc_bytes: int
    alloc_count: int
    # Deprecated, kept for the stable JSON (`opscope.memory/1`): the bytes of the op's own allocations not
    # freed before the call that made them returned, summed over calls ("left live"; no view prints it).
    self_increase_bytes: int = 0


@dataclass(frozen=True)
class LiveBlock:
    device: str
    addr: int
    nbytes: int
    ts_ns: int
    op: str


@dataclass(frozen=True)
class MemoryStats(Tabular):
    path: str
    options: MemoryOptions
    devices: tuple[DeviceMemory, ...]
    top_ops: tuple[OpMemory, ...]
    steps: tuple[StepMemory, ...]
    live_at_end: tuple[LiveBlock, ...]  # the largest live-at-end allocations (leak candidates), `top` of them
    timeline: dict[str, tuple[list[int], list[int], list[int] | None]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def _table_rows(self) -> list[dict[str, Any]]:
        """One row per device: its peaks, counts and what is live at the end (`top_ops`, `steps` and
        `live_at_end` hold the other tables)."""
        return [{k: v for k, v in row.items() if k != "lifetime_ns"} for row in dataclass_rows(self.devices)]


def _chosen(names: list[str], wanted: tuple[str, ...] | None) -> list[str]:
    if not wanted:
        return names
    out = [n for n in names if n in wanted or (n.partition(":")[2] in wanted and is_gpu(n))]
    if not out:
        raise UsageError(
            f"--device: no memory events on {', '.join(wanted)} (the trace has {', '.join(names) or 'none'})"
        )
    return out


def lifetimes(ts: np.ndarray, partner: np.ndarray, nbytes: np.ndarray) -> tuple[float, float, float] | None:
    """p50, p95 (linear interpolation between closest ranks) and max of free time - allocation time, ns."""
    allocs = np.flatnonzero((nbytes > 0) & (partner >= 0))
    if not len(allocs):
        return None
    life = (ts[partner[allocs]] - ts[allocs]).astype(np.float64)
    return float(np.percentile(life, 50)), float(np.percentile(life, 95)), float(life.max())


def memory_stats(trace: Trace, options: MemoryOptions | None = None) -> MemoryStats:
    options = options or MemoryOptions()
    stage("memory events")
    events = memory_events(trace)
    if options.steps is not None:
        chosen = windows.select_windows(trace, options.steps)
        inside = pl.lit(False)
        for w in chosen:
            inside = inside | pl.col(Col.TS_NS).is_between(w.start_ns, w.end_ns)
        events = events.filter(inside)
    names = _chosen(device_order(events["mem_device"].to_list()), options.devices)
    events = events.filter(pl.col("mem_device").is_in(names))
    owners = find_owners(trace, events)
    markers = windows.marker_windows(trace)
    if options.steps is not None:
        wanted = set(windows.parse_steps(options.steps))
        markers = tuple(w for w in markers if w.step in wanted)
    capacity = {d.id: d.total_memory for d in trace.meta.devices}
    devices, ops, live, steps, warnings = [], [], [], [], []
    timeline: dict[str, tuple[list[int], list[int], list[int] | None]] = {}
    for name in names:
        mask = (events["mem_device"] == name).to_numpy()
        frame = events.filter(pl.Series(mask))
        own = owners.take(mask)
        pairing = pair_frees(frame[Col.MEM_ADDR], frame[Col.MEM_BYTES])
        dev, level, reserved = _device(name, frame, own, markers, capacity, pairing)
        devices.append(dev)
        ts = frame[Col.TS_NS].to_numpy()
        timeline[name] = (ts.tolist(), level.tolist(), reserved)
        ops.extend(_ops(name, frame, own, pairing, dev.live_at_end_count is not None))
        if dev.live_at_end_count is not None:
            nbytes = frame[Col.MEM_BYTES].to_numpy()
            at = np.flatnonzero(pairing.live_at_end(frame))
            live.append(
                pl.DataFrame(
                    {
                        "device": pl.Series([name] * len(at), dtype=pl.String),
                        "addr": frame[Col.MEM_ADDR].gather(at).cast(pl.Int64),
                        "nbytes": nbytes[at].astype(np.int64),
                        "ts_ns": ts[at].astype(np.int64),
                        "op": own.label.gather(at),
                    }
                )
            )
        if markers:
            rows = step_memory(name, ts, level, frame[Col.MEM_BYTES].to_numpy(), dev.relative, markers)
            steps.extend(rows)
            warnings.extend(growth_warnings(name, rows))
        if dev.unmatched_frees:
            warnings.append(
                f"{name}: {dev.unmatched_frees} free(s) without an allocation in the trace (made "
                "before the profiler started, or a double free)"
            )
        if dev.relative:
            warnings.append(
                f"{name}: the trace has no allocator totals (PyTorch 1.9): figures are relative to "
                "the allocated memory when the profiler started"
            )
    ops.sort(key=lambda o: (-o.self_alloc_bytes, -o.alloc_bytes, o.op, o.device))
    top = options.top or None
    return MemoryStats(
        trace.path,
        options,
        tuple(devices),
        tuple(ops[:top]),
        tuple(steps),
        _largest_live(live, top),
        timeline,
        tuple(warnings),
    )


def _largest_live(parts: list[pl.DataFrame], top: int | None) -> tuple[LiveBlock, ...]:
    """The live-at-end allocations of every device, largest first (then the earliest; then in device and
    trace order), the first `top` of them (all: None) as rows."""
    if not parts:
        return ()
    frame = pl.concat(parts).with_row_index("_i")
    chosen = frame.sort(["nbytes", "ts_ns", "_i"], descending=[True, False, False])
    if top is not None:
        chosen = chosen.head(top)
    return tuple(LiveBlock(*row) for row in chosen.drop("_i").iter_rows())


def _device(
    name: str,
    frame: pl.DataFrame,
    own: Owners,
    markers: tuple[windows.StepWindow, ...],
    capacity: dict[int, int | None],
    pairing: Pairing,
) -> tuple[DeviceMemory, np.ndarray, list[int] | None]:
    nbytes = frame[Col.MEM_BYTES].to_numpy().astype(np.int64)
    ts = frame[Col.TS_NS].to_numpy().astype(np.int64)
    allocated = frame[Col.MEM_ALLOCATED]
    relative = allocated.null_count() > 0
    level = np.cumsum(nbytes) if relative else allocated.to_numpy().astype(np.int64)
    peak_at, peak = peak_of(level, relative)
    gpu = is_gpu(name)
    reserved_col = frame[Col.MEM_RESERVED]
    has_reserved = gpu and not relative and reserved_col.null_count() == 0
    reserved = reserved_col.to_numpy().astype(np.int64) if has_reserved else None
    frag = reserved - level if reserved is not None else None
    addr = frame[Col.MEM_ADDR]
    has_addr = addr.null_count() < frame.height
    live = pairing.live_at_end(frame)
    kind, _, index = name.partition(":")
    cap = capacity.get(int(index)) if kind in CAPACITY_TYPES and index.isdigit() else None
    step = next((w.step for w in markers if w.start_ns <= ts[peak_at] <= w.end_ns), None)
    dev = DeviceMemory(
        device=name,
        peak_allocated_bytes=peak,
        peak_allocated_ts_ns=int(ts[peak_at]),
        peak_allocated_op=own.innermost(peak_at),
        peak_allocated_step=step,
        peak_reserved_bytes=int(reserved.max()) if reserved is not None else None,
        fragmentation_at_peak_bytes=int(frag[peak_at]) if frag is not None else None,
        max_fragmentation_bytes=int(frag.max()) if frag is not None else None,
        capacity_bytes=cap,
        relative=relative,
        alloc_count=int((nbytes > 0).sum()),
        alloc_bytes=int(nbytes[nbytes > 0].sum()),
        free_count=int((nbytes < 0).sum()),
        unmatched_frees=pairing.unmatched_frees,
        live_at_end_count=int(live.sum()) if has_addr else None,
        live_at_end_bytes=int(nbytes[live].sum()) if has_addr else None,
        lifetime_ns=lifetimes(ts, pairing.partner, nbytes),
    )
    return dev, level, reserved.tolist() if reserved is not None else None


def _ops(device: str, frame: pl.DataFrame, own: Owners, pairing: Pairing, paired: bool) -> list[OpMemory]:
    """Per op label: its own allocations, those of them still live at the end (`paired`: the trace records
    addresses, so frees pair with allocations), and the inclusive allocations (`Owners.inclusive`)."""
    nbytes = frame[Col.MEM_BYTES].to_numpy().astype(np.int64)
    ts = frame[Col.TS_NS].to_numpy().astype(np.int64)
    alloc = nbytes > 0
    live = pairing.live_at_end(frame)
    partner = pairing.partner
    # left live when the call returned: never freed, outside every op, or freed after the op's end
    freed_after = ts[np.maximum(partner, 0)] > own.owner_end_ns()
    increase = alloc & ((partner < 0) | (own.charged < 0) | freed_after)
    own_rows = (
        pl.DataFrame({"label": own.label, "b": nbytes, "live": live, "increase": increase})
        .filter(pl.Series(alloc))
        .group_by("label")
        .agg(
            pl.col("b").sum().alias("self_bytes"),
            pl.len().alias("self_count"),
            pl.col("b").filter(pl.col("live")).sum().alias("live_bytes"),
            pl.col("live").sum().alias("live_count"),
            pl.col("b").filter(pl.col("increase")).sum().alias("increase"),
        )
    )
    mine = {row[0]: row[1:] for row in own_rows.iter_rows()}
    inclusive = own.inclusive(nbytes, alloc)
    rows = []
    for k in set(mine) | set(inclusive):
        self_bytes, self_count, live_bytes, live_count, left = mine.get(k, (0, 0, 0, 0, 0))
        alloc_bytes, alloc_count = inclusive.get(k, (self_bytes, self_count))
        rows.append(
            OpMemory(
                op=k,
                device=device,
                self_alloc_bytes=int(self_bytes),
                self_alloc_count=int(self_count),
                live_at_end_bytes=int(live_bytes) if paired else None,
                live_at_end_count=int(live_count) if paired else None,
                alloc_bytes=int(alloc_bytes),
                alloc_count=int(alloc_count),
                self_increase_bytes=int(left),
            )
        )
    return rows
