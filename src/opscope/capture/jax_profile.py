"""JAX capture: `opscope.profile_jax(logdir)` around `jax.profiler.trace`, and `opscope run` on a JAX script.

JAX writes `logdir/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<host>.xplane.pb` (+ `<host>.trace.json.gz`); opscope
reads the xplane of the newest run (ingest/xplane.py). jax is imported only when a capture starts (the `jax`
extra: `opscope[jax]`).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opscope.capture.runner import Command, RunResult, _script_frames, execute
from opscope.errors import MissingDependency
from opscope.extras import install_command

_IMPORTS_JAX = re.compile(rb"^\s*(import\s+jax\b|from\s+jax\b)", re.MULTILINE)
_IMPORTS_TORCH = re.compile(rb"^\s*(import\s+torch\b|from\s+torch\b)", re.MULTILINE)


def require_jax() -> Any:
    """`jax`, or a `MissingDependency` error with the install hint."""
    try:
        return importlib.import_module("jax")
    except ImportError:
        raise MissingDependency(
            f"JAX capture needs jax: {install_command('jax')} (or pip install jax)"
        ) from None


def newest_xplane(logdir: str | os.PathLike[str]) -> Path | None:
    """The xplane of the newest run under `logdir/plugins/profile` (None when there is none)."""
    from opscope.ingest.inputs import jax_run

    run = jax_run(Path(logdir))
    if run is None:
        return None
    files = sorted(run.glob("*.xplane.pb"))
    return files[0] if files else None


@dataclass
class JaxProfile:
    """What `profile_jax` recorded: the log folder and, after the block, the xplane file it wrote."""

    logdir: Path
    trace_path: Path | None = None
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)

    def load(self) -> Any:
        """The recorded trace (`opscope.load` of the xplane)."""
        from opscope.loading import load

        if self.trace_path is None:
            raise RuntimeError(
                "no JAX trace was recorded (the profile block has not finished, or JAX wrote none)"
            )
        return load(self.trace_path)


@contextlib.contextmanager
def profile_jax(logdir: str | os.PathLike[str] | None = None, **trace_options: Any) -> Iterator[JaxProfile]:
    """Record everything JAX runs inside the block (`jax.profiler.trace(logdir, **trace_options)`); the yielded
    `JaxProfile` names the xplane file afterwards. `logdir` defaults to $PROFILER_LOG_DIR or ./trace_logs."""
    from opscope.ingest.inputs import default_dir

    jax = require_jax()
    folder = Path(logdir) if logdir is not None else default_dir()
    result = JaxProfile(logdir=folder)
    start = time.perf_counter()
    with jax.profiler.trace(str(folder), **trace_options):
        yield result
    result.seconds = time.perf_counter() - start
    result.trace_path = newest_xplane(folder)
    if result.trace_path is None:
        result.warnings.append(f"JAX wrote no .xplane.pb under {folder}/plugins/profile")


def is_jax_script(command: Command) -> bool:
    """A script (not a module) whose source imports jax and not torch (a script importing both is profiled
    with torch.profiler unless `--jax` is given)."""
    if command.is_module:
        return False
    try:
        source = Path(command.target).read_bytes()
    except OSError:
        return False
    return _IMPORTS_JAX.search(source) is not None and _IMPORTS_TORCH.search(source) is None


def _watch_script_traces(jax: Any, on_start: Callable[[str], None]) -> Callable[[], None]:
    """Wrap `jax.profiler.start_trace` (public and internal names) so that a script starting its own trace is
    seen (its log folder is reported to `on_start` before the real call); returns the undo function."""
    targets = [jax.profiler]
    with contextlib.suppress(ImportError):
        targets.append(importlib.import_module("jax._src.profiler"))
    originals = [(t, t.start_trace) for t in targets]
    real = originals[-1][1]

    def start_trace(log_dir: Any, *args: Any, **kwargs: Any) -> Any:
        on_start(os.fspath(log_dir))
        return real(log_dir, *args, **kwargs)

    for target, _ in originals:
        target.start_trace = start_trace

    def undo() -> None:
        for target, original in originals:
            target.start_trace = original

    return undo


def run_jax_script(command: Command, logdir: str | os.PathLike[str] | None) -> RunResult:
    """Run a JAX script under `jax.profiler` and find its xplane. When the script records its own profile
    (`jax.profiler.trace` / `start_trace`), opscope's trace stops first and the script's folder is read."""
    from opscope.ingest.inputs import default_dir

    jax = require_jax()
    folder = Path(logdir) if logdir is not None else default_dir()
    own: list[str] = []
    ours = [True]

    def on_start(log_dir: str) -> None:
        if ours[0]:
            ours[0] = False
            jax.profiler.stop_trace()
        own.append(log_dir)

    status, error, script_tb = 0, None, None
    start = time.perf_counter()
    jax.profiler.start_trace(str(folder))
    undo = _watch_script_traces(jax, on_start)
    try:
        execute(command)
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
        error = f"exited with status {status}" if isinstance(exc.code, int) else f"exited: {exc.code}"
    except Exception as exc:
        status = 1
        script_tb, where = _script_frames(exc)
        error = f"failed at {where} ({type(exc).__name__}: {exc})"
    finally:
        undo()
        if ours[0]:
            jax.profiler.stop_trace()
    read_from = Path(own[-1]) if own else folder
    trace = newest_xplane(read_from)
    warnings = [] if trace else [f"JAX wrote no .xplane.pb under {read_from}/plugins/profile"]
    if own:
        warnings.append(f"the script records its own JAX profile: reading {read_from}")
    return RunResult(
        command=command,
        exit_status=status,
        error=error,
        script_traceback=script_tb,
        trace_path=str(trace) if trace else None,
        steps=0,
        step_source=None,
        device=str(jax.default_backend()),
        warnings=tuple(warnings),
        crash_note="the trace recorded up to the failure was kept" if status else None,
        seconds=time.perf_counter() - start,
    )
