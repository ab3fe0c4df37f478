"""A mergeable quantile sketch: fixed logarithmic buckets with 1% relative accuracy (the DDSketch idea).

Per-file work in `opscope.scale` returns small partial results that the parent merges; sums, counts, minima and
maxima merge exactly, quantiles do not, unless every part keeps a summary built on the same bucket grid. Here a
value x > 0 goes to bucket i = ceil(log_gamma(x)) with gamma = (1 + a) / (1 - a), and bucket i is represented by
2 gamma^i / (gamma + 1), which is within a relative error a of every value in it. Merging adds bucket counts,
so it is exact, associative and commutative: a sketch of the whole equals the merge of sketches of the parts,
whatever the split and the order. Values are non-negative durations; zero goes to its own bucket.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import polars as pl

RELATIVE_ACCURACY = 0.01
_GAMMA = (1 + RELATIVE_ACCURACY) / (1 - RELATIVE_ACCURACY)
_LOG_GAMMA = math.log(_GAMMA)


def bucket_index(column: str) -> pl.Expr:
    """The bucket of each positive value of `column`: ceil(log_gamma(x)), as column "bucket"."""
    return (pl.col(column).cast(pl.Float64).log() / _LOG_GAMMA).ceil().cast(pl.Int64).alias("bucket")


def _bucket_value(index: int) -> float:
    return 2.0 * _GAMMA**index / (_GAMMA + 1.0)


@dataclass(frozen=True)
class Sketch:
    """Counts per log bucket (sorted by bucket index), plus the exact count, minimum and maximum."""

    bins: tuple[tuple[int, int], ...] = ()
    zeros: int = 0
    count: int = 0
    min: float | None = None
    max: float | None = None

    @classmethod
    def of(cls, values: Iterable[float]) -> Sketch:
        """A sketch of `values` (non-negative; NaN is refused)."""
        series = pl.Series("v", list(values), dtype=pl.Float64)
        if series.is_empty():
            return cls()
        if series.is_nan().any() or series.is_null().any() or (series < 0).any():
            raise ValueError("Sketch takes non-negative numbers only")
        positive = series.filter(series > 0).to_frame()
        counts = positive.group_by(bucket_index("v")).agg(pl.len().alias("c")).sort("bucket")
        return cls(
            bins=tuple((int(k), int(c)) for k, c in counts.iter_rows()),
            zeros=int(series.len() - positive.height),
            count=int(series.len()),
            min=float(series.min()),  # type: ignore[arg-type]
            max=float(series.max()),  # type: ignore[arg-type]
        )

    def merge(self, other: Sketch) -> Sketch:
        """The sketch of both inputs together (exact: bucket counts add)."""
        if other.count == 0:
            return self
        if self.count == 0:
            return other
        merged: dict[int, int] = dict(self.bins)
        for key, value in other.bins:
            merged[key] = merged.get(key, 0) + value
        assert (
            self.min is not None and other.min is not None and self.max is not None and other.max is not None
        )
        return Sketch(
            bins=tuple(sorted(merged.items())),
            zeros=self.zeros + other.zeros,
            count=self.count + other.count,
            min=min(self.min, other.min),
            max=max(self.max, other.max),
        )

    def quantile(self, q: float) -> float | None:
        """The q-quantile (0 <= q <= 1) within 1% relative error; None for an empty sketch.

        The rank convention is that of numpy's default (linear) method at its lower neighbour: the value of
        rank floor(q * (count - 1)) in sorted order. q=0 and q=1 give the exact minimum and maximum.
        """
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile must be within [0, 1], got {q}")
        if self.count == 0:
            return None
        assert self.min is not None and self.max is not None
        if q == 0.0:
            return self.min
        if q == 1.0:
            return self.max
        rank = math.floor(q * (self.count - 1))
        if rank < self.zeros:
            return 0.0
        seen = self.zeros
        for index, count in self.bins:
            seen += count
            if seen > rank:
                return min(max(_bucket_value(index), self.min), self.max)
        return self.max


def merge_all(sketches: Iterable[Sketch]) -> Sketch:
    out = Sketch()
    for sketch in sketches:
        out = out.merge(sketch)
    return out
