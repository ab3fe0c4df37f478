"""Partial results that merge exactly: per-name duration statistics (count, sum, min, max) with a quantile
sketch, built from a polars frame in one grouped pass.

A worker reduces its trace to `NamedDurations`; the parent merges those of many traces. Counts, sums, minima
and maxima are integers, so merging them in any order gives the same numbers as computing them over all events
at once; quantiles come from the mergeable `Sketch` (1% relative accuracy).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import polars as pl

from opscope.analysis.base.sketch import Sketch, bucket_index


@dataclass(frozen=True)
class Durations:
    count: int
    total_ns: int
    min_ns: int
    max_ns: int
    sketch: Sketch

    def merge(self, other: Durations) -> Durations:
        return Durations(
            count=self.count + other.count,
            total_ns=self.total_ns + other.total_ns,
            min_ns=min(self.min_ns, other.min_ns),
            max_ns=max(self.max_ns, other.max_ns),
            sketch=self.sketch.merge(other.sketch),
        )

    @property
    def mean_ns(self) -> float:
        return self.total_ns / self.count if self.count else 0.0


def durations_by_name(frame: pl.DataFrame, name: str, value: str) -> dict[str, Durations]:
    """Per distinct `name`: statistics of the non-negative integer column `value` (nulls dropped)."""
    data = frame.select(pl.col(name).cast(pl.String).fill_null(""), pl.col(value)).filter(
        pl.col(value).is_not_null() & (pl.col(value) >= 0)
    )
    if data.is_empty():
        return {}
    stats = data.group_by(name).agg(
        pl.len().alias("n"),
        pl.col(value).sum().alias("sum"),
        pl.col(value).min().alias("min"),
        pl.col(value).max().alias("max"),
        (pl.col(value) == 0).sum().alias("zeros"),
    )
    bins = (
        data.filter(pl.col(value) > 0)
        .group_by(name, bucket_index(value))
        .agg(pl.len().alias("c"))
        .sort(name, "bucket")
        .group_by(name, maintain_order=True)
        .agg("bucket", "c")
    )
    bins_by_name = {r[0]: tuple(zip(r[1], r[2])) for r in bins.iter_rows()}
    out = {}
    for key, n, total, lo, hi, zeros in stats.iter_rows():
        sketch = Sketch(
            bins=tuple((int(b), int(c)) for b, c in bins_by_name.get(key, ())),
            zeros=int(zeros),
            count=int(n),
            min=float(lo),
            max=float(hi),
        )
        out[key] = Durations(count=int(n), total_ns=int(total), min_ns=int(lo), max_ns=int(hi), sketch=sketch)
    return out


def merge_named(parts: Iterable[dict[str, Durations]]) -> dict[str, Durations]:
    """Name-wise merge of many partial tables."""
    out: dict[str, Durations] = {}
    for part in parts:
        for key, stats in part.items():
            out[key] = out[key].merge(stats) if key in out else stats
    return out


def quantile_ns(stats: Durations, q: float) -> float:
    value = stats.sketch.quantile(q)
    return math.nan if value is None else value
