"""Run one function over many inputs: in this process, in local worker processes (the default for several
traces), or on a Dask distributed cluster (`--scheduler ADDRESS`, the `opscope[dask]` extra).

Whatever the mode, results come back in input order and either all of them come back or an error is raised:
a worker that dies, a scheduler that cannot be reached, a cluster without workers end the run with a one-line
`ClusterError`, never with a partial result.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from opscope.analysis.base.parallel import available_memory, cores
from opscope.analysis.base.stages import current_listener, relaying
from opscope.errors import ClusterError, MissingDependency, UsageError
from opscope.extras import install_command
from opscope.scale import CONNECT_TIMEOUT_S

T = TypeVar("T")
R = TypeVar("R")
log = logging.getLogger("opscope")

POLL_S = 0.5  # how often a Dask run checks that its cluster still has a scheduler and workers
DASK_SCHEMES = ("tcp", "tls", "ucx", "ws", "wss", "inproc")
# Below this much input, starting worker processes (each imports polars) costs more than it saves.
SMALL_INPUT_BYTES = 16 << 20
# Memory one worker needs per trace: a fixed part plus a multiple of the (uncompressed) file size.
WORKER_BASE_BYTES = 256 << 20
WORKER_BYTES_PER_INPUT_BYTE = 12
GZIP_EXPANSION = 10
QUEUED = 2  # tasks waiting per worker process, so that a worker never idles between two
# From this many traces per worker, worker processes beat threads when nothing is set (`parallel_mode`).
PROCESS_TASKS_PER_WORKER = 16


def input_bytes(path: str) -> int:
    """Estimated uncompressed size of a trace file."""
    try:
        size = os.path.getsize(path)
    except OSError:
        return 0
    return size * GZIP_EXPANSION if path.endswith(".gz") else size


def default_jobs(sizes: Sequence[int]) -> int:
    """Workers for inputs of these (uncompressed) sizes: bounded by cores, inputs and memory; 1 (this thread)
    for one input, and for small inputs when the workers would be processes."""
    if len(sizes) <= 1 or (sum(sizes) < SMALL_INPUT_BYTES and parallel_mode() == "processes"):
        return 1
    jobs = min(cores(), len(sizes))
    memory = available_memory()
    if memory is not None:
        per_worker = WORKER_BASE_BYTES + WORKER_BYTES_PER_INPUT_BYTE * max(sizes)
        jobs = min(jobs, max(1, memory // per_worker))
    return max(1, jobs)


def _pool_context() -> multiprocessing.context.BaseContext:
    # Never plain fork: polars' thread pool does not survive it. A forkserver imports opscope once and forks
    # workers from that clean process; elsewhere spawn.
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["opscope.scale.tasks"])
        return context
    return multiprocessing.get_context("spawn")


def _start_pool(workers: int) -> ProcessPoolExecutor:
    """A process pool whose workers are up (starting one blocks until the forkserver has imported opscope)."""
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=_pool_context())
    try:
        wait([pool.submit(os.getpid) for _ in range(workers)])
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    return pool


def _local(func: Callable[[T], R], items: Sequence[T], jobs: int) -> list[R]:
    """`jobs` - 1 worker processes plus this one. The workers start in a background thread (each needs polars
    imported, which takes longer than reading a small trace) while this process already works through the
    list; once they are up, each gets at most `QUEUED` tasks waiting, and this process keeps taking the next."""
    starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="opscope-pool")
    starting = starter.submit(_start_pool, jobs - 1)
    pool: ProcessPoolExecutor | None = None
    results: dict[int, R] = {}
    in_flight: dict[Future[R], int] = {}
    upcoming = 0

    def top_up() -> None:
        nonlocal upcoming, pool
        if pool is None:
            if not starting.done():
                return
            pool = starting.result()
        while upcoming < len(items) and len(in_flight) < QUEUED * (jobs - 1):
            in_flight[pool.submit(func, items[upcoming])] = upcoming
            upcoming += 1

    def collect(finished: Iterable[Future[R]]) -> None:
        for future in finished:
            results[in_flight.pop(future)] = future.result()

    try:
        top_up()
        while upcoming < len(items):
            mine = upcoming
            upcoming += 1
            results[mine] = func(items[mine])
            collect([f for f in in_flight if f.done()])
            top_up()
        collect(list(wait(in_flight).done))
        return [results[i] for i in range(len(items))]
    except BrokenProcessPool:
        raise ClusterError(
            f"a worker process died (killed, or out of memory?) after {len(results)} of "
            f"{len(items)} traces; no result (rerun with --jobs 1 to see which trace)"
        ) from None
    finally:
        for future in in_flight:
            future.cancel()
        starter.shutdown(wait=True)
        with contextlib.suppress(BrokenProcessPool):
            (pool or starting.result()).shutdown(wait=True, cancel_futures=True)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _dask(func: Callable[[T], R], items: Sequence[T], address: str, timeout_s: float) -> list[R]:
    try:
        import dask
        from distributed import Client
    except ImportError:
        raise MissingDependency(f"--scheduler needs Dask: {install_command('dask')}") from None
    scheme = address.split("://", 1)[0] if "://" in address else "tcp"
    if scheme not in DASK_SCHEMES:
        raise UsageError(
            f"--scheduler: unknown address scheme {scheme!r} in {address!r} "
            f"(expected {', '.join(s + '://' for s in DASK_SCHEMES)})"
        )
    # Every connection attempt (the first, the client's reconnections, our polls) gives up after timeout_s, and
    # distributed's own logging (tracebacks of lost connections) stays quiet: the run ends with one line.
    with _quiet_distributed(), dask.config.set({"distributed.comm.timeouts.connect": f"{timeout_s}s"}):
        client = _connect(Client, address, timeout_s)
        try:
            try:
                client.wait_for_workers(1, timeout=timeout_s)
            except Exception:
                raise ClusterError(
                    f"the Dask scheduler at {address} has no workers (waited {timeout_s:g}s)"
                ) from None
            futures = client.map(func, list(items), pure=False)
            results = _gather(client, futures, address, timeout_s)
            if len(results) != len(items):
                raise ClusterError(
                    f"the Dask cluster returned {len(results)} results for {len(items)} traces"
                )
            return results
        finally:
            _close(client, timeout_s)


def _connect(client_class: Any, address: str, timeout_s: float) -> Any:
    """A connected `distributed.Client`, or a `ClusterError`. A client whose start fails half-way (it
    started its IO-loop thread, then could not connect, or stopped on Ctrl-C) is closed before the error:
    `Client(...)` raises without handing it over, and its own `close()` returns at once for a client that
    never ran, leaving the thread behind, so it is caught as it starts and its loop runner stopped."""
    started: list[Any] = []

    class Tracked(client_class):  # type: ignore[misc,valid-type]  # distributed is untyped here
        def start(self, **kwargs: Any) -> None:
            started.append(self)
            super().start(**kwargs)

    try:
        return Tracked(address, timeout=f"{timeout_s}s", set_as_default=False)
    except BaseException as exc:
        for half in started:
            _close(half, timeout_s)
        if not isinstance(exc, Exception):  # KeyboardInterrupt, SIGTERM: after the cleanup, as they were
            raise
        raise ClusterError(  # OSError, TimeoutError, ValueError for a malformed address, ...
            f"cannot reach the Dask scheduler at {address} within {timeout_s:g}s ({_one_line(exc)})"
        ) from None


def _close(client: Any, timeout_s: float) -> None:
    """Close a client, half-built or not, and stop its IO-loop thread: `close()` leaves it running when the
    start failed, or when closing a client whose scheduler is gone times out."""
    with contextlib.suppress(Exception):
        client.close(timeout=timeout_s)
    runner = getattr(client, "_loop_runner", None)
    if runner is not None:
        with contextlib.suppress(Exception):
            runner.stop(timeout=timeout_s)


def _gather(client: Any, futures: list[Any], address: str, timeout_s: float) -> list[Any]:
    """Wait for every future, checking the cluster every `POLL_S`: a cluster left without workers for
    `timeout_s` (tasks would wait for one forever) or a lost scheduler ends the wait with a `ClusterError` that
    says how far the run got. The results come back all together or not at all."""
    import asyncio  # here, not at the top: only a Dask run needs it (and dask has imported it already)

    from distributed.scheduler import KilledWorker

    total = len(futures)
    outstanding, finished = [total], [0]
    lock = threading.Lock()
    settled = threading.Event()  # every future done, or one failed (gather then raises its error at once)

    def on_done(future: Any) -> None:
        with lock:
            outstanding[0] -= 1
            finished[0] += future.status == "finished"
            if outstanding[0] == 0 or future.status != "finished":
                settled.set()

    for future in futures:
        future.add_done_callback(on_done)
    alone_since: float | None = None
    while not settled.wait(POLL_S):
        done = finished[0]
        try:
            workers = len(client.nthreads())
        except Exception:  # CommClosedError, OSError, a timeout: the scheduler is gone
            raise ClusterError(
                f"lost the connection to the Dask scheduler at {address} after {done} of {total} "
                "traces; no result"
            ) from None
        if workers:
            alone_since = None
        elif alone_since is None:
            alone_since = time.monotonic()
        elif time.monotonic() - alone_since > timeout_s:
            raise ClusterError(
                f"every Dask worker of {address} was lost after {done} of {total} traces and none "
                f"came back within {timeout_s:g}s; no result"
            )
    try:
        return list(client.gather(futures))
    except KilledWorker as exc:
        raise ClusterError(f"Dask workers died running a task ({_one_line(exc)}); no result") from None
    except (ModuleNotFoundError, ImportError) as exc:
        raise ClusterError(
            f"the Dask workers cannot import opscope ({_one_line(exc)}): install opscope on every worker"
        ) from None
    except (CancelledError, asyncio.CancelledError):
        raise ClusterError(
            f"lost the connection to the Dask scheduler at {address} after {finished[0]} of "
            f"{total} traces; no result"
        ) from None
    except OSError:
        raise ClusterError(
            f"lost the connection to the Dask scheduler at {address} after {finished[0]} of "
            f"{total} traces; no result"
        ) from None


@contextlib.contextmanager
def _quiet_distributed() -> Iterator[None]:
    """distributed logs every lost connection with tracebacks to standard error; during an opscope run its
    loggers (and asyncio's, which it reports through) only pass what the run itself turns into its error."""
    roots = ("distributed", "asyncio", "tornado")
    names = [name for name in list(logging.root.manager.loggerDict) if name.split(".")[0] in roots]
    loggers = [logging.getLogger(name) for name in {*roots, *names}]  # dask's config gives children levels
    saved = [(logger, logger.level) for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for logger, level in saved:
            logger.setLevel(level)


def _threads(func: Callable[[T], R], items: Sequence[T], jobs: int) -> list[R]:
    """`jobs` threads of this process. The native reader decodes with the GIL released and polars and
    pyarrow release it too, so threads share the cores without the start-up cost of worker processes.
    Interrupted (Ctrl-C in the main thread), the tasks not started are dropped and those running stop at
    their next stage (`_staged`): the interpreter, which waits for these threads, exits within a stage."""
    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="opscope-task")
    try:
        return list(pool.map(_staged(func, len(items), stop), enumerate(items)))
    except BaseException:
        stop.set()
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _staged(
    func: Callable[[T], R], total: int, stop: threading.Event | None = None
) -> Callable[[tuple[int, T]], R]:
    """`func` for (index, item), its analyses' stages passed on to the caller's listener as "trace 2 of 3:
    linking ..." (`stages.relaying`); with `stop`, a task raises KeyboardInterrupt at its next stage once
    `stop` is set."""
    parent = current_listener()

    def call(indexed: tuple[int, T]) -> R:
        index, item = indexed
        with relaying(parent, index + 1, total, stop):
            return func(item)

    return call


def parallel_mode(tasks: int = 0, jobs: int = 1, input_size: int = 0) -> str:
    """How local fan-out runs: `$OPSCOPE_PARALLEL` (threads / processes) when set; else processes for many
    traces with enough input to pay for starting the workers (each imports polars, ~0.3 s), threads otherwise.
    Measured with `bench/bench_ranks.py` on 2 cores, against one thread: 64 DLRM ranks (0.9 MB each) 2.12x in
    processes vs 1.55x in threads; 16 ranks 1.49x vs 1.41x; 8 ranks 1.08x vs 1.26x; 8 x 15 MB 1.18x vs 1.28x
    (the per-trace Python work holds the GIL, the reading and the polars queries do not)."""
    wanted = os.environ.get("OPSCOPE_PARALLEL", "").strip().lower()
    if wanted:
        if wanted not in ("threads", "processes"):
            raise UsageError(f"OPSCOPE_PARALLEL={wanted!r}: expected threads or processes")
        return wanted
    if jobs > 1 and tasks >= PROCESS_TASKS_PER_WORKER * jobs and input_size >= SMALL_INPUT_BYTES:
        return "processes"
    return "threads"


def run_all(
    func: Callable[[T], R],
    items: Sequence[T],
    *,
    jobs: int = 1,
    scheduler: str | None = None,
    timeout_s: float = CONNECT_TIMEOUT_S,
    mode: str | None = None,
) -> list[R]:
    """`[func(item) for item in items]`, on a Dask cluster when `scheduler` is given, else in `jobs` local
    threads or processes (`mode`, default `parallel_mode()`; 1 job: in this thread). `func` must be a
    module-level function and items picklable."""
    if scheduler:
        return _dask(func, items, scheduler, timeout_s)
    if len(items) <= 1:
        return [func(item) for item in items]
    if jobs <= 1:
        return list(map(_staged(func, len(items)), enumerate(items)))
    mode = mode or parallel_mode()
    log.debug("running %d tasks in %d worker %s", len(items), jobs, mode)
    if mode == "threads":
        return _threads(func, items, min(jobs, len(items)))
    return _local(func, items, min(jobs, len(items)))
