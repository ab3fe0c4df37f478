"""The trace's (kind, name) table (`names.kind_names`), which capture classification, the synchronising
calls, the whole-trace span and the count of GPU events without a duration read instead of scanning the events:
its counts against the raw JSON of real traces, its span and untimed counts against a pass over the events."""

from __future__ import annotations

from collections import Counter

import polars as pl
import pytest

import opscope
import reference as ref
from conftest import corpus_path
from opscope.analysis.base.names import kind_names, names_of, span_of, untimed
from opscope.analysis.base.windows import work_span
from opscope.analysis.kernels.summary import without_duration
from opscope.model.schema import GPU_KINDS, Col, Kind
from opscope.model.trace import TraceMeta

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


SPAN_TRACES = [
    *TRACES,
    "tracelens/mi300__jax08_gemm__tw003.xplane.pb",
    "pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite",
]


@pytest.mark.parametrize("relative", SPAN_TRACES)
def test_span_and_untimed_counts_equal_a_pass_over_the_events(relative: str) -> None:
    """`windows.work_span` of the whole trace and `summary.without_duration` read the table; the same figures
    computed by a pass over the events (the span's own form for a selection of GPU events)."""
    path = corpus_path(relative)
    trace = opscope.load(path)
    assert work_span(trace) == work_span(opscope.load(path), trace.gpu_events())
    gpu = pl.col(Col.KIND).is_in(list(GPU_KINDS))
    direct = trace.lazy().filter(gpu & pl.col(Col.DUR_NS).is_null()).select(pl.len()).collect().item()
    assert without_duration(trace) == direct


def test_span_of_a_hand_made_frame() -> None:
    """Hand-made edge cases: a negative duration ends at its start, events without a duration or a start and
    kinds that are not work (instants, flows) are left out; no work at all is no span."""
    frame = pl.DataFrame(
        {
            Col.KIND: [Kind.KERNEL, Kind.KERNEL, Kind.CPU_OP, Kind.CPU_OP, Kind.INSTANT, Kind.KERNEL],
            Col.NAME: ["k", "k", "op", "op2", "mark", "late"],
            Col.TS_NS: [100, 50, 400, None, 0, 900],
            Col.DUR_NS: [10, None, -5, 7, 1000, None],
        },
        schema_overrides={Col.KIND: pl.Categorical, Col.NAME: pl.Categorical},
    )
    trace = opscope.Trace.from_frame(TraceMeta(path="hand-made", format="test"), frame)
    assert span_of(trace, [Kind.KERNEL, Kind.CPU_OP]) == (100, 400)
    assert untimed(trace, [Kind.KERNEL]) == 2
    assert span_of(trace, [Kind.MEMSET]) is None
