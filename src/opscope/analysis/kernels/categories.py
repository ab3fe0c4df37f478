"""Kernel categories: GPU time per family (GEMM, convolution, attention, ..., communication, memcpy, other).

The rules are data (`category_rules.RULES`); this module applies them. Each distinct (name, kind) is classified
once, by one polars expression over all of them (the rules in order, Rust's regex engine, vectorised), then the
mapping is joined back onto the events: the cost grows with the number of distinct names, not of events, and
300,000 distinct names take a fraction of a second (Python's `re`, rule by rule, took about 30 s).

Definitions (docs/analysis-timeline.md):
- category of a GPU event: `memcpy` / `memset` by kind; a kernel takes the first rule whose pattern matches
  its name, `other` when none does.
- total_ns: sum of the durations of the category's events within the analysed windows (clipped to them).
- share: total_ns / the sum over all categories (so shares add up to 1; overlapping kernels both count,
  like `summary`'s share).
- busy_ns: the union of the category's intervals (its wall-clock footprint; <= total_ns).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import polars as pl

from opscope.analysis.base import intervals
from opscope.analysis.kernels.category_rules import CATEGORIES, MEMCPY, MEMSET, OTHER, RULES
from opscope.model.schema import Col, Kind

CATEGORY = "category"


def category_expr(name: pl.Expr, kind: pl.Expr) -> pl.Expr:
    """The category of each row: memcpy / memset by kind, else the first rule whose pattern matches the name,
    else `other` (a null name is `other`, a null kind a kernel)."""
    chain = pl.when(kind == Kind.MEMCPY).then(pl.lit(MEMCPY)).when(kind == Kind.MEMSET).then(pl.lit(MEMSET))
    for category, pattern in RULES:
        chain = chain.when(name.str.contains("(?i)" + pattern)).then(pl.lit(category))
    return chain.otherwise(pl.lit(OTHER))


def categories_of(pairs: Iterable[tuple[str | None, str | None]]) -> dict[tuple[str | None, str | None], str]:
    """The category of each distinct (name, kind), classified together."""
    unique = pl.DataFrame(list(set(pairs)), schema={Col.NAME: pl.String, Col.KIND: pl.String}, orient="row")
    mapping = unique.with_columns(category_expr(pl.col(Col.NAME), pl.col(Col.KIND)).alias(CATEGORY))
    return {(n, k): c for n, k, c in mapping.iter_rows()}


def classify(name: str, kind: str = Kind.KERNEL) -> str:
    """The category of one GPU event (for many, use `categories_of` or `with_category`)."""
    return categories_of([(name, kind)])[(name, kind)]


def with_category(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` (with name and kind columns, any string-like dtype) plus a `category` column."""
    if frame.height == 0:
        return frame.with_columns(pl.lit(None, dtype=pl.String).alias(CATEGORY))
    if all(isinstance(frame.schema[c], pl.Categorical) for c in (Col.NAME, Col.KIND)):
        return _with_category_by_code(frame)
    pairs = frame.select(pl.col(Col.NAME).cast(pl.String), pl.col(Col.KIND).cast(pl.String)).unique()
    mapping = pairs.with_columns(category_expr(pl.col(Col.NAME), pl.col(Col.KIND)).alias(CATEGORY))
    keyed = frame.with_columns(
        pl.col(Col.NAME).cast(pl.String).alias("_n"), pl.col(Col.KIND).cast(pl.String).alias("_k")
    )
    return keyed.join(
        mapping.rename({Col.NAME: "_n", Col.KIND: "_k"}),
        on=["_n", "_k"],
        how="left",
        nulls_equal=True,
        maintain_order="left",
    ).drop("_n", "_k")


def _with_category_by_code(frame: pl.DataFrame) -> pl.DataFrame:
    """`with_category` of a frame whose name and kind are categorical: each distinct (name, kind) pair is one
    integer made of their codes, classified once as text, and every row looks its pair up (no text per row:
    0.5 s -> 0.05 s for the 390 k GPU events of the 1 GB benchmark trace)."""
    missing = (1 << 32) - 1  # a null name or kind is a pair of its own, classified like any other
    code = [pl.col(c).to_physical().cast(pl.Int64).fill_null(missing) for c in (Col.NAME, Col.KIND)]
    key = (code[0] * (1 << 32) + code[1]).alias("_pair")
    pairs = frame.select(key, Col.NAME, Col.KIND).unique(subset="_pair")
    mapping = pairs.select(
        "_pair",
        category_expr(pl.col(Col.NAME).cast(pl.String), pl.col(Col.KIND).cast(pl.String)).alias(CATEGORY),
    )
    category = key.replace_strict(mapping["_pair"], mapping[CATEGORY], return_dtype=mapping.schema[CATEGORY])
    return frame.with_columns(category.alias(CATEGORY))


@dataclass(frozen=True)
class CategoryRow:
    category: str
    calls: int
    total_ns: int
    busy_ns: int
    share: float
    top_kernel: str | None  # the kernel with the most time in this category


@dataclass(frozen=True)
class CategoryBreakdown:
    rows: tuple[CategoryRow, ...]  # every category with time, largest first
    total_ns: int
    other_share: float  # share of time left as "other": how well the rules cover this trace


def category_breakdown(gpu: pl.DataFrame) -> CategoryBreakdown:
    """Time per category of `gpu` (GPU activity already restricted to the analysed windows, with
    start_ns / end_ns columns and a `category` column)."""
    if gpu.height == 0:
        return CategoryBreakdown(rows=(), total_ns=0, other_share=0.0)
    dur = pl.col(intervals.END) - pl.col(intervals.START)
    per = gpu.group_by(CATEGORY).agg(pl.len().alias("calls"), dur.sum().alias("total"))
    busy = intervals.union_ns(gpu, by=[CATEGORY])
    assert isinstance(busy, pl.DataFrame)
    top = (
        gpu.group_by(CATEGORY, Col.NAME)
        .agg(dur.sum().alias("t"))
        .sort(["t", Col.NAME], descending=[True, False])
        .group_by(CATEGORY, maintain_order=True)
        .first()
    )
    table = per.join(busy, on=CATEGORY, how="left").join(
        top.select(CATEGORY, Col.NAME), on=CATEGORY, how="left"
    )
    total = int(table["total"].sum() or 0)
    order = {c: i for i, c in enumerate(CATEGORIES)}
    rows = sorted(
        (
            CategoryRow(
                category=r[CATEGORY],
                calls=int(r["calls"]),
                total_ns=int(r["total"]),
                busy_ns=int(r["busy_ns"] or 0),
                share=int(r["total"]) / total if total else 0.0,
                top_kernel=r[Col.NAME],
            )
            for r in table.iter_rows(named=True)
        ),
        key=lambda row: (-row.total_ns, order.get(row.category, len(order))),
    )
    other = next((r.share for r in rows if r.category == OTHER), 0.0)
    return CategoryBreakdown(rows=tuple(rows), total_ns=total, other_share=other)
