"""The same model on two GPUs (or two vendors): operator by operator, which GPU wins, and why.

Kernels do not match across vendors (`Cijk_...` on an MI300X is `cutlass_...` on an H100), operators do. Each
side is summarised once (`hardware_side`, pure over a trace): every GPU event goes to the innermost operator
that launched it, keyed by the operator's name and input shapes, as `ops --by-shape` keys its rows, so a row's
GPU time is that table's GPU self time exactly; events launched outside every operator go to a row per kernel
category ("(no op): gemm"). Vendor-specific operators that do the same job have one name here (`ALIASES`:
`aten::cudnn_convolution` and `aten::miopen_convolution` are both "convolution", keyed by their input and
weight shapes, since MIOpen's call also lists the bias).

Rows are matched in four passes (`hardware_diff`), none dropping work:
1. operator and shapes equal on both sides;
2. what is left of an operator, its shapes differing, matched by name ("shapes differ");
3. the "(no op)" rows by kernel category;
4. what is still without a partner (another framework's operators: aten ops against XLA's HLO ops; another
   decomposition; the "(no op)" rows of a category the other side runs inside operators) summed by the
   category of the kernels that carry most of its time ("(other work): gemm").
What still has no partner is listed on its side alone. Coverage = the GPU time in matched rows / the side's GPU
time. Each row carries, per side: GPU time, kernels, calls, the library of the kernels that carry most of its
time (`kernel_facts`), and where the efficiency model sizes the operator, its achieved TFLOP/s or TB/s and the
percent of that GPU's own peak. Definitions: docs/compare.md ("Across hardware").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Final

import polars as pl

from opscope.analysis.attribution.ops import OpOptions, op_stats
from opscope.analysis.base.linking import link
from opscope.analysis.efficiency.table import EfficiencyOptions, efficiency
from opscope.analysis.kernels.categories import categories_of
from opscope.analysis.kernels.gpu_arch import gpu_identity
from opscope.analysis.kernels.kernel_facts import facts_of
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace

# vendor-specific operator -> (the name both sides share, how many leading inputs key its shape)
ALIASES: Final[dict[str, tuple[str, int]]] = {
    "aten::cudnn_convolution": ("convolution", 2),
    "aten::miopen_convolution": ("convolution", 2),
    "aten::miopen_depthwise_convolution": ("convolution", 2),
    "aten::cudnn_convolution_transpose": ("convolution_transpose", 2),
    "aten::miopen_convolution_transpose": ("convolution_transpose", 2),
    "aten::cudnn_batch_norm": ("batch_norm", 1),
    "aten::miopen_batch_norm": ("batch_norm", 1),
    "aten::cudnn_batch_norm_backward": ("batch_norm_backward", 2),
    "aten::miopen_batch_norm_backward": ("batch_norm_backward", 2),
    "aten::_cudnn_rnn": ("rnn", 1),
    "aten::miopen_rnn": ("rnn", 1),
    "aten::_flash_attention_forward": ("attention_forward", 3),
    "aten::_efficient_attention_forward": ("attention_forward", 3),
    "aten::_scaled_dot_product_flash_attention": ("scaled_dot_product_attention", 3),
    "aten::_scaled_dot_product_efficient_attention": ("scaled_dot_product_attention", 3),
    "aten::_scaled_dot_product_cudnn_attention": ("scaled_dot_product_attention", 3),
    "aten::_flash_attention_backward": ("attention_backward", 4),
    "aten::_efficient_attention_backward": ("attention_backward", 4),
}
NO_OP: Final = "(no op)"
OTHER_OPS: Final = "(other work)"
EXACT, BY_NAME, BY_CATEGORY = "op and shapes", "op, shapes differ", "kernel category"
BY_KERNELS: Final = "ops by kernel category"
VERDICT_ROWS: Final = 5


@dataclass(frozen=True)
class HardwareSide:
    """One trace, summarised for the comparison (small: one row per operator and shapes)."""

    path: str
    device: str  # the GPU's label ("NVIDIA H100 80GB HBM3 (Hopper, sm90)")
    arch: str | None  # "sm90", "gfx942"
    gpu_ns: int  # all GPU activity
    # key, shape, raw_name, raw_shape, no_op, gpu_ns, kernels, calls, library, kernel_arch, align1, tflops, tbps,
    # pct_compute, pct_bandwidth, bound
    rows: pl.DataFrame


@dataclass(frozen=True)
class SideFigures:
    gpu_ns: int
    kernels: int
    calls: int | None
    library: str | None
    kernel_arch: str | None
    align1: bool
    tflops: float | None
    tbps: float | None
    pct_of_peak: float | None  # of the bound side's peak (compute or bandwidth)
    bound: str | None


@dataclass(frozen=True)
class HardwareRow:
    key: str  # the shared operator name, or "(no op): category"
    shape: str | None
    match: str  # EXACT | BY_NAME | BY_CATEGORY | "" (one side only)
    base: SideFigures | None
    new: SideFigures | None

    @property
    def delta_ns(self) -> int:
        return (self.new.gpu_ns if self.new else 0) - (self.base.gpu_ns if self.base else 0)

    @property
    def ratio(self) -> float | None:
        """NEW / BASE GPU time (above 1: NEW is slower on it)."""
        if self.base is None or self.new is None or not self.base.gpu_ns:
            return None
        return self.new.gpu_ns / self.base.gpu_ns


@dataclass(frozen=True)
class HardwareDiff:
    base_device: str
    new_device: str
    base_gpu_ns: int
    new_gpu_ns: int
    rows: tuple[HardwareRow, ...]  # by |delta|, largest first
    coverage_base: float
    coverage_new: float
    verdict: tuple[str, ...]
    library_notes: tuple[str, ...] = field(default=())
    # what the slower side would save at the faster side's percent of its own peak (rows the model sizes)
    projections: tuple[str, ...] = field(default=())


def _shape(raw: str | None, keep: int | None) -> str | None:
    if raw is None or keep is None:
        return raw
    try:
        inputs = json.loads(raw)
    except ValueError:
        return raw
    return json.dumps(inputs[:keep], separators=(",", ":")) if isinstance(inputs, list) else raw


def _older(kernel: str | None, gpu: str | None) -> bool:
    """A kernel built for an older architecture than the GPU's (cutlass_75 on sm90): both NVIDIA "smNN"."""
    if not kernel or not gpu or not kernel.startswith("sm") or not gpu.startswith("sm"):
        return False
    try:
        return int(kernel[2:].rstrip("a")) < int(gpu[2:].rstrip("a"))
    except ValueError:
        return False


