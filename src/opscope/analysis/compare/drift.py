"""What drifted across the windows of one sampled run, when it started and how fast (docs/drift.md).

Pure: the windows' figures in, the changes out. For each watched figure (FIGURES) with a value in enough windows:

- moved: every one of the last R windows lies beyond the first B windows' median by more than the larger of
  `z` x their noise (standard deviation, at least 0.5% of their mean and the figure's own floor) and
  (`threshold` - 1) x their median: `history check`'s two policies (threshold 1.10, z 3) at once, so a change is
  both beyond the run-to-run noise and material. B = max(3, n // 4), R = max(2, n // 4) of n windows; fewer than
  MIN_WINDOWS windows: insufficient data.
- onset and rate: two models are fitted by least squares to the whole series, a trend (flat, then a straight line
  from a knot) and a step (one level, then another); the one with the smaller squared error, at every candidate
  start, gives the onset window (the first window that shows the change) and the rate: for a trend its slope per
  1,000 steps (window positions are their middle steps), for a step the size of the step.
- watched one by one too: the five heaviest operators (CPU self time per step) and kernels (GPU time per step)
  of the baseline windows, each at least 5% of the step time (`top_figures`).
- carried by: the operators (CPU self time per step; calls per step for the allocation figures) or kernels (GPU
  time per step) whose own change between the same baseline and recent windows has the figure's sign, largest
  first, at most three.
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from opscope.analysis.timeline.gap_causes import DATALOADER_PATTERN

MIN_WINDOWS = 6
MIN_SIGMA = 0.005  # the baseline's noise is at least 0.5% of its mean (history.policy)
CARRIERS = 3
TOP_EACH = 5  # operators and kernels watched one by one (`top_figures`)
MIN_TOP_SHARE = 0.05  # ... each at least this share of the baseline's step time
MAX_CANDIDATES = 400  # onsets tried per model (evenly spaced over longer runs)


@dataclass(frozen=True)
class Figure:
    id: str
    label: str
    metric: str  # the history's global metric it is read from ("" for a derived one)
    unit: str  # of the values drift reports
    scale: float  # stored value x scale = reported value
    floor: (
        float  # the least noise assumed, in reported units (a flat baseline of 0 is not infinitely precise)
    )
    carriers: (
        str  # "op_time", "op_calls", "kernel", "dataloader" or "" (a process figure: nothing in a trace)
    )
    lower_is_worse: bool = False


FIGURES: tuple[Figure, ...] = (
    # the median step of the window: one step slowed by something else on the machine does not move it
    Figure("step_time", "step time", "step_time_us", "ms", 1e-3, 0.001, "op_time"),
    Figure("gpu_busy", "GPU busy per step", "gpu_time_per_step_mean_us", "ms", 1e-3, 0.001, "kernel"),
    Figure(
        "gpu_utilization", "GPU utilisation", "utilization", "%", 100.0, 0.5, "kernel", lower_is_worse=True
    ),
    Figure(
        "host_outside_ops",
        "host time outside ops per step",
        "host_outside_ops_per_step_us",
        "ms",
        1e-3,
        0.001,
        "op_time",
    ),
    Figure(
        "dataloader_wait",
        "DataLoader wait per step",
        "dataloader_wait_per_step_us",
        "ms",
        1e-3,
        0.01,
        "dataloader",
    ),
    Figure("process_memory", "process memory at window end", "rss_end_bytes", "MB", 1e-6, 1.0, ""),
    Figure(
        "cuda_allocated",
        "CUDA memory allocated at window end",
        "cuda_allocated_end_bytes",
        "MB",
        1e-6,
        1.0,
        "",
    ),
    Figure(
        "cuda_reserved", "CUDA memory reserved at window end", "cuda_reserved_end_bytes", "MB", 1e-6, 1.0, ""
    ),
    Figure(
        "peak_allocated", "peak memory allocated in the window", "peak_allocated_bytes", "MB", 1e-6, 1.0, ""
    ),
    Figure("allocations", "allocations per step", "allocations_per_step", "per step", 1.0, 0.5, "op_calls"),
    Figure(
        "allocator_calls",
        "allocator calls per step",
        "allocator_calls_per_step",
        "per step",
        1.0,
        0.5,
        "op_calls",
    ),
    Figure("compiles", "torch.compile compilations per window", "", "per window", 1.0, 0.5, ""),
)
BY_ID = {f.id: f for f in FIGURES}
NOTES = {
    "": "a figure of the sampling process, not of the trace: no operator carries it",
    "process_memory": "the process's resident memory: a steady rise is a leak (a list, a cache, tensors kept "
    "alive); record with profile_memory (opscope run --profile-memory) and `opscope memory` on the last window "
    "names what is live at its end",
    "host_outside_ops": "time on the step's thread between operators: the script's own Python (a list walked "
    "every step, bookkeeping, logging); record with --with-stack and `opscope lines` on a window names the lines",
    "compiles": "torch.compile compiled again between windows (new shapes, failing guards): "
    "`opscope compile-check` on a window's trace names the compile ids; TORCH_LOGS=recompiles says why",
}


@dataclass(frozen=True)
class WindowInfo:
    index: int
    first_step: int | None
    last_step: int | None
    started_at: str | None
    elapsed_s: float | None
    trace: str | None
    history_run: int | None


@dataclass(frozen=True)
class WindowFigures:
    """One window's figures: `values` by the history's global metric name (stored units); `ops` and `kernels`:
    name -> per step (CPU self us, calls, GPU us) for the carriers."""

    info: WindowInfo
    values: Mapping[str, float]
    op_self_us: Mapping[str, float]
    op_calls: Mapping[str, float]
    kernel_us: Mapping[str, float]


@dataclass(frozen=True)
class Carrier:
    kind: str  # "op" or "kernel"
    name: str
    before: float
    after: float
    unit: str

    @property
    def change(self) -> float:
        return self.after - self.before


@dataclass(frozen=True)
class Change:
    figure: Figure
    direction: str  # "up" or "down"
    worse: bool
    baseline: float  # median of the baseline windows, reported units
    now: float  # median of the recent windows
    noise: float  # the baseline's noise (standard deviation, floored)
    onset_window: int
    onset_step: int | None
    model: str  # "trend" or "step"
    rate: float  # trend: per 1,000 steps (per window without step numbers); step: the step's size
    unit: str
    rate_per_window: float
    carried_by: tuple[Carrier, ...]
    note: str | None


@dataclass(frozen=True)
class Series:
    figure: Figure
    values: tuple[float | None, ...]  # per window, reported units
    moved: bool


@dataclass(frozen=True)
class Drift:
    windows: tuple[WindowInfo, ...]
    status: str  # "ok", "drift" or "insufficient_data"
    reason: str | None
    baseline_windows: int
    recent_windows: int
    threshold: float
    z: float
    series: tuple[Series, ...]
    changes: tuple[Change, ...]
    left_out: tuple[int, ...] = ()  # windows not judged: the first (warm-up) and any cut short (`_complete`)


def _values(windows: Sequence[WindowFigures], figure: Figure) -> list[float | None]:
    if figure.id.startswith(("op:", "kernel:")):
        kind, _, name = figure.id.partition(":")
        return [
            (w.op_self_us if kind == "op" else w.kernel_us).get(name, 0.0) * figure.scale for w in windows
        ]
    if figure.id == "compiles":  # compilations between the end of the previous window and the end of this one
        totals = [w.values.get("compiles_total") for w in windows]
        out: list[float | None] = [None]
        out += [b - a if a is not None and b is not None else None for a, b in itertools.pairwise(totals)]
        return out if any(v is not None for v in out) else [None] * len(windows)
    return [None if (v := w.values.get(figure.metric)) is None else float(v) * figure.scale for w in windows]


def _fit(x: np.ndarray, y: np.ndarray) -> tuple[str, int, float]:
    """(model, onset index, rate per unit of x or step size) of the better of the two models (module doc)."""
    n = len(y)
    best: tuple[float, str, int, float] = (float("inf"), "step", 0, 0.0)
    candidates = np.unique(np.linspace(0, n - 2, min(n - 1, MAX_CANDIDATES)).astype(int))
    for c in candidates:  # trend: flat up to window c, then a line (windows, not trace rows: a few hundred)
        h = np.maximum(x - x[c], 0.0)
        design = np.stack([np.ones(n), h], axis=1)
        coef, *_ = np.linalg.lstsq(design, y, rcond=None)
        sse = float(((design @ coef - y) ** 2).sum())
        if sse < best[0]:
            best = (sse, "trend", c + 1 if c > 0 else 0, float(coef[1]))
    for c in candidates + 1:  # step: windows from c on at another level
        before, after = y[:c], y[c:]
        sse = float(((before - before.mean()) ** 2).sum() + ((after - after.mean()) ** 2).sum())
        if sse < best[0] * 0.95:  # a step must fit clearly better than a trend (it has one parameter more)
            best = (sse, "step", c, float(after.mean() - before.mean()))
    return best[1], best[2], best[3]


def _carriers(
    windows: Sequence[WindowFigures], figure: Figure, base: slice, recent: slice, sign: float
) -> tuple[Carrier, ...]:
    source: list[Mapping[str, float]]
    kind, unit, scale = "op", "ms per step", 1e-3
    if figure.carriers in ("op_time", "dataloader"):
        source = [w.op_self_us for w in windows]
    elif figure.carriers == "op_calls":
        source, unit, scale = [w.op_calls for w in windows], "calls per step", 1.0
    elif figure.carriers == "kernel":
        source, kind = [w.kernel_us for w in windows], "kernel"
    else:
        return ()
    names = set().union(*(s.keys() for s in source))
    if figure.carriers == "dataloader":
        pattern = re.compile(DATALOADER_PATTERN)
        names = {n for n in names if pattern.search(n)}
    found = []
    for name in names:
        series = [s.get(name, 0.0) * scale for s in source]
        before, after = statistics.median(series[base]), statistics.median(series[recent])
        if (after - before) * sign > 0:
            found.append(Carrier(kind, name, before, after, unit))
    found.sort(key=lambda c: (-abs(c.change), c.name))
    return tuple(found[:CARRIERS])


def top_figures(windows: Sequence[WindowFigures]) -> tuple[Figure, ...]:
    """The operators (CPU self time per step) and kernels (GPU time per step) watched one by one: the TOP_EACH
    heaviest of each in the first windows (the baseline's median), each at least MIN_TOP_SHARE of the baseline's
    step time (smaller ones are noise at this grain; they still carry a moved figure)."""
    head = windows[: max(3, len(windows) // 4)]
    if not head:
        return ()
    step_us = statistics.median([w.values.get("step_time_us", 0.0) for w in head])
    out: list[Figure] = []
    for kind, source, label in (
        ("op", "op_self_us", "CPU self time per step"),
        ("kernel", "kernel_us", "GPU time per step"),
    ):
        maps = [getattr(w, source) for w in head]
        names = set().union(*(m.keys() for m in maps))
        ranked = sorted(
            ((statistics.median([m.get(n, 0.0) for m in maps]), n) for n in names),
            key=lambda t: (-t[0], t[1]),
        )
        for us, name in ranked[:TOP_EACH]:
            if step_us > 0 and us >= MIN_TOP_SHARE * step_us:
                out.append(Figure(f"{kind}:{name}", f"{name} ({label})", "", "ms", 1e-3, 0.001, ""))
    return tuple(out)


def drift(windows: Sequence[WindowFigures], threshold: float = 1.10, z: float = 3.0) -> Drift:
    """The drift of one sampled run's windows (in their order); see the module doc."""
    windows, left_out = _complete(windows)
    n = len(windows)
    infos = tuple(w.info for w in windows)
    b, r = max(3, n // 4), max(2, n // 4)
    if n < MIN_WINDOWS:
        series = tuple(
            Series(f, tuple(_values(windows, f)), False) for f in (*FIGURES, *top_figures(windows))
        )
        reason = (
            f"{n} window(s); drift needs at least {MIN_WINDOWS} (a baseline of 3 and 2 recent ones, apart)"
        )
        return Drift(infos, "insufficient_data", reason, b, r, threshold, z, _present(series), (), left_out)
    mid = np.array(
        [
            (
                (w.info.first_step + w.info.last_step) / 2
                if w.info.first_step is not None and w.info.last_step is not None
                else np.nan
            )
            for w in windows
        ],
        dtype=np.float64,
    )
    by_steps = not np.isnan(mid).any()
    out_series, changes = [], []
    for figure in (*FIGURES, *top_figures(windows)):
        values = _values(windows, figure)
        known = [i for i, v in enumerate(values) if v is not None]
        moved = False
        if len(known) >= MIN_WINDOWS:
            ys = np.array([values[i] for i in known], dtype=np.float64)
            xs = mid[known] if by_steps else np.array(known, dtype=np.float64)
            kb, kr = max(3, len(ys) // 4), max(2, len(ys) // 4)
            base, recent = ys[:kb], ys[-kr:]
            centre = float(np.median(base))
            noise = max(float(np.std(base, ddof=1)), MIN_SIGMA * abs(float(base.mean())), figure.floor)
            margin = max(z * noise, (threshold - 1.0) * abs(centre))
            up, down = bool((recent > centre + margin).all()), bool((recent < centre - margin).all())
            if up or down:
                moved = True
                model, onset, rate = _fit(xs, ys)
                sign = 1.0 if up else -1.0
                spacing = float(np.median(np.diff(xs))) if len(xs) > 1 else 1.0
                per_window = rate * spacing if model == "trend" else rate
                if model == "trend":
                    rate_out, unit = (
                        (rate * 1000.0, f"{figure.unit} per 1,000 steps")
                        if by_steps
                        else (rate, f"{figure.unit} per window")
                    )
                else:
                    rate_out, unit = rate, f"{figure.unit}, at once"
                onset_window = known[onset]
                changes.append(
                    Change(
                        figure=figure,
                        direction="up" if up else "down",
                        worse=up != figure.lower_is_worse,
                        baseline=centre,
                        now=float(np.median(recent)),
                        noise=noise,
                        onset_window=windows[onset_window].info.index,
                        onset_step=windows[onset_window].info.first_step,
                        model=model,
                        rate=rate_out,
                        unit=unit,
                        rate_per_window=per_window,
                        carried_by=_carriers(
                            [windows[i] for i in known],
                            figure,
                            slice(0, kb),
                            slice(len(ys) - kr, len(ys)),
                            sign,
                        ),
                        note=NOTES.get(figure.id)
                        or (NOTES[""] if not figure.carriers and ":" not in figure.id else None),
                    )
                )
        out_series.append(Series(figure, tuple(values), moved))
    return Drift(
        infos,
        "drift" if changes else "ok",
        None,
        b,
        r,
        threshold,
        z,
        _present(tuple(out_series)),
        tuple(changes),
        left_out,
    )


def _complete(windows: Sequence[WindowFigures]) -> tuple[Sequence[WindowFigures], tuple[int, ...]]:
    """The windows that recorded as many steps as the most any did (the run's last window is cut short when
    the script ends inside it; its figures are not comparable), and the indices of those left out; and the
    first window too where at least 8 are left: it holds the warm-up (first calls, caches, compilation)."""
    counts = [
        w.info.last_step - w.info.first_step + 1
        for w in windows
        if w.info.first_step is not None and w.info.last_step is not None
    ]
    full = max(counts, default=0)
    short = {
        w.info.index
        for w in windows
        if w.info.first_step is not None
        and w.info.last_step is not None
        and w.info.last_step - w.info.first_step + 1 < full
    }
    kept = [w for w in windows if w.info.index not in short]
    if len(kept) >= 8:
        short.add(kept[0].info.index)
        kept = kept[1:]
    return kept, tuple(sorted(short))


def _present(series: tuple[Series, ...]) -> tuple[Series, ...]:
    """The figures with a value other than 0 in at least one window (a CPU run has no GPU figures)."""
    return tuple(s for s in series if any(v is not None and v != 0 for v in s.values))
