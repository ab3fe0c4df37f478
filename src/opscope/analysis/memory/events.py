"""The allocator's `[memory]` events of a trace, one device at a time, and the pairing of frees with allocations.

Input of every memory analysis: `memory_events` selects the rows the ingest filled the `mem_*` columns of,
names their device (`cuda:0`, `hip:0`, `cpu`, ...) and keeps them in trace order (time, then file order);
`pair_frees` matches each free with the latest unmatched allocation of the same device and address (see
`docs/memory.md`). Pure functions over the event table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from opscope.analysis.base.nesting import lexsort
from opscope.model.schema import Col
from opscope.model.trace import Trace

# c10::DeviceType values -> the names opscope shows ("cuda:0"); CPU and MPS have no index in their name.
DEVICE_TYPES: dict[int, str] = {
    0: "cpu",
    1: "cuda",
    6: "hip",
    12: "xpu",
    13: "mps",
    19: "mtia",
    20: "privateuse1",
}
UNINDEXED = ("cpu", "mps")
ROW = "_mem_row"  # position in the event table (file order), the tiebreak for equal timestamps


def device_name(device_type: int | None, device_id: int | None) -> str:
    """`cuda:0` for (1, 0); `cpu` for (0, -1); an unknown type keeps its number (`type42:0`)."""
    kind = DEVICE_TYPES.get(device_type, f"type{device_type}") if device_type is not None else "unknown"
    if kind in UNINDEXED or device_id is None or device_id < 0:
        return kind
    return f"{kind}:{device_id}"


def is_gpu(name: str) -> bool:
    """Devices with a caching allocator whose reserved memory means something (everything but the CPU)."""
    return name != "cpu" and not name.startswith("unknown")


def memory_events(trace: Trace) -> pl.DataFrame:
    """Every `[memory]` event with a size, in trace order: ROW, ts_ns, pid, tid, the mem_* columns and
    `mem_device` (the device's name). Read once per trace (`Trace.derived`): the peaks and the memory summary
    of one command (`analyze`'s peaks, the advice's memory rule, the report's panel) share it."""
    return trace.derived("memory_events", lambda: _memory_events(trace))


def _memory_events(trace: Trace) -> pl.DataFrame:
    frame = (
        trace.lazy()
        .with_row_index(ROW)
        .filter(pl.col(Col.MEM_BYTES).is_not_null() & pl.col(Col.TS_NS).is_not_null())
        .select(
            ROW,
            Col.TS_NS,
            pl.col(Col.PID).cast(pl.String),
            pl.col(Col.TID).cast(pl.String),
            Col.MEM_ADDR,
            Col.MEM_BYTES,
            Col.MEM_ALLOCATED,
            Col.MEM_RESERVED,
            Col.MEM_DEVICE_TYPE,
            Col.MEM_DEVICE_ID,
        )
        .sort([Col.TS_NS, ROW])
        .collect()
    )
    pairs = frame.select(Col.MEM_DEVICE_TYPE, Col.MEM_DEVICE_ID).unique()
    names = pairs.with_columns(
        pl.Series("mem_device", [device_name(t, i) for t, i in pairs.iter_rows()], dtype=pl.String)
    )
    return frame.join(names, on=[Col.MEM_DEVICE_TYPE, Col.MEM_DEVICE_ID], how="left", nulls_equal=True).sort(
        [Col.TS_NS, ROW]
    )


def device_order(names: list[str]) -> list[str]:
    """GPUs first by type and index, the CPU last."""

    def key(name: str) -> tuple[int, str, int]:
        kind, _, index = name.partition(":")
        return (1 if name == "cpu" else 0, kind, int(index) if index.isdigit() else -1)

    return sorted(set(names), key=key)


def peak_of(level: np.ndarray, relative: bool) -> tuple[int, int]:
    """(position, bytes) of the peak of a device's allocated level: the first event that reaches the maximum.
    A relative level (the running sum of `Bytes`) starts from 0 before the first event, so its peak is never
    below 0: where no event rises above 0 it is 0, placed at the first event (the level just before it)."""
    at = int(np.argmax(level))
    if relative and level[at] <= 0:
        return 0, 0
    return at, int(level[at])


@dataclass(frozen=True)
class Pairing:
    """Per event of one device (positions in its frame): `partner` is the matching free of an allocation or
    the matching allocation of a free (-1: none). `unmatched_frees` counts frees with no allocation."""

    partner: np.ndarray
    unmatched_frees: int

    def live_at_end(self, frame: pl.DataFrame) -> np.ndarray:
        """Per event of `frame` (the device's events these pairs are of): an allocation with an address that no
        free takes in the window, i.e. still live at its end (docs/memory.md)."""
        allocated = frame[Col.MEM_BYTES].to_numpy() > 0
        return allocated & (self.partner < 0) & frame[Col.MEM_ADDR].is_not_null().to_numpy()


def pair_frees(addr: pl.Series, nbytes: pl.Series) -> Pairing:
    """Pair the events of one device, given in trace order: a free (Bytes < 0) takes the latest allocation
    (Bytes > 0) of the same address that no free has taken yet. Events without an address pair with nothing.

    Per address this is bracket matching, done for every address at once (issue 25: it was a Python loop over
    the events): each address's events in order are steps +1 (allocation) and -1 (free); the number of open
    allocations after each event is their running sum floored at 0 (a free with none open is unmatched and
    changes nothing), which is the running sum less its running minimum where that is below 0. A matched free
    takes the allocation that opened the level it closes, the latest one at that level before it: in the order
    (address, level, position) it is the element just before the free."""
    n = len(addr)
    partner = np.full(n, -1, dtype=np.int64)
    size = nbytes.fill_null(0).to_numpy().astype(np.int64)
    events = np.flatnonzero(addr.is_not_null().to_numpy() & (size != 0))
    if len(events) == 0:
        return Pairing(partner, 0)
    order = events[lexsort((events, addr.to_numpy()[events]))]  # by address, then trace order
    address = addr.to_numpy()[order]
    step = np.where(size[order] > 0, 1, -1)
    first = np.r_[True, address[1:] != address[:-1]]  # each address's first event
    group = np.cumsum(first) - 1
    total = np.cumsum(step)
    running = total - (total - step)[np.flatnonzero(first)][group]  # the sum within the address
    # the running minimum within the address: earlier addresses are lifted above any later value
    lift = (group[-1] - group) * (2 * len(order) + 2)
    low = np.minimum.accumulate(running + lift) - lift
    after = running - np.minimum(low, 0)  # open allocations after each event
    before = np.where(first, 0, np.r_[0, after[:-1]])
    alloc = step > 0
    matched = ~alloc & (before > 0)
    level = np.where(alloc, after, before)
    chosen = np.flatnonzero(alloc | matched)
    ranked = chosen[lexsort((chosen, level[chosen], group[chosen]))]
    frees = np.flatnonzero(matched[ranked])
    free_at, alloc_at = order[ranked[frees]], order[ranked[frees - 1]]
    partner[free_at], partner[alloc_at] = alloc_at, free_at
    return Pairing(partner, int((~alloc & ~matched).sum()))