def hardware_side(trace: Trace) -> HardwareSide:
    """`trace` summarised per operator and shapes (and per kernel category outside every operator)."""
    linked = link(trace)
    identity = gpu_identity(trace)
    gpu = linked.gpu.select(
        pl.col(Col.NAME).cast(pl.String).alias("kernel"),
        pl.col(Col.KIND).cast(pl.String).alias("kind"),
        Col.DUR_NS,
        "op_row",
        pl.col("op_name").cast(pl.String),
    )
    shapes = linked.scopes.select(  # whitespace dropped, as `ops --by-shape` keys its rows
        pl.col("row").alias("op_row"), pl.col(Col.INPUT_DIMS).cast(pl.String).str.replace_all(r"\s+", "")
    )
    gpu = gpu.join(shapes, on="op_row", how="left")
    names = gpu["kernel"].unique().drop_nulls().to_list()
    facts = facts_of(names)
    categories = categories_of((n, Kind.KERNEL) for n in names)
    kernels = pl.DataFrame(
        {
            "kernel": names,
            "library": [facts[n].library or facts[n].family for n in names],
            "kernel_arch": [facts[n].arch for n in names],
            "align1": ["align1" in n for n in names],
            "category": [categories[(n, Kind.KERNEL)] for n in names],
        },
        schema={
            "kernel": pl.String,
            "library": pl.String,
            "kernel_arch": pl.String,
            "align1": pl.Boolean,
            "category": pl.String,
        },
    )
    gpu = gpu.join(kernels, on="kernel", how="left").with_columns(
        pl.when(pl.col("kind") == Kind.KERNEL)
        .then(pl.col("category"))
        .otherwise(pl.col("kind"))
        .alias("category"),
        pl.col("op_row").is_null().alias("no_op"),
    )
    # the operator rows: keyed by name and shapes as `ops --by-shape`; the others by kernel category
    gpu = gpu.with_columns(
        pl.when(pl.col("no_op"))
        .then(pl.lit(NO_OP + ": ") + pl.col("category"))
        .otherwise(pl.col("op_name"))
        .alias("raw_name"),
        pl.when(pl.col("no_op"))
        .then(pl.lit(None, dtype=pl.String))
        .otherwise(pl.col(Col.INPUT_DIMS))
        .alias("raw_shape"),
    )
    keys = ["raw_name", "raw_shape", "no_op"]
    totals = gpu.group_by(keys).agg(pl.col(Col.DUR_NS).sum().alias("gpu_ns"), pl.len().alias("kernels"))
    # the library whose kernels carry most of each row's time (ties: by name, for one answer)
    carriers = (
        gpu.group_by([*keys, "library", "kernel_arch", "align1", "category"])
        .agg(pl.col(Col.DUR_NS).sum().alias("t"))
        .sort(["t", "library"], descending=[True, False], nulls_last=True)
        .group_by(keys, maintain_order=True)
        .first()
        .drop("t")
    )
    rows = totals.join(carriers, on=keys, how="left", nulls_equal=True)
    ops = op_stats(trace, OpOptions(by_shape=True, top=0), linked)
    calls = pl.DataFrame(
        {
            "raw_name": [r.name for r in ops.rows],
            "raw_shape": [r.input_dims for r in ops.rows],
            "calls": [r.calls for r in ops.rows],
        },
        schema={"raw_name": pl.String, "raw_shape": pl.String, "calls": pl.Int64},
    ).unique(["raw_name", "raw_shape"])
    sized = efficiency(trace, EfficiencyOptions(by_shape=True, top=0), linked).rows
    rates = pl.DataFrame(
        {
            "raw_name": [r.op for r in sized],
            "raw_shape": [r.shape for r in sized],
            "tflops": [r.achieved_tflops for r in sized],
            "tbps": [r.achieved_tbps for r in sized],
            "pct_compute": [r.pct_of_peak_compute for r in sized],
            "pct_bandwidth": [r.pct_of_peak_bandwidth for r in sized],
            "bound": [r.bound for r in sized],
        },
        schema={
            "raw_name": pl.String,
            "raw_shape": pl.String,
            "tflops": pl.Float64,
            "tbps": pl.Float64,
            "pct_compute": pl.Float64,
            "pct_bandwidth": pl.Float64,
            "bound": pl.String,
        },
    ).unique(["raw_name", "raw_shape"])
    rows = rows.join(calls, on=["raw_name", "raw_shape"], how="left", nulls_equal=True).join(
        rates, on=["raw_name", "raw_shape"], how="left", nulls_equal=True
    )
    aliases = {name: alias for name in rows["raw_name"].unique().to_list() if (alias := ALIASES.get(name))}
    rows = rows.with_columns(
        pl.col("raw_name").replace({k: v[0] for k, v in aliases.items()}).alias("key"),
        pl.struct("raw_name", "raw_shape")
        .map_elements(
            lambda r: _shape(r["raw_shape"], aliases[r["raw_name"]][1] if r["raw_name"] in aliases else None),
            return_dtype=pl.String,
        )
        .alias("shape"),
    )
    return HardwareSide(
        path=trace.path,
        device=identity.label,
        arch=identity.arch.key if identity.arch else None,
        gpu_ns=int(gpu[Col.DUR_NS].sum() or 0),
        rows=rows,
    )


