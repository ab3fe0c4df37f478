"""`low_occupancy`: kernels with a low theoretical occupancy; tensor-core, warp-specialised / persistent and
communication kernels excepted (kernel_families.py says which; docs/advice.md)."""

from __future__ import annotations

import polars as pl

from opscope.analysis.kernels.gpu_arch import AMD
from opscope.analysis.kernels.kernel_facts import occupancy_exemption
from opscope.analysis.kernels.launch_config import LaunchOptions, launch_config
from opscope.analysis.rules.context import E, RuleContext, S
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


def low_theoretical_occupancy(ctx: RuleContext, threshold: float) -> Hit | Skipped | None:
    report = launch_config(ctx.trace, LaunchOptions(top=0, window=ctx.selected_window))
    rows = [
        r
        for r in report.rows
        if r.theoretical_occupancy_pct is not None and occupancy_exemption(r.name) is None
    ]
    if not rows and ctx.gpu.vendor == AMD:
        return Skipped(
            "occupancy is modelled for NVIDIA GPUs only (an AMD compute unit's limits are not an SM's)"
        )
    if not rows or ctx.gpu_total_ns == 0:
        return None
    low = sorted(
        (
            r
            for r in rows
            if r.theoretical_occupancy_pct is not None and r.theoretical_occupancy_pct < threshold
        ),
        key=lambda r: (-r.total_ns, r.name),
    )
    lowest = min(r.theoretical_occupancy_pct or 0.0 for r in rows)
    if not low:
        return Hit(value=lowest, time_at_stake_ns=0)
    evidence = tuple(
        {
            "kernel": r.name,
            "calls": r.calls,
            "time_us": round(r.total_ns / 1e3, 3),
            "theoretical_occupancy_pct": round(r.theoretical_occupancy_pct or 0.0, 3),
            "limiter": r.limiter,
            "block": list(r.block),
            "registers_per_thread": r.registers_per_thread,
            "shared_memory": r.shared_memory,
        }
        for r in low[:MAX_EVIDENCE]
    )
    total = sum(r.total_ns for r in low)
    # the model: each configuration's time scaled by its occupancy over the threshold (throughput grows at
    # most in proportion to the resident warps, up to the threshold): an optimistic bound
    estimate = sum(r.total_ns * (1 - (r.theoretical_occupancy_pct or 0.0) / threshold) for r in low)
    names = sorted({r.name for r in low})
    return Hit(
        value=lowest,
        time_at_stake_ns=total,
        evidence=evidence,
        detail=f"{len(low)} launch configurations below {threshold:g}% theoretical occupancy"
        + (
            f" (limits of {ctx.gpu.arch.label}, inferred from kernel names)"
            if ctx.gpu.inferred and ctx.gpu.arch
            else ""
        ),
        claims=ctx.kernels.filter(pl.col(Col.NAME).is_in(names)).select(S, E),
        # the change: those kernels at the time-weighted share the model leaves them
        what_if=(exact_names(names), max(0.0, 1 - estimate / total)) if total > 0 else None,
        estimate_ns=round(estimate),
        model="occupancy_to_threshold",
    )


RULES = (
    Rule(
        id="low_occupancy",
        title="Kernels with low theoretical occupancy",
        source="nsys",
        metric="lowest theoretical occupancy % (tensor-core, warp-specialised / persistent and communication "
        "kernels excepted)",
        threshold=25,
        direction=BELOW,
        basis=GPU_TIME,
        advice="The limiter in the evidence (registers, shared memory, block size) caps the warps resident per "
        "SM: for your own kernels use more threads per block, fewer registers (__launch_bounds__, "
        "-maxrregcount) or less shared memory; for library kernels try another shape or dtype.",
        check=low_theoretical_occupancy,
        role=GENERAL,
    ),
)
