"""`launch_bound_small_kernels` and `fusion_candidates`: many small kernels (docs/advice.md)."""

from __future__ import annotations

import polars as pl

from opscope.analysis.base import intervals
from opscope.analysis.kernels.categories import CATEGORY
from opscope.analysis.kernels.category_rules import ELEMENTWISE, NORMALIZATION
from opscope.analysis.rules.context import E, RuleContext, S
from opscope.analysis.rules.factors import factor
from opscope.analysis.rules.model import ABOVE, GPU_TIME, MAX_EVIDENCE, Hit, Rule, Skipped
from opscope.analysis.timeline.activity import FROM_GRAPH, LAUNCH_DUR
from opscope.model.schema import Col

SHORT_NS = 10_000  # without a launch call in the trace, a kernel under 10 us counts as short
FUSE_SHORT_NS = 50_000  # elementwise / normalisation kernels under 50 us are fusion candidates
MIN_RUN = 3  # kernels back to back
MIN_REPEATS = 2  # the same sequence seen at least twice
FUSED = factor("fused_chain")  # a fused run costs its longest kernel x this


def small_kernels(ctx: RuleContext, threshold: float) -> Hit | Skipped | None:
    why = ctx.not_steady()
    if why:  # a graph capture launches without running: its launches say nothing about the replays
        return Skipped(why)
    kernels = ctx.kernels.filter(~pl.col(FROM_GRAPH).fill_null(False))
    if kernels.height == 0:
        return None
    dur = pl.col(Col.DUR_NS)
    short = pl.when(pl.col(LAUNCH_DUR).is_not_null()).then(dur < pl.col(LAUNCH_DUR)).otherwise(dur < SHORT_NS)
    found = kernels.filter(short)
    fraction = found.height / kernels.height
    covered = int(found.select((pl.col(E) - pl.col(S)).sum()).item() or 0) if found.height else 0
    groups = (
        found.with_columns((pl.col(E) - pl.col(S)).alias("_ns"))
        .group_by(Col.NAME)
        .agg(pl.len().alias("calls"), pl.col("_ns").sum(), pl.col(LAUNCH_DUR).mean().alias("_launch"))
        .sort(["calls", Col.NAME], descending=[True, False])
    )
    evidence = tuple(
        {
            "kernel": r[Col.NAME],
            "calls": r["calls"],
            "time_us": round(r["_ns"] / 1e3, 3),
            "mean_launch_call_us": None if r["_launch"] is None else round(r["_launch"] / 1e3, 3),
        }
        for r in groups.head(MAX_EVIDENCE).iter_rows(named=True)
    )
    share = covered / ctx.gpu_total_ns if ctx.gpu_total_ns else 0.0
    gaps = _gaps_before(kernels, short)
    return Hit(
        value=fraction,
        time_at_stake_ns=covered,
        evidence=evidence,
        detail=f"{found.height:,} of {kernels.height:,} kernels are shorter than their launch call "
        f"(they cover {share * 100:.1f}% of GPU time)",
        claims=intervals.intersect(gaps.select(S, E), ctx.idle_gaps.select(S, E)),
        estimate_ns=int(gaps["_save"].sum() or 0) if gaps.height else 0,
        model="launch_overhead_removed",
    )


def _gaps_before(kernels: pl.DataFrame, short: pl.Expr) -> pl.DataFrame:
    """The model of a CUDA graph: the time before each short kernel on its stream (since the previous kernel
    ended) is launch overhead, removed up to the kernel's own launch call time (SHORT_NS without one). Columns
    start_ns, end_ns (the gap) and _save (what removing the launch saves there). The claim is the part of
    these gaps where the GPU is idle."""
    lanes = [Col.DEVICE, Col.STREAM]
    ordered = kernels.sort([*lanes, S]).with_columns(
        pl.col(E).shift(1).over(lanes).alias("_prev"), short.alias("_short")
    )
    gaps = ordered.filter(pl.col("_short") & (pl.col(S) > pl.col("_prev")))
    limit = pl.col(LAUNCH_DUR).fill_null(SHORT_NS)
    return gaps.select(
        pl.col("_prev").alias(S),
        pl.col(S).alias(E),
        pl.min_horizontal(pl.col(S) - pl.col("_prev"), limit).alias("_save"),
    )