def _figures(rows: pl.DataFrame) -> SideFigures:
    """One side of a matched row (several source rows summed: time, kernels, calls; the rest from the one that
    carries most time; rates only where a single sized row is the whole of it)."""
    first = rows.sort("gpu_ns", descending=True).row(0, named=True)
    single = rows.height == 1
    pct = None
    if single and first["bound"] == "compute":
        pct = first["pct_compute"]
    elif single and first["bound"] == "memory":
        pct = first["pct_bandwidth"]
    calls = rows["calls"].drop_nulls()
    return SideFigures(
        gpu_ns=int(rows["gpu_ns"].sum()),
        kernels=int(rows["kernels"].sum()),
        calls=int(calls.sum()) if len(calls) else None,
        library=first["library"],
        kernel_arch=first["kernel_arch"],
        align1=bool(first["align1"]),
        tflops=first["tflops"] if single else None,
        tbps=first["tbps"] if single else None,
        pct_of_peak=pct,
        bound=first["bound"] if single else None,
    )


def _other_work() -> pl.Expr:
    """The last pass's key: "(other work): " and the category of the kernels carrying a row's time."""
    return (pl.lit(OTHER_OPS + ": ") + pl.col("category").fill_null("other")).alias("group")


def _pair(
    base: pl.DataFrame, new: pl.DataFrame, keys: list[str]
) -> tuple[list[tuple[tuple, pl.DataFrame, pl.DataFrame]], pl.DataFrame, pl.DataFrame]:
    """Groups equal on `keys` on both sides, and what is left of each side."""
    common = (
        base.select(keys).unique().join(new.select(keys).unique(), on=keys, how="inner", nulls_equal=True)
    )
    pairs = []
    if common.height:
        left = base.join(common, on=keys, how="semi", nulls_equal=True).partition_by(keys, as_dict=True)
        right = new.join(common, on=keys, how="semi", nulls_equal=True).partition_by(keys, as_dict=True)
        pairs = [(key, left[key], right[key]) for key in left if key in right]
    rest_base = base.join(common, on=keys, how="anti", nulls_equal=True)
    rest_new = new.join(common, on=keys, how="anti", nulls_equal=True)
    return pairs, rest_base, rest_new


