"""Decode batches in worker processes while the main process reads, splits and writes.

JSON decoding holds the GIL, so the only way to use a second core is a second process. The main process
decompresses, cuts the events array into verified batches of whole events and writes the cache; workers turn
bytes into Arrow record batches. Results come back in order, with a bounded number of batches in flight so
memory stays bounded whatever the trace size. The worker count comes from the usable CPUs, capped, and can be
set with $OPSCOPE_WORKERS (0 or 1 = decode in the main process).
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

MAX_WORKERS = 4
MIN_CPUS = 4  # measured on 2 cores: the main process's share (split, check, write) leaves no gain
PARALLEL_MIN_BYTES = 48 << 20  # below this, starting processes costs more than it saves


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def plan_workers(estimated_bytes: int) -> int:
    """How many decode workers for a trace of about `estimated_bytes` decompressed bytes (0 = none)."""
    env = os.environ.get("OPSCOPE_WORKERS")
    if env is not None and env.strip():
        try:
            wanted = int(env)
        except ValueError:
            wanted = 0
        return wanted if wanted > 1 else 0
    minimum = int(os.environ.get("OPSCOPE_PARALLEL_MIN_MB", PARALLEL_MIN_BYTES >> 20)) << 20
    cpus = usable_cpus()
    if cpus < MIN_CPUS or estimated_bytes < minimum:
        return 0
    return min(cpus, MAX_WORKERS)


def ordered_map(func: Callable[[T], R], items: Iterable[T], workers: int, preload: str) -> Iterator[R]:
    """`map(func, items)` over `workers` processes, in order, at most 2 x workers items in flight.

    Exceptions raised by `func` are re-raised here, in order, when their item's turn comes.
    """
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([preload])
    pending: deque[Future[R]] = deque()
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        try:
            for item in items:
                pending.append(pool.submit(func, item))
                while len(pending) >= 2 * workers:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()
