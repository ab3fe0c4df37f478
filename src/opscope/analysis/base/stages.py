"""Stage announcements: a long analysis says which stage it enters ("linking", "rules: host_bound", "critical
path: step 3 of 80"); whoever runs it may show that (the CLI draws one status line on a terminal, cli/progress.py).

Nothing is printed here: `stage(name)` calls the listener installed with `listening(callback)` for the current
context, or does nothing. Analyses stay pure functions; the listener is the caller's business."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

Listener = Callable[[str], None]
_LISTENER: ContextVar[Listener | None] = ContextVar("opscope_stage_listener", default=None)
_LAST: list[str] = []  # the stage announced last in this process, by any thread (`last_stage`)


def stage(name: str) -> None:
    """Announce that the running analysis enters stage `name`."""
    _LAST[:] = [name]
    listener = _LISTENER.get()
    if listener is not None:
        listener(name)


def last_stage() -> str | None:
    """The stage announced last in this process, whichever thread announced it (None before any): what the
    CLI's memory guard names when it stops a command."""
    return _LAST[0] if _LAST else None


def current_listener() -> Listener | None:
    """The listener of the current context (None: stages go nowhere): for work handed to other threads, which
    start with no listener, to pass their stages on (`scale.executor`)."""
    return _LISTENER.get()


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Send the stages announced inside the block to `listener`."""
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)


@contextmanager
def relaying(
    parent: Listener | None, trace: int, traces: int, stop: threading.Event | None = None
) -> Iterator[None]:
    """Pass the stages announced inside the block, the work on trace number `trace` of the `traces` a command
    reads, on to `parent` as "trace 2 of 3: linking ..."; `parent` is taken from the thread that hands the
    work out (`current_listener`), since another thread starts with none. With `stop`, the block raises
    KeyboardInterrupt at its next stage once `stop` is set (the command was interrupted: the work stops)."""

    def relay(name: str) -> None:
        if stop is not None and stop.is_set():
            raise KeyboardInterrupt
        if parent is not None:
            parent(f"trace {trace} of {traces}: {name}")

    with listening(relay):
        yield
