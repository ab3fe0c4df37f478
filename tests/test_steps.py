"""`opscope steps`: per-step, per-device figures against a raw recomputation (plain-Python interval unions of
the raw events), whole-trace windows, overlapping steps, events outside every step, CPU-only traces, and the
command's outputs."""

from __future__ import annotations

import csv
import io
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

import opscope
import reference as ref
from conftest import corpus_path
from opscope.analysis.attribution.steps import StepOptions, step_stats, step_windows
from opscope.analysis.base.linking import link

V100 = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
NCCL = "hta/nccl_parser_config_nccl_data.json.gz"
RESNET_2021 = "kineto/plugin_samples_resnet50_num_workers_0_worker0.pt.trace.json.gz"
GPU_ONLY = "tracelens/mi210__gpu_only_trace__gpu_only_trace.json.gz"
CPU_ONLY = "hta/cpu_only_rank-34.OLDVERSION_b8cce2cd9c.pt.trace.json.gz"
STEP = re.compile(r"^ProfilerStep#(\d+)$")


def raw_windows(events: list[dict]) -> list[tuple[int, int, int]]:
    out = [
        (int(STEP.match(e["name"]).group(1)), *ref.span(e))
        for e in events
        if e.get("cat") in ref.OP_CATS and ref.is_x(e) and STEP.match(e.get("name", ""))
    ]
    if out:
        return sorted(out, key=lambda w: w[1])
    # the whole-trace window: GPU activity and CPU work (docs/analysis-timeline.md)
    timed = [ref.span(e) for e in events if ref.is_x(e) and e.get("cat") in {*ref.GPU_CATS, *ref.CPU_CATS}]
    return [(-1, min(s for s, _ in timed), max(e for _, e in timed))]


def raw_step_figures(events: list[dict]) -> dict[tuple[int, object], dict[str, int]]:
    gpu = [e for e in events if e.get("cat") in ref.GPU_CATS and ref.is_x(e)]
    out: dict[tuple[int, object], dict[str, int]] = {}
    for number, lo, hi in raw_windows(events):
        parts: dict[object, dict[str, list[tuple[int, int]]]] = defaultdict(lambda: defaultdict(list))
        for e in gpu:
            start, end = ref.span(e)
            if start < hi and end > lo:
                device = ref.args(e).get("device", e.get("pid"))
                piece = (max(start, lo), min(end, hi))
                kind = ref.gpu_category(e)
                parts[device]["busy"].append(piece)
                parts[device]["kernel" if kind not in ("memcpy", "memset") else kind].append(piece)
                if kind == "communication":
                    parts[device]["comm"].append(piece)
        for device, groups in parts.items():
            out[(number, device)] = {k: ref.union_length(v) for k, v in groups.items()}
            out[(number, device)]["wall"] = hi - lo
    return out


@pytest.mark.parametrize(
    "relative",
    [V100, NCCL, RESNET_2021, GPU_ONLY, "hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"],
)
@pytest.mark.parametrize("linked", [False, True], ids=["scan", "link-table"])
def test_figures_match_raw(relative: str, linked: bool) -> None:
    """Both ways to the GPU events: a pass over the trace (`opscope steps`) and the link table the caller
    already has (`analyze`, the report)."""
    events = ref.load(corpus_path(relative))
    expected = raw_step_figures(events)
    trace = opscope.load(corpus_path(relative))
    result = step_stats(trace, linkage=link(trace) if linked else None)
    assert [(w.window.start_ns, w.window.end_ns) for w in result.rows] == [
        (lo, hi) for _, lo, hi in raw_windows(events)
    ]
    for row in result.rows:
        number = row.window.step if row.window.step is not None else -1
        for d in row.devices:
            e = expected.get((number, d.device), {"wall": row.wall_ns})
            assert d.busy_ns == e.get("busy", 0)
            assert (d.kernel_ns, d.memcpy_ns, d.memset_ns, d.comm_ns) == (
                e.get("kernel", 0),
                e.get("memcpy", 0),
                e.get("memset", 0),
                e.get("comm", 0),
            )
            assert d.idle_ns == row.wall_ns - d.busy_ns
    walls = [r.wall_ns for r in result.rows]
    assert [r.slowest for r in result.rows] == (
        [w == max(walls) for w in walls] if len(walls) > 1 else [False]
    )


def test_communication_time_on_nccl_trace() -> None:
    result = step_stats(opscope.load(corpus_path(NCCL)))
    assert len(result.rows) == 3  # the gpu_user_annotation copies of ProfilerStep#N are not windows
    assert all(
        d.comm_ns > 0 and d.comm_ns <= d.kernel_ns <= d.busy_ns for r in result.rows for d in r.devices
    )


def test_events_outside_every_step_on_real_trace() -> None:
    events = ref.load(corpus_path(V100))
    windows = raw_windows(events)
    outside_events, inside_ns, total = 0, 0, 0
    for e in events:
        if e.get("cat") in ref.GPU_CATS and ref.is_x(e):
            start, end = ref.span(e)
            total += end - start
            pieces = [(max(start, lo), min(end, hi)) for _, lo, hi in windows if start < hi and end > lo]
            outside_events += not pieces
            inside_ns += ref.union_length(pieces)
    result = step_stats(opscope.load(corpus_path(V100)))
    assert result.outside_events == outside_events == 1021
    assert result.outside_ns == total - inside_ns > 0
    assert result.overlapping_steps == 0 and result.overlap_ns == 0


