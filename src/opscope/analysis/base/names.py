"""The trace's distinct (kind, name) pairs, counted once per trace: the questions "is there any event named
like X" and "which names match" answered from a few hundred rows instead of a pass over the events' text."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from opscope.model.schema import Col
from opscope.model.trace import Trace


def kind_names(trace: Trace) -> pl.DataFrame:
    """Every distinct (kind, name) of the trace's events with its count (kind, name as text; count), computed
    once per trace: the questions "is there any event named like X" and "how many" that several analyses ask
    (capture and compilation markers, synchronising calls) answered from a few hundred rows instead of a scan
    of the events each."""
    return trace.derived(
        "kind_names",
        lambda: (
            trace.lazy()
            .group_by(Col.KIND, Col.NAME)
            .agg(pl.len().alias("count"))
            .select(pl.col(Col.KIND).cast(pl.String), pl.col(Col.NAME).cast(pl.String), "count")
            .collect()
        ),
    )


def matching(trace: Trace, kinds: Sequence[str], pattern: str) -> pl.DataFrame:
    """The rows of `kind_names` of `kinds` whose name matches `pattern`."""
    return kind_names(trace).filter(
        pl.col(Col.KIND).is_in(list(kinds)) & pl.col(Col.NAME).str.contains(pattern)
    )


def names_of(trace: Trace, kinds: Sequence[str], pattern: str) -> list[str]:
    """The distinct names of events of `kinds` that match `pattern` (`kind_names`)."""
    return matching(trace, kinds, pattern)[Col.NAME].unique().sort().to_list()
