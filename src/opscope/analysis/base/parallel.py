"""Independent pieces of one analysis (the step windows of the critical path, each its own graph) run on a few
threads: most of a piece's time is spent in polars and numpy, which release the GIL, so two to four pieces
overlap. Results come back in the order of the pieces, so nothing downstream can tell; a stage is announced per
piece as it is taken up, in order, from the calling thread. On an interruption (Ctrl-C) the pieces not yet
started are cancelled and the running ones (tens of ms each) finish in the background.

`Beside` runs one whole analysis on a thread of its own while the caller computes another (the report's
critical path beside its advice; `analyze`'s busy / idle analyses beside its op and step tables), one at a time:
a `Beside` asked for while another one's thread runs is computed in the caller's thread (on two cores a third
thread gains nothing and adds its memory: the report's advice runs `analyze`'s pieces beside its trees)."""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar, cast

from opscope.analysis.base.stages import stage

T = TypeVar("T")
R = TypeVar("R")

MAX_THREADS = 4  # more gains little: the pieces' Python glue holds the GIL
_BESIDE = threading.Semaphore(1)  # held while a `Beside` thread runs


def threads() -> int:
    """How many pieces run at once: one more than the CPUs this process may use, at most MAX_THREADS and at most
    `POLARS_MAX_THREADS` where that is set (under an address-space limit the CLI sets it to one thread per
    GiB: docs/security.md, "Memory"); 1 runs the pieces one at a time."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    budget = MAX_THREADS
    cap = os.environ.get("POLARS_MAX_THREADS", "").strip()
    if cap.isdigit() and int(cap) > 0:
        budget = min(budget, int(cap))
    return max(1, min(budget, cpus + 1))


def ordered_map(fn: Callable[[T], R], items: Sequence[T], label: str) -> Iterator[R]:
    """`fn` of each item, in the items' order, computed a few at a time (see the module doc); `label`: the
    stage's name ("critical path: window 3 of 80")."""
    workers = threads() if len(items) > 1 else 1
    if workers == 1:
        for i, item in enumerate(items):
            stage(f"{label} {i + 1} of {len(items)}")
            yield fn(item)
        return
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="opscope-piece")
    ahead = 2 * workers  # at most this many pieces submitted and not yet taken: bounded memory
    pending: deque[Future[R]] = deque()
    taken = 0

    def take() -> R:
        nonlocal taken
        taken += 1
        stage(f"{label} {taken} of {len(items)}")
        return pending.popleft().result()

    try:
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= ahead:
                yield take()
        while pending:
            yield take()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


class Beside(Generic[R]):
    """`fn()` computed on a thread of its own while the caller goes on with other work (the report's critical
    path beside `advise`: most of both is polars and numpy, which release the GIL, so on two cores they
    overlap). `result()` waits for it and returns its value or raises its exception. The thread is a daemon:
    an interrupted command does not wait for it at exit. It announces no stages (a thread starts with no
    listener), so the progress line stays the caller's; the caller announces the wait. Results it shares
    with the caller through `Trace.derived` are computed once: whichever asks second waits for the first."""

    def __init__(self, fn: Callable[[], R], name: str = "opscope-beside", spare_only: bool = False) -> None:
        """`spare_only`: only when a thread is free; else nothing is computed now (`started` is false) and the
        caller computes the result itself when it needs it (a result it will ask for through
        `Trace.derived`, started early)."""
        self._done = threading.Event()
        self._value: R | None = None
        self._error: BaseException | None = None
        self.started = True
        # one thread asked for (`threads`), or another `Beside` running: computed here, now
        if threads() == 1 or not _BESIDE.acquire(blocking=False):
            if spare_only:
                self.started = False
                self._done.set()
            else:
                self._run(fn)
            return
        try:
            threading.Thread(target=self._run, args=(fn, True), name=name, daemon=True).start()
        except BaseException:
            _BESIDE.release()
            raise

    def _run(self, fn: Callable[[], R], held: bool = False) -> None:
        try:
            self._value = fn()
        except BaseException as exc:  # handed to the caller by `result`
            self._error = exc
        finally:
            if held:
                _BESIDE.release()
            self._done.set()

    def result(self) -> R:
        if not self.started:
            raise RuntimeError("not started: no thread was free (spare_only)")
        self._done.wait()
        if self._error is not None:
            raise self._error
        return cast(R, self._value)
