"""`opscope.profile`: one-line profiling of PyTorch code over `torch.profiler`, writing `*.pt.trace.json.gz`.

This is the capture edge of the pipeline: it runs the user's code under `torch.profiler` with a schedule
(`schedule.py`), writes each finished cycle to the trace folder (`export.py`), and hands the file to the same
ingest and analyses as `opscope summary`. `profile(...)` is a context manager and a decorator; `prof.step()`
(or the module-level `opscope.step()`) marks the end of a step; `annotate("name")` adds a user range.
torch is imported lazily, on entering the block.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from opscope.capture import export, memory_snapshot
from opscope.capture._torch import describe_device, require_torch
from opscope.capture.quiet import filtered_stderr
from opscope.capture.sampling import Sampler, Sampling, StepClock, WindowLog
from opscope.capture.schedule import NONE, RECORD, RECORD_AND_SAVE, WARMUP, Schedule
from opscope.errors import UsageError

if TYPE_CHECKING:
    from opscope.capture.summary import CaptureSummary

log = logging.getLogger("opscope")

ACTIVITIES = ("cpu", "cuda")
_ACTIVE: list[Profile] = []  # the running profile (at most one: torch allows one profiler at a time)


@dataclass(frozen=True)
class ProfileOptions:
    schedule: Schedule = field(default_factory=Schedule)
    record_shapes: bool = False  # "Input Dims" of each op
    with_stack: bool = False  # Python source locations (python_function events)
    profile_memory: bool = False  # tensor allocations and frees
    memory_snapshot: bool = False  # CUDA allocator history, dumped next to each trace (memory_snapshot.py)
    nvtx: bool = False  # NVTX ranges for steps and annotate() ranges (Nsight Systems lines up with the trace)
    activities: tuple[str, ...] | None = None  # "cpu", "cuda"; None = CPU, plus CUDA when a GPU is available
    log_dir: str | None = None  # None = $PROFILER_LOG_DIR, else ./trace_logs
    save: bool = True  # False: collect but write no file (overhead measurement)
    sampling: Sampling | None = None  # a window every M steps or S seconds (sampling.py); replaces `schedule`


def _torch_action(torch: Any, action: str) -> Any:
    table = {
        NONE: torch.profiler.ProfilerAction.NONE,
        WARMUP: torch.profiler.ProfilerAction.WARMUP,
        RECORD: torch.profiler.ProfilerAction.RECORD,
        RECORD_AND_SAVE: torch.profiler.ProfilerAction.RECORD_AND_SAVE,
    }
    return table[action]


class Profile(contextlib.ContextDecorator):
    """A profiling session (reusable: each `with` block or decorated call is a new session)."""

    def __init__(self, options: ProfileOptions | None = None) -> None:
        self.options = options or ProfileOptions()
        self.trace_paths: list[Path] = []  # traces written by the last session, in order
        self.warnings: list[str] = []
        self.steps = 0  # step() calls counted in the last session
        self.step_source: str | None = None  # "user" (prof.step / opscope.step) or "optimizer"
        self.cycles = 0  # profiling cycles completed (a trace each when saving)
        self.device = "cpu"
        self.crash_note: str | None = None  # set when the profiled code raised: what was saved
        self.log_warnings = True  # False: keep warnings in `warnings` only (callers that report them)
        self.step_hint = "mark the end of each step with prof.step() or opscope.step()"
        self._torch_prof: Any = None
        self._folder: Path | None = None
        self._nvtx = False
        self._nvtx_open = False
        self._snapshot = False
        self.snapshot_paths: list[Path] = []  # allocator snapshots written by the last session (CUDA only)
        self.command = "python"  # what ran (`opscope run` names the script), for a sampling run's manifest
        self.sampling: WindowLog | None = None  # the sampling run of the last session (`options.sampling`)
        self._sampler: Sampler | None = None
        self._clock: StepClock | None = None

    def _recreate_cm(self) -> Profile:
        return self

    @property
    def running(self) -> bool:
        return self._torch_prof is not None

    @property
    def trace_path(self) -> Path | None:
        """The last trace written, if any."""
        return self.trace_paths[-1] if self.trace_paths else None

    def _activities(self, torch: Any) -> list[Any]:
        wanted = self.options.activities
        if wanted is None:
            wanted = ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",)
        unknown = [a for a in wanted if a not in ACTIVITIES]
        if unknown or not wanted:
            raise UsageError(
                f"activities: expected some of {', '.join(ACTIVITIES)}, got {', '.join(wanted) or 'none'}"
            )
        if "cuda" in wanted and not torch.cuda.is_available():
            raise UsageError("activities: cuda asked for, but no CUDA/ROCm device is available")
        kinds = torch.profiler.ProfilerActivity
        return [kinds.CPU if a == "cpu" else kinds.CUDA for a in wanted]

    def __enter__(self) -> Profile:
        torch = require_torch()
        if _ACTIVE:
            raise UsageError(
                "opscope.profile: another opscope.profile block is already running (torch allows one)"
            )
        activities = self._activities(torch)
        self._folder = export.log_dir(self.options.log_dir) if self.options.save else None
        self.trace_paths, self.warnings, self.steps, self.cycles, self.step_source = [], [], 0, 0, None
        self.crash_note = None
        uses_cuda = torch.profiler.ProfilerActivity.CUDA in activities
        self.device = describe_device(torch.device("cuda")) if uses_cuda else "cpu"
        self._nvtx = self.options.nvtx and torch.cuda.is_available()
        if self.options.nvtx and not self._nvtx:
            self._warn("nvtx=True ignored: NVTX ranges need a CUDA device")
        schedule = self.options.schedule
        plan = self.options.sampling
        self._sampler = Sampler(plan) if plan is not None else None
        self._clock = StepClock() if plan is not None else None
        self.sampling = None
        if plan is not None:
            if self._folder is None:
                raise UsageError("sampling writes a trace per window: it needs save=True")
            self.sampling = WindowLog(plan, self._folder, self.command)
        decide = self._sampler.action if self._sampler is not None else schedule.action
        prof = torch.profiler.profile(
            activities=activities,
            schedule=lambda step: _torch_action(torch, decide(step)),
            on_trace_ready=self._trace_ready,
            record_shapes=self.options.record_shapes,
            with_stack=self.options.with_stack,
            profile_memory=self.options.profile_memory,
        )
        self.snapshot_paths = []
        self._snapshot = self.options.memory_snapshot and memory_snapshot.start(torch)
        if self.options.memory_snapshot and not self._snapshot:
            self._warn(memory_snapshot.SKIPPED)
        with filtered_stderr():
            prof.__enter__()
        self._torch_prof = prof
        _ACTIVE.append(self)
        self._nvtx_begin()
        return self

    def _trace_ready(self, prof: Any) -> None:
        self.cycles += 1
        if self.sampling is not None and self._sampler is not None and self._clock is not None:
            begun = time.perf_counter()
            path = export.write_trace(prof, self.sampling.folder)
            first, last = self._sampler.recorded_steps() or (self.steps, self.steps)
            timing = self._clock.window()
            self.sampling.written(path, (first, min(last, self.steps)), timing, time.perf_counter() - begun)
            self.trace_paths = [self.sampling.folder / w.trace for w in self.sampling.windows if w.trace]
            self._clock.restart()
        elif self._folder is not None:
            self.trace_paths.append(export.write_trace(prof, self._folder))
            if self._snapshot:
                self.snapshot_paths.append(memory_snapshot.dump(require_torch(), self.trace_paths[-1]))

    def step(self, source: str = "user") -> None:
        """Mark the end of a step (the schedule advances). Optimizer-driven steps stop counting once the code
        marks steps itself."""
        if self._torch_prof is None:
            raise UsageError("prof.step() called outside the profiled block")
        if source == "optimizer" and self.step_source == "user":
            return
        self.step_source = source
        self._nvtx_end()
        if self._sampler is not None and self._clock is not None and self.sampling is not None:
            action = self._sampler.action(self.steps)
            self._clock.step(action)
            if action == WARMUP:  # the window's first recorded step starts now
                self.sampling.recording_starts()
        with warnings.catch_warnings():
            # Each cycle is exported as it ends, so torch's note about clearing events between cycles is moot.
            warnings.filterwarnings("ignore", message="Warning: Profiler clears events")
            with filtered_stderr():
                self._torch_prof.step()
        self.steps += 1
        self._nvtx_begin()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        self._nvtx_end()
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        prof, self._torch_prof = self._torch_prof, None
        try:
            if prof is not None:
                with filtered_stderr():
                    prof.__exit__(exc_type, exc, tb)
        finally:
            if self._snapshot:
                self._snapshot = False
                memory_snapshot.stop(require_torch())
            if self.sampling is not None:
                self.sampling.finish(self.steps)
                for message in self.sampling.warnings:
                    self._warn(message)
            self._check_coverage(crashed=exc_type is not None)
        return False

    def _check_coverage(self, crashed: bool) -> None:
        schedule = self.options.schedule
        where = f": {self.trace_path}" if self.trace_path else ""
        if crashed:
            saved = "the trace of what ran before it was saved" if self.cycles else "no trace was captured"
            self.crash_note = f"{saved}{where}"
            if self.log_warnings:
                log.warning(f"the profiled code raised an error during step {self.steps}; {self.crash_note}")
            return
        if self.options.sampling is not None:
            if self.cycles == 0:
                self._warn(
                    f"no window was written: the block ended after {self.steps} step(s), before the first "
                    f"window ({self.options.sampling.describe()})"
                )
            return
        if schedule.whole_run:
            return
        if self.cycles == 0:
            self._warn(
                f"no trace was written: the block ended during step {self.steps}, before recording "
                f"starts at step {schedule.first_recorded_step} ({schedule.describe()})"
            )
        elif self.steps == 0:
            self._warn(f"step() was never called, so the whole block counted as step 0; {self.step_hint}")
        elif schedule.steps_needed is not None and self.steps < schedule.steps_needed:
            self._warn(
                f"the block ended after {self.steps} step(s), but the schedule ({schedule.describe()}) "
                f"needs {schedule.steps_needed}: the last trace covers fewer steps than asked{where}"
            )

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        if self.log_warnings:
            log.warning(message)

    def _nvtx_begin(self) -> None:
        if self._nvtx:
            require_torch().cuda.nvtx.range_push(f"opscope step {self.steps}")
            self._nvtx_open = True

    def _nvtx_end(self) -> None:
        if self._nvtx_open:
            require_torch().cuda.nvtx.range_pop()
            self._nvtx_open = False

    def summary(self, top: int = 30) -> CaptureSummary:
        """The last trace's summary: the `opscope summary` kernel table (and, for a CPU-only trace, the
        per-operator table). Printing it prints the table."""
        from opscope.capture.summary import summarize

        if self.trace_path is None:
            reason = self.crash_note or (
                self.warnings[-1] if self.warnings else "the block has not finished yet"
            )
            raise UsageError(f"no trace to summarise ({reason})")
        return summarize(self.trace_path, device=self.device, top=top)


def profile(
    steps: int | None = None,
    *,
    wait: int = 0,
    warmup: int = 0,
    active: int | None = None,
    repeat: int = 1,
    skip_first: int = 0,
    record_shapes: bool = False,
    with_stack: bool = False,
    profile_memory: bool = False,
    nvtx: bool = False,
    activities: tuple[str, ...] | None = None,
    log_dir: str | None = None,
    save: bool = True,
    memory_snapshot: bool = False,
    every: int | None = None,
    every_seconds: float | None = None,
    keep: int | None = None,
    history: str | None = None,
) -> Profile:
    """Profile a block or a function; `steps=N` traces the first N steps, no schedule traces the whole block.

    `every=M` (or `every_seconds=S`) samples a long run instead: a window of `steps` steps every M steps (S
    seconds), each its own trace in a run folder under the log folder, every window added to the run history
    (`history`: its database; default $OPSCOPE_HISTORY or .opscope/history.sqlite), only the newest `keep`
    traces left on disk; `opscope drift` reads the folder (docs/drift.md).

    See `docs/capture.md` for the schedule's meaning; traces go to `log_dir`, $PROFILER_LOG_DIR or ./trace_logs.
    """
    sampling: Sampling | None = None
    schedule = Schedule()
    if every is not None or every_seconds is not None:
        if steps is None or active is not None or wait or warmup or repeat != 1:
            raise UsageError(
                "sampling takes steps=N (steps per window) with every=M or every_seconds=S, no schedule"
            )
        sampling = Sampling(
            steps=steps,
            every=every,
            every_seconds=every_seconds,
            keep=keep,
            skip_first=skip_first,
            history=history,
        )
    elif keep is not None or history is not None:
        raise UsageError("keep and history belong to sampling: give every=M or every_seconds=S too")
    else:
        schedule = Schedule.build(
            steps, wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first
        )
    return Profile(
        ProfileOptions(
            schedule=schedule,
            record_shapes=record_shapes,
            with_stack=with_stack,
            profile_memory=profile_memory,
            nvtx=nvtx,
            memory_snapshot=memory_snapshot,
            activities=tuple(activities) if activities is not None else None,
            log_dir=str(log_dir) if log_dir is not None else None,
            save=save,
            sampling=sampling,
        )
    )


def active() -> Profile | None:
    """The running `opscope.profile` session, if any."""
    return _ACTIVE[-1] if _ACTIVE else None


def step() -> None:
    """Mark the end of a step in the running profile; does nothing when nothing is being profiled, so scripts
    can call it unconditionally."""
    if _ACTIVE:
        _ACTIVE[-1].step()


class annotate(
    contextlib.ContextDecorator
):  # lower case: used like a function, `with opscope.annotate("x"):`
    """A named range in the trace (`record_function`), and an NVTX range when the profile has nvtx=True."""

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise UsageError("annotate() needs a non-empty name")
        self.name = name
        self._local = threading.local()

    def __enter__(self) -> annotate:
        torch = require_torch()
        ranges = self._local.__dict__.setdefault("stack", [])
        record = torch.profiler.record_function(self.name)
        record.__enter__()
        running = active()
        nvtx = running is not None and running._nvtx
        if nvtx:
            torch.cuda.nvtx.range_push(self.name)
        ranges.append((record, nvtx))
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        record, nvtx = self._local.stack.pop()
        if nvtx:
            require_torch().cuda.nvtx.range_pop()
        record.__exit__(exc_type, exc, tb)
        return False
