"""Nsight Compute CSV: parsing both pages and joining to a trace. The ncu exports here are hand-made
fixtures following ncu's documented layouts (tests/fixtures/ncu_*_handmade.csv): no real export exists in
the corpus."""

from __future__ import annotations

import json

import pytest

from conftest import REPO, corpus_path
from opscope.ingest.ncu import read_ncu_csv

RAW = REPO / "tests" / "fixtures" / "ncu_raw_handmade.csv"
DETAILS = REPO / "tests" / "fixtures" / "ncu_details_handmade.csv"
SAXPY = "pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"


def test_raw_page_units_and_values():
    metrics = read_ncu_csv(RAW)
    assert metrics.layout == "raw"
    frame = metrics.launches
    assert frame["id"].to_list() == [0, 1, 2, 3]
    first = frame.row(0, named=True)
    assert first["duration_ns"] == pytest.approx(17_704_320.0)  # "17,704.32" usecond
    assert first["sm_throughput_pct"] == pytest.approx(0.92)
    assert first["registers_per_thread"] == 26 and first["block"] == "512,1,1" and first["grid"] == "2,1,1"
    last = frame.row(3, named=True)
    assert last["static_shared_mem_bytes"] == pytest.approx(1024.0)  # 1.024 Kbyte/block
    assert last["l1_hit_pct"] == pytest.approx(12.5)


def test_details_page_one_metric_per_row():
    metrics = read_ncu_csv(DETAILS)
    assert metrics.layout == "details"
    first = metrics.launches.row(0, named=True)
    assert first["duration_ns"] == pytest.approx(17.70e6)  # msecond
    assert first["memory_throughput_pct"] == pytest.approx(1.61)  # the % one, not Gbyte/second
    assert first["block_limit_registers"] == 4 and first["theoretical_occupancy_pct"] == 100
    assert metrics.launches.row(1, named=True)["l1_hit_pct"] is None  # "n/a"


@pytest.mark.corpus
def test_kernels_metrics_join_by_name_and_launch_order(cli):
    result = cli("kernels", corpus_path(SAXPY), "--metrics", RAW, "--format", "json", "--no-cache")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["schema"] == "opscope.kernels/1"
    assert data["metrics"]["profiled_launches"] == 4 and data["metrics"]["matched_launches"] == 3
    assert data["metrics"]["unmatched_kernels"] == ["vecAdd(float *, float *, float *, int)"]
    row = data["rows"][0]
    assert row["calls"] == 5 and row["metrics"]["launches"] == 3
    assert row["metrics"]["sm_throughput_pct"] == pytest.approx((0.92 + 0.90 + 0.94) / 3, abs=0.01)
    assert row["metrics"]["bound"] == "latency" and row["metrics"]["occupancy_limiter"] == "registers"
    assert {
        "under_filled",
        "low_sm_throughput",
        "latency_bound",
        "low_achieved_occupancy",
        "poor_l1_hit_rate",
        "poor_l2_hit_rate",
    } <= set(row["flags"])


@pytest.mark.corpus
def test_details_page_matches_base_names(cli):
    result = cli("kernels", corpus_path(SAXPY), "--metrics", DETAILS, "--format", "json", "--no-cache")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["metrics"]["matched_launches"] == 2 and data["metrics"]["unmatched_kernels"] == []


def test_memory_bound_flag_from_a_hand_made_launch(tmp_path):
    from opscope.analysis.kernels.metrics import MetricsOptions, _flags

    bound, _, flags = _flags(
        {
            "sm_throughput_pct": 21.3,
            "dram_throughput_pct": 88.4,
            "achieved_occupancy_pct": 81.2,
            "l1_hit_rate_pct": 12.5,
            "l2_hit_rate_pct": 35.2,
        },
        MetricsOptions(),
    )
    assert bound == "memory" and "memory_bound" in flags and "low_achieved_occupancy" not in flags
    bound, _, flags = _flags({"sm_throughput_pct": 85.0, "dram_throughput_pct": 30.0}, MetricsOptions())
    assert bound == "compute" and "low_sm_throughput" not in flags


def test_bad_metrics_file_is_a_one_line_error(cli, tmp_path):
    bad = tmp_path / "not_ncu.csv"
    bad.write_text("a,b\n1,2\n")
    result = cli("kernels", corpus_path(SAXPY), "--metrics", bad)
    assert result.code == 2 and "not an Nsight Compute CSV" in result.err
    result = cli("kernels", corpus_path(SAXPY), "--metrics", tmp_path / "missing.csv")
    assert result.code == 2 and "no such file" in result.err


def test_formats_lists_readers(cli):
    result = cli("formats", "--format", "json")
    assert result.code == 0
    data = json.loads(result.out)
    assert data["schema"] == "opscope.formats/1"
    assert [f["name"] for f in data["formats"]] == ["nsys", "xplane", "rocprof", "rocprof-csv", "kineto"]