def fusion_runs(ctx: RuleContext, threshold: float) -> Hit | None:
    kernels = ctx.kernels
    if kernels.height == 0 or ctx.gpu_total_ns == 0:
        return None
    lanes = [Col.DEVICE, Col.STREAM]
    flagged = kernels.sort([*lanes, S]).with_columns(
        (
            pl.col(CATEGORY).is_in([ELEMENTWISE, NORMALIZATION]) & ((pl.col(E) - pl.col(S)) < FUSE_SHORT_NS)
        ).alias("_f")
    )
    flagged = flagged.with_columns(
        (pl.col("_f") != pl.col("_f").shift(1).over(lanes))
        .fill_null(True)
        .cum_sum()
        .over(lanes)
        .alias("_run")
    )
    runs = (
        flagged.filter(pl.col("_f"))
        .group_by([*lanes, "_run"])
        .agg(
            pl.col(Col.NAME).alias("_names"),
            pl.len().alias("_n"),
            (pl.col(E) - pl.col(S)).sum().alias("_ns"),
            (pl.col(E) - pl.col(S)).max().alias("_longest"),
        )
        .filter(pl.col("_n") >= MIN_RUN)
        .with_columns(pl.col("_names").list.join(" | ").alias("_seq"))
    )
    repeated = (
        runs.group_by("_seq")
        .agg(
            pl.len().alias("repeats"),
            pl.col("_n").first(),
            pl.col("_ns").sum(),
            (pl.col("_ns") - pl.col("_longest") * FUSED).sum().alias("_save"),
        )
        .filter(pl.col("repeats") >= MIN_REPEATS)
        .sort(["_ns", "_seq"], descending=[True, False])
    )
    members = flagged.join(
        runs.join(repeated.select("_seq"), on="_seq", how="semi").select(*lanes, "_run"),
        on=[*lanes, "_run"],
        how="semi",
    )
    total = int(repeated["_ns"].sum() or 0) if repeated.height else 0
    evidence = tuple(
        {
            "kernels": r["_seq"].split(" | ")[:8],
            "length": r["_n"],
            "repeats": r["repeats"],
            "time_us": round(r["_ns"] / 1e3, 3),
        }
        for r in repeated.head(MAX_EVIDENCE).iter_rows(named=True)
    )
    return Hit(
        value=total / ctx.gpu_total_ns,
        time_at_stake_ns=total,
        evidence=evidence,
        detail=f"{repeated.height:,} repeated sequences of {MIN_RUN}+ short elementwise / normalisation kernels",
        # the model: each run fused into one kernel that costs about its longest member
        claims=members.select(S, E),
        estimate_ns=round(float(repeated["_save"].sum() or 0)) if repeated.height else 0,
        model="fused_chain",
    )


RULES = (
    Rule(
        id="launch_bound_small_kernels",
        title="Many kernels shorter than their launch",
        source="nsys",
        metric="fraction of kernels shorter than their launch call",
        threshold=0.5,
        direction=ABOVE,
        basis=GPU_TIME,
        advice="The host spends longer launching these kernels than the GPU runs them: capture the step in a "
        "CUDA graph (torch.cuda.graphs, torch.compile(mode='reduce-overhead')), fuse small ops "
        "(torch.compile), or give each kernel more work (bigger batches).",
        check=small_kernels,
    ),
    Rule(
        id="fusion_candidates",
        title="Repeated runs of short elementwise / normalisation kernels",
        source="own",
        metric="share of GPU time in repeated runs",
        threshold=0,
        direction=ABOVE,
        basis=GPU_TIME,
        advice="Fuse them: torch.compile generates one Triton kernel per fusible chain; or use a fused "
        "implementation (fused optimizers foreach/fused=True, fused LayerNorm / RMSNorm, fused "
        "bias+activation).",
        check=fusion_runs,
    ),
)
