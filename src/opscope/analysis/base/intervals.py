"""Interval arithmetic over event tables: union ("busy time" without double counting), intersection
("overlap") and clipping to a window. Every timeline figure is built from these, so each is computed once,
vectorised (sort + cumulative max), never with nested loops.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

START = "start_ns"
END = "end_ns"


def merge(
    frame: pl.DataFrame | pl.LazyFrame, start: str = START, end: str = END, by: Sequence[str] = ()
) -> pl.DataFrame:
    """Merge overlapping or touching intervals (per `by` group) into disjoint ones, sorted by start.

    Returns columns `*by, start_ns, end_ns`. Zero-length and inverted intervals are dropped.
    """
    keys = list(by)
    lazy = frame.lazy().select(*keys, pl.col(start).alias(START), pl.col(end).alias(END))
    lazy = lazy.filter(
        pl.col(START).is_not_null() & pl.col(END).is_not_null() & (pl.col(END) > pl.col(START))
    )
    lazy = lazy.sort([*keys, START])
    prev = pl.col(END).cum_max().shift(1)
    if keys:
        prev = prev.over(keys)
    lazy = lazy.with_columns(prev.alias("_prev"))
    new = pl.col("_prev").is_null() | (pl.col(START) > pl.col("_prev"))
    gid = new.cum_sum()
    if keys:
        gid = gid.over(keys)
    lazy = lazy.with_columns(gid.alias("_gid"))
    out = lazy.group_by([*keys, "_gid"]).agg(pl.col(START).min(), pl.col(END).max())
    return out.drop("_gid").sort([*keys, START]).collect()


def union_ns(
    frame: pl.DataFrame | pl.LazyFrame, start: str = START, end: str = END, by: Sequence[str] = ()
) -> pl.DataFrame | int:
    """Total covered time: an int without `by`, else a frame `*by, busy_ns`."""
    merged = merge(frame, start, end, by)
    length = (pl.col(END) - pl.col(START)).sum()
    if not by:
        return int(merged.select(length).item() or 0)
    return merged.group_by(list(by)).agg(length.alias("busy_ns")).sort(list(by))


def intersection_ns(
    a: pl.DataFrame | pl.LazyFrame, b: pl.DataFrame | pl.LazyFrame, start: str = START, end: str = END
) -> int:
    """Time covered by both sets: |A| + |B| - |A ∪ B|, each set merged first."""
    ma = merge(a, start, end)
    mb = merge(b, start, end)
    both = pl.concat([ma, mb])
    total_a = int(ma.select((pl.col(END) - pl.col(START)).sum()).item() or 0)
    total_b = int(mb.select((pl.col(END) - pl.col(START)).sum()).item() or 0)
    union = merge(both)
    return total_a + total_b - int(union.select((pl.col(END) - pl.col(START)).sum()).item() or 0)


def clip(
    frame: pl.DataFrame | pl.LazyFrame, lo: int, hi: int, start: str = START, end: str = END
) -> pl.LazyFrame:
    """Intervals cut to the window [lo, hi); those entirely outside are dropped."""
    return (
        frame.lazy()
        .with_columns(
            pl.col(start).clip(lower_bound=lo).alias(start), pl.col(end).clip(upper_bound=hi).alias(end)
        )
        .filter(pl.col(end) > pl.col(start))
    )


def gaps(merged: pl.DataFrame, lo: int, hi: int) -> pl.DataFrame:
    """The idle gaps between disjoint sorted intervals within [lo, hi): columns start_ns, end_ns."""
    starts = [lo, *merged[END].to_list()]
    ends = [*merged[START].to_list(), hi]
    out = pl.DataFrame({START: starts, END: ends}, schema={START: pl.Int64, END: pl.Int64})
    return out.with_columns(pl.col(START).clip(lower_bound=lo), pl.col(END).clip(upper_bound=hi)).filter(
        pl.col(END) > pl.col(START)
    )