def hardware_diff(base: HardwareSide, new: HardwareSide) -> HardwareDiff:
    """BASE and NEW matched operator by operator (module doc)."""
    rows: list[HardwareRow] = []
    b_ops, n_ops = base.rows.filter(~pl.col("no_op")), new.rows.filter(~pl.col("no_op"))
    exact, b_rest, n_rest = _pair(b_ops, n_ops, ["key", "shape"])
    for (key, shape), b, n in exact:
        rows.append(HardwareRow(key, shape, EXACT, _figures(b), _figures(n)))
    named, b_rest, n_rest = _pair(b_rest, n_rest, ["key"])
    for (key,), b, n in named:
        rows.append(HardwareRow(key, None, BY_NAME, _figures(b), _figures(n)))
    b_cat, n_cat = base.rows.filter(pl.col("no_op")), new.rows.filter(pl.col("no_op"))
    by_category, b_cat_rest, n_cat_rest = _pair(b_cat, n_cat, ["key"])
    for (key,), b, n in by_category:
        rows.append(HardwareRow(key, None, BY_CATEGORY, _figures(b), _figures(n)))
    # 4. operators still without a partner (another framework's operators, another decomposition), by the
    # category of the kernels that carry most of their time
    # (with the "(no op)" rows pass 3 left: one framework's unattributed GEMMs meet the other's GEMM operators)
    group = _other_work()
    b_rest = pl.concat([b_rest, b_cat_rest]).with_columns(group)
    n_rest = pl.concat([n_rest, n_cat_rest]).with_columns(group)
    by_kernels, b_rest, n_rest = _pair(b_rest, n_rest, ["group"])
    for (name,), b, n in by_kernels:
        rows.append(HardwareRow(name, None, BY_KERNELS, _figures(b), _figures(n)))
    for side, rest in (("base", b_rest.drop("group")), ("new", n_rest.drop("group"))):
        for part in rest.partition_by(["key", "shape"], maintain_order=True):
            figures = _figures(part)
            key, shape = part["key"][0], part["shape"][0]
            rows.append(
                HardwareRow(
                    key, shape, "", figures if side == "base" else None, figures if side == "new" else None
                )
            )
    rows.sort(key=lambda r: (-abs(r.delta_ns), r.key, r.shape or ""))
    matched = [r for r in rows if r.match]
    coverage_base = sum(r.base.gpu_ns for r in matched if r.base) / base.gpu_ns if base.gpu_ns else 0.0
    coverage_new = sum(r.new.gpu_ns for r in matched if r.new) / new.gpu_ns if new.gpu_ns else 0.0
    return HardwareDiff(
        base_device=base.device,
        new_device=new.device,
        base_gpu_ns=base.gpu_ns,
        new_gpu_ns=new.gpu_ns,
        rows=tuple(rows),
        coverage_base=coverage_base,
        coverage_new=coverage_new,
        verdict=_verdict(rows, base, new),
        library_notes=_library_notes(rows, base, new),
        projections=_projections(rows, base, new),
    )


