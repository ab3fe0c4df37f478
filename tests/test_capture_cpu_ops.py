"""The capture figures have one definition each, shared with `opscope ops` and `opscope steps` (issue 17): the
CPU-operator table is the cpu_op rows of `ops`, GPU busy is the busy time of `steps`, CPU busy uses the same
window arithmetic. Each is also checked against the independent reference reader (tests/reference.py) on real
CPU-only and GPU traces."""

from __future__ import annotations

import pytest

import opscope
import reference as ref
from conftest import corpus_path
from opscope.analysis.attribution.cpu_ops import cpu_busy_ns, cpu_op_table
from opscope.analysis.attribution.ops import OpOptions, op_stats
from opscope.analysis.attribution.steps import step_stats
from opscope.analysis.base.windows import step_windows
from opscope.capture.summary import summarize, utilization
from opscope.model.schema import Kind

CORPUS = [
    "hta/cpu_only_rank-34.OLDVERSION_b8cce2cd9c.pt.trace.json.gz",  # real CPU-only capture, 7.4k ops, 5 steps
    "hta/cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",  # trimmed CPU-only capture
    "hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz",  # GPU trace: the table is the CPU side
    "param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json",  # user annotations nested inside ops
]
V100 = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"  # GPU trace with step markers


@pytest.mark.corpus
@pytest.mark.parametrize("relative", CORPUS)
def test_cpu_op_table_matches_raw_recomputation(relative):
    path = corpus_path(relative)
    table = cpu_op_table(opscope.load(path), top=0)
    expected = ref.cpu_op_stats(ref.load(path))
    got = {r.name: {"calls": r.calls, "total_ns": r.total_ns, "self_ns": r.self_ns} for r in table.rows}
    assert got == expected
    assert table.ops == sum(r["calls"] for r in expected.values())
    assert table.self_total_ns == sum(r["self_ns"] for r in expected.values())
    assert sum(r.share for r in table.rows) == pytest.approx(1.0)
    assert [r.self_ns for r in table.rows] == sorted((r.self_ns for r in table.rows), reverse=True)


@pytest.mark.corpus
@pytest.mark.parametrize("relative", CORPUS)
def test_cpu_op_table_shows_the_numbers_of_ops(relative):
    # One definition of CPU self time: the capture table is the cpu_op rows of `opscope ops`, number for number.
    trace = opscope.load(corpus_path(relative))
    ops = {
        r.name: (r.calls, r.cpu_total_ns, r.cpu_self_ns)
        for r in op_stats(trace, OpOptions(top=0)).rows
        if r.kind == Kind.CPU_OP and r.name != "ProfilerStep#*"
    }
    table = cpu_op_table(trace, top=0)
    assert {r.name: (r.calls, r.total_ns, r.self_ns) for r in table.rows} == ops


@pytest.mark.corpus
def test_dlrm_self_time_leaves_out_annotations_nested_in_ops():
    # The one change of number in issue 17: record_param_comms encloses a user annotation; its self time no
    # longer includes it (605 us before, as `ops` and torch.profiler's "CPU self" count it now: 163 us).
    table = cpu_op_table(opscope.load(corpus_path(CORPUS[3])), top=0)
    row = next(r for r in table.rows if r.name == "record_param_comms")
    assert (row.calls, row.total_ns, row.self_ns) == (13, 605_000, 163_000)


@pytest.mark.corpus
def test_self_time_sums_to_per_thread_union():
    # With proper nesting and no annotations inside ops, self time summed over all ops covers every instant of
    # operator time once per thread.
    path = corpus_path(CORPUS[0])
    ops = ref.cpu_ops(ref.load(path))
    threads = {op["thread"] for op in ops}
    union = sum(
        ref.union_length([(o["ts"], o["ts"] + o["dur"]) for o in ops if o["thread"] == t]) for t in threads
    )
    assert cpu_op_table(opscope.load(path)).self_total_ns == union


@pytest.mark.corpus
def test_top_cut_keeps_the_rest_line():
    trace = opscope.load(corpus_path(CORPUS[0]))
    full = cpu_op_table(trace, top=0)
    cut = cpu_op_table(trace, top=5)
    assert cut.rows == full.rows[:5]
    assert cut.rest is not None and cut.rest.rows == len(full.rows) - 5
    assert cut.rest.self_ns == sum(r.self_ns for r in full.rows[5:])


@pytest.mark.corpus
@pytest.mark.parametrize(
    "relative",
    [CORPUS[0], "kineto/tb_plugin_samples_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz"],
)
def test_step_windows_and_cpu_busy_match_raw(relative):
    # The 2021-schema resnet trace files its ProfilerStep markers as "Operator" events.
    path = corpus_path(relative)
    trace = opscope.load(path)
    events = ref.load(path)
    windows = step_windows(trace)
    raw = ref.step_windows(events)
    assert [(w.step, w.start_ns, w.end_ns) for w in windows] == raw
    ops = ref.cpu_ops(events)
    expected = sum(
        ref.union_length([(max(o["ts"], lo), min(o["ts"] + o["dur"], hi)) for o in ops]) for _, lo, hi in raw
    )
    assert cpu_busy_ns(trace, windows) == expected
    assert utilization(trace, gpu=False) == pytest.approx(ref.cpu_busy_share(events))


@pytest.mark.corpus
def test_gpu_busy_of_a_capture_is_the_busy_time_of_steps():
    # One definition of busy time: what `opscope demo` / `bench` report is what `opscope steps` shows.
    path = corpus_path(V100)
    trace = opscope.load(path)
    steps = step_stats(trace)
    busy = sum(d.busy_ns for row in steps.rows for d in row.devices)
    wall = sum(row.wall_ns for row in steps.rows) * len(steps.devices)
    assert steps.from_markers and utilization(trace, gpu=True) == busy / wall
    events = ref.load(path)
    windows = ref.steps(events)
    assert busy == ref.busy_in(ref.gpu_events(events), windows)
    assert wall == sum(hi - lo for lo, hi in windows)


@pytest.mark.corpus
def test_capture_summary_shows_the_numbers_of_summary_and_ops():
    path = corpus_path(CORPUS[0])
    result = summarize(path, top=0)
    trace = opscope.load(path)
    assert result.kernels == opscope.summary(trace, top=0)
    assert result.cpu_ops == cpu_op_table(trace, top=0, annotations=True)
    assert result.steps == len(ref.step_windows(ref.load(path)))


def test_step_windows_without_markers_is_one_window():
    path = corpus_path("hta/critical_path_cuda_event_sync_multi_stream_event_sync_trace.json.gz")
    windows = step_windows(opscope.load(path))
    assert len(windows) == 1 and windows[0].step is None
    events = [e for e in ref.load(path) if ref.is_x(e) and e.get("cat") != "Trace"]
    assert windows[0].start_ns == min(ref.ns(e["ts"]) for e in events)
    assert windows[0].end_ns == max(ref.ns(e["ts"]) + ref.ns(e["dur"]) for e in events)
