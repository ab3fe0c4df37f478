"""What kind of capture a window is (analysis/timeline/capture.py, docs/advice.md "Capture type"), before any
idle finding: a real graph-capture trace and a real whole-process capture with a long head from the corpus,
hand-made (labelled) traces for compilation, a warm-up step and steady steps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import opscope
import reference as ref
from conftest import corpus_path
from handmade_traces import document, kernel, launch, step, write
from opscope.analysis.findings import Advice
from opscope.analysis.rules.advise import advise

SGLANG_CAPTURE = "tracelens/inference__sglang_decode__capture_traces__bs_32_rank0.json.gz"
HEAD = "hta/execution_trace_benchmark_simple_add_trace.json.gz"  # 19.6 s of process start-up, then the work
IDLE_RULES = ("host_bound", "gpu_gaps", "low_utilization_windows", "launch_bound_small_kernels")


def advice_of(path: Path, cache: bool = True) -> Advice:
    result = advise(opscope.load(path, cache=cache))
    assert result.advice is not None and result.advice.capture is not None
    return result.advice


@pytest.mark.corpus
def test_graph_capture_is_said_and_not_blamed_on_the_host(cli) -> None:
    """sglang's CUDA-graph capture (hipStreamGetCaptureInfo, 546 launch calls, 2 kernels that ran): the idle
    rules do not run (each says why), no host-bound or launch-bound finding, and the output says what the
    window is and how to profile the replays."""
    advice = advice_of(corpus_path(SGLANG_CAPTURE))
    assert advice.capture is not None and advice.capture.kind == "graph_capture"
    outcomes = {o.id: o for o in advice.outcomes}
    for rule in IDLE_RULES:
        assert outcomes[rule].status == "not evaluated" and "graph capture" in outcomes[rule].reason
    assert not {f.id for f in advice.findings} & set(IDLE_RULES)
    table = cli("advise", corpus_path(SGLANG_CAPTURE), "--width", "200")
    assert "capture: graph capture" in table.out and "replays" in table.out
    data = json.loads(cli("advise", corpus_path(SGLANG_CAPTURE), "--format", "json").out)
    assert data["capture"]["kind"] == "graph_capture" and data["capture"]["steady_us"] == 0


@pytest.mark.corpus
def test_long_head_is_reported_not_blamed() -> None:
    """A whole-process capture: the GPU's first work starts 19.6 s into the window. The head is reported (raw:
    first GPU start - window start) and no idle finding claims it: the idle rules read the steady part only."""
    events = ref.load(corpus_path(HEAD))
    gpu = ref.merge([(g.start, g.end) for g in ref.gpu(events)])
    lo, hi = ref.window(events)
    advice = advice_of(corpus_path(HEAD))
    c = advice.capture
    assert c is not None and c.kind == "long_head_or_tail"
    assert c.head_ns == gpu[0][0] - lo and c.tail_ns == hi - gpu[-1][1]
    assert c.steady_ns == gpu[-1][1] - gpu[0][0]
    idle = [f for f in advice.findings if f.id in IDLE_RULES]
    assert sum(f.predicted_saving_ns or 0 for f in idle) <= c.steady_ns


def _steps(first_us: float, rest_us: float, n: int = 4) -> list[dict[str, Any]]:
    """Hand-made: n steps, each with one 50 us kernel at its start; the first step first_us long."""
    events: list[dict[str, Any]] = []
    t = 0.0
    for i in range(n):
        length = first_us if i == 0 else rest_us
        events += [step(i, t, length), launch(t + 1, i + 1), kernel("k", t + 5, 50, i + 1)]
        t += length
    return events


def test_warm_up_step_is_left_out_of_the_idle_rules(tmp_path: Path) -> None:
    """Hand-made: a first step 10x the others (warm-up). The capture says so and the idle rules read steps 1-3
    only: the low-utilisation windows are the later steps, never step 0."""
    path = write(tmp_path / "handmade_warm_up.json", document(_steps(2000, 200)))
    advice = advice_of(path, cache=False)
    assert advice.capture is not None and advice.capture.kind == "warm_up"
    assert advice.capture.steady_ns == 3 * 200_000
    low = [f for f in (*advice.findings, *advice.withheld) if f.id == "low_utilization_windows"]
    assert low and all(e["window"] != "ProfilerStep#0" for e in low[0].evidence)


def test_steady_steps_are_steady(tmp_path: Path) -> None:
    """Hand-made: four equal steps: steady state, all of them read."""
    path = write(tmp_path / "handmade_steady.json", document(_steps(200, 200)))
    advice = advice_of(path, cache=False)
    assert advice.capture is not None and advice.capture.kind == "steady_state"
    assert advice.capture.steady_ns == 4 * 200_000


def test_compilation_window_is_said(tmp_path: Path) -> None:
    """Hand-made: TorchDynamo / Inductor frames cover most of the window (torch.compile's first call): the
    capture is compilation and the idle rules do not run."""
    frames = [
        {
            "ph": "X",
            "cat": "python_function",
            "name": name,
            "pid": 100,
            "tid": 1,
            "ts": ts,
            "dur": dur,
            "args": {},
        }
        for name, ts, dur in (
            ("torch/_dynamo/convert_frame.py(1032): __call__", 0, 3000),
            ("torch/_inductor/compile_fx.py(1590): compile_fx", 100, 2800),
        )
    ]
    events = [*frames, launch(3100, 1), kernel("triton_poi_fused_add_0", 3105, 20, 1)]
    path = write(tmp_path / "handmade_compile.json", document(events))
    advice = advice_of(path, cache=False)
    assert advice.capture is not None and advice.capture.kind == "compilation"
    outcomes = {o.id: o for o in advice.outcomes}
    assert all(outcomes[r].status == "not evaluated" for r in ("host_bound", "gpu_gaps"))


@pytest.mark.corpus
def test_no_rule_is_silent_on_a_cpu_only_trace() -> None:
    """A CPU-only capture (no GPU activity): every rule that reads GPU activity is listed as not evaluated, with
    the reason; none is left out or passes for "nothing found" (memory_near_capacity reads memory events: it
    says what it lacks; dataloader_bound reads the loader's CPU spans: it measures them, and this capture has
    none)."""
    from opscope.analysis.rules.registry import RULES

    advice = advice_of(corpus_path("hta/cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"))
    assert [o.id for o in advice.outcomes] == [r.id for r in RULES]
    cpu_side = {r.id for r in RULES if not r.reads_gpu}
    assert all(o.status == "not evaluated" and o.reason for o in advice.outcomes if o.id not in cpu_side)
    assert all(
        o.status in ("not evaluated", "threshold not crossed") for o in advice.outcomes if o.id in cpu_side
    )
    gpu = {r.id for r in RULES if r.reads_gpu}
    assert all(o.reason == "no GPU activity in the analysed window" for o in advice.outcomes if o.id in gpu)
    assert advice.findings == ()