def _label(row: HardwareRow) -> str:
    return row.key + (f" {row.shape}" if row.shape else "")


def _verdict(rows: list[HardwareRow], base: HardwareSide, new: HardwareSide) -> tuple[str, ...]:
    """Where NEW loses and where it wins: the matched rows that carry the difference, as a share of BASE's GPU
    time."""
    total = new.gpu_ns - base.gpu_ns
    reference = base.gpu_ns or 1
    lines = [
        f"GPU time: BASE {base.gpu_ns / 1e6:,.3f} ms on {base.device}, NEW {new.gpu_ns / 1e6:,.3f} ms on "
        f"{new.device} ({100 * total / reference:+.1f}%)"
    ]
    matched = [r for r in rows if r.match]
    for title, chosen in (
        ("NEW loses most on", [r for r in matched if r.delta_ns > 0][:VERDICT_ROWS]),
        (
            "NEW wins most on",
            [r for r in sorted(matched, key=lambda r: r.delta_ns) if r.delta_ns < 0][:VERDICT_ROWS],
        ),
    ):
        if chosen:
            parts = [
                f"{_label(r)} {r.delta_ns / 1e6:+,.3f} ms ({100 * r.delta_ns / reference:+.1f}% of BASE)"
                for r in chosen
            ]
            lines.append(f"{title}: " + "; ".join(parts))
    return tuple(lines)


def _library_notes(rows: list[HardwareRow], base: HardwareSide, new: HardwareSide) -> tuple[str, ...]:
    """Differences that come from the library rather than the hardware: the slower side's kernels built for an
    older architecture than its GPU, or align1 variants (no vectorised loads: a size not a multiple of 8)."""
    notes = []
    for row in [r for r in rows if r.match][: 2 * VERDICT_ROWS]:
        slower, side = (row.new, new) if row.delta_ns > 0 else (row.base, base)
        if slower is None:
            continue
        reasons = []
        if _older(slower.kernel_arch, side.arch):
            reasons.append(
                f"built for {slower.kernel_arch} on an {side.arch} GPU (no {side.arch}-specific path)"
            )
        if slower.align1:
            reasons.append("align1 variants (unaligned sizes: no vector loads)")
        if reasons:
            rate = f" at {slower.pct_of_peak:.1f}% of peak" if slower.pct_of_peak is not None else ""
            notes.append(
                f"{side.device}: {_label(row)} runs {slower.library or 'its'} kernels{rate}, "
                f"{' and '.join(reasons)}: a library choice, not the hardware"
            )
    return tuple(notes)


@dataclass(frozen=True)
class CompareRow:
    key: str
    shape: str | None
    match: str  # EXACT | BY_KERNELS | "" (not on every trace)
    sides: tuple[SideFigures | None, ...]  # one per trace, in the order given

    @property
    def fastest(self) -> int | None:
        """The trace that spends the least GPU time on this row, where every trace has it."""
        if any(s is None for s in self.sides):
            return None
        times = [s.gpu_ns for s in self.sides if s is not None]
        return times.index(min(times))


