"""Advice rules at and just above (or below) their default thresholds, on HAND-MADE traces: each case builds
the smallest Kineto trace whose metric equals the threshold exactly ("at": no finding) and one whose metric
is just past it ("past": a finding). Numbers come from the events written here."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import opscope
from handmade_traces import Event, cpu_op, document, kernel, launch, step, write
from opscope.analysis.findings import Finding
from opscope.analysis.rules.advise import advise

DEVICE = {
    "id": 0,
    "name": "Hand-made GPU",
    "computeMajor": 8,
    "computeMinor": 0,
    "numSms": 108,
    "maxThreadsPerMultiprocessor": 2048,
    "regsPerMultiprocessor": 65536,
    "warpSize": 32,
    "sharedMemPerMultiprocessor": 167936,
    "totalGlobalMem": 40 * 2**30,
}


def run(tmp_path: Path, events: list[Event], rule: str) -> tuple[Finding | None, Any]:
    doc = document(events)
    doc["deviceProperties"] = [DEVICE]
    path = write(tmp_path / f"handmade_{rule}.json", doc)
    result = advise(opscope.load(path, cache=False))
    assert result.advice is not None
    assert not [w for w in result.advice.warnings if "not evaluated" not in w], result.advice.warnings
    # the rule's finding: shown, or withheld (it fired, but a finding above claims its time)
    found = [f for f in (*result.advice.findings, *result.advice.withheld) if f.id == rule]
    return (found[0] if found else None), result


def launched(name: str, ts: float, dur: float, corr: int, launch_dur: float = 2, tid: int = 1) -> list[Event]:
    """A launch call at `ts` and its kernel right after."""
    return [launch(ts, corr, dur=launch_dur, tid=tid), kernel(name, ts + launch_dur, dur, corr)]


def memcpy(name: str, ts: float, dur: float, corr: int, nbytes: int) -> list[Event]:
    return [
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaMemcpyAsync",
            "pid": 100,
            "tid": 1,
            "ts": ts - 3,
            "dur": 2,
            "args": {"correlation": corr},
        },
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": name,
            "pid": 0,
            "tid": 7,
            "ts": ts,
            "dur": dur,
            "args": {"device": 0, "stream": 7, "correlation": corr, "bytes": nbytes},
        },
    ]


def pageable(past: bool, nbytes: int = 1 << 20) -> list[Event]:
    kind = "Pageable" if past else "Pinned"
    return [*memcpy(f"Memcpy HtoD ({kind} -> Device)", 10, 5, 1, nbytes), *launched("k", 20, 5, 2)]


def test_small_pageable_copy_is_not_a_finding(tmp_path: Path) -> None:
    """Hand-made: one 16-byte pageable copy. Pinning it would save nothing (a copy that small is bound by its
    latency, not its bandwidth: docs/advice.md), so the rule fires but there is no finding: the outcome says
    "no time at stake", and no saving is predicted for it."""
    found, result = run(tmp_path, pageable(True, 16), "pageable_memcpy")
    assert found is None
    (outcome,) = [o for o in result.advice.outcomes if o.id == "pageable_memcpy"]
    assert outcome.status == "no time at stake" and outcome.value == 1


def sync(past: bool) -> list[Event]:
    events = [step(0, 0, 100), step(1, 100, 100), *launched("k", 10, 20, 1), *launched("k", 110, 20, 2)]
    if past:
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaStreamSynchronize",
                "pid": 100,
                "tid": 1,
                "ts": 150,
                "dur": 10,
                "args": {},
            }
        )
    return events


def dataloader(past: bool) -> list[Event]:
    # one step of 1000 us; DataLoader __next__ takes 50 us (= 5.0%, at) or 51 us (5.1%, past)
    return [
        step(0, 0, 1000),
        {
            "ph": "X",
            "cat": "user_annotation",
            "pid": 100,
            "tid": 1,
            "ts": 1,
            "dur": 51 if past else 50,
            "args": {},
            "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
        },
        *launched("k", 100, 800, 1),
    ]


def host(past: bool) -> list[Event]:
    # window [0, 1000); busy 250 + 250 = 50% (at) or 250 + 249 (49.9%, past); the gap waits for a launch
    second = 751 if past else 750
    return [
        launch(0, 1),
        kernel("k", 0, 250, 1),
        launch(second - 10, 2, dur=2),
        kernel("k", second, 1000 - second, 2),
    ]


def low_windows(past: bool) -> list[Event]:
    # one step [0, 1000) busy 500 us (50%, at) or 499 us (49.9%, past)
    busy = 499 if past else 500
    return [step(0, 0, 1000), launch(1, 1), kernel("k", 1, busy, 1)]


def gaps(past: bool) -> list[Event]:
    # kernels [2, 12) and [1012 or 1013, ...): an idle gap of 1000 us (at) or 1001 us (past)
    return [*launched("k", 0, 10, 1), *launched("k", 1011 if past else 1010, 10, 2)]


def exposed(past: bool) -> list[Event]:
    # window [0, 1000): compute [0, 500), NCCL [500, 600 or 601) alone, compute [900, 1000)
    return [
        launch(0, 1),
        kernel("compute_kernel", 0, 500, 1),
        launch(1, 2),
        kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 500, 101 if past else 100, 2),
        launch(2, 3),
        kernel("compute_kernel", 900, 100, 3),
    ]


def channels(past: bool) -> list[Event]:
    # layout conversion 50 of 1000 us (5.0%, at) or 51 of 1001 us (5.09%, past)
    return [
        *launched("implicit_convolve_sgemm", 0, 950, 1),
        *launched("void cudnn::ops::nchwToNhwcKernel<float>", 1000, 51 if past else 50, 2),
    ]


def attention(past: bool) -> list[Event]:
    # bmm -> softmax -> bmm over a [2, S, S] score tensor, S = 16 (at) or 17 (past)
    s = 17 if past else 16
    return [
        cpu_op("aten::bmm", 0, 20, dims=[[2, s, 8], [2, 8, s]]),
        *launched("gemm_a", 1, 5, 1),
        cpu_op("aten::softmax", 30, 20, dims=[[2, s, s], [], []]),
        *launched("softmax_kernel", 31, 5, 2),
        cpu_op("aten::bmm", 60, 20, dims=[[2, s, s], [2, s, 8]]),
        *launched("gemm_b", 61, 5, 3),
    ]


def alignment(past: bool) -> list[Event]:
    # fp16 mm with K = 64 (aligned, at: no misaligned time) or K = 65 (past)
    k = 65 if past else 64
    op = cpu_op("aten::mm", 0, 20, dims=[[64, k], [k, 64]])
    op["args"]["Input type"] = ["c10::Half", "c10::Half"]
    return [op, *launched("sm80_xmma_gemm_f16f16", 1, 5, 1)]


def fp32(past: bool) -> list[Event]:
    # an Ampere GPU running only tensor-core GEMMs (at: 0 fp32 time) or also one volta_sgemm (past)
    events = launched("sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x128x32", 0, 10, 1)
    if past:
        events += launched("volta_sgemm_128x64_nn", 20, 10, 2)
    return events


def small(past: bool) -> list[Event]:
    # kernels shorter than their launch call: 2 of 4 (50%, at) or 3 of 5 (60%, past)
    events: list[Event] = []
    durations = [1, 1, 50, 50] + ([1] if past else [])
    for i, dur in enumerate(durations):
        events += launched("k", i * 100, dur, i + 1, launch_dur=5)
    return events


def fusion(past: bool) -> list[Event]:
    # the run add -> mul -> layer_norm of short kernels once (at: not repeated) or twice (past)
    names = ["elementwise_add_kernel", "elementwise_mul_kernel", "layer_norm_kernel"]
    events: list[Event] = []
    corr = 1
    for repeat in range(2 if past else 1):
        base = repeat * 1000
        events += launched("gemm_kernel", base, 100, corr)
        corr += 1
        for i, name in enumerate(names):
            events += launched(name, base + 200 + 20 * i, 10, corr)
            corr += 1
    return events


def occupancy(past: bool) -> list[Event]:
    # 512 threads x 128 registers: one block per SM = 16 of 64 warps = 25% (at);
    # 480 threads x 128 registers: 15 of 64 warps = 23.4% (past, below 25%)
    threads = 480 if past else 512
    events = launched("my_kernel", 0, 100, 1)
    events[1]["args"].update(
        {"grid": [216, 1, 1], "block": [threads, 1, 1], "registers per thread": 128, "shared memory": 0}
    )
    return events


CASES: dict[str, Callable[[bool], list[Event]]] = {
    "pageable_memcpy": pageable,
    "sync_in_loop": sync,
    "dataloader_bound": dataloader,
    "host_bound": host,
    "low_utilization_windows": low_windows,
    "gpu_gaps": gaps,
    "exposed_communication": exposed,
    "channels_last": channels,
    "unfused_attention": attention,
    "gemm_alignment": alignment,
    "tensor_cores_unused": fp32,
    "launch_bound_small_kernels": small,
    "fusion_candidates": fusion,
    "low_occupancy": occupancy,
}

EXPECTED_AT = {
    "dataloader_bound": 0.05,
    "host_bound": 0.5,
    "low_utilization_windows": 0.5,
    "gpu_gaps": 1000.0,
    "exposed_communication": 0.1,
    "channels_last": 0.05,
    "launch_bound_small_kernels": 0.5,
    "low_occupancy": 25.0,
}


@pytest.mark.parametrize("rule", sorted(CASES))
def test_at_threshold_no_finding(tmp_path: Path, rule: str) -> None:
    found, _ = run(tmp_path, CASES[rule](False), rule)
    assert found is None


@pytest.mark.parametrize("rule", sorted(CASES))
def test_past_threshold_finding(tmp_path: Path, rule: str) -> None:
    found, _ = run(tmp_path, CASES[rule](True), rule)
    assert found is not None and found.id == rule
    assert found.severity in ("info", "warn", "crit") and found.advice and found.source
    assert len(found.evidence) <= 10


def test_values_just_past(tmp_path: Path) -> None:
    """The measured values of the hand-made "past" cases, computed by hand from the events above."""
    expected = {
        "dataloader_bound": 51 / 1000,
        "host_bound": 499 / 1000,
        "low_utilization_windows": 499 / 1000,
        "gpu_gaps": 1001.0,
        "exposed_communication": 101 / 1000,
        "channels_last": 51 / 1001,
        "launch_bound_small_kernels": 3 / 5,
        "low_occupancy": 15 / 64 * 100,
        "unfused_attention": 17,
        "pageable_memcpy": 1,
        "sync_in_loop": 0.5,
    }
    for rule, value in expected.items():
        found, _ = run(tmp_path, CASES[rule](True), rule)
        assert found is not None and found.value == pytest.approx(value), rule


def test_time_at_stake_and_severity(tmp_path: Path) -> None:
    # exposed communication: 101 us of a 1000 us window = 10.1% -> crit; host_bound: host wait 490 - 1 us
    found, _ = run(tmp_path, exposed(True), "exposed_communication")
    assert found is not None and found.time_at_stake_ns == 101_000 and found.severity == "crit"
    found, _ = run(tmp_path, gaps(True), "gpu_gaps")
    assert found is not None and found.time_at_stake_ns == 1_001_000
    # channels_last: 51 us of 1001 us of GPU time = 5.1% -> warn
    found, _ = run(tmp_path, channels(True), "channels_last")
    assert found is not None and found.share == pytest.approx(51 / 1001) and found.severity == "warn"
    # alignment: the padded size is the next multiple of 8
    found, _ = run(tmp_path, alignment(True), "gemm_alignment")
    assert found is not None and found.evidence[0]["misaligned"] == {"K": 65}
    assert found.evidence[0]["pad_to"] == {"K": 72} and found.evidence[0]["multiple_of"] == 8
    assert found.evidence[0]["pad_to_64"] == {"K": 128}


@pytest.mark.parametrize(
    ("op", "dtype"), [("aten::_scaled_mm", "c10::Float8_e4m3fn"), ("aten::_int_mm", "signed char")]
)
def test_fp8_and_int8_gemms_need_16_elements(tmp_path: Path, op: str, dtype: str) -> None:
    """Hand-made: an fp8 / int8 GEMM with K = 40 (a multiple of 8, not of 16) is misaligned; K = 48 is not."""
    for k, expect in ((40, {"K": 40}), (48, None)):
        event = cpu_op(op, 0, 20, dims=[[64, k], [k, 64]])
        event["args"]["Input type"] = [dtype, dtype]
        found, _ = run(tmp_path, [event, *launched("sm90_xmma_gemm_e4m3", 1, 5, 1)], "gemm_alignment")
        if expect is None:
            assert found is None or found.time_at_stake_ns == 0
        else:
            assert found is not None and found.evidence[0]["misaligned"] == expect
            assert found.evidence[0]["multiple_of"] == 16 and found.evidence[0]["pad_to"] == {"K": 48}


@pytest.mark.parametrize("disabled", [False, True])
def test_the_efficiency_table_is_computed_only_for_an_enabled_rule(
    monkeypatch: pytest.MonkeyPatch, disabled: bool
) -> None:
    """`advise` starts the `low_efficiency` rule's table early on a spare thread; a configuration that switches
    the rule off computes no table at all (real trace: the V100 ResNet capture)."""
    import threading

    from conftest import corpus_path
    from opscope.analysis.base import parallel
    from opscope.analysis.findings import RuleConfig
    from opscope.analysis.overview import AnalyzeOptions

    monkeypatch.setattr(parallel, "threads", lambda: 3)
    # without the cache: nothing kept by an earlier command, so the checks run (read back, they need no table)
    trace = opscope.load(
        corpus_path("hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"), cache=False
    )
    rules = RuleConfig(disabled=frozenset({"low_efficiency"})) if disabled else None
    advise(trace, AnalyzeOptions(rules=rules))
    for thread in threading.enumerate():  # a table started early and not yet done
        if thread.name == "opscope-efficiency":
            thread.join()
    computed = [key for key in trace._derived if key.startswith("efficiency:")]
    assert (computed == []) if disabled else (len(computed) == 1)
