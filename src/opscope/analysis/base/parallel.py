"""Independent pieces of one analysis (the step windows of the critical path, each its own graph) run on a few
threads: most of a piece's time is spent in polars and numpy, which release the GIL, so two to four pieces
overlap. Results come back in the order of the pieces, so nothing downstream can tell; a stage is announced per
piece as it is taken up, in order, from the calling thread. On an interruption (Ctrl-C) the pieces not yet
started are cancelled and the running ones (tens of ms each) finish in the background.

`Beside` runs one whole analysis on a thread of its own while the caller computes another (the report's
critical path beside its advice; `analyze`'s busy / idle analyses beside its op and step tables), one at a time:
a `Beside` asked for while another one's thread runs is computed in the caller's thread (on two cores a third
thread gains nothing and adds its memory: the report's advice runs `analyze`'s pieces beside its trees).

`split_map` shares many pieces with worker processes where a piece's own Python work holds the GIL (a step's
critical-path graph: threads gain ~10% on two cores): this process takes pieces from the front, each worker
a batch at a time from the back (a payload holding only what the batch needs), until they meet."""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar, cast

from opscope.analysis.base.stages import stage
from opscope.analysis.base.workers import Worker, WorkerDied, proc_kb

T = TypeVar("T")
R = TypeVar("R")
P = TypeVar("P")

MAX_THREADS = 4  # more gains little: the pieces' Python glue holds the GIL
_BESIDE = threading.Semaphore(1)  # held while a `Beside` thread runs


def cores() -> int:
    """The CPUs this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def available_memory() -> int | None:
    """MemAvailable from /proc/meminfo (bytes), None where unknown."""
    kb = proc_kb("/proc/meminfo", "MemAvailable:")
    return None if kb is None else kb * 1024


def address_limit() -> int | None:
    """The soft RLIMIT_AS in bytes, or None when there is none (or no such limit on this system): the CLI
    reserves less under one (cli/address_space.py), and `split_map` starts no worker process."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not a Unix system
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY or soft < 0 else int(soft)


def threads() -> int:
    """How many pieces run at once: one more than the CPUs this process may use, at most MAX_THREADS and at most
    `POLARS_MAX_THREADS` where that is set (under an address-space limit the CLI sets it to one thread per
    GiB: docs/security.md, "Memory"); 1 runs the pieces one at a time."""
    cpus = cores()
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


MAX_PROCESSES = 3  # `split_map`'s worker processes at most: each holds its batch and ~150 MB of imports
PROCESS_BASE_BYTES = 384 << 20  # memory a worker needs besides its payloads (`process_workers`)
# the peak memory of each worker process `split_map` started (`worker_peaks_kb`)
_worker_peaks_kb: list[int] = []


def worker_peaks_kb() -> list[int]:
    """The peak resident memory (KiB) of each worker process `split_map` has started in this process, as each
    reported it: the benchmark adds them to the command's own."""
    return list(_worker_peaks_kb)


def process_workers(payload_bytes: int = 0) -> int:
    """How many worker processes `split_map` may start: one less than the CPUs, at most MAX_PROCESSES and one
    less than `threads()` (`POLARS_MAX_THREADS=1` runs everything in this process), as many as the available
    memory holds (each: PROCESS_BASE_BYTES and four times its share of `payload_bytes`, the pieces' input in
    memory); none where `$OPSCOPE_PARALLEL` is `threads` or an address-space limit is set (each worker would
    get one of its own: together they could use more than the user allowed)."""
    if os.environ.get("OPSCOPE_PARALLEL", "").strip().lower() == "threads":
        return 0
    if address_limit() is not None:
        return 0
    workers = max(0, min(MAX_PROCESSES, cores() - 1, threads() - 1))
    memory = available_memory()
    if memory is not None:
        while workers and workers * (PROCESS_BASE_BYTES + 4 * payload_bytes // (workers + 1)) > memory:
            workers -= 1
    return workers


def split_map(
    local: Callable[[int], R],
    remote: Callable[[P], list[R]],
    payload: Callable[[int, int], P],
    count: int,
    label: str,
    workers: int,
    batch: int,
) -> Iterator[R]:
    """`local(i)` for i in range(count), in order, where `remote(payload(lo, hi))` (a module-level function of
    a picklable payload) gives the same results for the pieces lo..hi-1 in a worker process (`workers.Worker`).
    This process takes pieces from the front, one at a time (announcing `label` as `ordered_map` does); each
    of `workers` processes holds one batch of `batch` pieces from the back at a time, sent while at least two
    batches are left between the front and the back; when they meet, the batches still out are waited for.
    A worker that dies (killed, out of memory) loses nothing: its pieces are computed here. With no workers:
    `ordered_map`."""
    if workers <= 0 or count < 2 * batch:
        yield from ordered_map(local, range(count), label)
        return
    idle: deque[Worker] = deque()
    started: list[Worker] = []
    lock = threading.Lock()

    def run_remote(lo: int, hi: int, sent: P) -> list[R]:  # on a sender thread: one worker's round trip
        with lock:
            worker = idle.popleft() if idle else None
        if worker is None:
            worker = Worker()
            with lock:
                started.append(worker)
        result = worker.call(remote, sent)
        with lock:
            idle.append(worker)
        return result

    senders = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="opscope-sender")
    front, back = 0, count
    out: list[tuple[int, int, Future[list[R]]]] = []  # batches sent: (lo, hi, future)
    finished = False
    try:
        while True:
            died = any(f.done() and f.exception() is not None for *_, f in out)
            while not died and back - front >= 2 * batch and sum(not f.done() for *_, f in out) < workers:
                lo = back - batch
                out.append((lo, back, senders.submit(run_remote, lo, back, payload(lo, back))))
                back = lo
            if front >= back:
                break
            stage(f"{label} {front + 1} of {count}")
            yield local(front)
            front += 1
        for lo, hi, future in sorted(out, key=lambda sent: sent[0]):
            try:
                results: list[R] | None = future.result()
            except WorkerDied:  # these pieces are computed here
                results = None
            for i in range(lo, hi):
                stage(f"{label} {i + 1} of {count}")
                yield local(i) if results is None else results[i - lo]
        finished = True
    finally:
        with lock:
            for worker in started:
                # after a normal end, let the workers exit and reap them (their memory is counted, nothing is
                # left behind); on an interruption, stop them now
                if finished:
                    worker.close()
                else:
                    worker.kill()
                _worker_peaks_kb.append(worker.peak_kb)
        senders.shutdown(wait=finished, cancel_futures=True)