def test_no_markers_is_one_window() -> None:
    events = ref.load(corpus_path(GPU_ONLY))
    (window,) = step_windows(opscope.load(corpus_path(GPU_ONLY)))
    ((_, lo, hi),) = raw_windows(events)
    assert (window.step, window.start_ns, window.end_ns) == (None, lo, hi)
    result = step_stats(opscope.load(corpus_path(GPU_ONLY)))
    assert not result.from_markers and result.outside_events == 0 and result.unattributed_share == 1.0


def test_cpu_only_trace() -> None:
    result = step_stats(opscope.load(corpus_path(CPU_ONLY)))
    assert len(result.rows) == 5 and result.devices == () and result.link is None
    assert all(r.devices == () and r.gpu_events == 0 for r in result.rows)
    assert sum(r.slowest for r in result.rows) == 1


def test_overlapping_steps(tmp_path: Path) -> None:
    # HAND-MADE (no overlapping steps in the corpus): ProfilerStep#2 starts before #1 ends; a kernel in the
    # overlap counts in both steps, once in the GPU time inside the windows; one kernel lies outside both.
    def x(cat: str, name: str, ts: float, dur: float, **args: object) -> dict:
        gpu = cat == "kernel"
        return {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": 0 if gpu else 1,
            "tid": 7 if gpu else 1,
            "ts": ts,
            "dur": dur,
            "args": {**args, **({"device": 0, "stream": 7} if gpu else {})},
        }

    path = tmp_path / "overlap.json"
    path.write_text(
        json.dumps(
            {
                "traceEvents": [
                    x("user_annotation", "ProfilerStep#1", 0, 100),
                    x("user_annotation", "ProfilerStep#2", 80, 100),
                    x("kernel", "a", 10, 20),
                    x("kernel", "b", 85, 10),
                    x("kernel", "c", 150, 20),
                    x("kernel", "d", 300, 5),
                    x("kernel", "ncclKernel_AllReduce", 160, 5),
                ]
            }
        )
    )
    result = step_stats(opscope.load(path, cache=False))
    assert result.overlapping_steps == 1 and result.overlap_ns == 20_000
    first, second = ([d.busy_ns for d in r.devices] for r in result.rows)
    assert first == [30_000] and second == [30_000]  # b counts in both windows
    assert result.rows[1].devices[0].comm_ns == 5_000
    assert result.outside_events == 1 and result.outside_ns == 5_000
    assert step_stats(opscope.load(path, cache=False), StepOptions(steps="2")).rows[0].window.step == 2


def test_cli_outputs(cli) -> None:
    path = corpus_path(NCCL)
    result = cli("steps", path, "--format", "json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["schema"] == "opscope.steps/1" and data["from_markers"] is True
    assert [s["step"] for s in data["steps"]] == [4, 5, 6] and data["slowest_step"] == 6
    assert set(data["steps"][0]["devices"][0]) == {
        "device",
        "busy_us",
        "kernel_us",
        "memcpy_us",
        "memset_us",
        "comm_us",
        "idle_us",
        "utilization",
    }
    assert data["outside"] == {"gpu_events": 0, "gpu_us": 0.0} and data["unattributed_share"] == 0.0
    only = json.loads(cli("steps", path, "--format", "json", "--steps", "5").out)
    assert [s["step"] for s in only["steps"]] == [5]
    rows = list(csv.DictReader(io.StringIO(cli("steps", path, "--format", "csv").out)))
    assert [float(r["busy_us"]) for r in rows] == [s["devices"][0]["busy_us"] for s in data["steps"]]
    assert rows[-1]["mark"] == "slowest" and float(rows[0]["wall_us"]) == data["steps"][0]["wall_us"]
    table = cli("steps", path, "--width", "140", "--no-color")
    assert table.code == 0 and "slowest" in table.out
    cpu = cli("steps", corpus_path(CPU_ONLY), "--format", "markdown")
    assert cpu.code == 0 and "wall time only" in cpu.out
    bad = cli("steps", corpus_path(GPU_ONLY), "--steps", "1")
    assert bad.code == 2 and "no ProfilerStep" in bad.err


@pytest.mark.parametrize("relative", [V100, CPU_ONLY, NCCL])
def test_busy_time_per_window_equals_the_union_of_pieces(
    relative: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`busy_ns` (merged once, then per window by binary search) equals the union of the events cut into one
    piece per window they overlap, for the CPU operators (the report's per-step CPU busy time) and the GPU
    events per device; and its fallback for times that would not fit the shifted axis answers the same."""
    from opscope.analysis.attribution import steps
    from opscope.analysis.attribution.cpu_ops import _cpu_ops
    from opscope.analysis.base import intervals
    from opscope.analysis.base.linking import link
    from opscope.model.schema import Col

    trace = opscope.load(corpus_path(relative))
    windows = steps.select_windows(trace, None)
    cpu = _cpu_ops(link(trace))
    gpu = trace.gpu_events().select(Col.DEVICE, Col.TS_NS, Col.DUR_NS).collect()
    for events, by in ((cpu, ()), (gpu, (Col.DEVICE,))):
        pieces = steps._union_per_window(steps.window_pieces(events, windows), list(by))
        want = {key: ns for key, ns in pieces.items() if ns > 0}
        assert want or events.height == 0
        assert steps.busy_ns(events, windows, by) == want
        with monkeypatch.context() as patched:
            patched.setattr(intervals, "covered_per_window", lambda *args: None)
            assert steps.busy_ns(events, windows, by) == want
