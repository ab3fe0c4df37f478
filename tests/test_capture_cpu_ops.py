"""The CPU-operator table and the busy/step-window figures, checked against an independent recomputation from
the raw JSON of real CPU-only and GPU traces (tests/capture_support.py)."""

from __future__ import annotations

import pytest

import opscope
from capture_support import cpu_op_stats, cpu_ops, raw_events, step_windows, union_length
from conftest import corpus_path
from opscope.analysis.busy import busy_ns
from opscope.analysis.busy import step_windows as opscope_windows
from opscope.analysis.cpu_ops import cpu_op_table
from opscope.model.schema import Kind

CORPUS = [
    "hta/cpu_only_rank-34.OLDVERSION_b8cce2cd9c.pt.trace.json.gz",  # real CPU-only capture, 7.4k ops, 5 steps
    "hta/cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",  # trimmed CPU-only capture
    "hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz",  # GPU trace: the table is the CPU side
    "param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json",
]


@pytest.mark.corpus
@pytest.mark.parametrize("relative", CORPUS)
def test_cpu_op_table_matches_raw_recomputation(relative):
    path = corpus_path(relative)
    table = cpu_op_table(opscope.load(path), top=0)
    expected = cpu_op_stats(path)
    got = {r.name: {"calls": r.calls, "total_ns": r.total_ns, "self_ns": r.self_ns} for r in table.rows}
    assert got == expected
    assert table.ops == sum(r["calls"] for r in expected.values())
    assert table.self_total_ns == sum(r["self_ns"] for r in expected.values())
    assert sum(r.share for r in table.rows) == pytest.approx(1.0)
    assert [r.self_ns for r in table.rows] == sorted((r.self_ns for r in table.rows), reverse=True)


@pytest.mark.corpus
def test_self_time_sums_to_per_thread_union():
    # With proper nesting, self time summed over all ops covers every instant of operator time once per thread.
    path = corpus_path(CORPUS[0])
    ops = cpu_ops(raw_events(path))
    threads = {op["thread"] for op in ops}
    union = sum(union_length([(o["ts"], o["ts"] + o["dur"]) for o in ops if o["thread"] == t]) for t in threads)
    assert cpu_op_table(opscope.load(path)).self_total_ns == union


@pytest.mark.corpus
def test_top_cut_keeps_the_rest_line():
    path = corpus_path(CORPUS[0])
    full = cpu_op_table(opscope.load(path), top=0)
    cut = cpu_op_table(opscope.load(path), top=5)
    assert cut.rows == full.rows[:5]
    assert cut.rest is not None and cut.rest.rows == len(full.rows) - 5
    assert cut.rest.self_ns == sum(r.self_ns for r in full.rows[5:])


@pytest.mark.corpus
@pytest.mark.parametrize("relative", [CORPUS[0], "kineto/tb_plugin_samples_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz"])
def test_step_windows_and_busy_match_raw(relative):
    # The 2021-schema resnet trace files its ProfilerStep markers as "Operator" events.
    path = corpus_path(relative)
    trace = opscope.load(path)
    windows = opscope_windows(trace)
    raw = step_windows(path)
    assert [(w.step, w.start_ns, w.end_ns) for w in windows] == raw
    ops = cpu_ops(raw_events(path))
    expected = sum(union_length([(max(o["ts"], lo), min(o["ts"] + o["dur"], hi)) for o in ops]) for _, lo, hi in raw)
    assert busy_ns(trace, (Kind.CPU_OP,), windows) == expected


def test_step_windows_without_markers_is_one_window():
    path = corpus_path("hta/critical_path_cuda_event_sync_multi_stream_event_sync_trace.json.gz")
    windows = opscope_windows(opscope.load(path))
    assert len(windows) == 1 and windows[0].step is None
    events = [e for e in raw_events(path) if e.get("ph") == "X" and "dur" in e and e.get("cat") != "Trace"]
    from capture_support import ns

    assert windows[0].start_ns == min(ns(e["ts"]) for e in events)
    assert windows[0].end_ns == max(ns(e["ts"]) + ns(e["dur"]) for e in events)
