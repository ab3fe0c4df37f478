"""Innermost enclosing span: for each call on a CPU thread, the most deeply nested CPU op that contains it.

Used to say which operator issued a synchronisation or a slow launch. Spans on one thread are properly nested
(a profiler records a call stack), so the innermost span containing a call is the latest-starting span that
starts at or before the call and ends at or after its end. Finding it is a "nearest earlier element with
end >= t" query, answered for all calls at once with binary lifting over a sparse table of range maxima of the
span ends: O((spans + calls) log spans), numpy only, no per-call Python loop.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from opscope.model.schema import Col

SPAN_INDEX = "span_index"


def innermost_enclosing(calls: pl.DataFrame, spans: pl.DataFrame, by: Sequence[str] = (Col.PID, Col.TID),
                        start: str = Col.TS_NS, end: str = "end_ns") -> pl.Series:
    """For each row of `calls`, the row index in `spans` of its innermost enclosing span (same `by` keys),
    or null. Both frames need `by`, `start` and `end` columns; a span encloses a call when
    span.start <= call.start and call.end <= span.end."""
    keys = list(by)
    n_calls = calls.height
    if n_calls == 0 or spans.height == 0:
        return pl.Series(SPAN_INDEX, [None] * n_calls, dtype=pl.Int64)
    # One integer per thread, shared by both frames.
    threads = pl.concat([calls.select(keys), spans.select(keys)]).unique(maintain_order=True).with_row_index("_thr")
    ordered = (
        spans.select(*keys, start, end).with_row_index("_orig")
        .join(threads, on=keys, how="left", nulls_equal=True)
        .sort(["_thr", start, end], descending=[False, False, True])  # parents before children on equal start
    )
    thr = ordered["_thr"].to_numpy().astype(np.int64)
    starts = ordered[start].to_numpy().astype(np.int64)
    ends = ordered[end].to_numpy().astype(np.int64)
    orig = ordered["_orig"].to_numpy().astype(np.int64)
    n = len(ends)

    q = calls.select(*keys, start, end).join(threads, on=keys, how="left", nulls_equal=True, maintain_order="left")
    known = (q[start].is_not_null() & q[end].is_not_null()).to_numpy()  # calls without times match nothing
    q_thr = q["_thr"].to_numpy().astype(np.int64)
    q_start = q[start].fill_null(0).to_numpy().astype(np.int64)
    q_end = q[end].fill_null(0).to_numpy().astype(np.int64)

    # Position of the last span (thread, start order) starting at or before each call; first span of its thread.
    bounds = np.searchsorted(thr, np.arange(len(threads) + 1), side="left")
    pos = np.full(n_calls, -1, dtype=np.int64)
    first = np.zeros(n_calls, dtype=np.int64)
    for t in np.unique(q_thr):  # a few threads: one vectorised search each
        lo, hi = bounds[t], bounds[t + 1]
        mask = q_thr == t
        pos[mask] = lo + np.searchsorted(starts[lo:hi], q_start[mask], side="right") - 1
        first[mask] = lo

    # Sparse table: table[k][i] = max(ends[i - 2^k + 1 .. i]) (blocks ending at i).
    table = [ends]
    k = 1
    while (1 << k) <= n:
        prev = table[-1]
        step = 1 << (k - 1)
        cur = prev.copy()
        cur[step:] = np.maximum(prev[step:], prev[:-step])
        table.append(cur)
        k += 1
    valid = (pos >= first) & known
    cur_pos = np.where(valid, pos, 0)
    for level in range(len(table) - 1, -1, -1):
        size = 1 << level
        can = valid & (cur_pos - size + 1 >= first) & (table[level][cur_pos] < q_end)
        cur_pos = np.where(can, cur_pos - size, cur_pos)
        valid &= cur_pos >= first
        cur_pos = np.where(valid, cur_pos, 0)
    found = valid & (ends[cur_pos] >= q_end) & (starts[cur_pos] <= q_start)
    result = np.where(found, orig[cur_pos], -1)
    return pl.Series(SPAN_INDEX, result, dtype=pl.Int64).replace(-1, None)

