"""The parse progress bar: bytes of the trace file read / its size, on standard error.

It appears only when standard error is a terminal, -q was not given, and the parse has already taken
`delay_s` (about a second): short parses and piped or logged runs stay silent. Without colour (--no-color,
NO_COLOR) it draws plain characters.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

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