@dataclass(frozen=True)
class HardwareTable:
    """Three or more traces of one model (`opscope compare`): one column per trace."""

    paths: tuple[str, ...]
    devices: tuple[str, ...]
    gpu_ns: tuple[int, ...]
    rows: tuple[CompareRow, ...]  # by the largest GPU time on any trace first
    coverage: tuple[float, ...]  # per trace: GPU time in rows every trace has / its GPU time


def hardware_compare(sides: list[HardwareSide]) -> HardwareTable:
    """Every trace matched against all the others in two passes: operator and shapes present in every trace;
    then everything else by the category of the kernels that carry its time ("(other work): gemm"), which
    every trace may or may not have. Nothing is dropped."""
    ops = [s.rows.filter(~pl.col("no_op")) for s in sides]
    common = ops[0].select("key", "shape").unique()
    for frame in ops[1:]:
        common = common.join(
            frame.select("key", "shape").unique(), on=["key", "shape"], how="inner", nulls_equal=True
        )
    rows: list[CompareRow] = []
    parts = [
        frame.join(common, on=["key", "shape"], how="semi", nulls_equal=True).partition_by(
            ["key", "shape"], as_dict=True
        )
        for frame in ops
    ]
    for key, shape in common.iter_rows():
        rows.append(CompareRow(key, shape, EXACT, tuple(_figures(p[(key, shape)]) for p in parts)))
    group = _other_work()
    rests = [
        pl.concat(
            [
                frame.join(common, on=["key", "shape"], how="anti", nulls_equal=True),
                s.rows.filter(pl.col("no_op")),
            ]
        )
        .with_columns(group)
        .partition_by("group", as_dict=True)
        for frame, s in zip(ops, sides, strict=True)
    ]
    for (name,) in sorted({k for rest in rests for k in rest}):
        figures = tuple(_figures(rest[(name,)]) if (name,) in rest else None for rest in rests)
        rows.append(CompareRow(name, None, BY_KERNELS if all(figures) else "", figures))
    rows.sort(key=lambda r: (-max(s.gpu_ns for s in r.sides if s is not None), r.key, r.shape or ""))
    everywhere = [r for r in rows if all(r.sides)]
    coverage = tuple(
        sum(side.gpu_ns for r in everywhere if (side := r.sides[i]) is not None) / s.gpu_ns
        if s.gpu_ns
        else 0.0
        for i, s in enumerate(sides)
    )
    return HardwareTable(
        paths=tuple(s.path for s in sides),
        devices=tuple(s.device for s in sides),
        gpu_ns=tuple(s.gpu_ns for s in sides),
        rows=tuple(rows),
        coverage=coverage,
    )


def _projections(rows: list[HardwareRow], base: HardwareSide, new: HardwareSide) -> tuple[str, ...]:
    """For the rows the efficiency model sizes on both sides, bound the same way: the slower side's time were it
    to reach the faster side's percent of its own peak (time x its percent / the other's percent), capped by its
    own roofline (never above 100% of its peak)."""
    lines = []
    for row in [r for r in rows if r.match == EXACT and r.base and r.new][: 4 * VERDICT_ROWS]:
        assert row.base is not None and row.new is not None
        if row.delta_ns > 0:
            slow, fast, side = row.new, row.base, new
        else:
            slow, fast, side = row.base, row.new, base
        if (
            slow.pct_of_peak is None
            or fast.pct_of_peak is None
            or slow.bound != fast.bound
            or not slow.pct_of_peak
            or fast.pct_of_peak <= slow.pct_of_peak
        ):
            continue
        target = min(fast.pct_of_peak, 100.0)
        projected = slow.gpu_ns * slow.pct_of_peak / target
        lines.append(
            f"{side.device}: {_label(row)} at {slow.pct_of_peak:.3g}% of its peak; at the other GPU's "
            f"{target:.3g}% it would take {projected / 1e6:,.3f} ms instead of {slow.gpu_ns / 1e6:,.3f} ms "
            f"({(slow.gpu_ns - projected) / 1e6:,.3f} ms less, {slow.bound}-bound)"
        )
        if len(lines) == VERDICT_ROWS:
            break
    return tuple(lines)
