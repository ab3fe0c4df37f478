"""Figures shared by `diff` and `ranks`: the analysed scope (ProfilerStep windows, or the whole trace), the GPU
activity and CPU operators inside it, GPU busy time over it, and kernel categories.

These functions are adapters. The attribution work (steps, operators with linked GPU time, timeline
utilisation, kernel categories) owns the full versions of these figures; until it lands, each adapter computes
the minimal figure itself, as defined in docs/compare.md, and the comparisons only ever call the adapters, so
switching them over changes no caller.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from opscope.analysis import intervals
from opscope.model.schema import GPU_KINDS, Col, Kind
from opscope.model.trace import Trace

STEP_PREFIX = "ProfilerStep#"
CPU_SPAN_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION)
LAUNCH_KINDS = (Kind.RUNTIME, Kind.DRIVER)
# Kinds whose spans make up the activity window of a trace without step markers.
ACTIVITY_KINDS = (*GPU_KINDS, Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.RUNTIME, Kind.DRIVER, Kind.PYTHON)
COMMUNICATION = "communication"
SHAPE = "shape"
LAUNCH_NS = "launch_ns"

# Kernel categories, first match wins (lower-cased name, regex). Kept as data; the attribution work's category
# table replaces it when it lands.
CATEGORY_RULES: tuple[tuple[str, str], ...] = (
    (COMMUNICATION, r"nccl|rccl|allreduce|all_reduce|allgather|reducescatter|alltoall"),
    ("attention", r"flash|fmha|attention|attn|sdpa|_mha"),
    ("gemm", r"gemm|cublas|cutlass|xmma|cijk_|hipblaslt|matmul|_mm_|wgmma|^ampere_|^volta_|^turing_|^sm\d+_"),
    ("convolution", r"conv|cudnn|winograd|implicit_|fprop|dgrad|wgrad"),
    ("normalization", r"norm"),
    ("softmax", r"softmax"),
    ("reduction", r"reduce|triton_red|_sum_|argmax|argmin"),
    ("elementwise", r"elementwise|vectorized|unrolled|pointwise|triton_poi|copy_kernel|fill"),
)
CATEGORIES: tuple[str, ...] = (*(c for c, _ in CATEGORY_RULES), "memcpy", "memset", "other")


@dataclass(frozen=True)
class Scope:
    """The part of a trace the figures cover: disjoint, sorted [start, end) windows, and how many steps they are
    (0: no step markers, one window over all activity)."""

    windows: tuple[tuple[int, int], ...]
    steps: int

    @property
    def length_ns(self) -> int:
        return sum(end - start for start, end in self.windows)

    def frame(self) -> pl.DataFrame:
        return pl.DataFrame({intervals.START: [w[0] for w in self.windows],
                             intervals.END: [w[1] for w in self.windows]},
                            schema={intervals.START: pl.Int64, intervals.END: pl.Int64})


def _kind_is(kinds: Sequence[str]) -> pl.Expr:
    return pl.col(Col.KIND).cast(pl.String).is_in(list(kinds))


def _name() -> pl.Expr:
    return pl.col(Col.NAME).cast(pl.String)


def step_windows(trace: Trace) -> tuple[tuple[str, int, int], ...]:
    """CPU-side ProfilerStep#N spans (name, start_ns, end_ns), by start; one per step name."""
    frame = (
        trace.lazy()
        .filter(_kind_is(CPU_SPAN_KINDS) & _name().str.starts_with(STEP_PREFIX) & (pl.col(Col.DUR_NS) > 0))
        .select(_name().alias(Col.NAME), pl.col(Col.TS_NS), (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS)).alias("end"))
        .sort(Col.TS_NS, Col.NAME)
        .collect()
        .unique(subset=[Col.NAME], keep="first", maintain_order=True)
    )
    return tuple((r[0], int(r[1]), int(r[2])) for r in frame.iter_rows())


def activity_window(trace: Trace) -> tuple[int, int] | None:
    """[first start, last end] over kernels, copies, CPU ops, annotations, launches and Python spans."""
    row = (
        trace.lazy()
        .filter(_kind_is(ACTIVITY_KINDS) & pl.col(Col.DUR_NS).is_not_null() & (pl.col(Col.DUR_NS) >= 0))
        .select(pl.col(Col.TS_NS).min().alias("lo"), (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS)).max().alias("hi"))
        .collect()
        .row(0)
    )
    if row[0] is None or row[1] is None:
        return None
    return int(row[0]), int(row[1])


def trace_scope(trace: Trace, use_steps: bool) -> Scope:
    """Step windows (merged where they overlap) when `use_steps` and the trace has them, else the activity window."""
    if use_steps:
        steps = step_windows(trace)
        if steps:
            merged = intervals.merge(pl.DataFrame({"s": [s[1] for s in steps], "e": [s[2] for s in steps]}),
                                     "s", "e")
            return Scope(windows=tuple(merged.iter_rows()), steps=len(steps))
    window = activity_window(trace)
    return Scope(windows=(window,) if window else (), steps=0)


