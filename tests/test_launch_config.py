"""Theoretical occupancy from launch configuration, checked against the trace's own occupancy estimate."""

from __future__ import annotations

import gzip
import json

import polars as pl
import pytest

import opscope
from conftest import corpus_path
from opscope.analysis.kernels.launch_config import LaunchOptions, arch_limits, launch_config, occupancy
from opscope.model.meta import DeviceInfo

V100 = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
H100 = [
    "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "tracelens/h100__Falconsai_nsfw_image_detection__1016002.json.gz",
]
A100 = DeviceInfo(
    id=0,
    name="A100",
    sm_count=108,
    max_threads_per_sm=2048,
    regs_per_sm=65536,
    shared_mem_per_sm=167936,
    warp_size=32,
    compute_capability="8.0",
)


def _load_gz(path):
    with gzip.open(path) as handle:
        return json.load(handle)


def test_occupancy_calculator_known_cases():
    arch = arch_limits(A100)
    assert arch is not None
    full = occupancy(256, 32, 0, arch)
    assert full is not None and (full.theoretical_pct, full.blocks_per_sm, full.limiter) == (100.0, 8, "none")
    # 128 regs/thread: 4096 regs per warp -> 16 warps per SM -> 2 blocks of 8 warps -> 25%.
    regs = occupancy(256, 128, 0, arch)
    assert regs is not None and (regs.theoretical_pct, regs.limiter) == (25.0, "registers")
    # 100 KB of shared memory per block (+1 KB reserved): one block per SM.
    smem = occupancy(128, 32, 100 * 1024, arch)
    assert smem is not None and (smem.blocks_per_sm, smem.limiter) == (1, "shared_memory")
    assert smem.theoretical_pct == pytest.approx(100 * 4 / 64)
    # 32-thread blocks: the 32-blocks-per-SM limit binds at 50%.
    tiny = occupancy(32, 16, 0, arch)
    assert tiny is not None and (tiny.theoretical_pct, tiny.limiter) == (50.0, "blocks")
    # 768-thread blocks: 24 warps each, only 2 fit in 64 warps.
    big = occupancy(768, 16, 0, arch)
    assert big is not None and (big.theoretical_pct, big.limiter) == (75.0, "warps")


def _kineto_kernels(rel):
    doc = _load_gz(corpus_path(rel))
    device = DeviceInfo.from_kineto(doc["deviceProperties"][0])
    return device, [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]


@pytest.mark.corpus
@pytest.mark.parametrize("rel", [V100, *H100])
def test_trace_estimate_never_exceeds_theoretical_occupancy(rel):
    """Kineto's est. achieved occupancy = min(resident blocks, grid/SMs) x threads / max threads per SM
    (rounded), so it is bounded by the theoretical occupancy; where Kineto's own calculation succeeded
    (est > 0) our resident-block count reproduces it exactly."""
    device, kernels = _kineto_kernels(rel)
    arch = arch_limits(device)
    assert arch is not None
    checked = reproduced = 0
    for event in kernels:
        args = event["args"]
        threads = args["block"][0] * args["block"][1] * args["block"][2]
        occ = occupancy(threads, args["registers per thread"], args["shared memory"], arch)
        est = args["est. achieved occupancy %"]
        assert occ is not None
        assert est <= occ.theoretical_pct + 0.5, (event["name"], est, occ)
        if est > 0:
            checked += 1
            predicted = (
                min(occ.blocks_per_sm, args["blocks per SM"]) * threads / device.max_threads_per_sm * 100
            )
            reproduced += abs(predicted - est) <= 0.5 or int(predicted) == est
    assert checked > 0 and reproduced == checked


@pytest.mark.corpus
def test_launch_config_rows_cover_every_kernel_and_flag_small_grids():
    trace = opscope.load(corpus_path(V100))
    report = launch_config(trace, LaunchOptions(top=0))
    assert sum(r.calls for r in report.rows) == report.kernels == 4350
    kernels = trace.events.filter(pl.col("kind").cast(pl.String) == "kernel")
    assert sum(r.total_ns for r in report.rows) == kernels["dur_ns"].sum()
    assert len(_kineto_kernels(V100)[1]) == 4350
    small = [r for r in report.rows if 0 < r.blocks < 80]
    assert small and all("under_filled" in r.flags for r in small)
    assert all("under_filled" not in r.flags for r in report.rows if r.blocks >= 80)
    low = [
        r for r in report.rows if r.theoretical_occupancy_pct is not None and r.theoretical_occupancy_pct < 50
    ]
    assert all("low_occupancy" in r.flags for r in low)


@pytest.mark.corpus
def test_kernels_command_on_amd_has_no_occupancy(cli):
    result = cli(
        "kernels", corpus_path("omniperf/vcopy_MI100__timestamps.csv"), "--format", "json", "--no-cache"
    )
    assert result.code == 0, result.err
    row = json.loads(result.out)["rows"][0]
    assert row["theoretical_occupancy_pct"] is None and row["grid"] == [4096, 1, 1]
