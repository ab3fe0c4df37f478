"""Per-file work sent to worker processes or Dask workers: read one trace, reduce it to a small partial result.

Each task is a module-level function of one picklable `FileTask`, so local processes and Dask workers run
exactly the same code on exactly the same input and return the same result. Warnings met while reading travel
back inside the result instead of being logged in the worker, where nobody would see them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from opscope.analysis.kernels.merge import SummaryPartial, summary_partial
from opscope.analysis.kernels.summary import SummaryOptions
from opscope.analysis.validity import Validity, repaired, validity
from opscope.loading import load
from opscope.model.trace import Trace

R = TypeVar("R")


@dataclass(frozen=True)
class FileTask:
    path: str  # absolute, so that workers with another working directory find it
    label: str  # the path as the user gave it, shown in the output
    cache: bool = True
    cache_dir: str | None = None  # the parent's cache folder for local workers; None on a cluster
    strict: bool = False
    by_shape: bool = False
    decode_workers: int | None = None  # $OPSCOPE_WORKERS for the reader; 1 in worker processes (no nesting)
    summary: SummaryOptions | None = None  # for `summary_file`
    repair: tuple[str, ...] = ()  # --repair: read the trace repaired (docs/validity.md)


_QUIET_LOCK = threading.Lock()
_quiet_depth = 0
_quiet_saved = logging.NOTSET


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Warnings off while tasks run (they are kept in each trace's metadata); counted, so that tasks running
    in threads at the same time restore the level only when the last one ends."""
    global _quiet_depth, _quiet_saved
    logger = logging.getLogger("opscope")
    with _QUIET_LOCK:
        if _quiet_depth == 0:
            _quiet_saved = logger.level
            logger.setLevel(logging.ERROR)
        _quiet_depth += 1
    try:
        yield
    finally:
        with _QUIET_LOCK:
            _quiet_depth -= 1
            if _quiet_depth == 0:
                logger.setLevel(_quiet_saved)


@contextlib.contextmanager
def _environment(settings: dict[str, str | None]) -> Iterator[None]:
    """Set the environment variables that are not None, and restore them after (tasks may run in the parent)."""
    saved = {key: os.environ.get(key) for key, value in settings.items() if value is not None}
    for key in saved:
        os.environ[key] = settings[key]  # type: ignore[assignment]
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def read(task: FileTask) -> Trace:
    """Load the task's trace (warnings kept in its metadata, not logged), labelled with the user's path."""
    settings = {
        "OPSCOPE_CACHE_DIR": task.cache_dir,
        "OPSCOPE_WORKERS": None if task.decode_workers is None else str(task.decode_workers),
    }
    with _quiet(), _environment(settings):
        trace = load(task.path, cache=task.cache, strict=task.strict)
    trace.meta = dataclasses.replace(trace.meta, path=task.label)
    return repaired(trace, task.repair) if task.repair else trace


def checked(func: Callable[[Trace, FileTask], R], task: FileTask) -> tuple[R, Validity]:
    """`func` of the task's trace, and what the validity checks found on it (docs/validity.md): the checks
    run where the trace was read, on the same read."""
    trace = read(task)
    found = validity(trace)  # first: what it holds while it checks is given back before the analysis runs
    return func(trace, task), found


def summary_file(trace: Trace, task: FileTask) -> SummaryPartial:
    return summary_partial(trace, task.summary or SummaryOptions())
