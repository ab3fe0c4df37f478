"""`deadline(seconds)`: a test fails instead of hanging (SIGALRM raises `Alarm` inside whatever runs, SQLite's
progress handler included). Shared by the hostile SQLite tests of the readers and of the history database."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


class Alarm(Exception):
    pass


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail instead of hanging: SIGALRM raises inside whatever runs, SQLite's progress handler included."""

    def ring(signum: int, frame: object) -> None:
        raise Alarm(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
