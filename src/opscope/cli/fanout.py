"""Options and helpers shared by the subcommands that read several traces (`diff`, `ranks`): which files, how
many worker processes, or which Dask scheduler."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import logging
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from opscope.cli.common import check_outputs
from opscope.cli.validity import note, repairs
from opscope.errors import UsageError
from opscope.untrusted import visible

if TYPE_CHECKING:
    from opscope.analysis.validity import Validity
    from opscope.model.trace import Trace
    from opscope.scale.tasks import FileTask

R = TypeVar("R")
log = logging.getLogger("opscope")


def add_parallel_args(parser: argparse.ArgumentParser) -> None:
    from opscope.scale import CONNECT_TIMEOUT_S

    parser.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="worker processes (default: by cores, memory and input size; 1 = this process)",
    )
    parser.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run the per-trace work on this Dask scheduler (tcp://host:8786; needs opscope[dask]; "
        "the workers must see the trace paths)",
    )
    parser.add_argument(
        "--connect-timeout",
        type=float,
        default=CONNECT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"how long to wait for the scheduler and its workers (default {CONNECT_TIMEOUT_S:g})",
    )


def file_tasks(
    paths: Sequence[str | Path], args: argparse.Namespace, by_shape: bool = False
) -> list[FileTask]:
    """One task per trace file; each path as `resolve_input` understands it (a folder: its newest trace)."""
    from opscope.ingest.cache import cache_dir
    from opscope.loading import resolve
    from opscope.scale.tasks import FileTask

    tasks = []
    for given in paths:
        source = resolve(given)
        check_outputs(args, source)
        label = str(given) if not Path(given).is_dir() else str(source)
        tasks.append(
            FileTask(
                path=str(source.resolve()),
                label=label,
                cache=not args.no_cache,
                cache_dir=None if args.scheduler else str(cache_dir()),
                strict=args.strict,
                by_shape=by_shape,
                repair=repairs(args),
            )
        )
    return tasks


def _work_bytes(task: FileTask) -> int:
    """What reading the trace costs, in bytes of input: its cache file when there is one (a fraction of the
    trace's size, and quick to read), else the trace's uncompressed size."""
    from opscope.ingest.cache import cache_path
    from opscope.scale.executor import input_bytes

    if task.cache:
        cached = cache_path(Path(task.path))
        with contextlib.suppress(OSError):
            if cached.stat().st_mtime_ns >= Path(task.path).stat().st_mtime_ns:
                return cached.stat().st_size
    return input_bytes(task.path)


_SCHEDULER = re.compile(r"^(?:[a-z][a-z0-9+.-]*://[^\s/]+(?::\d+)?/?|[^\s/:]+:\d+)$")


def check_parallel_args(args: argparse.Namespace, traces: int, spread: bool = True) -> None:
    """-j, --scheduler and --connect-timeout are checked whatever the number of traces (`-j -3` with one trace
    used to pass unseen, `--scheduler garbage` waited for a connection); with one trace read here (`spread`
    false, or -j alone) a log line says they have nothing to spread."""
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be 1 or more")
    if not args.connect_timeout > 0 or args.connect_timeout == float("inf"):
        raise UsageError("--connect-timeout must be a positive number of seconds")
    if args.scheduler is not None and not _SCHEDULER.match(args.scheduler):
        raise UsageError(
            f"--scheduler {visible(args.scheduler)!r}: expected a Dask scheduler address such as tcp://host:8786"
        )
    if traces <= 1 and (args.jobs is not None or (args.scheduler is not None and not spread)):
        log.info("one trace: it is read in this process (-j and --scheduler spread several traces)")


def run_tasks(
    func: Callable[[Trace, FileTask], R], tasks: Sequence[FileTask], args: argparse.Namespace
) -> list[R]:
    """`func` of each task's trace, where the trace is read (this process, worker processes or Dask workers),
    in the tasks' order; what the validity checks found on each trace is noted for the output."""
    from opscope.scale.tasks import checked

    results = _run_checked(functools.partial(checked, func), tasks, args)
    for task, (_, found) in zip(tasks, results, strict=True):
        note(args, task.label, found)
    return [value for value, _ in results]


def _run_checked(
    func: Callable[[FileTask], tuple[R, Validity]], tasks: Sequence[FileTask], args: argparse.Namespace
) -> list[tuple[R, Validity]]:
    check_parallel_args(args, len(tasks))
    if len(tasks) <= 1 and not args.scheduler:
        return [func(t) for t in tasks]  # what run_all does for one task, without importing the executor
    from opscope.scale.executor import default_jobs, parallel_mode, run_all

    sizes = [_work_bytes(t) for t in tasks]
    jobs = args.jobs if args.jobs is not None else default_jobs(sizes)
    mode = parallel_mode(len(tasks), jobs, sum(sizes))
    if args.scheduler or (jobs > 1 and len(tasks) > 1 and mode == "processes"):
        # Each trace already has a process (Dask workers cannot even start one): the reader decodes in it.
        tasks = [dataclasses.replace(t, decode_workers=1) for t in tasks]
    return run_all(
        func, tasks, jobs=jobs, scheduler=args.scheduler, timeout_s=args.connect_timeout, mode=mode
    )
