"""Peak memory per device, the figure every other command shows (analyze, report, diff, ranks), and its
before/after comparison. Same definitions as `opscope memory` (docs/memory.md), without the per-op work."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from opscope.analysis.memory.events import device_order, is_gpu, memory_events
from opscope.analysis.timeline import windows
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
    device: str
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
        out.append(DevicePeak(name, int(level.to_numpy().max()), peak_reserved, relative))
    return tuple(out)


def compare_peaks(base: tuple[DevicePeak, ...], new: tuple[DevicePeak, ...]) -> tuple[PeakChange, ...]:
    b = {p.device: p for p in base}
    n = {p.device: p for p in new}
    return tuple(PeakChange(d, b.get(d), n.get(d)) for d in device_order([*b, *n]))
