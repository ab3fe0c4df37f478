"""`channels_last`: layout conversions around convolutions (docs/advice.md)."""

from __future__ import annotations

import polars as pl

from opscope.analysis.base.windows import names_matching
from opscope.analysis.kernels.categories import CATEGORY
from opscope.analysis.kernels.category_rules import CONVOLUTION
from opscope.analysis.rules.context import E, RuleContext, S
from opscope.analysis.rules.model import ABOVE, GPU_TIME, MAX_EVIDENCE, Hit, Rule, exact_names
from opscope.model.schema import Col

LAYOUT_KERNEL = (
    r"(?i)nchwToNhwc|nhwcToNchw|nchw_?to_?nhwc|nhwc_?to_?nchw|batched_transpose|transpose_?readWrite"
    r"|convertTensor|permute_?nchw|cudnn::.*transpose"
)


def layout_conversions(ctx: RuleContext, threshold: float) -> Hit | None:
    kernels = ctx.kernels
    if kernels.height == 0 or ctx.gpu_total_ns == 0:
        return None
    if kernels.filter(pl.col(CATEGORY) == CONVOLUTION).height == 0:
        return Hit(value=0, time_at_stake_ns=0, detail="no convolutions")
    # the pattern matched on the distinct names, not on every kernel's
    found = kernels.filter(pl.col(Col.NAME).is_in(names_matching(kernels, Col.NAME, LAYOUT_KERNEL)))
    groups = (
        found.with_columns((pl.col(E) - pl.col(S)).alias("_ns"))
        .group_by(Col.NAME)
        .agg(pl.len().alias("calls"), pl.col("_ns").sum())
        .sort(["_ns", Col.NAME], descending=[True, False])
    )
    total = int(groups["_ns"].sum() or 0) if groups.height else 0
    evidence = tuple(
        {"kernel": r[Col.NAME], "calls": r["calls"], "time_us": round(r["_ns"] / 1e3, 3)}
        for r in groups.head(MAX_EVIDENCE).iter_rows(named=True)
    )
    return Hit(
        value=total / ctx.gpu_total_ns,
        time_at_stake_ns=total,
        evidence=evidence,
        detail=f"{found.height:,} layout-conversion kernels in a trace with convolutions",
        what_if=(exact_names(found[Col.NAME].unique().to_list()), 0.0) if found.height else None,
        # the model: the conversions removed (activations and weights kept in NHWC)
        claims=found.select(S, E),
        estimate_ns=total,
        model="layout_kernels_removed",
    )


RULES = (
    Rule(
        id="channels_last",
        title="Layout conversions around convolutions",
        source="nvidia",
        metric="share of GPU time in NCHW <-> NHWC conversion kernels",
        threshold=0.05,
        direction=ABOVE,
        basis=GPU_TIME,
        advice="Keep activations and weights in NHWC: model.to(memory_format=torch.channels_last) and "
        "input.to(memory_format=torch.channels_last); tensor-core convolutions work in NHWC, so NCHW "
        "tensors are converted before and after every convolution.",
        check=layout_conversions,
    ),
)
