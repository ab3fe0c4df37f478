"""The efficiency table: per op (and input shape), FLOPs and bytes per call from `families`, the GPU time of
the kernels launched inside its calls, and the achieved rates against the device's peaks from `peaks`.
Definitions: docs/efficiency.md.

Every selected GPU event counts in exactly one place (issue 28), so sized + unsized GPU time = the trace's GPU
time: an event launched inside a sized op call belongs to the outermost such call (`aten::linear` is listed,
the `aten::addmm` inside it is not: its kernels are in linear's time; an op that is sometimes nested is listed
with its other calls). Rows: per (op, shape), its sized calls that no sized call encloses (the top-level calls).
Unsized: the rest, per op or annotation that launched it directly, with the reason it is not sized; GPU work
launched outside every op is one row, `(no op)`.

`basis="cpu"` measures a trace without GPU activity (a CPU-only capture, `opscope demo` on a CPU) the same way
on the ops' CPU time: a row's time is the op's CPU total (the op and the ops inside it), an unsized op's its CPU
self time; there is no CPU in the peak table, so only `--peak-tflops` / `--peak-tbps` give percentages.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl

from opscope.analysis.attribution.ops import OpOptions, op_stats
from opscope.analysis.base.codetag import analysis_tag
from opscope.analysis.base.linking import (
    OP_KINDS,
    ROW,
    Linkage,
    event_columns,
    is_trace_link,
    link,
    once_per_link,
    selected_gpu,
)
from opscope.analysis.base.nesting import RowTree
from opscope.analysis.base.stages import stage
from opscope.analysis.base.stored import rows_frame, rows_of
from opscope.analysis.base.windows import STEP_ANY, fold_steps
from opscope.analysis.efficiency.families import COMPUTE_FAMILIES, Cost, Unsized
from opscope.analysis.efficiency.peaks import GpuPeaks, match_peaks
from opscope.analysis.efficiency.recorded_roofline import RecordedRoofline, recorded_roofline
from opscope.analysis.efficiency.sizing import LIST_DTYPE, Key, list_dtypes, size_call, size_ops
from opscope.analysis.kernels.gpu_arch import GpuIdentity, gpu_identity, named_model
from opscope.model.kinds import Kind
from opscope.model.schema import Col
from opscope.model.trace import Trace
from opscope.tables import Tabular

WINOGRAD = r"(?i)winograd"  # cuDNN / MIOpen kernels that compute a convolution by the Winograd transform
WINOGRAD_WHY = "which does fewer multiplications than the direct convolution the FLOPs count"
NO_OP = "(no op)"
OUTSIDE_REASON = "launched outside every operator and annotation"
ANNOTATION_REASON = "launched directly inside an annotation (record_function, NVTX range), not an operator"


@dataclass(frozen=True)
class _Part:
    """The top-level calls of one (op, shape): how many, and the GPU time of the kernels launched inside them."""

    name: str
    input_dims: str | None
    calls: int
    gpu_ns: int
    cpu_ns: int | None = None  # basis "cpu": the calls' CPU total


@dataclass(frozen=True)
class EfficiencyOptions:
    by_shape: bool = True
    top: int = 30  # rows to keep; 0 = all
    peak_tflops: float | None = None  # overrides the table's compute peak (every dtype)
    peak_tbps: float | None = None  # overrides the table's memory bandwidth
    devices: tuple[int, ...] | None = None
    streams: tuple[int, ...] | None = None
    basis: str = "gpu"  # "gpu": the time of the kernels each op launched; "cpu": the ops' own CPU time


@dataclass(frozen=True)
class EfficiencyRow:
    op: str
    shape: str | None  # Input Dims JSON without whitespace; None in per-op rows (by_shape off)
    dtype: str | None
    family: str
    calls: int
    gpu_time_us: float
    flops_per_call: float | None  # a mean over shapes in per-op rows
    bytes_per_call: float
    achieved_tflops: float | None
    achieved_tbps: float | None
    intensity_flops_per_byte: float | None
    peak_tflops: float | None
    peak_tbps: float | None
    pct_of_peak_compute: float | None  # percent (0-100)
    pct_of_peak_bandwidth: float | None
    bound: str | None  # "compute" | "memory" | None
    model: str  # "exact" | "estimate"
    note: str = ""
    cpu_time_us: float | None = None  # basis "cpu": the op's CPU total over its calls (gpu_time_us is then 0)

    @property
    def time_us(self) -> float:
        """The time the rates are measured over: GPU time, or CPU time on the "cpu" basis."""
        return self.gpu_time_us if self.cpu_time_us is None else self.cpu_time_us


@dataclass(frozen=True)
class UnsizedRow:
    op: str
    shape: str | None
    calls: int
    gpu_time_us: float
    reason: str
    cpu_time_us: float | None = None  # basis "cpu": the op's CPU self time over its calls

    @property
    def time_us(self) -> float:
        return self.gpu_time_us if self.cpu_time_us is None else self.cpu_time_us


@dataclass(frozen=True)
class Inherited:
    """An op (and shape) with no row of its own whose every call runs inside a sized op with a row, the same
    (op, shape) for all its calls, the nearest such: `ops --efficiency` shows that row's figures, marked
    `via` it (`aten::addmm` via `aten::linear`)."""

    op: str
    shape: str | None
    via_op: str
    via_shape: str | None


@dataclass(frozen=True)
class Efficiency(Tabular):
    path: str
    device: str | None  # the deviceProperties name the peaks were matched on
    peaks: GpuPeaks | None  # the matched table entry (None: unknown GPU)
    peak_tflops_override: float | None
    peak_tbps_override: float | None
    rows: tuple[EfficiencyRow, ...]
    unsized: tuple[UnsizedRow, ...]
    total_rows: int
    gpu_time_ns: int  # all selected GPU activity
    sized_gpu_time_ns: int  # of which in the rows (all rows, not only the top)
    unsized_gpu_time_ns: int
    options: EfficiencyOptions
    warnings: tuple[str, ...] = field(default=())
    inherited: tuple[Inherited, ...] = field(default=())  # over all rows, not only the --top ones
    gpu: GpuIdentity | None = field(default=None)  # the GPU, from the trace or inferred from kernel names
    basis: str = "gpu"  # see EfficiencyOptions.basis
    # basis "cpu": the self time of every CPU operator (the denominator), of which in the rows / the unsized list
    cpu_time_ns: int = 0
    sized_cpu_time_ns: int = 0
    unsized_cpu_time_ns: int = 0
    # roofline points the profiler measured (a rocprof-compute database), shown beside the modelled rows
    recorded: RecordedRoofline | None = field(default=None)

    @property
    def why_nothing_sized(self) -> str | None:
        """Why there is no row, in one sentence (the CLI's note and the report's panel say the same); None when
        there are rows."""
        if self.rows or self.total_rows:
            return None
        if self.basis == "cpu":
            return (
                "No op could be sized: the model needs CPU ops with record_shapes (Input Dims, Input type); "
                "without GPU activity it measures their CPU time."
            )
        if not self.gpu_time_ns:
            return (
                "No GPU kernels, memcpys or memsets in this selection: efficiency is GPU time against the "
                "GPU's peak, so there is nothing to measure."
            )
        ops = [u for u in self.unsized if u.reason not in (OUTSIDE_REASON, ANNOTATION_REASON)]
        if not ops:
            return (
                "No op could be sized: no operator launched GPU work (it was launched outside every operator, "
                "or directly inside annotations; Nsight Systems and rocprof traces carry no operators or shapes)."
            )
        if any(u.shape is not None for u in ops):
            return (
                "No op could be sized: the ops that launched GPU work have no model here; each one's reason "
                "is in the table."
            )
        return (
            "No op could be sized: the model needs CPU ops with record_shapes (Input Dims, Input type) that "
            "launched GPU work."
        )

    def _frame(self) -> pl.DataFrame:
        """The rows as a DataFrame (one column per field of `EfficiencyRow`)."""
        schema = {name: _POLARS_TYPES[kind] for name, kind in EfficiencyRow.__annotations__.items()}
        return pl.DataFrame([asdict(r) for r in self.rows], schema=schema, orient="row")

    def _table_title(self) -> str:
        return f"Efficiency: {self.path} ({self.device or 'device not recorded'})"


_POLARS_TYPES: dict[str, Any] = {
    "str": pl.String,
    "str | None": pl.String,
    "int": pl.Int64,
    "float": pl.Float64,
    "float | None": pl.Float64,
}


def _device(trace: Trace, options: EfficiencyOptions) -> tuple[str | None, GpuPeaks | None, list[str]]:
    """The device name the peaks are matched on, the matched entry, and warnings. A trace that names no model
    (no device description, or a generic name such as "AMD Radeon Graphics") takes the GPU inferred from its
    kernel names (analysis/kernels/gpu_arch.py): peaks only where that architecture is one product line
    (Volta: V100), said in a warning."""
    devices = (
        list(trace.meta.devices)
        if options.devices is None
        else [d for d in map(trace.meta.describe, options.devices) if d is not None]
    )
    names = list(dict.fromkeys(n for n in map(named_model, devices) if n))
    gpu = gpu_identity(trace)
    warnings = (
        [f"several GPU models in the trace ({', '.join(names)}): peaks of the first"]
        if len(names) > 1
        else []
    )
    if names:
        return names[0], match_peaks(names[0]), warnings
    if gpu.note:
        warnings.append(gpu.note)
    if gpu.arch is None:
        return None, None, warnings
    peaks = match_peaks(gpu.arch.peaks) if gpu.arch.peaks else None
    if peaks is not None:
        warnings.append(
            f"no device model in the trace: peak figures of {peaks.name} assumed for {gpu.arch.label} (the "
            f"architecture's data-centre part; pass --peak-tflops / --peak-tbps for another board)"
        )
    return gpu.label, peaks, warnings


def _scopes(trace: Trace, linked: Linkage) -> tuple[pl.DataFrame, RowTree]:
    """The op scopes (row, name, whitespace-free input_dims, input_types, concrete_inputs, list_dtype: the
    dtype of aten::cat's inputs, from their producer) and their nesting."""
    ops = linked.scopes.filter(pl.col(Col.KIND).is_in(list(OP_KINDS)))
    scopes = ops.select(
        ROW,
        pl.col(Col.NAME).cast(pl.String),
        pl.col(Col.KIND).cast(pl.String),
        _text(ops[Col.INPUT_DIMS], strip=True).alias(Col.INPUT_DIMS),
        "op_parent_row",
        Col.PID,
        Col.TID,
        Col.TS_NS,
        Col.DUR_NS,
    )
    # only the op rows' input types and concrete inputs, made text after they are found: casting the whole
    # table's columns held a string per event of a multi-GB trace
    text = (Col.INPUT_TYPES, Col.CONCRETE_INPUTS)
    found = event_columns(trace, scopes[ROW], OP_KINDS, text)
    scopes = scopes.with_columns(_text(f).alias(c) for f, c in zip(found, text, strict=True))
    # each aten::cat's dtype put in place by its row: a join would copy every column of the 1.5 M op rows of the
    # 1 GB benchmark trace (+90 MB there, at the efficiency table's peak) for a handful of cats, or none
    dtypes = list_dtypes(scopes)
    dtype = (
        pl.col(ROW).replace_strict(dtypes[ROW], dtypes[LIST_DTYPE], default=None, return_dtype=pl.String)
        if dtypes.height
        else pl.lit(None, dtype=pl.String)
    )
    scopes = scopes.with_columns(dtype.alias(LIST_DTYPE))
    return scopes, RowTree.of(scopes, ROW, "op_parent_row")


def _text(values: pl.Series, strip: bool = False) -> pl.Series | pl.Expr:
    """A categorical column as text (`strip`: without whitespace); one that is all null (a trace recorded
    without shapes or concrete inputs) as a null constant: text of 1.5 M nulls still holds 16 bytes a row."""
    if values.null_count() == values.len():
        return pl.lit(None, dtype=pl.String)
    text = values.cast(pl.String)
    return text.str.replace_all(r"\s+", "") if strip else text


def _key_ids(scopes: pl.DataFrame, dims: pl.Expr) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(row -> _key, _key -> name, input_dims): an integer id per distinct (op, shape), so the joins over
    (op, enclosing op) pairs (ops x depth rows) carry integers, not the text of names and shapes."""
    # one grouping of the rows by their text, not a grouping and then a join of every row back onto the groups
    # by that text again (x64: +150 MB at the efficiency table's peak)
    grouped = (
        scopes.select(ROW, Col.NAME, dims.alias(Col.INPUT_DIMS))
        .group_by(Col.NAME, Col.INPUT_DIMS)
        .agg(pl.col(ROW))
        .with_row_index("_key")
        .with_columns(pl.col("_key").cast(pl.Int64))
    )
    return grouped.select(ROW, "_key").explode(ROW), grouped.select("_key", Col.NAME, Col.INPUT_DIMS)


def _nested(
    keys: tuple[pl.DataFrame, pl.DataFrame], tree: RowTree, sized: pl.DataFrame
) -> set[tuple[str, str | None]]:
    """The (name, input_dims) whose every call has a sized op among its enclosing ops. `keys`: `_key_ids` by
    name and shape."""
    rows, ids = keys
    sized_ids = ids.join(sized, on=[Col.NAME, Col.INPUT_DIMS], nulls_equal=True, how="semi")["_key"]
    key = tree.aligned(rows, "_key")
    inside = tree.nearest(np.isin(key, sized_ids.to_numpy())) >= 0
    table = (
        pl.DataFrame({"_key": key, "_nested": inside})
        .group_by("_key")
        .agg(pl.col("_nested").all().alias("nested"))
        .filter(pl.col("nested"))
        .join(ids, on="_key")
    )
    return {(r[Col.NAME], r[Col.INPUT_DIMS]) for r in table.iter_rows(named=True)}


def _inherited(
    keys: tuple[pl.DataFrame, pl.DataFrame], tree: RowTree, rows: list[EfficiencyRow]
) -> tuple[Inherited, ...]:
    """Per (op, shape) without a row: its nearest enclosing op with a row, when every call has one and it is
    the same row for all (else none: figures of different ops are never mixed). `keys`: `_key_ids` of the
    rows' keys (by name and shape, or by name alone)."""
    keyed, ids = keys
    listed = pl.DataFrame(
        [(r.op, r.shape) for r in rows], schema={Col.NAME: pl.String, Col.INPUT_DIMS: pl.String}, orient="row"
    )
    listed_ids = ids.join(listed, on=[Col.NAME, Col.INPUT_DIMS], nulls_equal=True, how="semi")["_key"]
    key = tree.aligned(keyed, "_key")
    near = tree.nearest(np.isin(key, listed_ids.to_numpy()))
    via = pl.Series("_via", key[np.maximum(near, 0)], dtype=pl.Int64)
    per_key = (
        pl.DataFrame({"_key": key})
        .with_columns(pl.when(pl.Series(near >= 0)).then(via).alias("_via"))
        .filter(~pl.col("_key").is_in(listed_ids.implode()))
        .group_by("_key")
        .agg(
            pl.col("_via").is_not_null().all().alias("every"),
            pl.col("_via").n_unique().alias("vias"),
            pl.col("_via").first(),
        )
        .filter(pl.col("every") & (pl.col("vias") == 1))
        .join(ids, on="_key")
        .join(ids.rename({"_key": "_via", Col.NAME: "via_op", Col.INPUT_DIMS: "via_shape"}), on="_via")
        .sort(Col.NAME, Col.INPUT_DIMS, nulls_last=True)
    )
    return tuple(
        Inherited(name, shape, via, via_shape)
        for name, shape, via, via_shape in per_key.select(
            Col.NAME, Col.INPUT_DIMS, "via_op", "via_shape"
        ).iter_rows()
    )


def efficiency(
    trace: Trace, options: EfficiencyOptions | None = None, linkage: Linkage | None = None
) -> Efficiency:
    """FLOP/s, bytes/s and percent of peak per op (and shape) of `trace`: see the module doc. Computed once per
    trace, link table and options other than `top` (the advice rules and the report share it); `top` only cuts
    its rows."""
    opts = options or EfficiencyOptions()
    linked = linkage or link(trace)
    whole = once_per_link(
        trace,
        linked,
        f"efficiency:{replace(opts, top=0)!r}",
        lambda: _whole(trace, replace(opts, top=0), linked),
    )
    keep = slice(None) if opts.top <= 0 else slice(opts.top)
    return replace(
        whole,
        rows=whole.rows[keep],
        unsized=whole.unsized[keep],
        options=opts,
        recorded=recorded_roofline(trace),
    )


def _whole(trace: Trace, opts: EfficiencyOptions, linked: Linkage) -> Efficiency:
    """The whole table (`top` 0). That of the whole trace on the peak table (no device or stream selection, no
    peak given) over the trace's own link table is kept beside the trace cache (`Trace.persisted`): `advise`,
    `report`, `efficiency` and `ops --efficiency` read it, so only the first command on a trace computes it
    (issue 25: ~0.12 s of the x4 report). Its key's tag (`codetag.analysis_tag`) covers the code behind it and
    the peak table it was measured against, so a changed peak table is measured again."""
    if (
        opts.devices
        or opts.streams
        or opts.peak_tflops is not None
        or opts.peak_tbps is not None
        or opts.basis not in ("gpu", "cpu")
        or not is_trace_link(trace, linked)
    ):
        return _efficiency(trace, opts, linked)
    tag = analysis_tag()
    if tag is None:
        return _efficiency(trace, opts, linked)
    device, peaks, _ = _device(trace, opts)
    return trace.persisted(
        f"efficiency-{'shape' if opts.by_shape else 'op'}-{opts.basis}-{tag}",
        lambda: _efficiency(trace, opts, linked),
        _encode,
        lambda f: _decode(f, trace, opts, device, peaks),
    )


_FIGURES = (
    "total_rows",
    "gpu_time_ns",
    "sized_gpu_time_ns",
    "unsized_gpu_time_ns",
    "cpu_time_ns",
    "sized_cpu_time_ns",
    "unsized_cpu_time_ns",
)


def _encode(table: Efficiency) -> dict[str, pl.DataFrame]:
    return {
        "rows": rows_frame(EfficiencyRow, table.rows),
        "unsized": rows_frame(UnsizedRow, table.unsized),
        "inherited": rows_frame(Inherited, table.inherited),
        "figures": pl.DataFrame(
            [{k: getattr(table, k) for k in _FIGURES}], schema=dict.fromkeys(_FIGURES, pl.Int64)
        ),
        "warnings": pl.DataFrame({"warning": list(table.warnings)}, schema={"warning": pl.String}),
    }


def _decode(
    frames: dict[str, pl.DataFrame],
    trace: Trace,
    opts: EfficiencyOptions,
    device: str | None,
    peaks: GpuPeaks | None,
) -> Efficiency:
    (figures,) = frames["figures"].to_dicts()
    return Efficiency(
        path=trace.path,
        device=device,
        peaks=peaks,
        peak_tflops_override=None,
        peak_tbps_override=None,
        rows=rows_of(EfficiencyRow, frames["rows"]),
        unsized=rows_of(UnsizedRow, frames["unsized"]),
        options=opts,
        warnings=tuple(frames["warnings"]["warning"].to_list()),
        inherited=rows_of(Inherited, frames["inherited"]),
        gpu=gpu_identity(trace),
        basis=opts.basis,
        total_rows=int(figures["total_rows"]),
        gpu_time_ns=int(figures["gpu_time_ns"]),
        sized_gpu_time_ns=int(figures["sized_gpu_time_ns"]),
        unsized_gpu_time_ns=int(figures["unsized_gpu_time_ns"]),
        cpu_time_ns=int(figures["cpu_time_ns"]),
        sized_cpu_time_ns=int(figures["sized_cpu_time_ns"]),
        unsized_cpu_time_ns=int(figures["unsized_cpu_time_ns"]),
    )


def _efficiency(trace: Trace, opts: EfficiencyOptions, linked: Linkage) -> Efficiency:
    if opts.basis not in ("gpu", "cpu"):
        raise ValueError(f"efficiency basis must be gpu or cpu, not {opts.basis!r}")
    if opts.basis == "cpu":
        return _cpu_efficiency(trace, opts, linked)
    stage("efficiency: op scopes and their enclosing ops")
    scopes, tree = _scopes(trace, linked)
    stage("efficiency: sizing ops")
    costs = size_ops(scopes)
    sized_keys = _sized_keys(costs)
    stage("efficiency: GPU time per op and shape")
    events, top_level = _owners(trace, linked, opts, scopes, tree, sized_keys)
    device, peaks, warnings = _device(trace, opts)
    sized, winograd = _sized_parts(events, top_level, scopes, opts)
    rows = _rows(sized, opts, peaks, winograd)
    rows.sort(key=lambda x: (-x.gpu_time_us, x.op, x.shape or ""))
    unsized = _unsized(events, scopes, costs)
    if not opts.by_shape:
        unsized = _merge_unsized(unsized)
    unsized.sort(key=lambda x: (-x.gpu_time_us, x.op, x.shape or ""))
    stage("efficiency: figures inherited from enclosing ops")
    # the rows' own keys only (by name and shape, or by name): the other set of keys was computed for nothing
    dims = pl.col(Col.INPUT_DIMS) if opts.by_shape else pl.lit(None, dtype=pl.String)
    inherited = _inherited(_key_ids(scopes, dims), tree, rows)
    dur = events[Col.DUR_NS]
    owned = events["owner"].is_not_null()
    return Efficiency(
        path=trace.path,
        device=device,
        peaks=peaks,
        peak_tflops_override=opts.peak_tflops,
        peak_tbps_override=opts.peak_tbps,
        rows=tuple(rows),  # all of them: `efficiency` cuts them at `top`
        unsized=tuple(unsized),
        total_rows=len(rows),
        gpu_time_ns=int(dur.sum() or 0),
        sized_gpu_time_ns=int(dur.filter(owned).sum() or 0),
        unsized_gpu_time_ns=int(dur.filter(~owned).sum() or 0),
        options=opts,
        warnings=tuple(warnings) + trace.meta.warnings,
        inherited=inherited,
        gpu=gpu_identity(trace),
        basis=opts.basis,
    )


def _sized_keys(costs: dict[Key, Cost | Unsized]) -> pl.DataFrame:
    """The (name, input dims) keys that `size_ops` could size (a `Cost`), as a frame to join on."""
    return pl.DataFrame(
        [k for k, c in costs.items() if isinstance(c, Cost)],
        schema={Col.NAME: pl.String, Col.INPUT_DIMS: pl.String},
        orient="row",
    )


def _cpu_efficiency(trace: Trace, opts: EfficiencyOptions, linked: Linkage) -> Efficiency:
    """Basis "cpu" (a trace without GPU activity): every op's own CPU time, from `ops`' table."""
    cpu = True
    stage("efficiency: GPU time per op and shape")
    stats = op_stats(
        trace, OpOptions(by_shape=True, top=0, devices=opts.devices, streams=opts.streams), linked
    )
    stage("efficiency: op scopes and their enclosing ops")
    scopes, tree = _scopes(trace, linked)
    stage("efficiency: sizing ops")
    costs = size_ops(scopes)
    sized_keys = _sized_keys(costs)
    stage("efficiency: ops inside sized ops")
    shaped = _key_ids(scopes, pl.col(Col.INPUT_DIMS))
    nested = _nested(shaped, tree, sized_keys)

    device, peaks, warnings = _device(trace, opts)
    sized: list[tuple[_Part, Cost]] = []
    unsized: list[UnsizedRow] = []
    operators = [r for r in stats.rows if r.kind == Kind.CPU_OP and r.name != STEP_ANY]
    for r in stats.rows if not cpu else operators:
        key = (r.name, r.input_dims)
        if key in nested or (r.cpu_total_ns if cpu else r.gpu_total_ns) <= 0:
            continue
        cost = costs.get(key) or size_call(r.name, r.input_dims, None, None)
        if isinstance(cost, Cost):
            sized.append((_Part(r.name, r.input_dims, r.calls, r.gpu_total_ns, r.cpu_total_ns), cost))
        elif cpu and r.cpu_self_ns > 0:
            unsized.append(UnsizedRow(r.name, r.input_dims, r.calls, 0.0, cost.reason, r.cpu_self_ns / 1e3))
        elif not cpu and r.kind == Kind.CPU_OP and r.gpu_self_ns > 0:
            unsized.append(UnsizedRow(r.name, r.input_dims, r.calls, r.gpu_total_ns / 1e3, cost.reason))
    rows = _rows(sized, opts, peaks, set())
    rows.sort(key=lambda x: (-x.time_us, x.op, x.shape or ""))
    if not opts.by_shape:
        unsized = _merge_unsized(unsized)
    unsized.sort(key=lambda x: (-x.time_us, x.op, x.shape or ""))
    sized_ns = sum(r.gpu_ns for r, _ in sized)
    stage("efficiency: figures inherited from enclosing ops")
    by_op = shaped if opts.by_shape else _key_ids(scopes, pl.lit(None, dtype=pl.String))
    inherited = _inherited(by_op, tree, rows)
    return Efficiency(
        path=trace.path,
        device=device,
        peaks=peaks,
        peak_tflops_override=opts.peak_tflops,
        peak_tbps_override=opts.peak_tbps,
        rows=tuple(rows),  # all of them: `efficiency` cuts them at `top`
        unsized=tuple(unsized),
        total_rows=len(rows),
        gpu_time_ns=stats.gpu_time_ns,
        sized_gpu_time_ns=sized_ns,
        unsized_gpu_time_ns=sum(round(u.gpu_time_us * 1e3) for u in unsized),
        options=opts,
        warnings=tuple(warnings) + stats.warnings,
        inherited=inherited,
        gpu=gpu_identity(trace),
        basis=opts.basis,
        cpu_time_ns=sum(r.cpu_self_ns for r in operators) if cpu else 0,
        sized_cpu_time_ns=sum(r.cpu_ns or 0 for r, _ in sized) if cpu else 0,
        unsized_cpu_time_ns=sum(round((u.cpu_time_us or 0.0) * 1e3) for u in unsized),
    )


def _owners(
    trace: Trace,
    linked: Linkage,
    opts: EfficiencyOptions,
    scopes: pl.DataFrame,
    tree: RowTree,
    sized_keys: pl.DataFrame,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(events, top_level). events: every selected GPU event (name, dur_ns, op_row: its launch's innermost op or
    annotation) with `owner`, the outermost sized op instance enclosing its launch (null: none), so that each
    event counts in exactly one row, sized or unsized (issue 28: sized + unsized = GPU time). top_level: the
    rows of the sized op instances that no sized instance encloses (the calls of the rows)."""
    sized = (  # none where nothing could be sized (a trace recorded without shapes): no pass over the ops' text
        scopes.join(sized_keys, on=[Col.NAME, Col.INPUT_DIMS], how="semi", nulls_equal=True)[ROW]
        if sized_keys.height
        else scopes[ROW].clear()
    )
    is_sized = tree.flags(sized)
    inside = is_sized & (tree.nearest(is_sized) >= 0)  # a sized op inside another sized op
    top_level = scopes.filter(pl.col(ROW).is_in(pl.Series(tree.rows[is_sized & ~inside]).implode()))
    outer = tree.outermost(is_sized)
    owner = pl.DataFrame(
        {"op_row": tree.rows[outer >= 0], "owner": tree.rows[outer[outer >= 0]]},
        schema={"op_row": scopes.schema[ROW], "owner": scopes.schema[ROW]},
    )
    events = (  # the kernel names stay categorical: only the sized calls' are read, as text (`_sized_parts`)
        selected_gpu(trace, linked, opts.devices, opts.streams)
        .select(Col.NAME, Col.DUR_NS, "op_row")
        .join(owner, on="op_row", how="left")
    )
    return events, top_level


def _sized_parts(
    events: pl.DataFrame, top_level: pl.DataFrame, scopes: pl.DataFrame, opts: EfficiencyOptions
) -> tuple[list[tuple[_Part, Cost]], set[tuple[str, str | None]]]:
    """Per (op, shape) with GPU time: its top-level calls, their GPU time and their cost (sized over those calls
    only); and the (op, shape) whose kernels include a Winograd convolution (fewer multiplications than the
    direct convolution the FLOPs count)."""
    per_call = (
        events.filter(pl.col("owner").is_not_null())
        .group_by("owner")
        .agg(
            pl.col(Col.DUR_NS).sum().alias("gpu_ns"),
            pl.col(Col.NAME).cast(pl.String).str.contains(WINOGRAD).any().alias("winograd"),
        )
    )
    calls = top_level.join(per_call.rename({"owner": ROW}), on=ROW, how="left").with_columns(
        pl.col("gpu_ns").fill_null(0), pl.col("winograd").fill_null(False)
    )
    if opts.devices or opts.streams:  # only the calls that launched selected GPU work, as `ops` counts them
        calls = calls.filter(pl.col("gpu_ns") > 0)
    keys = [Col.NAME, Col.INPUT_DIMS]
    per_key = (
        calls.group_by(keys)
        .agg(pl.len().alias("calls"), pl.col("gpu_ns").sum(), pl.col("winograd").any())
        .filter(pl.col("gpu_ns") > 0)
    )
    costs = size_ops(scopes.join(calls.select(ROW), on=ROW, how="semi"))
    parts: list[tuple[_Part, Cost]] = []
    winograd: set[tuple[str, str | None]] = set()
    for name, dims, n, gpu_ns, wino in per_key.select(*keys, "calls", "gpu_ns", "winograd").iter_rows():
        cost = costs.get((name, dims))
        if not isinstance(cost, Cost):  # every call of a sized (op, shape) is sized
            continue
        parts.append((_Part(name, dims, int(n), int(gpu_ns)), cost))
        if wino:
            winograd.add((name, dims if opts.by_shape else None))
    return parts, winograd


def _unsized(
    events: pl.DataFrame, scopes: pl.DataFrame, costs: dict[tuple[str, str | None], Cost | Unsized]
) -> list[UnsizedRow]:
    """GPU time that no sized op encloses, per op (and shape) that launched it directly (its innermost op or
    annotation), with the reason it is not sized; GPU work launched outside every op is one row, `(no op)`."""
    loose = events.filter(pl.col("owner").is_null())
    launched = loose.filter(pl.col("op_row").is_not_null()).select("op_row", Col.DUR_NS)
    keyed = scopes.select(pl.col(ROW).alias("op_row"), Col.NAME, Col.INPUT_DIMS, Col.KIND)
    # the step names folded on the launching ops only, after the join, not on every op of the trace
    per_key = (
        fold_steps(launched.join(keyed, on="op_row", how="inner"))
        .group_by(Col.NAME, Col.INPUT_DIMS, Col.KIND)
        .agg(pl.col("op_row").n_unique().alias("calls"), pl.col(Col.DUR_NS).sum().alias("gpu_ns"))
        .filter(pl.col("gpu_ns") > 0)
    )
    out = []
    for name, dims, kind, calls, gpu_ns in per_key.iter_rows():
        if kind != Kind.CPU_OP:
            reason = ANNOTATION_REASON
        else:
            cost = costs.get((name, dims)) or size_call(name, dims, None, None)
            reason = cost.reason if isinstance(cost, Unsized) else "nested in no sized call"
        out.append(UnsizedRow(name, dims, int(calls), gpu_ns / 1e3, reason))
    outside = loose.filter(pl.col("op_row").is_null())
    outside_ns = int(outside[Col.DUR_NS].sum() or 0)
    if outside_ns > 0:
        out.append(UnsizedRow(NO_OP, None, outside.height, outside_ns / 1e3, OUTSIDE_REASON))
    return out


def _merge_unsized(rows: list[UnsizedRow]) -> list[UnsizedRow]:
    merged: dict[str, UnsizedRow] = {}
    for u in rows:
        prev = merged.get(u.op)
        merged[u.op] = UnsizedRow(
            u.op,
            None,
            u.calls + (prev.calls if prev else 0),
            u.gpu_time_us + (prev.gpu_time_us if prev else 0.0),
            prev.reason if prev else u.reason,
            None if u.cpu_time_us is None else u.cpu_time_us + ((prev.cpu_time_us or 0.0) if prev else 0.0),
        )
    return list(merged.values())


def _rows(
    sized: list[tuple[_Part, Cost]],
    opts: EfficiencyOptions,
    peaks: GpuPeaks | None,
    winograd: set[tuple[str, str | None]],
) -> list[EfficiencyRow]:
    groups: dict[tuple[str, str | None], list[tuple[_Part, Cost]]] = {}
    for r, c in sized:
        groups.setdefault((r.name, r.input_dims if opts.by_shape else None), []).append((r, c))
    out = []
    for (name, shape), members in groups.items():
        calls = sum(r.calls for r, _ in members)
        gpu_ns = sum(r.gpu_ns for r, _ in members)
        cpu_ns = sum(r.cpu_ns or 0 for r, _ in members) if opts.basis == "cpu" else None
        costs = [c for _, c in members]
        dtypes = {c.dtype for c in costs}
        flops = (
            None
            if any(c.flops is None for c in costs)
            else sum(c.flops * r.calls for r, c in members if c.flops is not None)
        )
        nbytes = sum(c.bytes * r.calls for r, c in members)
        out.append(
            _row(
                name,
                shape,
                dtypes.pop() if len(dtypes) == 1 else "mixed",
                costs[0].family,
                calls,
                gpu_ns,
                flops,
                nbytes,
                "estimate" if any(c.model == "estimate" for c in costs) else "exact",
                costs[0].note,
                opts,
                peaks,
                cpu_ns,
                (name, shape) in winograd,
            )
        )
    return out


def _row(
    name: str,
    shape: str | None,
    dtype: str,
    family: str,
    calls: int,
    gpu_ns: int,
    flops: float | None,
    nbytes: float,
    model: str,
    note: str,
    opts: EfficiencyOptions,
    peaks: GpuPeaks | None,
    cpu_ns: int | None = None,
    winograd: bool = False,
) -> EfficiencyRow:
    """One row from totals over its calls: achieved = total FLOPs (bytes) / GPU time (the CPU time `cpu_ns` on
    the "cpu" basis). `winograd`: the row's kernels include a Winograd convolution."""
    seconds = (gpu_ns if cpu_ns is None else cpu_ns) / 1e9
    compute = family in COMPUTE_FAMILIES and flops is not None
    peak_tflops = opts.peak_tflops or (peaks.tflops_for(dtype) if peaks else None)
    peak_tflops = peak_tflops if compute else None
    peak_tbps = opts.peak_tbps or (peaks.bandwidth_tbps if peaks else None)
    tflops = flops / seconds / 1e12 if compute and flops is not None else None
    tbps = nbytes / seconds / 1e12
    intensity = flops / nbytes if compute and flops is not None and nbytes else None
    if not compute:
        bound: str | None = "memory"
    elif intensity is not None and peak_tflops and peak_tbps:
        bound = "compute" if intensity >= peak_tflops / peak_tbps else "memory"
    else:
        bound = None
    pct_compute = 100 * tflops / peak_tflops if tflops is not None and peak_tflops else None
    if pct_compute is not None and pct_compute > 100:
        if winograd:  # the cause is the algorithm, not the estimate (issue 28)
            why = f"above 100% of peak: its kernels use Winograd convolution, {WINOGRAD_WHY}"
        elif model == "estimate":
            why = "above 100% of peak, so the estimate's assumption does not hold for this op"
        else:
            why = ""
        note = f"{note}; {why}" if note and why else note or why
    return EfficiencyRow(
        op=name,
        shape=shape,
        dtype=dtype,
        family=family,
        calls=calls,
        gpu_time_us=gpu_ns / 1e3,
        flops_per_call=flops / calls if flops is not None else None,
        bytes_per_call=nbytes / calls,
        achieved_tflops=tflops,
        achieved_tbps=tbps,
        intensity_flops_per_byte=intensity,
        peak_tflops=peak_tflops,
        peak_tbps=peak_tbps,
        pct_of_peak_compute=pct_compute,
        pct_of_peak_bandwidth=100 * tbps / peak_tbps if peak_tbps else None,
        bound=bound,
        model=model,
        note=note,
        cpu_time_us=None if cpu_ns is None else cpu_ns / 1e3,
    )
