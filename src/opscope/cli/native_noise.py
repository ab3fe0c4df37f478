r"""What native code writes to standard error, without Rust's panic text (issue 57).

A Rust panic prints `thread '...' panicked at ...`, its message and `note: run with \`RUST_BACKTRACE=1\`...`
before it unwinds into Python as an exception (which the CLI reports in one line), and a failed allocation
prints `memory allocation of N bytes failed` before it aborts (`supervise.py` reports that one). polars and the
native reader each carry their own Rust runtime, whose panic hook no Python code can replace. So the console
script (`main.entry`) points file descriptor 2, where native code writes, at a pipe read by a thread that drops
those lines and passes every other line on, and points Python's `sys.stderr`, where opscope itself writes its
one-line errors, progress and warnings, straight at the real standard error (a terminal stays a terminal for
the progress line). With OPSCOPE_DEBUG set nothing is filtered.
"""

from __future__ import annotations

import io
import os
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

PANIC = re.compile(rb"^thread '.*' panicked at ")
NOTE = re.compile(rb"^note: (run with `RUST_BACKTRACE|Some details are omitted)")
ALONE = re.compile(rb"^(memory allocation of \d+ bytes failed|fatal runtime error: )")


class NoiseFilter:
    """Line by line: Rust's panic reports (from the `panicked at` line to its `note:` line) and its allocation
    failures are dropped; every other line is kept."""

    def __init__(self) -> None:
        self.in_panic = False

    def keep(self, line: bytes) -> bool:
        if self.in_panic:
            if NOTE.match(line):
                self.in_panic = False
            return False
        if PANIC.match(line):
            self.in_panic = not NOTE.search(line)
            return False
        return not ALONE.match(line)


def _pump(source: int, sink: int) -> None:
    """Copy `source` to `sink` line by line through a `NoiseFilter`, until `source` ends."""
    noise = NoiseFilter()
    pending = b""
    while True:
        try:
            chunk = os.read(source, 65536)
        except OSError:
            break
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        out = b"".join(line + b"\n" for line in lines if noise.keep(line))
        if out:
            _write(sink, out)
    if pending and noise.keep(pending):
        _write(sink, pending)
    os.close(source)


def _write(fd: int, data: bytes) -> None:
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:  # the reader went away (a closed pipe): nothing more to show
        pass


@contextmanager
def filtered() -> Iterator[None]:
    """Run the block with native code's standard error filtered (the module doc); a no-op with OPSCOPE_DEBUG,
    or where the descriptors cannot be moved."""
    if os.environ.get("OPSCOPE_DEBUG") or not hasattr(os, "pipe"):
        yield
        return
    try:
        sys.stderr.flush()
        real = os.dup(2)
        read_end, write_end = os.pipe()
    except OSError:
        yield
        return
    previous = sys.stderr
    pump = threading.Thread(target=_pump, args=(read_end, real), name="opscope-stderr", daemon=True)
    try:
        os.dup2(write_end, 2)
        os.close(write_end)
        sys.stderr = io.TextIOWrapper(
            io.FileIO(real, "w", closefd=False),
            encoding=getattr(previous, "encoding", None) or "utf-8",
            errors="backslashreplace",
            # each line in one write at its newline (`print` writes the text and the newline apart: written
            # through, native text could land between them); the progress line flushes itself
            line_buffering=True,
        )
        pump.start()
        yield
    finally:
        with suppress(OSError, ValueError):
            sys.stderr.flush()
        sys.stderr = previous
        os.dup2(real, 2)  # the pipe's last writer closed: the pump drains it and stops
        pump.join(timeout=5)
        os.close(real)
