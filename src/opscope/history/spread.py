"""The per-call spread (mean, median, p95) of operators and categories, which their analyses only total.

- op, per call: the GPU time of one instance of the op (a cpu_op or user_annotation event; every ProfilerStep#N
  is an instance of "ProfilerStep#*", as in `opscope ops`), i.e. the summed duration of the GPU events whose
  launch call lies inside that instance (directly or through child ops, `analysis.base.linking`). A GPU
  event inside several nested instances of the same name counts for the outermost one only, so the per-call
  values of a name sum to its `gpu_total` in `opscope ops`; an instance that launched nothing counts 0.
- category, per call: the duration of one GPU event of the category, as `opscope analyze`'s categories count it
  (the GPU activity cut to the analysed window, `kernels/categories.py`).

Percentiles interpolate linearly between the closest ranks (numpy's default), as for kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from opscope.analysis.base import intervals
from opscope.analysis.base.linking import OP_KINDS, ROW, Linkage, selected_gpu
from opscope.analysis.base.nesting import RowTree, ancestors, has_equal_ancestor, subtree_sums
from opscope.analysis.base.windows import fold_steps
from opscope.analysis.kernels.categories import CATEGORY
from opscope.model.schema import Col
from opscope.model.trace import Trace

P95 = 0.95


@dataclass(frozen=True)
class Spread:
    """Nanoseconds per call."""

    mean: float
    median: float
    p95: float


def _spread(frame: pl.DataFrame, key: str, value: str) -> dict[str, Spread]:
    grouped = frame.group_by(key).agg(
        pl.col(value).mean().alias("mean"),
        pl.col(value).median().alias("median"),
        pl.col(value).quantile(P95, interpolation="linear").alias("p95"),
    )
    return {
        str(r[key]): Spread(float(r["mean"]), float(r["median"]), float(r["p95"]))
        for r in grouped.iter_rows(named=True)
    }


def op_call_gpu(trace: Trace, linkage: Linkage) -> pl.DataFrame:
    """One row per op instance: row, name (String, steps folded), gpu_ns (see the module doc). An instance
    inside an instance of its own name counts 0 (its GPU events count for the outermost one); any other counts
    the GPU time launched anywhere inside it: sums up the op tree, one vectorised pass per level, where pairing
    every GPU event with every op enclosing it held events x depth rows."""
    folded = fold_steps(linkage.scopes.filter(pl.col(Col.KIND).is_in(list(OP_KINDS))))
    # the name's code: its categorical code where the name column is categorical (no text sort)
    code = (
        pl.col(Col.NAME).fill_null("").to_physical().cast(pl.Int64)
        if isinstance(folded.schema[Col.NAME], pl.Categorical)
        else pl.col(Col.NAME).cast(pl.String).fill_null("").rank("dense").cast(pl.Int64)
    )
    instances = folded.select(
        ROW, pl.col(Col.NAME).cast(pl.String).fill_null(""), "op_parent_row", code.alias("_code")
    ).sort(ROW)
    tree = RowTree.of(instances, ROW, "op_parent_row")  # positions in the order of `instances` (by row)
    parent = tree.parent
    launched = selected_gpu(trace, linkage).filter(pl.col("op_row").is_not_null())
    own = tree.find(launched["op_row"].to_numpy())
    direct = np.zeros(len(tree.rows), dtype=np.int64)
    np.add.at(direct, own[own >= 0], launched[Col.DUR_NS].fill_null(0).to_numpy()[own >= 0])
    codes = instances["_code"].to_numpy()
    total = subtree_sums(parent, direct)
    if total is None:  # a malformed (cyclic) op tree: the pairs' walk stops at its bound instead
        return _op_call_gpu_pairs(trace, linkage)
    gpu_ns = np.where(has_equal_ancestor(parent, codes), 0, total)
    return instances.select(ROW, Col.NAME).with_columns(pl.Series("gpu_ns", gpu_ns, dtype=pl.Int64))


def _op_call_gpu_pairs(trace: Trace, linkage: Linkage) -> pl.DataFrame:
    """`op_call_gpu` by pairing every launch with every op enclosing it (for op trees that are not trees)."""
    instances = fold_steps(linkage.scopes.filter(pl.col(Col.KIND).is_in(list(OP_KINDS)))).select(
        ROW, pl.col(Col.NAME).cast(pl.String).fill_null(""), "op_parent_row"
    )
    gpu = selected_gpu(trace, linkage)
    launched = gpu.filter(pl.col("op_row").is_not_null()).select(
        pl.col(ROW).alias("gpu_row"), "op_row", Col.DUR_NS
    )
    pairs = ancestors(instances.select(ROW, "op_parent_row"), launched["op_row"].unique(), up="op_parent_row")
    names = instances.select(pl.col(ROW).alias("ancestor"), Col.NAME)
    outermost = (
        launched.join(pairs.rename({ROW: "op_row"}), on="op_row", how="inner")
        .join(names, on="ancestor", how="inner")
        .sort("level", descending=True)
        .unique(["gpu_row", Col.NAME], keep="first")  # the highest level: the outermost instance of the name
        .group_by("ancestor")
        .agg(pl.col(Col.DUR_NS).sum().alias("gpu_ns"))
    )
    return instances.join(outermost.rename({"ancestor": ROW}), on=ROW, how="left").select(
        ROW, Col.NAME, pl.col("gpu_ns").fill_null(0)
    )


def op_spread(trace: Trace, linkage: Linkage) -> dict[str, Spread]:
    """Op name -> the spread of its calls' GPU time."""
    return _spread(op_call_gpu(trace, linkage), Col.NAME, "gpu_ns")


def category_spread(clipped: pl.DataFrame) -> dict[str, Spread]:
    """Category -> the spread of its GPU events' durations; `clipped`: the frame `category_breakdown` reads."""
    if clipped.height == 0:
        return {}
    frame = clipped.select(
        pl.col(CATEGORY).cast(pl.String), (pl.col(intervals.END) - pl.col(intervals.START)).alias("dur")
    )
    return _spread(frame, CATEGORY, "dur")
