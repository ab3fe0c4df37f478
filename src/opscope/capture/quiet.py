"""Filter the profiler library's known, harmless log lines out of the process's stderr.

torch's profiler library (Kineto, C++) writes straight to file descriptor 2, so `sys.stderr` cannot catch it.
On every start and stop it prints `USDT: ... profiler_start` / `profiler_stop` (tracing probes, printed at every
log level), and on a machine without a GPU driver `ERROR: ... gpuGetDeviceCount failed with code 35`
(cudaErrorInsufficientDriver: no driver, so no GPU to describe - expected on a CPU-only run). A newcomer's
first command should not open with an error line.

`filtered_stderr()` wraps only the calls into the profiler (start, step, stop), never the profiled code: for
their duration fd 2 points at a pipe, and a thread copies every line to the real stderr except those matching
`HARMLESS` exactly. Everything else - Kineto's other errors and warnings, Python's own output - passes through
unchanged and in order. Setting `OPSCOPE_KINETO_LOGS=1` turns the filter off.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections.abc import Iterator
from typing import Final

# Matched against whole lines (without the line end). The Kineto prefix is `LEVEL:DATE TIME PID:TID FILE:LINE] `.
_WHERE: Final = rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \d+:\d+ [\w.]+:\d+\] "
HARMLESS: Final[tuple[re.Pattern[bytes], ...]] = (
    re.compile(rb"USDT:" + _WHERE + rb"profiler_(start|stop)"),
    re.compile(rb"ERROR:" + _WHERE + rb"gpuGetDeviceCount failed with code 35"),
)
ENV_SWITCH: Final = "OPSCOPE_KINETO_LOGS"


def harmless(line: bytes) -> bool:
    stripped = line.rstrip(b"\r\n")
    return any(p.fullmatch(stripped) for p in HARMLESS)


def _copy(source: int, target: int) -> None:
    pending = b""
    with os.fdopen(source, "rb", buffering=0) as reader:
        while chunk := reader.read(65536):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            out = b"".join(line + b"\n" for line in lines if not harmless(line))
            if out:
                os.write(target, out)
    if pending and not harmless(pending):
        os.write(target, pending)


@contextlib.contextmanager
def filtered_stderr() -> Iterator[None]:
    """For the duration of the block, drop `HARMLESS` lines written to fd 2 (see the module doc)."""
    if os.environ.get(ENV_SWITCH) == "1":
        yield
        return
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:
        yield  # no real fd 2 (embedded interpreters): nothing to filter
        return
    try:
        read_end, write_end = os.pipe()
    except OSError:  # out of file descriptors: better noise than a failed capture
        os.close(saved)
        yield
        return
    worker = threading.Thread(target=_copy, args=(read_end, saved), name="opscope-stderr-filter", daemon=True)
    worker.start()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            sys.stderr.flush()
        os.dup2(saved, 2)  # closes the pipe's last write end: the worker sees EOF
        worker.join()
        os.close(saved)
