"""Sampling a long run: a window of N traced steps every M steps (or every S seconds), each window its own trace,
all of them one sampling run (docs/drift.md).

`Sampler.action(step)` is the profiler's schedule: one warm-up step (the profiler on, its events dropped) and N
recorded steps per window, nothing between windows (torch.profiler is off then: the untraced steps cost one
`perf_counter` call each). `Sampling` is the plan; `WindowRecord` what is known about a window once it is written:
its steps, when it ran, what its traced steps cost against the untraced steps before it, and the process's memory
and compile count at its end. The run's folder holds the traces and `sampling.json` (`opscope.sampling/1`), which
`opscope drift` reads; with `keep`, only the newest K traces stay on disk: an older window is added to the run
history first (its figures kept there) and its trace deleted.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from opscope.analysis.base.workers import proc_kb
from opscope.capture.schedule import NONE, RECORD, RECORD_AND_SAVE, WARMUP
from opscope.errors import InputError, UsageError

MANIFEST = "sampling.json"
SCHEMA = "opscope.sampling/1"
RECENT_UNTRACED = 200  # untraced step times kept for the overhead's reference (the newest ones)


def new_run_id() -> str:
    """`YYYYmmddTHHMMSS-xxxxxx`: sortable by start time, unique among runs started the same second."""
    return f"{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class Sampling:
    steps: int  # N: steps recorded per window
    every: int | None = None  # a window starts every M steps ...
    every_seconds: float | None = (
        None  # ... or at the first step boundary S seconds after the last one started
    )
    keep: int | None = None  # window traces kept on disk (older ones: into the history, then deleted)
    skip_first: int = 0  # steps before the first window
    history: str | None = None  # the run history the windows go into (None: the default history)
    run_id: str = field(default_factory=new_run_id)

    def __post_init__(self) -> None:
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1:
            raise UsageError(f"sampling needs a positive number of steps per window, got {self.steps!r}")
        if (self.every is None) == (self.every_seconds is None):
            raise UsageError("sample with every=M steps or every_seconds=S, one of the two")
        if self.every is not None and (isinstance(self.every, bool) or self.every < self.steps + 1):
            raise UsageError(
                f"every={self.every}: a window is 1 warm-up step and {self.steps} recorded steps, so windows "
                f"can start at most every {self.steps + 1} steps"
            )
        if self.every_seconds is not None and not self.every_seconds > 0:
            raise UsageError(f"every_seconds must be positive, got {self.every_seconds}")
        if self.keep is not None and self.keep < 1:
            raise UsageError(f"keep must be at least 1 window, got {self.keep}")
        if self.skip_first < 0:
            raise UsageError(f"skip_first must be 0 or more, got {self.skip_first}")
        if not re.fullmatch(r"[\w.\-]+", self.run_id):
            raise UsageError(f"run id {self.run_id!r}: use letters, digits, '_', '.' or '-'")

    def describe(self) -> str:
        when = f"every {self.every} steps" if self.every else f"every {self.every_seconds:g} s"
        kept = f", the newest {self.keep} traces kept" if self.keep else ""
        return f"{self.steps} steps {when}{kept}"


class Sampler:
    """The schedule of a sampling run (see the module doc), stateful: `action(step)` is asked once per step in
    step order by torch.profiler (memoised: asking again returns the same answer)."""

    def __init__(self, plan: Sampling, clock: Callable[[], float] = time.monotonic) -> None:
        self.plan = plan
        self._clock = clock
        self._actions: dict[int, str] = {}
        self._window_start: int | None = None  # the warm-up step of the current or last window
        self._last_start_time: float | None = None

    def _starts(self, step: int) -> bool:
        plan = self.plan
        if step < plan.skip_first:
            return False
        if plan.every is not None:
            return (step - plan.skip_first) % plan.every == 0
        if self._last_start_time is None:
            return True
        return self._clock() - self._last_start_time >= float(plan.every_seconds or 0)

    def action(self, step: int) -> str:
        if step in self._actions:
            return self._actions[step]
        start = self._window_start
        offset = None if start is None else step - start
        if offset is not None and 0 < offset <= self.plan.steps:
            action = RECORD_AND_SAVE if offset == self.plan.steps else RECORD
        elif self._starts(step):
            self._window_start, self._last_start_time = step, self._clock()
            action = WARMUP
        else:
            action = NONE
        self._actions = {step: action}  # only the newest step is asked again
        return action

    def recorded_steps(self) -> tuple[int, int] | None:
        """(first, last) step recorded by the current or last window."""
        if self._window_start is None:
            return None
        return self._window_start + 1, self._window_start + self.plan.steps


@dataclass(frozen=True)
class WindowRecord:
    index: int  # 0, 1, ... in the order written
    trace: str | None  # the trace's file name in the run folder; None once deleted (kept in the history)
    first_step: int  # the step numbers recorded (ProfilerStep#first .. #last)
    last_step: int
    started_at: str  # wall clock (UTC, ISO 8601) at the start of the first recorded step
    elapsed_s: float  # seconds since the sampling run started, at that moment
    traced_step_s: float  # mean wall time of the recorded steps
    untraced_step_s: float | None  # median wall time of the (up to 200) untraced steps before the window
    export_s: float  # after the window: writing its trace and adding older windows to the history (`keep`)
    rss_bytes: int | None  # the process's resident memory at the end of the window
    cuda_allocated_bytes: int | None  # torch.cuda.memory_allocated / memory_reserved at the end (CUDA only)
    cuda_reserved_bytes: int | None
    compiles: (
        int | None
    )  # frames torch.compile has compiled so far (dynamo's counter; None: dynamo not loaded)
    history_run: int | None = None  # the run id of this window in the history, once added

    @property
    def overhead(self) -> float | None:
        """traced_step_s / untraced_step_s - 1: how much slower a traced step ran."""
        if self.untraced_step_s is None or self.untraced_step_s <= 0:
            return None
        return self.traced_step_s / self.untraced_step_s - 1.0


@dataclass(frozen=True)
class Manifest:
    run_id: str
    command: str
    plan: str  # Sampling.describe()
    history: str | None  # the history the windows go into (as given; None: the default)
    started_at: str
    steps: int  # steps seen so far
    windows: tuple[WindowRecord, ...]
    finished: bool
    finish_s: float = 0.0  # after the run: adding the windows still on disk to the history

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["schema"] = SCHEMA
        out["windows"] = [{**asdict(w), "overhead": w.overhead} for w in self.windows]
        return out

    def write(self, folder: Path) -> Path:
        """Atomically (a reader never sees half a manifest)."""
        path = folder / MANIFEST
        fd, tmp = tempfile.mkstemp(prefix=".sampling-", suffix=".json", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(self.to_json(), out, indent=1)
        os.replace(tmp, path)
        return path


def read_manifest(path: Path) -> Manifest:
    """A run folder's `sampling.json` (or the file itself); a clear error for anything else."""
    file = path / MANIFEST if path.is_dir() else path
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{file}: cannot read: {exc.strerror or exc}") from None
    except ValueError:
        raise InputError(f"{file}: not a sampling manifest (bad JSON)") from None
    if not isinstance(raw, dict) or raw.get("schema") != SCHEMA:
        raise InputError(f"{file}: not a sampling manifest ({SCHEMA})")
    try:
        fields = {f for f in WindowRecord.__dataclass_fields__}
        windows = tuple(
            WindowRecord(**{k: v for k, v in w.items() if k in fields}) for w in raw.get("windows", [])
        )
        return Manifest(
            run_id=str(raw["run_id"]),
            command=str(raw.get("command", "")),
            plan=str(raw.get("plan", "")),
            history=raw.get("history"),
            started_at=str(raw.get("started_at", "")),
            steps=int(raw.get("steps", 0)),
            windows=windows,
            finished=bool(raw.get("finished", False)),
            finish_s=float(raw.get("finish_s", 0.0)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{file}: a damaged sampling manifest ({type(exc).__name__}: {exc})") from None


def find_run_folder(path: Path) -> Path:
    """`path` when it holds a manifest, else its newest sub-folder that does (a log folder of several runs)."""
    if (path / MANIFEST).is_file() or (path.is_file() and path.name == MANIFEST):
        return path if path.is_dir() else path.parent
    if path.is_dir():
        runs = sorted(p for p in path.iterdir() if (p / MANIFEST).is_file())
        if runs:
            return runs[-1]
    raise InputError(f"{path}: no sampling run here (no {MANIFEST}; record one with opscope run --every)")


def process_memory() -> int | None:
    """This process's resident memory in bytes (Linux /proc; elsewhere the peak from getrusage)."""
    kb = proc_kb("/proc/self/status", "VmRSS:")
    if kb is not None:
        return kb * 1024
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(peak) * (1 if sys.platform == "darwin" else 1024)
    except (ImportError, OSError):  # pragma: no cover - not a Unix system
        return None


def compiled_frames() -> int | None:
    """Frames torch.compile (dynamo) has compiled in this process so far, each recompile counted; None when dynamo
    was never imported (not imported here: a script that does not compile pays nothing)."""
    utils = sys.modules.get("torch._dynamo.utils")
    counters = getattr(utils, "counters", None)
    if counters is None:
        return None
    try:
        return int(counters["frames"]["ok"])
    except (KeyError, TypeError, ValueError):
        return None


class StepClock:
    """Wall time per step, split into the steps a window traced and the untraced ones before it."""

    def __init__(self) -> None:
        self._last = time.perf_counter()
        self.untraced: deque[float] = deque(maxlen=RECENT_UNTRACED)
        self.traced: list[float] = []

    def step(self, action: str) -> None:
        """The step that just ended ran under `action` (the schedule's): recorded steps are the traced ones,
        steps with the profiler off the untraced ones; a warm-up step is neither."""
        now = time.perf_counter()
        if action in (RECORD, RECORD_AND_SAVE):
            self.traced.append(now - self._last)
        elif action == NONE:
            self.untraced.append(now - self._last)
        self._last = now

    def restart(self) -> None:
        """After writing a window: its export is not the next step's time."""
        self._last = time.perf_counter()

    def window(self) -> tuple[float, float | None]:
        """(mean traced step, median untraced step) for the window just recorded; starts the next window."""
        traced = statistics.fmean(self.traced) if self.traced else 0.0
        untraced = statistics.median(self.untraced) if self.untraced else None
        self.traced = []
        return traced, untraced


def cuda_memory() -> tuple[int | None, int | None]:
    """torch.cuda.memory_allocated / memory_reserved of the current device, where torch is loaded and CUDA in
    use; (None, None) otherwise."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    try:
        if cuda is None or not cuda.is_available() or not cuda.is_initialized():
            return None, None
        return int(cuda.memory_allocated()), int(cuda.memory_reserved())
    except Exception:  # a broken CUDA context: the figure is absent, the run goes on
        return None, None


def window_rows(record: WindowRecord) -> list[tuple[str, str, str, float]]:
    """The figures a window's sampling process measured, as history rows (docs/history.md)."""
    values = {
        "rss_end_bytes": record.rss_bytes,
        "cuda_allocated_end_bytes": record.cuda_allocated_bytes,
        "cuda_reserved_end_bytes": record.cuda_reserved_bytes,
        "compiles_total": record.compiles,
        "traced_step_us": record.traced_step_s * 1e6,
        "untraced_step_us": None if record.untraced_step_s is None else record.untraced_step_s * 1e6,
        "tracing_overhead": record.overhead,
    }
    return [("global", "run", k, float(v)) for k, v in values.items() if v is not None]


class WindowLog:
    """The run folder of a sampling run while it runs: each written window recorded in the manifest, the traces
    beyond `keep` added to the history and deleted, the rest added at the end (`finish`)."""

    def __init__(self, plan: Sampling, root: Path, command: str) -> None:
        self.plan = plan
        self.folder = root / plan.run_id
        try:
            self.folder.mkdir(parents=True, exist_ok=False)
        except FileExistsError:
            raise UsageError(f"{self.folder}: a sampling run of this id exists already") from None
        except OSError as exc:
            raise UsageError(f"{self.folder}: cannot create the run folder: {exc.strerror or exc}") from None
        self.command = command
        self.started = time.monotonic()
        self.started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.windows: list[WindowRecord] = []
        self.window_started: tuple[str, float] | None = None  # (wall clock, elapsed) of the current window
        self.warnings: list[str] = []
        self.steps = 0
        self.finish_s = 0.0
        self._write(finished=False)

    def _write(self, finished: bool) -> None:
        self.manifest(finished).write(self.folder)

    def manifest(self, finished: bool = True) -> Manifest:
        return Manifest(
            run_id=self.plan.run_id,
            command=self.command,
            plan=self.plan.describe(),
            history=self.plan.history,
            started_at=self.started_at,
            steps=self.steps,
            windows=tuple(self.windows),
            finished=finished,
            finish_s=self.finish_s,
        )

    def recording_starts(self) -> None:
        """The first recorded step of a window begins now."""
        self.window_started = (
            datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
            time.monotonic() - self.started,
        )

    def written(
        self, path: Path, steps: tuple[int, int], timing: tuple[float, float | None], export_s: float
    ) -> None:
        """A window's trace was written to `path` (inside the run folder)."""
        started_at, elapsed = self.window_started or (datetime.now(timezone.utc).isoformat(), 0.0)
        allocated, reserved = cuda_memory()
        rss, compiles = process_memory(), compiled_frames()  # before the summarising below adds its own
        begun = time.monotonic()
        if self.plan.keep is not None:  # room for this window's trace: the oldest ones into the history
            on_disk = [w for w in self.windows if w.trace is not None]
            old = on_disk[: max(len(on_disk) + 1 - self.plan.keep, 0)]
            if old:
                self._summarise(old, delete=True)
        self.windows.append(
            WindowRecord(
                index=len(self.windows),
                trace=path.name,
                first_step=steps[0],
                last_step=steps[1],
                started_at=started_at,
                elapsed_s=round(elapsed, 6),
                traced_step_s=timing[0],
                untraced_step_s=timing[1],
                export_s=export_s + time.monotonic() - begun,
                rss_bytes=rss,
                cuda_allocated_bytes=allocated,
                cuda_reserved_bytes=reserved,
                compiles=compiles,
            )
        )
        self._write(finished=False)

    def _summarise(self, records: list[WindowRecord], delete: bool) -> None:
        """Add windows to the history (their traces' figures and the measured ones), in a process of its own
        (`window_add`); then delete their traces (`delete`). A window that could not be added keeps its trace
        and the manifest says why."""
        request = {
            "db": self.plan.history,
            "windows": [
                {
                    "path": str(self.folder / str(r.trace)),
                    "sampling_run": self.plan.run_id,
                    "index": r.index,
                    "first_step": r.first_step,
                    "last_step": r.last_step,
                    "started_at": r.started_at,
                    "extra": window_rows(r),
                }
                for r in records
            ],
        }
        try:
            done = subprocess.run(
                [sys.executable, "-m", "opscope.history.window_add"],
                input=json.dumps(request),
                capture_output=True,
                text=True,
                check=False,
            )
            reply = json.loads(done.stdout.strip().splitlines()[-1])
        except (OSError, ValueError, IndexError) as exc:
            reply = {
                "added": [None] * len(records),
                "errors": [f"the history process failed ({exc})"] * len(records),
            }
        for record, run, error in zip(records, reply["added"], reply["errors"], strict=False):
            if run is None:
                self.warnings.append(
                    f"window {record.index}: not added to the history ({error}); its trace is kept"
                )
                continue
            kept = replace(record, history_run=int(run))
            if delete:
                (self.folder / str(record.trace)).unlink(missing_ok=True)
                kept = replace(kept, trace=None)
            self.windows[record.index] = kept

    def finish(self, steps: int) -> None:
        """At the end of the run: every window not yet in the history is added (its trace kept)."""
        self.steps = steps
        left = [r for r in self.windows if r.history_run is None and r.trace is not None]
        begun = time.monotonic()
        if left:
            self._summarise(left, delete=False)
        self.finish_s = round(time.monotonic() - begun, 6)
        self._write(finished=True)


def overhead_summary(
    windows: tuple[WindowRecord, ...], finish_s: float = 0.0
) -> dict[str, float | int | None]:
    """What sampling cost: the median over windows of traced / untraced - 1, the seconds spent after the
    windows writing traces and adding older ones to the history, in all, and after the run adding the rest."""
    ratios = [w.overhead for w in windows if w.overhead is not None]
    return {
        "windows": len(windows),
        "traced_step_overhead_median": statistics.median(ratios) if ratios else None,
        "export_s_total": round(sum(w.export_s for w in windows), 6),
        "finish_s": round(finish_s, 6),
    }
