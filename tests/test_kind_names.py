"""The trace's (kind, name) table (`names.kind_names`), which capture classification and the synchronising
calls read instead of scanning the events: its counts against the raw JSON of real traces."""

from __future__ import annotations

from collections import Counter

import polars as pl
import pytest

import opscope
import reference as ref
from conftest import corpus_path
from opscope.analysis.base.names import kind_names, names_of
from opscope.model.schema import Col, Kind

TRACES = [
    "hta/critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz",
    "tracelens/mi300__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
]


@pytest.mark.parametrize("relative", TRACES)
def test_runtime_call_counts_against_raw_json(relative: str) -> None:
    path = corpus_path(relative)
    raw = Counter(e.get("name") for e in ref.load(path) if e.get("cat") in ref.LAUNCH_CATS and ref.is_x(e))
    table = kind_names(opscope.load(path))
    calls = table.filter(pl.col(Col.KIND).is_in([Kind.RUNTIME, Kind.DRIVER]))
    assert dict(calls.select(Col.NAME, "count").rows()) == dict(raw)
    syncs = names_of(opscope.load(path), [Kind.RUNTIME, Kind.DRIVER], ref.SYNC_NAMES.pattern)
    assert syncs == sorted(n for n in raw if ref.SYNC_NAMES.search(n)) and syncs