def in_scope(frame: pl.DataFrame, scope: Scope, at: str) -> pl.DataFrame:
    """Rows whose time `at` falls inside a window of the scope. A whole-trace scope keeps every row."""
    if scope.steps == 0:
        return frame
    windows = scope.frame().rename({intervals.START: "_ws", intervals.END: "_we"})
    joined = frame.sort(at).join_asof(windows, left_on=at, right_on="_ws", strategy="backward")
    return joined.filter(pl.col("_we").is_not_null() & (pl.col(at) < pl.col("_we"))).drop("_ws", "_we")


def gpu_activity(trace: Trace, scope: Scope) -> pl.DataFrame:
    """GPU activity (kernels, copies, memsets) that belongs to the scope.

    Columns: name, kind, ts_ns, dur_ns, device, launch_ns. With step windows, an activity belongs to the step in
    which the launch call that queued it (runtime/driver event with the same correlation id) started, else to
    the step its own start falls in; so work queued late in a step and run after it still counts for that step.
    """
    gpu = trace.gpu_events().select(
        _name().alias(Col.NAME), pl.col(Col.KIND).cast(pl.String), Col.TS_NS, Col.DUR_NS, Col.DEVICE,
        Col.CORRELATION,
    ).collect()
    if scope.steps == 0:
        return gpu.with_columns(pl.col(Col.TS_NS).alias(LAUNCH_NS)).drop(Col.CORRELATION)
    launches = (
        trace.lazy()
        .filter(_kind_is(LAUNCH_KINDS) & pl.col(Col.CORRELATION).is_not_null())
        .group_by(Col.CORRELATION)
        .agg(pl.col(Col.TS_NS).min().alias(LAUNCH_NS))
        .collect()
    )
    gpu = gpu.join(launches, on=Col.CORRELATION, how="left").with_columns(
        pl.col(LAUNCH_NS).fill_null(pl.col(Col.TS_NS))
    )
    return in_scope(gpu, scope, LAUNCH_NS).drop(Col.CORRELATION)


def cpu_ops(trace: Trace, scope: Scope) -> pl.DataFrame:
    """CPU operators and user annotations (not the ProfilerStep spans) that start inside the scope.

    Columns: name, shape (the `Input Dims` text, null when not recorded), dur_ns.
    """
    ops = (
        trace.lazy()
        .filter(_kind_is(CPU_SPAN_KINDS) & pl.col(Col.DUR_NS).is_not_null()
                & ~_name().str.starts_with(STEP_PREFIX))
        .select(_name().alias(Col.NAME), pl.col(Col.INPUT_DIMS).cast(pl.String).alias(SHAPE), Col.TS_NS, Col.DUR_NS)
        .collect()
    )
    return in_scope(ops, scope, Col.TS_NS).drop(Col.TS_NS)


def op_gpu_time(trace: Trace, scope: Scope, by_shape: bool) -> pl.DataFrame | None:
    """GPU time of the kernels each operator launched (name[, shape], gpu_ns), or None when unavailable.

    Needs kernel-to-operator linking, which the attribution work provides; until it lands this returns None and
    operator rows carry CPU time only.
    """
    del trace, scope, by_shape
    return None


def busy_ns(activity: pl.DataFrame, scope: Scope) -> tuple[int, int]:
    """(busy time summed over devices, number of devices) of GPU intervals, each device's intervals merged
    (overlaps count once) and cut to the scope's windows. `activity` needs ts_ns, dur_ns, device."""
    if activity.is_empty() or not scope.windows:
        return 0, 0
    spans = activity.select(
        pl.col(Col.DEVICE).fill_null(-1),
        pl.col(Col.TS_NS).alias(intervals.START),
        (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS)).alias(intervals.END),
    )
    windows = scope.frame()
    total = 0
    devices = spans[Col.DEVICE].unique().to_list()
    for device in devices:
        own = spans.filter(pl.col(Col.DEVICE) == device)
        total += intervals.intersection_ns(own, windows)
    return total, len(devices)


def category_expr() -> pl.Expr:
    """A polars expression giving each GPU activity row (name, kind) its category."""
    lower = pl.col(Col.NAME).cast(pl.String).str.to_lowercase()
    kind = pl.col(Col.KIND).cast(pl.String)
    expr = pl.when(kind == Kind.MEMCPY).then(pl.lit("memcpy")).when(kind == Kind.MEMSET).then(pl.lit("memset"))
    for category, pattern in CATEGORY_RULES:
        expr = expr.when(lower.str.contains(pattern)).then(pl.lit(category))
    return expr.otherwise(pl.lit("other"))


def is_communication(name: str) -> bool:
    """Whether a kernel name is a collective / point-to-point communication kernel (NCCL, RCCL)."""
    return re.search(CATEGORY_RULES[0][1], name.lower()) is not None
