"""The two rules that read other analyses: `memory_near_capacity` (analysis/memory/) and `low_efficiency`
(analysis/efficiency/). Real traces from the corpus where it has a case, HAND-MADE traces (labelled) for the
thresholds: their numbers come from the events written here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import opscope
from conftest import corpus_path
from handmade_traces import Event, cpu_op, document, kernel, launch, python_frame, write
from opscope.analysis.efficiency.table import EfficiencyOptions, efficiency
from opscope.analysis.findings import Finding
from opscope.analysis.rules.advise import advise as advise_trace

QWEN_H100 = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
GIB = 2**30


def advise(path: Path) -> tuple[Finding | None, Finding | None, tuple[str, ...]]:
    advice = advise_trace(opscope.load(path, cache=False)).advice
    assert advice is not None
    by_id = {f.id: f for f in (*advice.findings, *advice.withheld)}  # fired: shown or withheld
    skipped = tuple(f"{o.id}: not evaluated: {o.reason}" for o in advice.not_evaluated)
    return by_id.get("memory_near_capacity"), by_id.get("low_efficiency"), advice.warnings + skipped


# --- memory_near_capacity -------------------------------------------------------------------------------------


def memory_event(ts: float, addr: int, nbytes: int, allocated: int) -> Event:
    return {
        "ph": "i",
        "s": "t",
        "cat": "cpu_instant_event",
        "name": "[memory]",
        "pid": 100,
        "tid": 1,
        "ts": ts,
        "args": {
            "Addr": addr,
            "Bytes": nbytes,
            "Total Allocated": allocated,
            "Total Reserved": allocated,
            "Device Type": 1,
            "Device Id": 0,
        },
    }


def memory_trace(tmp_path: Path, peak: int) -> Path:
    """HAND-MADE: one kernel, a cudaMalloc of 7 us, and an allocation that brings the allocator to `peak`
    bytes on a 40 GiB device, then frees it."""
    events: list[Event] = [
        launch(0, 1),
        kernel("my_kernel", 2, 100, 1),
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaMalloc",
            "pid": 100,
            "tid": 1,
            "ts": 10,
            "dur": 7,
            "args": {},
        },
        memory_event(20, 4096, peak, peak),
        memory_event(90, 4096, -peak, 0),
    ]
    doc = document(events)
    doc["deviceProperties"] = [{"id": 0, "name": "Hand-made GPU", "totalGlobalMem": 40 * GIB}]
    return write(tmp_path / "handmade_memory.json", doc)


def test_memory_at_threshold_no_finding(tmp_path: Path) -> None:
    found, _, warnings = advise(memory_trace(tmp_path, 36 * GIB))  # exactly 90% of 40 GiB
    assert found is None and not [w for w in warnings if w.startswith("memory_near_capacity")]


def test_memory_past_threshold_finding(tmp_path: Path) -> None:
    found, _, _ = advise(memory_trace(tmp_path, 36 * GIB + 1))
    assert found is not None
    assert found.value == pytest.approx((36 * GIB + 1) / (40 * GIB))
    assert found.time_at_stake_ns == 7_000  # the allocator's runtime calls
    (device,) = found.evidence
    assert device["device"] == "cuda:0" and device["peak_allocated_bytes"] == 36 * GIB + 1
    assert device["capacity_bytes"] == 40 * GIB


@pytest.mark.corpus
def test_memory_real_negative() -> None:
    found, _, warnings = advise(corpus_path(QWEN_H100))  # 1,991.757 MiB of 81,079.750 MiB
    assert found is None and not [w for w in warnings if w.startswith("memory_near_capacity")]


# --- low_efficiency --------------------------------------------------------------------------------------------

A100_BF16_TFLOPS = 312.0  # the peak table's dense bf16 figure for "NVIDIA A100-SXM4-40GB"


def mm_trace(tmp_path: Path, dur_us: float) -> Path:
    """HAND-MADE: one bf16 aten::mm [1000, 600] x [600, 780] (2 * 1000 * 600 * 780 = 936 MFLOP) launching one
    kernel of `dur_us` on an A100: 10 us is 93.6 TFLOP/s = 30% of 312."""
    op: Any = cpu_op("aten::mm", 0, 50, [[1000, 600], [600, 780]])
    op["args"]["Input type"] = ["c10::BFloat16", "c10::BFloat16"]
    events: list[Event] = [op, launch(5, 1), kernel("ampere_bf16_s16816gemm", 10, dur_us, 1)]
    doc = document(events, device="NVIDIA A100-SXM4-40GB")
    return write(tmp_path / "handmade_mm.json", doc)


def pct(dur_us: float) -> float:
    return 936e6 / (dur_us * 1e-6) / 1e12 / A100_BF16_TFLOPS * 100


def test_efficiency_just_above_threshold_no_finding(tmp_path: Path) -> None:
    assert pct(9.9) > 30
    _, found, _ = advise(mm_trace(tmp_path, 9.9))
    assert found is None


def test_efficiency_just_below_threshold_finding(tmp_path: Path) -> None:
    assert pct(10.1) < 30
    _, found, _ = advise(mm_trace(tmp_path, 10.1))
    assert found is not None and found.value == pytest.approx(pct(10.1))
    assert found.time_at_stake_ns == 10_100  # all of the GPU time
    (row,) = found.evidence
    assert row["op"] == "aten::mm" and row["kind"] == "compute" and row["dtype"] == "bf16"


def test_efficiency_unknown_gpu_is_not_guessed(tmp_path: Path) -> None:
    path = mm_trace(tmp_path, 100.0)
    doc_path = tmp_path / "handmade_mm_unknown.json"
    doc_path.write_text(path.read_text().replace("NVIDIA A100-SXM4-40GB", "Hand-made GPU"))
    _, found, warnings = advise(doc_path)
    assert found is None
    assert any(w.startswith("low_efficiency: not evaluated") for w in warnings)


@pytest.mark.corpus
def test_efficiency_real_positive_is_the_attention() -> None:
    path = corpus_path(QWEN_H100)
    _, found, _ = advise(path)
    assert found is not None
    table = efficiency(opscope.load(path), EfficiencyOptions(top=0))
    total_us = table.gpu_time_ns / 1e3
    hot = [r for r in table.rows if r.gpu_time_us / total_us >= 0.01]
    low = [
        r
        for r in hot
        if r.family in ("attention", "gemm", "convolution")
        and r.pct_of_peak_compute is not None
        and r.pct_of_peak_compute < 30
    ]
    low += [
        r
        for r in hot
        if r.family not in ("attention", "gemm", "convolution")
        and r.bound == "memory"
        and r.pct_of_peak_bandwidth is not None
        and r.pct_of_peak_bandwidth < 30
    ]
    assert found.time_at_stake_ns == round(sum(r.gpu_time_us for r in low) * 1e3)
    assert found.evidence[0]["op"] == "aten::scaled_dot_product_attention"
    assert found.evidence[0]["pct_of_peak"] == pytest.approx(9.12, abs=0.01)


@pytest.mark.parametrize(
    ("frame", "engine"),
    [
        ("vllm/v1/worker/gpu_model_runner.py(1473): execute_model", "vLLM"),
        ("/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py(9): run", "SGLang"),
    ],
)
def test_a_serving_engine_reserving_memory_is_not_a_finding(tmp_path: Path, frame: str, engine: str) -> None:
    """HAND-MADE: the same 95% peak in a trace whose Python frames are a serving engine's (real frame names of
    the corpus' vLLM and SGLang traces): the engine reserves its KV cache by design, so the rule is not
    evaluated and says why (issue 59 item 6)."""
    path = memory_trace(tmp_path, 38 * GIB)
    doc = json.loads(path.read_text())
    doc["traceEvents"].append(python_frame(frame, 0, 5))
    write(path, doc)
    found, _, warnings = advise(path)
    assert found is None
    assert any(
        w.startswith(f"memory_near_capacity: not evaluated: {engine} reserves device memory")
        for w in warnings
    )
