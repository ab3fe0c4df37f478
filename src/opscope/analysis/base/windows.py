"""Step windows: the time ranges of `ProfilerStep#N` (or of JAX `StepTraceAnnotation` events, by `step_num`),
how `--steps 3-5` picks among them, and which events overlap which window.

A step window is the span of the CPU-side `ProfilerStep#N` event (kind cpu_op or user_annotation; the GPU-side
`gpu_user_annotation` copies that Kineto also writes are ignored). A trace without step markers has one window:
the span of all its timed events. `overlap_pairs` finds every (event, window) overlap with sorted searches,
never by comparing every event with every window, so it stays fast with thousands of steps.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from opscope.analysis.base.codetag import code_tag
from opscope.analysis.base.names import names_of, span_of
from opscope.errors import UsageError
from opscope.model.schema import GPU_KINDS, Col, Kind
from opscope.model.trace import Trace

if TYPE_CHECKING:
    import numpy as np

STEP_NAME = r"^ProfilerStep#(\d+)$"
STEP_ANY = "ProfilerStep#*"
WHOLE_TRACE = "(whole trace)"


@dataclass(frozen=True)
class StepWindow:
    """One step: `step` is N of ProfilerStep#N (None for the whole-trace window); times in ns."""

    step: int | None
    name: str
    start_ns: int
    end_ns: int

    @property
    def dur_ns(self) -> int:
        """The window's wall time."""
        return self.end_ns - self.start_ns


def names_matching(frame: pl.DataFrame, column: str, pattern: str) -> list[str]:
    """The distinct values of a text column that match `pattern` (string work on distinct values only)."""
    names = frame.get_column(column).unique().drop_nulls().cast(pl.String)
    return names.filter(names.str.contains(pattern)).to_list()


def fold_steps(frame: pl.DataFrame, column: str = Col.NAME) -> pl.DataFrame:
    """Every ProfilerStep#N in `column` replaced by "ProfilerStep#*" (for tables that aggregate by name).
    A Categorical column stays Categorical."""
    steps = names_matching(frame, column, STEP_NAME)
    if not steps:
        return frame
    dtype = frame.schema[column]
    folded = pl.when(pl.col(column).is_in(steps)).then(pl.lit(STEP_ANY).cast(dtype)).otherwise(pl.col(column))
    return frame.with_columns(folded.alias(column))


# The kinds of CPU work (with GPU activity, what the whole-trace window spans).
CPU_WORK_KINDS = (Kind.CPU_OP, Kind.RUNTIME, Kind.DRIVER, Kind.USER_ANNOTATION, Kind.PYTHON)


def work_span(trace: Trace, gpu: pl.LazyFrame | None = None) -> tuple[int, int] | None:
    """The whole-trace window, defined once for every view (`analyze`, `steps`, `diff`, `ranks`, the report;
    issue 28): from the first start to the last end of the work, GPU activity (`gpu`: the selected GPU events,
    default all of them) and CPU work (`CPU_WORK_KINDS`) with a duration. Metadata, flows, instants, counters,
    the GPU-side annotations (`gpu_user_annotation`, CUPTI's profiler ranges) and the profiler's own `Trace`
    span are not work. None without any."""
    if gpu is None:  # the same figure from the per-(kind, name) table: no pass over the events
        return span_of(trace, [*GPU_KINDS, *CPU_WORK_KINDS])
    cpu = trace.lazy().filter(pl.col(Col.KIND).is_in(list(CPU_WORK_KINDS)) & pl.col(Col.DUR_NS).is_not_null())
    span = (
        pl.concat([gpu.select(Col.TS_NS, Col.DUR_NS), cpu.select(Col.TS_NS, Col.DUR_NS)])
        .filter(pl.col(Col.TS_NS).is_not_null())
        .select(
            pl.col(Col.TS_NS).min().alias("lo"),
            (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS).clip(lower_bound=0)).max().alias("hi"),
        )
        .collect()
    )
    lo, hi = span.row(0)
    return None if lo is None or hi is None else (int(lo), int(hi))


def marker_windows(trace: Trace) -> tuple[StepWindow, ...]:
    """The step windows of `trace`, sorted by start (empty when it has none). Computed once per trace and kept
    beside the trace cache (`Trace.persisted`: x64 ~60 ms computed, ~1 ms read back)."""
    from opscope.analysis.base import names

    return trace.persisted(
        f"marker_windows-{code_tag(sys.modules[__name__], names)}",
        lambda: _marker_windows(trace),
        _encode_windows,
        _decode_windows,
    )


_WINDOW_SCHEMA = {"step": pl.Int64, "name": pl.String, "start_ns": pl.Int64, "end_ns": pl.Int64}


def _encode_windows(found: tuple[StepWindow, ...]) -> dict[str, pl.DataFrame]:
    rows = [(w.step, w.name, w.start_ns, w.end_ns) for w in found]
    return {"windows": pl.DataFrame(rows, schema=_WINDOW_SCHEMA, orient="row")}


def _decode_windows(frames: dict[str, pl.DataFrame]) -> tuple[StepWindow, ...]:
    table = frames["windows"]
    if dict(table.schema) != _WINDOW_SCHEMA:
        raise ValueError("not a table of step windows")
    return tuple(StepWindow(step, name, start, end) for step, name, start, end in table.iter_rows())


