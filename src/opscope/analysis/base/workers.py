"""Worker processes for `parallel.split_map`: each a fresh interpreter (`sys.executable`) that imports only what
its calls need, fed pickled calls on its stdin and answering on its stdout.

Not multiprocessing's spawn or forkserver: both prepare each worker by importing the caller's main module again,
so a user's script that calls the API without an `if __name__ == "__main__":` guard would run a second time in
every worker (and fail when it asks for a worker there). Not fork either: polars' thread pool does not survive
it. A worker ignores Ctrl-C (the terminal sends it to the whole process group; the caller stops it), writes
nothing to the terminal (its stderr is discarded: an error inside a call travels back as the exception), and
exits when its stdin closes. A worker that dies (killed, out of memory) raises `WorkerDied` in the caller."""

from __future__ import annotations

import contextlib
import pickle
import subprocess
import sys
from collections.abc import Callable
from typing import IO, Any, TypeVar, cast

T = TypeVar("T")
R = TypeVar("R")

# what a worker runs: Ctrl-C ignored; the answers on a copy of stdout, whose own descriptor then goes where
# stderr goes (nothing a library prints can mix with them); the caller's import path, then `serve` (the path
# comes first, so that opscope is found where the caller found it)
_BOOT = (
    "import os, pickle, signal, sys\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "answers = os.fdopen(os.dup(1), 'wb')\n"
    "os.dup2(2, 1)\n"
    "sys.path[:] = pickle.load(sys.stdin.buffer)\n"
    "from opscope.analysis.base.workers import serve\n"
    "serve(sys.stdin.buffer, answers)\n"
)
EXIT_WAIT_S = 10.0  # how long `close` waits for a worker to exit after its stdin closed
_LIVE: set[int] = set()  # the process ids of this process's workers still running (`live_workers`)


def live_workers() -> list[int]:
    """The process ids of the workers this process started and has not closed yet (the CLI's memory guard
    counts their memory with its own)."""
    return sorted(_LIVE)


class WorkerDied(Exception):
    """The worker process ended before answering (killed, out of memory, or stopped by `kill`)."""


class Worker:
    """One worker process; `call` runs one call in it at a time. `peak_kb`: the worker's peak resident memory
    as it reported it with its last answer (VmHWM; 0 before one, or where /proc is missing)."""

    def __init__(self) -> None:
        self.peak_kb = 0
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-c", _BOOT],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except OSError as exc:  # no interpreter to start (an embedded Python): the caller computes it
            raise WorkerDied(f"cannot start a worker process: {exc}") from None
        _LIVE.add(self._process.pid)
        self._send(list(sys.path))

    def _send(self, value: object) -> None:
        stdin = cast(IO[bytes], self._process.stdin)
        try:
            pickle.dump(value, stdin, protocol=pickle.HIGHEST_PROTOCOL)
            stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as exc:  # ValueError: the pipe was closed by `kill`
            raise WorkerDied(str(exc)) from None

    def call(self, fn: Callable[[T], R], arg: T) -> R:
        """`fn(arg)` in the worker (`fn` a module-level function, `arg` picklable): its result, or its
        exception raised here; `WorkerDied` when the worker ends first."""
        self._send((fn, arg))
        try:
            ok, value, peak_kb = pickle.load(cast(IO[bytes], self._process.stdout))
        except (EOFError, OSError, ValueError, pickle.UnpicklingError) as exc:
            raise WorkerDied(f"worker process {self._process.pid} ended ({exc or 'no answer'})") from None
        self.peak_kb = max(self.peak_kb, peak_kb)
        if not ok:
            raise cast(BaseException, value)
        return cast(R, value)

    def close(self) -> None:
        """Let the worker exit (its stdin closed) and wait for it, so that its resources are reaped."""
        with contextlib.suppress(OSError):
            cast(IO[bytes], self._process.stdin).close()
        try:
            self._process.wait(timeout=EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            self.kill()
        _LIVE.discard(self._process.pid)

    def kill(self) -> None:
        """Stop the worker now (an interrupted caller); a call waiting on it raises `WorkerDied`."""
        self._process.kill()
        self._process.wait()
        _LIVE.discard(self._process.pid)


def proc_kb(path: str, field: str) -> int | None:
    """The number (kB) of `field` ("VmHWM:", "MemAvailable:") in a /proc file, None where it cannot be read."""
    try:
        with open(path, encoding="ascii", errors="replace") as lines:
            for line in lines:
                if line.startswith(field):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def peak_kb() -> int:
    """This process's peak resident memory in KiB (VmHWM: unlike `ru_maxrss` it does not start at the size of
    the process that started this one), 0 where /proc is missing."""
    return proc_kb("/proc/self/status", "VmHWM:") or 0


def serve(source: IO[bytes], sink: IO[bytes]) -> None:
    """A worker's loop: read a pickled (fn, arg) from `source`, answer (True, result, peak) or (False,
    exception, peak) (`peak_kb`) on `sink`, until `source` ends."""
    while True:
        try:
            fn, arg = pickle.load(source)
        except EOFError:
            return
        answer: tuple[bool, Any]
        try:
            answer = (True, fn(arg))
        except Exception as exc:  # travels back to the caller, which raises it
            answer = (False, exc)
        try:
            data = pickle.dumps((*answer, peak_kb()), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # an unpicklable result or exception: its text travels instead
            data = pickle.dumps((False, RuntimeError(f"{type(exc).__name__}: {exc}"), peak_kb()))
        sink.write(data)
        sink.flush()
