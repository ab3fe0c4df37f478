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

import polars as pl

from opscope.analysis.base import intervals
from opscope.analysis.base.linking import OP_KINDS, ROW, Linkage, selected_gpu
from opscope.analysis.base.nesting import ancestors
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
    """One row per op instance: row, name (String, steps folded), gpu_ns (see the module doc)."""
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
