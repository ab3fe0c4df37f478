"""Interval arithmetic over event tables: union ("busy time" without double counting), intersection
("overlap") and clipping to a window. Every timeline figure is built from these, so each is computed once,
vectorised (sort + cumulative max), never with nested loops.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
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
    if not keys:
        return _merge_one(frame, start, end)
    grouped = _merge_grouped(frame, start, end, keys)
    if grouped is not None:
        return grouped
    lazy = _valid(frame, start, end, keys).sort([*keys, START])
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


def _valid(
    frame: pl.DataFrame | pl.LazyFrame, start: str, end: str, keys: Sequence[str] = ()
) -> pl.LazyFrame:
    """`*keys, start_ns, end_ns` of the intervals `merge` keeps: both ends known, end after start."""
    return (
        frame.lazy()
        .select(*keys, pl.col(start).alias(START), pl.col(end).alias(END))
        .filter(pl.col(START).is_not_null() & pl.col(END).is_not_null() & (pl.col(END) > pl.col(START)))
    )


def _merge_one(frame: pl.DataFrame | pl.LazyFrame, start: str, end: str) -> pl.DataFrame:
    """`merge` without groups, in numpy: sorted by start, a new interval begins where the start passes the
    running maximum of the ends so far; it ends at that running maximum just before the next one begins
    (one sort and two passes, no group-by: the polars form cost ~30 ms per call on 1 M intervals)."""
    s, e, dtypes = _valid_arrays(frame, start, end)
    schema = {START: dtypes[0], END: dtypes[1]}
    if len(s) == 0:
        return pl.DataFrame({START: s, END: e}, schema=schema)
    _, _, starts, ends = _sweep(s, e)
    return pl.DataFrame({START: starts, END: ends}, schema=schema)


def _valid_arrays(
    frame: pl.DataFrame | pl.LazyFrame, start: str, end: str
) -> tuple[np.ndarray, np.ndarray, tuple[pl.DataType, pl.DataType]]:
    """The starts and ends of the intervals `merge` keeps (`_valid`) as numpy arrays, with their dtypes. A
    frame of integer columns without nulls is filtered in numpy: the small frames of the advice's claims
    (dozens of merges per command) cost a polars query each, ~0.4 ms, more than their merge."""
    if isinstance(frame, pl.DataFrame):
        a, b = frame.get_column(start), frame.get_column(end)
        if a.dtype == b.dtype and a.dtype.is_integer() and a.null_count() == 0 and b.null_count() == 0:
            s, e = a.to_numpy(), b.to_numpy()
            keep = e > s
            return s[keep], e[keep], (a.dtype, b.dtype)
    both = _valid(frame, start, end).collect()
    return both[START].to_numpy(), both[END].to_numpy(), (both.schema[START], both.schema[END])


def covered_ns(merged: pl.DataFrame) -> int:
    """The time a `merge` result covers (its intervals are disjoint: the sum of their lengths)."""
    if merged.height == 0:
        return 0
    return int((merged[END].to_numpy() - merged[START].to_numpy()).sum())


def _sweep(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The merge of intervals [s, e) (at least one), in numpy: sorted by start, a new interval begins where the
    start passes the running maximum of the ends so far and ends at that maximum just before the next one
    begins. (order: the sort, new: where a merged interval begins in that order, its starts, its ends)."""
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    last = np.empty(len(s), dtype=bool)
    last[:-1] = new[1:]
    last[-1] = True
    return order, new, s[new], reach[last]


def group_ids(frame: pl.DataFrame, keys: Sequence[str]) -> tuple[pl.DataFrame, np.ndarray]:
    """The distinct values of the `keys` columns of `frame` (sorted; nulls a value of their own) and each row's
    index among them."""
    groups = frame.select(keys).unique().sort(keys).with_row_index("_gid")
    gid = (
        frame.select(keys)
        .join(groups, on=list(keys), how="left", nulls_equal=True, maintain_order="left")["_gid"]
        .to_numpy()
        .astype(np.int64)
    )
    return groups.drop("_gid"), gid


