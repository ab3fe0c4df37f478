"""`unfused_attention`: matmul/bmm -> softmax -> matmul/bmm with a square score tensor (docs/advice.md)."""

from __future__ import annotations

import json

import polars as pl

from opscope.analysis.base.linking import ROW
from opscope.analysis.rules.context import RuleContext
from opscope.analysis.rules.factors import factor
from opscope.analysis.rules.model import ABOVE, GPU_TIME, MAX_EVIDENCE, Hit, Rule, Skipped
from opscope.model.schema import Col

MATMULS = ("aten::matmul", "aten::bmm", "aten::baddbmm", "aten::mm", "aten::einsum")
SOFTMAXES = ("aten::softmax", "aten::_softmax", "aten::_safe_softmax")
FUSED = factor("fused_attention")


def _score_length(dims_text: str | None) -> int | None:
    """S of a softmax input `[..., S, S]`, else None."""
    try:
        dims = json.loads(dims_text) if dims_text else None
    except ValueError:
        return None
    first = dims[0] if isinstance(dims, list) and dims else None
    if isinstance(first, list) and len(first) >= 3 and first[-1] == first[-2] and isinstance(first[-1], int):
        return first[-1]
    return None


def attention_chains(ctx: RuleContext, threshold: float) -> Hit | Skipped | None:
    """Key ops (matmuls and softmaxes, outermost of their family) in time order per thread; a softmax over
    [..., S, S] whose neighbours in that order are matmuls is one unfused attention."""
    missing = ctx.shapes_missing()
    if missing is not None:
        return Skipped(missing)
    if ctx.gpu_total_ns == 0:
        return None
    ops = ctx.ops
    family = (
        pl.when(pl.col(Col.NAME).is_in(MATMULS))
        .then(pl.lit("mm"))
        .when(pl.col(Col.NAME).is_in(SOFTMAXES))
        .then(pl.lit("sm"))
        .otherwise(None)
    )
    keyed = ops.with_columns(family.alias("_fam")).filter(pl.col("_fam").is_not_null())
    if keyed.filter(pl.col("_fam") == "sm").height == 0:
        return Hit(value=0, time_at_stake_ns=0)
    parents = keyed.select(pl.col(ROW).alias("op_parent_row"), pl.col("_fam").alias("_pfam"))
    keyed = keyed.join(parents, on="op_parent_row", how="left").filter(
        pl.col("_pfam").is_null() | (pl.col("_pfam") != pl.col("_fam"))
    )  # outermost of its family
    keyed = keyed.sort([Col.PID, Col.TID, Col.TS_NS]).with_columns(
        pl.col("_fam").shift(1).over([Col.PID, Col.TID]).alias("_before"),
        pl.col("_fam").shift(-1).over([Col.PID, Col.TID]).alias("_after"),
        pl.col(ROW).shift(1).over([Col.PID, Col.TID]).alias("_mm1"),
        pl.col(ROW).shift(-1).over([Col.PID, Col.TID]).alias("_mm2"),
    )
    chains = keyed.filter((pl.col("_fam") == "sm") & (pl.col("_before") == "mm") & (pl.col("_after") == "mm"))
    chains = chains.with_columns(
        pl.col(Col.INPUT_DIMS).map_elements(_score_length, return_dtype=pl.Int64).alias("_s")
    ).filter(pl.col("_s").is_not_null())
    if chains.height == 0:
        return Hit(value=0, time_at_stake_ns=0)
    under = ctx.gpu_ns_under(pl.concat([chains[ROW], chains["_mm1"], chains["_mm2"]]))
    ns = dict(zip(under[ROW].to_list(), under["gpu_ns"].to_list(), strict=True))
    chains = chains.with_columns(
        (
            pl.col(ROW).replace_strict(ns, default=0)
            + pl.col("_mm1").replace_strict(ns, default=0)
            + pl.col("_mm2").replace_strict(ns, default=0)
        ).alias("_ns"),
        pl.col(ROW).replace_strict(ns, default=0).alias("_softmax_ns"),
    )
    chains = chains.filter(pl.col("_s") > threshold)
    if chains.height == 0:
        return Hit(value=0, time_at_stake_ns=0)
    groups = (
        chains.group_by(Col.INPUT_DIMS)
        .agg(pl.len().alias("calls"), pl.col("_s").first(), pl.col("_ns").sum(), pl.col("_softmax_ns").sum())
        .sort(["_ns", Col.INPUT_DIMS], descending=[True, False])
    )
    evidence = tuple(
        {
            "softmax_input_dims": json.loads(r[Col.INPUT_DIMS])[0],
            "S": r["_s"],
            "chains": r["calls"],
            "time_us": round(r["_ns"] / 1e3, 3),
            "softmax_time_us": round(r["_softmax_ns"] / 1e3, 3),
        }
        for r in groups.head(MAX_EVIDENCE).iter_rows(named=True)
    )
    total = int(chains["_ns"].sum())
    longest = int(chains["_s"].max())  # type: ignore[arg-type]
    rows = pl.concat([chains[ROW], chains["_mm1"], chains["_mm2"]]).drop_nulls()
    return Hit(
        value=longest,
        time_at_stake_ns=total,
        evidence=evidence,
        detail=f"{chains.height:,} matmul -> softmax -> matmul chains, S up to {longest}",
        # the model: the chain's kernels replaced by one fused attention kernel at FUSED of their time
        claims=ctx.kernels_under(rows),
        estimate_ns=round(total * (1 - FUSED)),
        model="fused_attention",
    )


RULES = (
    Rule(
        id="unfused_attention",
        title="Attention computed unfused (matmul -> softmax -> matmul)",
        source="pytorch",
        metric="score length S of the [..., S, S] softmax",
        threshold=16,
        direction=ABOVE,
        basis=GPU_TIME,
        advice="Use torch.nn.functional.scaled_dot_product_attention (FlashAttention / memory-efficient "
        "kernels) or FlashAttention directly: it never writes the S x S score matrix to memory "
        "(transformers: attn_implementation='sdpa' or 'flash_attention_2').",
        check=attention_chains,
    ),
)
