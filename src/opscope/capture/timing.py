"""Timing a workload the same way everywhere in capture: device-synchronised `perf_counter`, and the spread of
repeated samples (median, quartiles, min, max)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from opscope.capture._torch import synchronize


def timing_method(device: Any) -> str:
    if device.type == "cuda":
        return "perf_counter bracketed by torch.cuda.synchronize"
    return "perf_counter"


def time_call(fn: Callable[[], object], device: Any) -> float:
    """Seconds `fn()` takes, GPU work included: queued GPU work is drained before and after."""
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


@dataclass(frozen=True)
class Spread:
    """Median, quartiles (linear interpolation, as numpy's default) and range of some samples."""

    median: float
    q1: float
    q3: float
    min: float
    max: float
    n: int

    @classmethod
    def of(cls, samples: Sequence[float]) -> Spread:
        if not samples:
            raise ValueError("no samples")
        values = sorted(samples)
        if len(values) == 1:
            q1 = q3 = values[0]
        else:
            q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
        return cls(
            median=statistics.median(values), q1=q1, q3=q3, min=values[0], max=values[-1], n=len(values)
        )

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def relative_iqr(self) -> float:
        """IQR / |median| (0 when the median is 0): how noisy the samples are."""
        return self.iqr / abs(self.median) if self.median else 0.0

    def as_dict(self, scale: float = 1.0, digits: int = 4) -> dict[str, float | int]:
        return {
            "median": round(self.median * scale, digits),
            "q1": round(self.q1 * scale, digits),
            "q3": round(self.q3 * scale, digits),
            "min": round(self.min * scale, digits),
            "max": round(self.max * scale, digits),
            "n": self.n,
        }
