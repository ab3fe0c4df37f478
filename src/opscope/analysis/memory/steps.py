"""Allocated memory per ProfilerStep: at its start, at its end, its peak, and the growth that signals a leak.

The allocated level between events is the level after the latest event (`Total Allocated`, or the running
sum of `Bytes` in traces without totals); before a device's first event it is that event's level minus its
own `Bytes`. A device whose allocated memory grows in 3 or more consecutive steps gets a warning: memory
that is not given back step after step is the strongest sign of a leak a trace can show.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from opscope.analysis.base.windows import StepWindow

GROWTH_RUN = 3  # consecutive growing steps that make a warning


@dataclass(frozen=True)
class StepMemory:
    step: int
    device: str
    start_allocated_bytes: int
    end_allocated_bytes: int
    peak_allocated_bytes: int

    @property
    def growth_bytes(self) -> int:
        return self.end_allocated_bytes - self.start_allocated_bytes


def _level_at(ts: np.ndarray, level: np.ndarray, before_first: int, t: int, inclusive: bool) -> int:
    """The allocated level at time `t`: after the last event at (inclusive) or before `t`."""
    k = int(np.searchsorted(ts, t, side="right" if inclusive else "left")) - 1
    return int(level[k]) if k >= 0 else before_first


def step_memory(
    device: str,
    ts: np.ndarray,
    level: np.ndarray,
    nbytes: np.ndarray,
    relative: bool,
    markers: tuple[StepWindow, ...],
) -> list[StepMemory]:
    """One row per step window for one device (events sorted by time)."""
    del relative  # the level already is the running sum where there are no totals
    if not len(ts):
        return []
    before_first = int(level[0] - nbytes[0])
    rows = []
    for w in markers:
        if w.step is None:
            continue
        start = _level_at(ts, level, before_first, w.start_ns, inclusive=False)
        end = _level_at(ts, level, before_first, w.end_ns, inclusive=True)
        lo, hi = np.searchsorted(ts, w.start_ns, side="left"), np.searchsorted(ts, w.end_ns, side="right")
        peak = max(start, int(level[lo:hi].max())) if hi > lo else start
        rows.append(StepMemory(w.step, device, start, end, peak))
    return rows


def growth_warnings(device: str, rows: list[StepMemory]) -> list[str]:
    """One warning per run of GROWTH_RUN or more consecutive steps whose allocated memory grew."""
    out: list[str] = []
    run: list[StepMemory] = []
    for row in [*rows, None]:
        if row is not None and row.growth_bytes > 0:
            run.append(row)
            continue
        if len(run) >= GROWTH_RUN:
            total = sum(r.growth_bytes for r in run)
            out.append(
                f"{device}: allocated memory grew in {len(run)} consecutive steps "
                f"({run[0].step}-{run[-1].step}) by {total:,} bytes in all: a possible leak"
            )
        run = []
    return out
