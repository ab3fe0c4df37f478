"""The trace's distinct (kind, name) pairs, counted once per trace: the questions "is there any event named
like X" and "which names match" answered from a few hundred rows instead of a pass over the events' text."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import polars as pl

from opscope.analysis.base.codetag import code_tag
from opscope.model.schema import Col
from opscope.model.trace import Trace


def kind_names(trace: Trace) -> pl.DataFrame:
    """Every distinct (kind, name) of the trace's events, computed once per trace in one pass over four columns
    and kept beside the trace cache (`Trace.persisted`: x64 ~105 ms computed, ~1 ms read back):
    kind, name (as text); count; untimed (how many have no duration); first_ns, last_end_ns (the first start
    and the last end of those with a duration, a negative duration counting as 0; null without any). The
    questions "is there any event named like X", "how many", "where does the work start and end" and "how
    many GPU events have no duration" that several analyses ask (capture and compilation markers,
    synchronising calls, `windows.work_span`, `summary.without_duration`) are answered from a few hundred
    rows instead of a scan of the events each."""
    timed = pl.col(Col.DUR_NS).is_not_null()
    return trace.persisted_frame(
        f"kind_names-{code_tag(sys.modules[__name__])}",
        lambda: (
            trace.lazy()
            .group_by(Col.KIND, Col.NAME)
            .agg(
                pl.len().alias("count"),
                pl.col(Col.DUR_NS).null_count().alias("untimed"),
                pl.when(timed).then(pl.col(Col.TS_NS)).min().alias("first_ns"),
                (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS).clip(lower_bound=0)).max().alias("last_end_ns"),
            )
            .select(
                pl.col(Col.KIND).cast(pl.String),
                pl.col(Col.NAME).cast(pl.String),
                "count",
                "untimed",
                "first_ns",
                "last_end_ns",
            )
            .sort(Col.KIND, Col.NAME, nulls_last=True)  # one order in every run, computed or read back
            .collect()
        ),
    )


def span_of(trace: Trace, kinds: Sequence[str]) -> tuple[int, int] | None:
    """(first start, last end) of the events of `kinds` with a duration (`kind_names`), None without any."""
    lo, hi = (
        kind_names(trace)
        .filter(pl.col(Col.KIND).is_in(list(kinds)))
        .select(pl.col("first_ns").min(), pl.col("last_end_ns").max())
        .row(0)
    )
    return None if lo is None or hi is None else (int(lo), int(hi))


def untimed(trace: Trace, kinds: Sequence[str]) -> int:
    """How many events of `kinds` have no duration (`kind_names`)."""
    return int(kind_names(trace).filter(pl.col(Col.KIND).is_in(list(kinds)))["untimed"].sum())


def matching(trace: Trace, kinds: Sequence[str], pattern: str) -> pl.DataFrame:
    """The rows of `kind_names` of `kinds` whose name matches `pattern`."""
    return kind_names(trace).filter(
        pl.col(Col.KIND).is_in(list(kinds)) & pl.col(Col.NAME).str.contains(pattern)
    )


def names_of(trace: Trace, kinds: Sequence[str], pattern: str) -> list[str]:
    """The distinct names of events of `kinds` that match `pattern` (`kind_names`)."""
    return matching(trace, kinds, pattern)[Col.NAME].unique().sort().to_list()
