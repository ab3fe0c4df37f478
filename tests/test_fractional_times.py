"""Regression: fractional microseconds must survive ingest (pyarrow 26 truncates floats cast to int64)."""

from __future__ import annotations

import opscope
from handmade_traces import document, kernel, write
from opscope.model.schema import Col


def test_fractional_microseconds_are_kept(tmp_path) -> None:
    # hand-made: one kernel with fractional start and duration, one with integers
    events = [kernel("a", 5654139052683.176, 7.136, 1), kernel("b", 10, 3, 2)]
    trace = opscope.load(write(tmp_path / "t.json", document(events)), cache=False)
    rows = dict(zip(trace.events[Col.NAME].cast(str), trace.events[Col.DUR_NS]))
    assert rows == {"a": 7136, "b": 3000}
    starts = sorted(trace.events[Col.TS_NS].to_list())
    assert starts == [10_000, 5654139052683176]