def covered_per_window(
    start: np.ndarray, end: np.ndarray, group: np.ndarray, groups: int, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray | None:
    """(windows x groups) int64: per window [lo, hi] and group (`group`: ints in [0, groups)), the length of the
    union of that group's intervals [start, end) cut to the window, what `union_ns` of the intervals' pieces
    per window and group gives. One merge of every group at once (`_merge_grouped`'s shifted time axis), then
    per window two binary searches and prefix sums of the merged lengths, less what sticks out at both ends:
    O(n log n + windows x groups x log n), where cutting every interval into pieces per window first cost a
    row per (interval, window). None where the shifted times would not fit in int64."""
    out = np.zeros((len(lo), groups), dtype=np.int64)
    keep = end > start
    s, e, g = start[keep].astype(np.int64), end[keep].astype(np.int64), group[keep].astype(np.int64)
    if len(s) == 0 or len(lo) == 0:
        return out
    base = min(int(s.min()), int(lo.min()))
    span = max(int(e.max()), int(hi.max())) - base + 1
    if span * (groups + 1) >= 2**62:
        return None
    _, _, starts, ends = _sweep(s + g * span - base, e + g * span - base)
    prefix = np.zeros(len(starts) + 1, dtype=np.int64)
    np.cumsum(ends - starts, out=prefix[1:])
    shift = np.arange(groups, dtype=np.int64) * span - base
    w_lo = lo.astype(np.int64)[:, None] + shift[None, :]
    w_hi = hi.astype(np.int64)[:, None] + shift[None, :]
    first = np.searchsorted(ends, w_lo, side="right")  # the first merged interval ending after the start
    stop = np.searchsorted(starts, w_hi, side="left")  # past the last one starting before the end
    meets = stop > first
    head = np.maximum(w_lo - starts[np.minimum(first, len(starts) - 1)], 0)
    tail = np.maximum(ends[np.maximum(stop - 1, 0)] - w_hi, 0)
    covered = prefix[stop] - prefix[first] - head - tail
    out[meets] = np.maximum(covered[meets], 0)
    return out


def _merge_grouped(
    frame: pl.DataFrame | pl.LazyFrame, start: str, end: str, keys: list[str]
) -> pl.DataFrame | None:
    """`merge` by groups in numpy: each group's intervals are moved to a stretch of the time axis of their own
    (group g by g x (span + 1) ns, the groups in key order), where one ungrouped merge (`_merge_one`'s sort and
    running maximum) cannot join two groups; the polars form sorted and ran a window function per group
    (~0.1 s per call on a million intervals). None where the shifted times would not fit in int64 (the
    caller's polars form answers)."""
    data = _valid(frame, start, end, keys).collect()
    schema = {**{k: data.schema[k] for k in keys}, START: data.schema[START], END: data.schema[END]}
    if data.height == 0:
        return pl.DataFrame(schema=schema)
    groups, gid = group_ids(data, keys)
    s = data[START].to_numpy().astype(np.int64)
    e = data[END].to_numpy().astype(np.int64)
    base = int(s.min())
    span = int(e.max()) - base + 1
    if span * (groups.height + 1) >= 2**62:
        return None
    shift = gid * span - base
    order, new, starts, ends = _sweep(s + shift, e + shift)
    which = gid[order][new]
    back = which * span - base
    return groups[which].with_columns(
        pl.Series(START, starts - back).cast(schema[START]),
        pl.Series(END, ends - back).cast(schema[END]),
    )


def union_ns(
    frame: pl.DataFrame | pl.LazyFrame, start: str = START, end: str = END, by: Sequence[str] = ()
) -> pl.DataFrame | int:
    """Total covered time: an int without `by`, else a frame `*by, busy_ns`."""
    merged = merge(frame, start, end, by)
    if not by:
        return covered_ns(merged)
    length = (pl.col(END) - pl.col(START)).sum()
    return merged.group_by(list(by)).agg(length.alias("busy_ns")).sort(list(by))


def intersection_ns(
    a: pl.DataFrame | pl.LazyFrame, b: pl.DataFrame | pl.LazyFrame, start: str = START, end: str = END
) -> int:
    """Time covered by both sets: |A| + |B| - |A ∪ B|, each set merged first."""
    ma = merge(a, start, end)
    mb = merge(b, start, end)
    return covered_ns(ma) + covered_ns(mb) - covered_ns(merge(pl.concat([ma, mb])))


def intersect(a: pl.DataFrame, b: pl.DataFrame) -> pl.DataFrame:
    """The intervals covered by both sets (start_ns, end_ns), each set merged first: one sweep over the sorted
    endpoints (+1 at a start, -1 at an end; covered by both where the running count is 2), O(n log n)."""
    ma, mb = merge(a), merge(b)
    if ma.height == 0 or mb.height == 0:
        return pl.DataFrame(schema={START: pl.Int64, END: pl.Int64})
    ends = [f.get_column(col).to_numpy().astype(np.int64) for f in (ma, mb) for col in (START, END)]
    t = np.concatenate(ends)
    d = np.concatenate(
        [np.full(len(x), step, dtype=np.int64) for x, step in zip(ends, (1, -1, 1, -1), strict=True)]
    )
    order = np.lexsort((d, t))  # at a tie an end comes first: touching intervals do not overlap
    t = t[order]
    covered = np.cumsum(d[order])[:-1] == 2
    keep = covered & (t[1:] > t[:-1])
    return pl.DataFrame({START: t[:-1][keep], END: t[1:][keep]}, schema={START: pl.Int64, END: pl.Int64})


def subtract(a: pl.DataFrame, b: pl.DataFrame) -> pl.DataFrame:
    """The intervals covered by `a` and not by `b` (start_ns, end_ns), each set merged first: one sweep over the
    sorted endpoints, as `intersect` (covered where a's running count is 1 and b's is 0), O(n log n)."""
    ma = merge(a)
    if ma.height == 0:
        return pl.DataFrame(schema={START: pl.Int64, END: pl.Int64})
    mb = merge(b)
    if mb.height == 0:
        return ma.select(pl.col(START).cast(pl.Int64), pl.col(END).cast(pl.Int64))
    ends = [f.get_column(col).to_numpy().astype(np.int64) for f in (ma, mb) for col in (START, END)]
    t = np.concatenate(ends)
    da = np.concatenate(
        [
            np.ones(len(ends[0]), np.int64),
            -np.ones(len(ends[1]), np.int64),
            np.zeros(len(ends[2]) + len(ends[3]), np.int64),
        ]
    )
    db = np.concatenate(
        [
            np.zeros(len(ends[0]) + len(ends[1]), np.int64),
            np.ones(len(ends[2]), np.int64),
            -np.ones(len(ends[3]), np.int64),
        ]
    )
    order = np.lexsort((da + db, t))  # at a tie an end comes first
    t = t[order]
    covered = (np.cumsum(da[order])[:-1] > 0) & (np.cumsum(db[order])[:-1] == 0)
    keep = covered & (t[1:] > t[:-1])
    out = pl.DataFrame({START: t[:-1][keep], END: t[1:][keep]}, schema={START: pl.Int64, END: pl.Int64})
    return merge(out) if out.height else out


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


class Coverage:
    """How much of a set of intervals lies inside any number of query windows, in one sweep.

    With C(t) = the sum over the intervals of clip(t - start, 0, end - start) (the covered time before t, each
    interval counted once even where intervals overlap each other), the time the set covers inside [lo, hi) is
    C(hi) - C(lo) for hi >= lo. C is read from the sorted starts and ends and their prefix sums: O((n + q) log n)
    for q windows, where summing a clipped copy of the set per window was O(n x q). Exact int64 arithmetic."""

    def __init__(self, frame: pl.DataFrame, start: str = START, end: str = END) -> None:
        valid = frame.filter(
            pl.col(start).is_not_null() & pl.col(end).is_not_null() & (pl.col(end) > pl.col(start))
        )
        self._starts = np.sort(valid[start].to_numpy().astype(np.int64))
        self._ends = np.sort(valid[end].to_numpy().astype(np.int64))
        self._start_sums = np.concatenate(([0], np.cumsum(self._starts)))
        self._end_sums = np.concatenate(([0], np.cumsum(self._ends)))

    def before(self, t: np.ndarray) -> np.ndarray:
        """C(t) for each t."""
        t = np.asarray(t, dtype=np.int64)
        started = np.searchsorted(self._starts, t, side="right")
        ended = np.searchsorted(self._ends, t, side="right")
        return (started * t - self._start_sums[started]) - (ended * t - self._end_sums[ended])

    def inside(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """The covered time inside each window [lo, hi) (0 where hi <= lo)."""
        lo = np.asarray(lo, dtype=np.int64)
        hi = np.asarray(hi, dtype=np.int64)
        return np.where(hi > lo, self.before(hi) - self.before(lo), 0)


def inside_any(start: pl.Series, end: pl.Series, windows: Sequence[tuple[int, int]]) -> pl.Series:
    """For each interval [start, end]: does one window [lo, hi] hold it whole (lo <= start and end <= hi)?

    One search per interval: among the windows that open at or before `start` (windows sorted by lo), the one
    that closes last decides (a running maximum of hi). O((n + w) log w), where testing every window for
    every interval was O(n x w). An interval with a missing start or end is not held (False)."""
    if not windows:
        return pl.Series(np.zeros(len(start), dtype=bool))
    ordered = sorted(windows)
    los = np.array([lo for lo, _ in ordered], dtype=np.int64)
    reach = np.maximum.accumulate(np.array([hi for _, hi in ordered], dtype=np.int64))
    known = (start.is_not_null() & end.is_not_null()).to_numpy()
    s = start.fill_null(0).cast(pl.Int64).to_numpy()
    e = end.fill_null(0).cast(pl.Int64).to_numpy()
    at = np.searchsorted(los, s, side="right") - 1
    return pl.Series((at >= 0) & (reach[np.maximum(at, 0)] >= e) & known)
