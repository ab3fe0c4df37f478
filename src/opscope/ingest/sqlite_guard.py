"""The progress handler that keeps an SQLite query from running forever: a budget of VM steps per query, and
signals (Ctrl-C, SIGTERM) honoured while SQLite's C code runs. Used by the SQLite trace reader
(`ingest/sqlite.py`) and the history database (`history/store.py`); only the standard library, so that opening
a history imports nothing heavy.
"""

from __future__ import annotations

import contextlib
import sqlite3
import sys
from collections.abc import Iterator
from typing import Any

PROGRESS_EVERY = 10_000  # SQLite VM instructions between two calls of the progress handler


class Guard:
    """The progress handler of one connection: aborts the running statement when its budget of VM steps is
    spent or a signal handler raised (the exception is kept and re-raised once SQLite has let go)."""

    def __init__(self, budget_steps: int) -> None:
        self.budget_calls = max(1, budget_steps // PROGRESS_EVERY)
        self.calls = 0
        self.raised: BaseException | None = None
        self.exhausted = False

    def start(self) -> None:
        self.calls = 0
        self.raised = None
        self.exhausted = False

    def __call__(self) -> int:
        self.calls += 1
        if self.calls > self.budget_calls:
            self.exhausted = True
            return 1
        return 0

    @contextlib.contextmanager
    def catching(self) -> Iterator[None]:
        """While a statement runs: an exception raised in the handler (a signal handler's KeyboardInterrupt or
        Terminated runs when the handler is called) aborts the statement, and the sqlite3 module hands it to
        `sys.unraisablehook` instead of raising it; keep it, to raise it once SQLite has let go."""
        previous = sys.unraisablehook

        def keep(unraisable: Any) -> None:
            if self.raised is None and unraisable.exc_value is not None:
                self.raised = unraisable.exc_value
            else:
                previous(unraisable)

        sqlite3.enable_callback_tracebacks(True)
        sys.unraisablehook = keep
        try:
            yield
        finally:
            sys.unraisablehook = previous
            sqlite3.enable_callback_tracebacks(False)
