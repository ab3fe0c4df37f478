"""The one timer the benchmark scripts share: best wall time of N calls (machines are noisy; the fastest run
is the least disturbed one)."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_of(fn: Callable[[], object], repeat: int = 1) -> float:
    best = float("inf")
    for _ in range(max(repeat, 1)):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best
