"""Communication is one figure (issue 28): the `communication` kernel category of `analyze` is what `steps`,
`ranks`, `diff`, `critical-path` and the report count too. The corpus has only NCCL kernels, so the
DeepSeek-style (DeepEP) and Blackwell (TensorRT-LLM one-shot all-reduce) names come from a HAND-MADE trace
built here; its expected figures are derived from the events written below, not from opscope."""

from __future__ import annotations

import json
from pathlib import Path

import handmade_traces as hm

# Two steps of 1000 us; each has a GEMM and two communication kernels whose names do not contain "nccl".
DEEPEP = "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*)"
ONESHOT = "void tensorrt_llm::kernels::ar_fusion::allreduce_fusion_kernel_oneshot_lamport<__nv_bfloat16, 8>()"
GEMM = "nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NTT"


def _trace(tmp_path: Path) -> Path:
    """Two steps of 1000 us; in each, three launches queue a GEMM, a DeepEP dispatch and a one-shot all-reduce
    back to back on one stream, and a cudaDeviceSynchronize waits for them, so the critical path runs through
    the three kernels."""
    events: list[hm.Event] = []
    corr = 1
    for n in range(2):
        start = 1000 + n * 1000
        events.append(hm.step(n + 1, start, 1000))
        at = start + 20
        for offset, (name, dur) in enumerate(((GEMM, 600), (DEEPEP, 113), (ONESHOT, 42))):
            events.append(hm.launch(start + 10 + 3 * offset, corr))
            events.append(hm.kernel(name, at, dur, corr))
            at += dur
            corr += 1
        sync = hm.launch(start + 30, corr, dur=at - (start + 30) + 2)
        sync["name"] = "cudaDeviceSynchronize"
        events.append(sync)
        corr += 1
    return hm.write(tmp_path / "comm_rank0.json", hm.document(events, rank=0, world_size=1))


COMM_PER_STEP_US = 113 + 42  # the two communication kernels, apart, on one stream


def _json(cli, *argv: object) -> dict:
    result = cli(*argv, "--format", "json")
    assert result.code == 0, result.err
    return json.loads(result.out)


def test_steps_counts_what_analyze_counts(cli, tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    steps = _json(cli, "steps", trace)
    comm = [d["comm_us"] for s in steps["steps"] for d in s["devices"]]
    assert comm == [COMM_PER_STEP_US, COMM_PER_STEP_US]
    analyze = _json(cli, "analyze", trace)
    (device,) = analyze["devices"]
    assert device["communication_us"] == sum(comm)
    categories = {c["category"]: c for c in analyze["categories"]}
    assert categories["communication"]["total_us"] == sum(comm)


def test_ranks_and_critical_path_count_the_same_kernels(cli, tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    ranks = _json(cli, "ranks", trace)
    (rank,) = ranks["ranks"]
    assert rank["communication_us"] == COMM_PER_STEP_US  # ranks divide by the number of steps
    path = _json(cli, "critical-path", trace)
    # Both communication kernels sit on the one stream after the GEMM: the path runs through them.
    for step in path["steps"]:
        assert step["breakdown"]["gpu_communication_bound"] == COMM_PER_STEP_US


def test_report_payload_counts_the_same(cli, tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    report = _json(cli, "report", trace)
    assert [s["by_category"]["communication"] for s in report["steps"]] == [COMM_PER_STEP_US] * 2
    paths = report["critical_path"]["steps"]
    assert [s["breakdown_us"]["gpu_communication_bound"] for s in paths] == [COMM_PER_STEP_US] * 2
