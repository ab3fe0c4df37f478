"""Peak memory per device, the figure every other command shows (analyze, report, diff, ranks), and its
before/after comparison. Same definitions as `opscope memory` (docs/memory.md), without the per-op work."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from opscope.analysis.base import windows
from opscope.analysis.memory.events import device_order, is_gpu, memory_events, peak_of
from opscope.model.schema import Col
from opscope.model.trace import Trace


@dataclass(frozen=True)
class DevicePeak:
    device: str
    peak_allocated_bytes: int
    peak_reserved_bytes: int | None
    relative: bool  # no allocator totals: relative to the level when the profiler started


@dataclass(frozen=True)
class PeakChange:
    device: str  # the name on both sides, or "cuda:0 -> hip:0" where a GPU pairs across vendors
    base: DevicePeak | None
    new: DevicePeak | None

    @property
    def allocated_change(self) -> float | None:
        """(new - base) / base of the peak allocated; None where either side is missing or base is 0."""
        if self.base is None or self.new is None or self.base.peak_allocated_bytes <= 0:
            return None
        return (
            self.new.peak_allocated_bytes - self.base.peak_allocated_bytes
        ) / self.base.peak_allocated_bytes


Peaks = tuple[DevicePeak, ...]  # one trace's peaks, a device each


def peak_memory(trace: Trace, steps: str | None = None) -> tuple[DevicePeak, ...]:
    """The peak allocated / reserved bytes of each device with `[memory]` events (empty without them)."""
    events = memory_events(trace)
    if steps is not None:
        inside = pl.lit(False)
        for w in windows.select_windows(trace, steps):
            inside = inside | pl.col(Col.TS_NS).is_between(w.start_ns, w.end_ns)
        events = events.filter(inside)
    out = []
    for name in device_order(events["mem_device"].to_list()):
        frame = events.filter(pl.col("mem_device") == name)
        relative = frame[Col.MEM_ALLOCATED].null_count() > 0
        level = frame[Col.MEM_BYTES].cum_sum() if relative else frame[Col.MEM_ALLOCATED]
        reserved = frame[Col.MEM_RESERVED]
        has_reserved = is_gpu(name) and not relative and reserved.null_count() == 0
        peak_reserved = int(reserved.to_numpy().max()) if has_reserved else None
        _, peak = peak_of(level.to_numpy(), relative)
        out.append(DevicePeak(name, peak, peak_reserved, relative))
    return tuple(out)


def gpu_index(name: str) -> int | None:
    """The index of an indexed accelerator (`cuda:0`, `hip:0`, `xpu:1` -> 0, 0, 1); None for `cpu`, `mps`."""
    kind, _, index = name.partition(":")
    return int(index) if is_gpu(name) and kind and index.isdigit() else None


def pair_devices(base: list[str], new: list[str]) -> list[tuple[str | None, str | None]]:
    """(base, new) device names paired: by name first; then a GPU left over on each side with the same index
    and only the vendor prefix differing (`cuda:0` / `hip:0`: one model on H100 and MI300X); the rest alone."""
    pairs: list[tuple[str | None, str | None]] = [(d, d) for d in base if d in new]
    left_b = [d for d in base if d not in new]
    left_n = [d for d in new if d not in base]
    for d in list(left_b):
        index = gpu_index(d)
        same_b = [b for b in left_b if index is not None and gpu_index(b) == index]
        same_n = [n for n in left_n if index is not None and gpu_index(n) == index]
        if len(same_b) == 1 and len(same_n) == 1:  # unambiguous: one candidate on each side
            pairs.append((d, same_n[0]))
            left_b.remove(d)
            left_n.remove(same_n[0])
    pairs.extend((d, None) for d in left_b)
    pairs.extend((None, d) for d in left_n)
    order = {name: k for k, name in enumerate(device_order([*base, *new]))}
    return sorted(pairs, key=lambda p: order[p[0] if p[0] is not None else str(p[1])])


def compare_peaks(base: tuple[DevicePeak, ...], new: tuple[DevicePeak, ...]) -> tuple[PeakChange, ...]:
    """Each device's peaks before and after, paired by `pair_devices`."""
    b = {p.device: p for p in base}
    n = {p.device: p for p in new}
    out = []
    for bn, nn in pair_devices(list(b), list(n)):
        label = " -> ".join(dict.fromkeys(d for d in (bn, nn) if d is not None))
        out.append(PeakChange(label, b.get(bn) if bn else None, n.get(nn) if nn else None))
    return tuple(out)
