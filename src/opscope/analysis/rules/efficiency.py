"""`low_efficiency`: hot GEMM / convolution / attention ops far below the GPU's peak FLOP/s, and hot
memory-bound ops far below its peak bandwidth (docs/advice.md, figures from docs/efficiency.md).

The figures are those of `opscope efficiency` (analysis/efficiency/), per op and shape; an op is hot when it
takes at least `HOT_SHARE` of the analysed GPU time. A GPU missing from the peak table gives no percentages, so
the rule says it could not be evaluated instead of guessing.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from opscope.analysis.base.linking import ROW
from opscope.analysis.efficiency.advice import low_efficiency_candidates
from opscope.analysis.efficiency.families import COMPUTE_FAMILIES
from opscope.analysis.efficiency.table import EfficiencyOptions, efficiency
from opscope.analysis.rules.context import RuleContext
from opscope.analysis.rules.model import (
    BELOW,
    GENERAL,
    GPU_TIME,
    MAX_EVIDENCE,
    Hit,
    Rule,
    Skipped,
    exact_names,
)
from opscope.model.schema import Col

LOW_EFFICIENCY = "low_efficiency"  # the rule's id
HOT_SHARE = 0.01  # ops under 1% of GPU time are not worth a finding of their own


def low_efficiency_options(
    devices: tuple[int, ...] | None, streams: tuple[int, ...] | None
) -> EfficiencyOptions:
    """The efficiency table the rule reads (every op and shape of the analysed devices and streams)."""
    return EfficiencyOptions(by_shape=True, top=0, devices=devices, streams=streams)


def low_efficiency(ctx: RuleContext, threshold: float) -> Hit | Skipped | None:
    opts = ctx.analysis.options
    table = efficiency(ctx.trace, low_efficiency_options(opts.devices, opts.streams), ctx.linkage)
    if table.peaks is None:
        if table.rows:
            return Skipped(
                f"no peak figures for this GPU: {_why_no_peaks(ctx, table.device)} "
                "(opscope efficiency --peak-tflops / --peak-tbps)"
            )
        return None
    total_us = table.gpu_time_ns / 1e3
    hot = [r for r in table.rows if total_us > 0 and r.gpu_time_us / total_us >= HOT_SHARE]
    pcts = [
        r.pct_of_peak_compute if r.family in COMPUTE_FAMILIES else r.pct_of_peak_bandwidth
        for r in hot
        if r.family in COMPUTE_FAMILIES or r.bound == "memory"
    ]
    known = [p for p in pcts if p is not None]
    if not known:
        return Skipped("no hot op with a FLOP or byte count (profile with record_shapes=True)")
    fraction = threshold / 100.0
    low = low_efficiency_candidates(hot, fraction, fraction, total_us, HOT_SHARE)
    value = min(known)
    if not low:
        return Hit(value=value, time_at_stake_ns=0)
    evidence = tuple(
        {
            "op": c.row.op,
            "shape": c.row.shape,
            "dtype": c.row.dtype,
            "kind": c.kind,
            "calls": c.row.calls,
            "gpu_time_us": round(c.gpu_time_us, 3),
            "pct_of_peak": round(c.pct_of_peak, 2),
            "achieved_tflops": c.row.achieved_tflops,
            "achieved_tbps": c.row.achieved_tbps,
            "model": c.row.model,
        }
        for c in low[:MAX_EVIDENCE]
    )
    return Hit(
        value=value,
        time_at_stake_ns=round(sum(c.gpu_time_us for c in low) * 1e3),
        evidence=evidence,
        detail=f"{len(low)} hot op shapes below {threshold:g}% of peak",
        **_at_threshold(ctx, [(c.row.op, c.row.shape, c.gpu_time_us, c.pct_of_peak) for c in low], threshold),
    )


def _why_no_peaks(ctx: RuleContext, device: str | None) -> str:
    gpu = ctx.gpu
    if gpu.inferred and gpu.arch is not None:
        return f"the trace names no model, and the kernel names say {gpu.arch.label}, one of several GPUs: {gpu.arch.gpus}"
    if device is None:
        return "the trace names no GPU model"
    return "it is not in the peak table"


def _at_threshold(
    ctx: RuleContext, low: list[tuple[str, str | None, float, float]], threshold: float
) -> dict[str, Any]:
    """The saving model of a faster kernel: each low op shape as if it ran at the threshold's % of peak (its
    time x pct / threshold). The what-if rescales the kernels launched inside those shapes by one factor (the
    time-weighted mean); a kernel name that other ops launch too is rescaled there as well, so the smaller of
    the estimate and the what-if wins."""
    ops = ctx.ops.with_columns(pl.col(Col.INPUT_DIMS).str.replace_all(r"\s", "").alias("_shape"))
    names: set[str] = set()
    rows: list[pl.Series] = []
    for op, shape, _, _ in low:
        chosen = ops.filter(
            (pl.col(Col.NAME) == op) & (pl.col("_shape").eq_missing(shape) if shape else True)
        )
        if chosen.height:
            rows.append(chosen[ROW])
            for kernels in ctx.gpu_ns_under(chosen[ROW])["kernels"].to_list():
                names.update(k for k in kernels if k)
    time = sum(t for _, _, t, _ in low)
    if not names or time <= 0:
        return {}
    kept = sum(t * min(pct / threshold, 1.0) for _, _, t, pct in low)
    return {
        "what_if": (exact_names(sorted(names)), kept / time),
        "claims": ctx.kernels_under(pl.concat(rows)),
        "estimate_ns": round((time - kept) * 1e3),
        "model": "efficiency_at_threshold",
    }


RULES = (
    Rule(
        id=LOW_EFFICIENCY,
        title="Hot ops far below the GPU's peak",
        source="own",
        metric="lowest % of peak (compute for GEMM / conv / attention, bandwidth for memory-bound ops) "
        "among ops with >= 1% of GPU time",
        threshold=30,
        direction=BELOW,
        basis=GPU_TIME,
        advice="A GEMM or attention op far below peak FLOP/s is usually too small or badly shaped (pad M, N, K "
        "to multiples of 64-128, batch small GEMMs, use bf16/fp16 or fp8, fused attention); a memory-bound op "
        "far below peak bandwidth moves data in small or strided pieces: fuse it with its neighbours "
        "(torch.compile) or make its inputs contiguous.",
        check=low_efficiency,
        role=GENERAL,
    ),
)
