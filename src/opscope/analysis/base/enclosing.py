"""Which interval holds which: the one place where an analysis asks "which enclosing interval (Python frame, op,
annotation, step) holds this event, innermost first".

Containers and queries are spans on lanes (a lane is a thread, as one integer per (pid, tid): `lanes`):
a container holds a query when both are on the same lane and start_c <= start_q and end_c >= end_q. The answer
is one sorted sweep over containers and queries together (`nesting.innermost_container`: a sort, running
maxima and binary lifting), O((n + m) log(n + m)) for n containers and m queries, whatever the trace holds:
many frames per thread, deep stacks, thousands of threads, every event at one timestamp. The question "which
events fall inside these windows" has its sweeps beside the windows (`windows.overlap_pairs`,
`intervals.inside_any`, `intervals.Coverage`).

What this replaces, and how a reviewer spots it (docs/analysis-scale.md): a join on a key (pid and tid, a
stream, a correlation id) followed by a filter comparing the two sides' times (`start <= ts & end >= end`).
That join builds every pair of the key's rows before the filter drops most of them: calls x frames per
thread, which grows with the square of the trace.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import polars as pl

from opscope.analysis.base.arrays import take_or
from opscope.analysis.base.nesting import innermost_container
from opscope.model.schema import Col


@dataclass(frozen=True, eq=False)
class Spans:
    """Intervals [start, end] on lanes, as int64 arrays of one length. A missing start makes a span that holds
    nothing and is held by nothing (`valid` False)."""

    lane: np.ndarray
    start: np.ndarray
    end: np.ndarray
    valid: np.ndarray

    def __len__(self) -> int:
        return len(self.start)

    @classmethod
    def of(
        cls,
        frame: pl.DataFrame,
        lane: np.ndarray,
        start: str = Col.TS_NS,
        dur: str | None = Col.DUR_NS,
        end: str | None = None,
    ) -> Spans:
        """The spans of a frame's rows on the lanes `lane` (from `lanes`, -1: unknown): from `start` and `dur`
        (a negative or missing duration counts as 0) or from `start` and `end`."""
        if end is not None:
            stop = pl.col(end)
        elif dur is not None:
            stop = pl.col(start) + pl.col(dur).fill_null(0).clip(lower_bound=0)
        else:
            stop = pl.col(start)
        cols = frame.select(pl.col(start).cast(pl.Int64).alias("_s"), stop.cast(pl.Int64).alias("_e"))
        valid = cols.select(pl.col("_s").is_not_null() & pl.col("_e").is_not_null()).to_series().to_numpy()
        s = cols["_s"].fill_null(0).to_numpy()
        e = cols["_e"].fill_null(0).to_numpy()
        return cls(lane=lane, start=s, end=np.maximum(e, s), valid=valid & (lane >= 0))


def lanes(*frames: pl.DataFrame, pid: str = Col.PID, tid: str = Col.TID) -> list[np.ndarray]:
    """One integer per (pid, tid) for the rows of each frame, the same thread the same integer in all of them
    (-1 where either is missing), from categorical codes. Polars keeps its table of categories only while a
    column uses it, so codes made by separate casts of text agree only while a categorical column is alive:
    where one of the frames has such columns (the trace's own tables), the others' text is cast beside them;
    where none has, all the text is cast in one frame."""
    codes = [pl.col(c).cast(pl.Categorical).to_physical().cast(pl.Int64) for c in (pid, tid)]
    key = (codes[0] * (1 << 32) + codes[1]).fill_null(-1)
    if any(f.schema[pid] == pl.Categorical and f.schema[tid] == pl.Categorical for f in frames):
        return [f.select(key).to_series().to_numpy() for f in frames]
    both = pl.concat([f.select(pl.col(pid).cast(pl.String), pl.col(tid).cast(pl.String)) for f in frames])
    joined = both.select(key).to_series().to_numpy()
    cuts = np.cumsum([0, *(f.height for f in frames)])
    return [joined[lo:hi] for lo, hi in itertools.pairwise(cuts)]


def innermost(containers: Spans, queries: Spans, can_contain: np.ndarray | None = None) -> np.ndarray:
    """For each query, the index (into `containers`) of the innermost container that holds it, -1 where none
    does. `can_contain`: a mask over the containers (default: all valid ones). A container with the same
    span as a query holds it; of equal containers the one listed last counts as the inner one."""
    n, m = len(containers), len(queries)
    if m == 0:
        return np.empty(0, dtype=np.int64)
    if n == 0:
        return np.full(m, -1, dtype=np.int64)
    allowed = containers.valid if can_contain is None else (can_contain & containers.valid)
    candidates = np.flatnonzero(allowed)
    if 4 * m < len(candidates):
        # few queries (a step's synchronising calls among a trace's Python frames): only a container that
        # holds some query's start can hold a query, whatever the lane; two binary searches per container
        # drop the others before the sort
        starts = np.sort(queries.start[queries.valid])
        first = np.searchsorted(starts, containers.start[candidates], side="left")
        last = np.searchsorted(starts, containers.end[candidates], side="right")
        candidates = candidates[last > first]
    lanes = np.concatenate([containers.lane[candidates], np.where(queries.valid, queries.lane, -3)])
    start = np.concatenate([containers.start[candidates], queries.start])
    end = np.concatenate([containers.end[candidates], queries.end])
    k = len(candidates)
    may = np.concatenate([np.ones(k, dtype=bool), np.zeros(m, dtype=bool)])
    # on an identical span the container sorts first (outer), so it is found by the query after it
    tiebreak = np.concatenate([np.zeros(k, dtype=np.int64), np.ones(m, dtype=np.int64)])
    found = innermost_container(lanes, start, end, may, tiebreak)[k:]
    return np.where(queries.valid, take_or(candidates, found, -1), -1)


def innermost_where(containers: Spans, queries: Spans, wanted: np.ndarray) -> np.ndarray:
    """For each query, the innermost container holding it among those `wanted` (a mask over the containers),
    else the innermost container holding it, else -1: e.g. the user's own source line around a call, else
    the innermost Python frame. Two sweeps, exact whether or not the containers nest (frames that only touch
    at an instant both hold a zero-length call there)."""
    inner = innermost(containers, queries)
    if not wanted.any():
        return inner
    preferred = innermost(containers, queries, wanted)
    return np.where(preferred >= 0, preferred, inner)
