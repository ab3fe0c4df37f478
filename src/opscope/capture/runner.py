"""`opscope run`: profile an unmodified Python script, in this process, under `opscope.profile`.

The script runs through `runpy` with `sys.argv` and `sys.path[0]` set as `python SCRIPT ARGS...` (or
`python -m MODULE ARGS...`) would set them. Steps are marked by the script calling `opscope.step()`, or else by
every `torch.optim` optimizer step (a global post-step hook); once the script calls `opscope.step()`, optimizer
steps stop counting. A script that raises or exits non-zero still leaves the trace of what ran before.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import runpy
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opscope.capture._torch import require_torch
from opscope.capture.profiler import Profile, ProfileOptions
from opscope.capture.sampling import Manifest
from opscope.errors import InputError, UsageError

_PYTHON_NAMES = ("python", "python3")


@dataclass(frozen=True)
class Command:
    """What to run: a script path or a module name, and the `sys.argv` it sees."""

    target: str
    is_module: bool
    argv: tuple[str, ...]

    @property
    def display(self) -> str:
        return f"-m {self.target}" if self.is_module else self.target


def _is_python(word: str) -> bool:
    name = os.path.basename(word)
    return (
        word == sys.executable
        or name in _PYTHON_NAMES
        or (name.startswith("python3.") and name[8:].isdigit())
    )


def parse_command(words: Sequence[str]) -> Command:
    """`[--] [python] SCRIPT.py ARGS...` or `[--] python -m MODULE ARGS...` -> `Command`."""
    rest = list(words)
    if rest and rest[0] == "--":
        rest = rest[1:]
    if rest and _is_python(rest[0]):
        rest = rest[1:]
    if not rest:
        raise UsageError(
            "nothing to run: give a Python script, e.g. opscope run -- python train.py --epochs 1"
        )
    if rest[0] == "-m":
        if len(rest) < 2:
            raise UsageError("python -m needs a module name")
        return Command(target=rest[1], is_module=True, argv=(rest[1], *rest[2:]))
    if rest[0].startswith("-"):
        raise UsageError(
            f"python option {rest[0]} is not supported by opscope run (scripts and -m MODULE only)"
        )
    script = Path(rest[0])
    if not script.exists():
        hint = "" if script.suffix == ".py" else " (opscope run profiles Python scripts in-process)"
        raise InputError(f"{script}: no such script{hint}")
    if not script.is_file():
        raise InputError(f"{script}: not a file")
    return Command(target=str(script), is_module=False, argv=(str(script), *rest[1:]))


@contextlib.contextmanager
def _script_environment(command: Command) -> Iterator[None]:
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = list(command.argv)
    sys.path.insert(0, os.getcwd() if command.is_module else str(Path(command.target).resolve().parent))
    try:
        yield
    finally:
        sys.argv[:] = saved_argv
        sys.path[:] = saved_path


def execute(command: Command) -> None:
    """Run the script once, as `__main__`; raises what it raises (`SystemExit(0)`/`None` is swallowed)."""
    with _script_environment(command):
        try:
            if command.is_module:
                runpy.run_module(command.target, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(command.target, run_name="__main__")
        except SystemExit as exc:
            if exc.code not in (None, 0):
                raise


@dataclass(frozen=True)
class RunResult:
    command: Command
    exit_status: int  # 0, the script's sys.exit status, or 1 for an uncaught exception
    error: str | None  # one line: what went wrong and where
    script_traceback: str | None  # the script's own frames, as Python would print them
    trace_path: str | None
    steps: int  # steps marked while profiling
    step_source: str | None  # "user" (opscope.step), "optimizer", or None (no marks)
    device: str
    warnings: tuple[str, ...]
    crash_note: str | None  # what was saved when the script failed
    seconds: float
    sampling: Manifest | None = None  # `--every`: the sampling run (its folder: `sampling_folder`)
    sampling_folder: str | None = None


def _script_frames(exc: BaseException) -> tuple[str, str]:
    """The traceback without opscope's and runpy's frames, and the innermost location in user code."""
    skip = (str(Path(__file__).resolve().parents[1]), runpy.__file__, contextlib.__file__, "<frozen runpy>")
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(skip):
        tb = tb.tb_next
    frames = traceback.extract_tb(tb)
    where = f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else "start-up"
    return "".join(traceback.format_exception(type(exc), exc, tb)), where


STEP_HINT = "call opscope.step() at the end of each step in the script, or step a torch.optim optimizer"


@contextlib.contextmanager
def optimizer_step_marks(prof: Profile) -> Iterator[None]:
    """While open, every `torch.optim` optimizer step marks a step of `prof` (unless the script marks its own
    steps with opscope.step()). Used by the profiled run and by the traced runs of `--overhead` alike, so both
    count the same steps."""
    prof.step_hint = STEP_HINT

    def on_optimizer_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        if prof.running:
            prof.step("optimizer")

    hook = importlib.import_module("torch.optim.optimizer").register_optimizer_step_post_hook(
        on_optimizer_step
    )
    try:
        yield
    finally:
        hook.remove()


def _summarised_trace(prof: Profile) -> str | None:
    """The trace the run's summary is of: the last one written; of a sampling run, the last window on disk
    that recorded all its steps (the run may end inside a window)."""
    if prof.sampling is None:
        return str(prof.trace_path) if prof.trace_path else None
    plan = prof.sampling.plan.steps
    whole = [w for w in prof.sampling.windows if w.trace and w.last_step - w.first_step + 1 >= plan]
    chosen = whole[-1] if whole else next((w for w in reversed(prof.sampling.windows) if w.trace), None)
    return str(prof.sampling.folder / chosen.trace) if chosen is not None and chosen.trace else None


def run_script(command: Command, options: ProfileOptions) -> RunResult:
    """Profile one run of `command`; never raises for the script's own failures (they are in the result)."""
    require_torch()
    prof = Profile(options)
    prof.log_warnings = False
    prof.command = " ".join(command.argv)
    status, error, script_tb = 0, None, None
    start = time.perf_counter()
    try:
        with optimizer_step_marks(prof), prof:
            execute(command)
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
        error = f"exited with status {status}" if isinstance(exc.code, int) else f"exited: {exc.code}"
    except Exception as exc:
        status = 1
        script_tb, where = _script_frames(exc)
        error = f"failed at {where} ({type(exc).__name__}: {exc})"
    return RunResult(
        command=command,
        exit_status=status,
        error=error,
        script_traceback=script_tb,
        trace_path=_summarised_trace(prof),
        steps=prof.steps,
        step_source=prof.step_source,
        device=prof.device,
        warnings=tuple(prof.warnings),
        crash_note=prof.crash_note,
        seconds=time.perf_counter() - start,
        sampling=prof.sampling.manifest() if prof.sampling is not None else None,
        sampling_folder=str(prof.sampling.folder) if prof.sampling is not None else None,
    )
