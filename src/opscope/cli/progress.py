"""Progress on standard error: the parse progress bar (bytes of the trace file read / its size) and the stage
line of the analyses (`StageLine`).

It appears only when standard error is a terminal, -q was not given, and the parse has already taken
`delay_s` (about a second): short parses and piped or logged runs stay silent. Without colour (--no-color,
NO_COLOR) it draws plain characters.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO

from opscope.untrusted import visible

if TYPE_CHECKING:  # rich is imported only when a bar may be drawn: piped and quiet runs do not pay for it
    from rich.console import Console
    from rich.progress import Progress, TaskID


class ParseProgress:
    """A `progress(done, total)` callback for `opscope.load` that draws a rich progress bar once it is due."""

    def __init__(self, console: Console, label: str, delay_s: float = 1.0) -> None:
        self.console = console
        self.label = visible(label)
        self.delay_s = delay_s
        self.started = time.monotonic()
        self.bar: Progress | None = None
        self.task: TaskID | None = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            if time.monotonic() - self.started < self.delay_s:
                return
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )

            self.bar = Progress(
                TextColumn("{task.description}", style="progress.description", markup=False),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
                console=self.console,
                transient=True,
            )
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=total)
        assert self.task is not None
        self.bar.update(self.task, completed=done, total=total)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


@contextmanager
def parse_progress(args: argparse.Namespace, label: str) -> Iterator[ParseProgress | None]:
    """A progress callback when standard error is a terminal and the user did not ask for quiet, else None."""
    if getattr(args, "quiet", False) or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console

    plain = getattr(args, "no_color", False) or "NO_COLOR" in os.environ
    console = Console(stderr=True, no_color=plain, color_system=None if plain else "auto", highlight=False)
    callback = ParseProgress(console, label)
    try:
        yield callback
    finally:
        callback.close()


STAGE_DELAY_S = 2.0  # commands quicker than this show no stage line


class StageLine:
    """A `stage(name)` listener (analysis/base/stages.py) that keeps one status line on standard error: the
    command and the stage it is in, with the time so far. Nothing is drawn before `delay_s` (about 2 s), so
    quick commands stay silent; the line is erased when the command ends."""

    def __init__(self, stream: TextIO, command: str, delay_s: float | None = None) -> None:
        self.stream = stream
        self.command = command
        self.delay_s = STAGE_DELAY_S if delay_s is None else delay_s
        self.started = time.monotonic()
        self.drawn = False
        self._lock = threading.Lock()  # several traces' tasks announce stages at once (`diff`, `ranks`)

    def __call__(self, name: str) -> None:
        elapsed = time.monotonic() - self.started
        if elapsed < self.delay_s:
            return
        with self._lock:
            self.stream.write(f"\r\x1b[2K{self.command}: {visible(name)} ({elapsed:.1f} s)")
            self.stream.flush()
            self.drawn = True

    def close(self) -> None:
        with self._lock:
            if self.drawn:
                self.stream.write("\r\x1b[2K")
                self.stream.flush()
                self.drawn = False


@contextmanager
def stage_progress(args: argparse.Namespace, command: str) -> Iterator[StageLine | None]:
    """Show the analyses' stages while the block runs, when standard error is a terminal and -q was not given."""
    if getattr(args, "quiet", False) or not sys.stderr.isatty():
        yield None
        return
    from opscope.analysis.base.stages import listening

    line = StageLine(sys.stderr, command)
    try:
        with listening(line):
            yield line
    finally:
        line.close()
