"""Figures shared by `diff` and `ranks`: the analysed scope (ProfilerStep windows, or the whole trace), the GPU
activity and CPU operators inside it, GPU busy time over it, and kernel categories.

These functions are the one place where the comparisons meet the attribution analyses: step windows come from
`analysis.base.windows`, the GPU activity of a step from kernel-to-launch linking
(`analysis.base.linking`), operator GPU time from `analysis.attribution.ops`, busy time from
`analysis.attribution.steps`, kernel categories from `analysis.kernels.categories` (the one rule table).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from opscope.analysis.attribution import steps
from opscope.analysis.attribution.ops import OpOptions, op_stats
from opscope.analysis.base import intervals, windows
from opscope.analysis.base.linking import Linkage, selected_gpu
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace

CPU_SPAN_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION)
SHAPE = "shape"
_SET = "_busy_set"  # the group key of busy_ns_of_sets


@dataclass(frozen=True)
class Scope:
    """The part of a trace the figures cover: disjoint, sorted [start, end) windows, and how many steps they are
    (0: no step markers, one window over all activity)."""

    windows: tuple[tuple[int, int], ...]
    steps: int
    spec: str | None = (
        None  # a --steps spec naming every step (for `analysis.attribution.ops` / `linking`); None: whole
    )

    @property
    def length_ns(self) -> int:
        return sum(end - start for start, end in self.windows)

    def frame(self) -> pl.DataFrame:
        return pl.DataFrame(
            {intervals.START: [w[0] for w in self.windows], intervals.END: [w[1] for w in self.windows]},
            schema={intervals.START: pl.Int64, intervals.END: pl.Int64},
        )


def _kind_is(kinds: Sequence[str]) -> pl.Expr:
    return pl.col(Col.KIND).is_in(list(kinds))


def _name() -> pl.Expr:
    return pl.col(Col.NAME).cast(pl.String)


def activity_window(trace: Trace) -> tuple[int, int] | None:
    """[first start, last end] of the trace's work: the whole-trace window of every view
    (`analysis.base.windows.work_span`), also when the trace has step markers."""
    return windows.work_span(trace)


def trace_scope(trace: Trace, use_steps: bool) -> Scope:
    """The ProfilerStep#N windows (`analysis.base.windows`; merged where they overlap) when `use_steps` and the
    trace has them, else the whole-trace window."""
    if use_steps:
        markers = windows.marker_windows(trace)
        if markers:
            merged = intervals.merge(
                pl.DataFrame({"s": [w.start_ns for w in markers], "e": [w.end_ns for w in markers]}), "s", "e"
            )
            spec = ",".join(str(n) for n in sorted({w.step for w in markers if w.step is not None}))
            return Scope(windows=tuple(merged.iter_rows()), steps=len(markers), spec=spec)
    window = activity_window(trace)
    return Scope(windows=(window,) if window else (), steps=0)


def in_scope(frame: pl.DataFrame, scope: Scope, at: str) -> pl.DataFrame:
    """Rows whose time `at` falls inside a window of the scope. A whole-trace scope keeps every row."""
    if scope.steps == 0:
        return frame
    windows = scope.frame().rename({intervals.START: "_ws", intervals.END: "_we"})
    joined = frame.sort(at).join_asof(windows, left_on=at, right_on="_ws", strategy="backward")
    return joined.filter(pl.col("_we").is_not_null() & (pl.col(at) < pl.col("_we"))).drop("_ws", "_we")


def gpu_activity(trace: Trace, scope: Scope, linkage: Linkage, text: bool = True) -> pl.DataFrame:
    """GPU activity (kernels, copies, memsets) that belongs to the scope: columns name, kind, ts_ns, dur_ns,
    device. With step windows, an activity belongs to the step in which the launch call that queued it started
    (its own start when the launch is missing), as `analysis.base.linking.selected_gpu` decides; so work queued late
    in a step and run after it still counts for that step. `text=False`: name and kind stay categorical (for a
    caller that groups by them and makes text of the groups)."""
    gpu = selected_gpu(trace, linkage, steps=scope.spec) if scope.steps else linkage.gpu
    name, kind = (_name(), pl.col(Col.KIND).cast(pl.String)) if text else (pl.col(Col.NAME), pl.col(Col.KIND))
    return gpu.select(name.alias(Col.NAME), kind, Col.TS_NS, Col.DUR_NS, Col.DEVICE)


def cpu_ops(trace: Trace, scope: Scope) -> pl.DataFrame:
    """CPU operators and user annotations that start inside the scope, without the step markers (names matching
    `windows.STEP_NAME`, the one pattern; an op merely named "ProfilerStep#..." is an operator).

    Columns: name, shape (the `Input Dims` text, null when not recorded), dur_ns.
    """
    ops = (
        trace.lazy()
        .filter(
            _kind_is(CPU_SPAN_KINDS)
            & pl.col(Col.DUR_NS).is_not_null()
            & ~_name().str.contains(windows.STEP_NAME)
        )
        .select(
            _name().alias(Col.NAME),
            pl.col(Col.INPUT_DIMS).cast(pl.String).alias(SHAPE),
            Col.TS_NS,
            Col.DUR_NS,
        )
        .collect()
    )
    return in_scope(ops, scope, Col.TS_NS).drop(Col.TS_NS)


def op_table(trace: Trace, scope: Scope, by_shape: bool, linkage: Linkage) -> pl.DataFrame:
    """Per operator name (and Input Dims with `by_shape`, whitespace removed) from `analysis.attribution.ops`: calls,
    cpu_ns (inclusive CPU time) and gpu_ns (GPU time of the kernels launched inside it), over the operators
    starting in the scope and the GPU activity belonging to it. The ProfilerStep spans are left out.
    Columns: name, shape, calls, cpu_ns, gpu_ns, cpu_self_ns (`ops`' CPU self time)."""
    stats = op_stats(
        trace, OpOptions(by_shape=by_shape, top=0, steps=scope.spec if scope.steps else None), linkage
    )
    rows = [
        (r.name, r.input_dims if by_shape else None, r.calls, r.cpu_total_ns, r.gpu_total_ns, r.cpu_self_ns)
        for r in stats.rows
        if r.name != windows.STEP_ANY
    ]
    return pl.DataFrame(
        rows,
        schema={
            Col.NAME: pl.String,
            SHAPE: pl.String,
            "calls": pl.Int64,
            "cpu_ns": pl.Int64,
            "gpu_ns": pl.Int64,
            "cpu_self_ns": pl.Int64,
        },
        orient="row",
    )


def busy_ns(activity: pl.DataFrame, scope: Scope) -> tuple[int, int]:
    """(busy time summed over devices, number of devices) of GPU intervals: the busy time of `opscope steps`
    (`attribution.steps.busy_ns`, per device the union of its intervals cut to each window) over the scope's
    disjoint windows. `activity` needs ts_ns, dur_ns, device."""
    return busy_ns_of_sets({"": activity}, scope)[""], device_count(activity, scope)


def device_count(activity: pl.DataFrame, scope: Scope) -> int:
    """The devices `busy_ns` sums over: those of `activity`, none without windows."""
    return activity[Col.DEVICE].n_unique() if scope.windows and not activity.is_empty() else 0


def busy_ns_of_sets(sets: dict[str, pl.DataFrame], scope: Scope) -> dict[str, int]:
    """`busy_ns` of several sets of GPU intervals at once (one interval merge over all of them, the set's
    name a group key): {name: busy time summed over devices}; 0 for an empty set."""
    out = dict.fromkeys(sets, 0)
    parts = [
        frame.select(Col.DEVICE, Col.TS_NS, Col.DUR_NS).with_columns(pl.lit(name).alias(_SET))
        for name, frame in sets.items()
        if not frame.is_empty()
    ]
    if not parts or not scope.windows:
        return out
    spans = tuple(windows.StepWindow(None, windows.WHOLE_TRACE, lo, hi) for lo, hi in scope.windows)
    for (_, name, _), ns in steps.busy_ns(pl.concat(parts), spans, by=[_SET, Col.DEVICE]).items():
        out[name] += ns
    return out
