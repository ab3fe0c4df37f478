"""Parse progress: how far through the file on disk a reader is, for a progress bar in the CLI.

The CLI hands a callback to `opscope.load(..., progress=callback)`; `load` makes it current for the duration of
the parse (a context variable, so readers need no extra parameter), and `ChunkReader` calls it after each chunk
with (bytes of the file consumed, file size), compressed bytes for a gzip file. Library code never draws
anything itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

ProgressCallback = Callable[[int, int], None]

_current: ContextVar[ProgressCallback | None] = ContextVar("opscope_progress", default=None)


@contextmanager
def reporting(callback: ProgressCallback | None) -> Iterator[None]:
    """Make `callback` the one readers report to, inside the `with` block."""
    token = _current.set(callback)
    try:
        yield
    finally:
        _current.reset(token)


def current() -> ProgressCallback | None:
    return _current.get()