def _marker_windows(trace: Trace) -> tuple[StepWindow, ...]:
    """The step windows of `trace`, sorted by start (empty when it has none): ProfilerStep#N events, and events
    with a `step_num` (JAX's `StepTraceAnnotation`, step N = step_num) in traces without ProfilerStep#N."""
    # the pattern matched on the distinct names, not on the text of every op (0.13 -> 0.03 s at x64)
    markers = names_of(trace, [Kind.CPU_OP, Kind.USER_ANNOTATION], STEP_NAME)
    steps = (
        trace.lazy()
        .filter(
            pl.col(Col.KIND).is_in([Kind.CPU_OP, Kind.USER_ANNOTATION])
            & pl.col(Col.DUR_NS).is_not_null()
            & (pl.col(Col.NAME).is_in(markers) | pl.col(Col.STEP_NUM).is_not_null())
        )
        .select(pl.col(Col.NAME).cast(pl.String), Col.TS_NS, Col.DUR_NS, Col.STEP_NUM)
        .sort([Col.TS_NS, Col.NAME])
        .collect()
    )
    profiler = steps.filter(pl.col(Col.NAME).str.contains(STEP_NAME))
    if profiler.height:
        return tuple(
            StepWindow(
                int(re.match(STEP_NAME, name).group(1)),  # type: ignore[union-attr]
                name,
                int(ts),
                int(ts) + max(int(dur), 0),
            )
            for name, ts, dur, _ in profiler.iter_rows()
        )
    return tuple(
        StepWindow(int(num), f"{name}#{num}", int(ts), int(ts) + max(int(dur), 0))
        for name, ts, dur, num in steps.iter_rows()
    )


def step_windows(trace: Trace) -> tuple[StepWindow, ...]:
    """ProfilerStep windows, or one window over the whole trace (`work_span`) when the trace has no step
    markers (empty for a trace without work)."""
    markers = marker_windows(trace)
    if markers:
        return markers
    span = work_span(trace)
    return () if span is None else (StepWindow(None, WHOLE_TRACE, span[0], span[1]),)


MAX_STEPS = 1_000_000  # step numbers one --steps spec may name


def parse_steps(spec: str) -> tuple[int, ...]:
    """`"3"`, `"3-5"`, `"2,4"`, `"2,4-6"` -> sorted step numbers."""
    numbers: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        match = re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", part)
        if not match:
            raise UsageError(f"--steps: expected numbers and ranges like 3, 3-5 or 2,4; got {spec!r}")
        lo = int(match.group(1))
        hi = int(match.group(2)) if match.group(2) else lo
        if hi < lo:
            raise UsageError(f"--steps: range {part!r} goes backwards")
        if len(numbers) + hi - lo + 1 > MAX_STEPS:  # 1-10000000000 would fill the memory with numbers
            raise UsageError(f"--steps: more than {MAX_STEPS} steps asked for")
        numbers.update(range(lo, hi + 1))
    return tuple(sorted(numbers))


def select_windows(trace: Trace, spec: str | None) -> tuple[StepWindow, ...]:
    """The windows chosen by a `--steps` spec (all windows when `spec` is None)."""
    if spec is None:
        return step_windows(trace)
    wanted = parse_steps(spec)
    markers = marker_windows(trace)
    if not markers:
        raise UsageError("--steps: this trace has no ProfilerStep#N markers")
    asked = set(wanted)
    chosen = tuple(w for w in markers if w.step in asked)
    missing = sorted(asked - {w.step for w in chosen})
    if missing:
        have = sorted({w.step for w in markers if w.step is not None})
        raise UsageError(
            f"--steps: no step {_bounded(_ranges(missing))} in this trace (it has steps {_bounded(_ranges(have))})"
        )
    return chosen


MESSAGE_LIST = 200  # characters of a list of steps in a one-line error


def _bounded(text: str) -> str:
    """`text` cut to MESSAGE_LIST characters at a comma, saying how much was left out (a spec such as
    1-1000000 once listed a million missing steps in its error)."""
    if len(text) <= MESSAGE_LIST:
        return text
    cut = text.rfind(",", 0, MESSAGE_LIST)
    cut = cut if cut > 0 else MESSAGE_LIST
    return f"{text[:cut]}, ... ({text[cut:].count(',')} more)"


def _ranges(numbers: list[int]) -> str:
    """[1, 2, 3, 5] -> "1-3,5"."""
    groups: list[list[int]] = []
    for n in numbers:
        if groups and groups[-1][-1] == n - 1:
            groups[-1].append(n)
        else:
            groups.append([n])
    return ",".join(str(g[0]) if len(g) == 1 else f"{g[0]}-{g[-1]}" for g in groups)


def overlap_pairs(
    start: np.ndarray, end: np.ndarray, windows: tuple[StepWindow, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """Every (event index, window index) with a non-empty overlap, or with the event's start inside the window
    for zero-length events. Windows may overlap one another; cost is sorting plus the number of pairs."""
    import numpy as np  # only here: a command that selects no steps must not pay numpy's import

    if not windows or len(start) == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    w_start = np.array([w.start_ns for w in windows], dtype=np.int64)
    w_end = np.array([w.end_ns for w in windows], dtype=np.int64)
    order = np.argsort(w_start, kind="stable")
    ws, we = w_start[order], w_end[order]
    reach = np.maximum.accumulate(we)  # sorted: the first window whose running max end passes s
    lo = np.searchsorted(reach, start, side="right")
    point = end <= start
    hi = np.where(point, np.searchsorted(ws, start, side="right"), np.searchsorted(ws, end, side="left"))
    counts = np.maximum(hi - lo, 0)
    event = np.repeat(np.arange(len(start)), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    win = np.repeat(lo, counts) + offsets
    s, e = start[event], end[event]
    real = np.where(point[event], (ws[win] <= s) & (s < we[win]), (s < we[win]) & (e > ws[win]))
    return event[real], order[win[real]]
