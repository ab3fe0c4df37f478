"""Nsight Compute CSV: parsing both pages and joining to a trace. The ncu exports of the first tests are
HAND-MADE fixtures following ncu's documented layouts (tests/fixtures/ncu_*_handmade.csv, and one written by
`_alexnet_export` with kernel names taken from a real corpus trace). The real export of the corpus
(ncu/apc_bert_flashattn_A100_nsight.csv) has no kernel in common with any corpus trace: it is joined here to
test the no-match path, and read on its own in test_ncu_command.py."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

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
    assert [f["name"] for f in data["formats"]] == [
        "rocpd",
        "rpd",
        "rocprof-compute",
        "nsys",
        "xplane",
        "pftrace",
        "rocprof",
        "rocprof-csv",
        "kineto",
    ]


NCU_EXPORT = "ncu/apc_bert_flashattn_A100_nsight.csv"
ALEXNET = "hta/critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz"


@pytest.mark.corpus
def test_no_kernel_of_the_export_in_the_trace_is_one_line_and_the_traces_table(cli):
    """The real export beside a trace that ran other kernels: it used to crash (SchemaError: the join's name
    column of nulls against the trace's text names, exit 3)."""
    trace, export = corpus_path(SAXPY), corpus_path(NCU_EXPORT)
    result = cli("kernels", trace, "--metrics", export, "--no-cache")
    assert result.code == 0, result.err
    assert result.err.count("\n") == 1 and "none of the 10 profiled launches" in result.err
    assert "saxpy" in result.out and "SM %" not in result.out  # the trace's own table, no empty ncu columns
    data = json.loads(cli("kernels", trace, "--metrics", export, "--format", "json", "--no-cache").out)
    assert data["metrics"]["profiled_launches"] == 10 and data["metrics"]["matched_launches"] == 0
    assert len(data["metrics"]["unmatched_kernels"]) == 7 and data["rows"][0]["metrics"] is None
    report = cli("report", trace, "--metrics", export, "--format", "json", "--no-cache")
    assert report.code == 0 and json.loads(report.out)["kernels"]["ncu"]["matched_launches"] == 0


def _trace_kernels(path) -> dict[str, int]:
    """Kernel name -> launches, read from the trace JSON with the json module."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        events = json.load(handle)["traceEvents"]
    return dict(Counter(e["name"] for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"))


def _alexnet_export(tmp_path) -> tuple[Path, dict[str, list[float]]]:
    """HAND-MADE ncu export (details page) whose kernel names come from the real alexnet trace: one name
    exactly as the trace has it, one as ncu prints it (`<unnamed>`, no parameter spelling of the trace) that
    matches by base name, one the trace does not have. Returns the path and the SM % written per name."""
    exact = "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>(cudnn::ops::nchw2nhwc_params_t<float>, float const*, float*)"
    ncu_style = "void at::native::<unnamed>::max_pool_forward_nchw<float, float>(int, const float *, long)"
    sm = {exact: [10.0, 20.0, 30.0], ncu_style: [40.0, 50.0], "not_in_the_trace(int)": [60.0]}
    rows = ['"ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"']
    launch = 0
    for name, values in sm.items():
        for value in values:
            rows.append(
                f'"{launch}","{name}","GPU Speed Of Light Throughput","Compute (SM) Throughput","%","{value}"'
            )
            rows.append(f'"{launch}","{name}","Occupancy","Achieved Occupancy","%","{value / 2}"')
            launch += 1
    path = tmp_path / "alexnet_ncu_handmade.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path, sm


@pytest.mark.corpus
def test_join_matches_real_trace_names_by_name_and_launch_order(cli, tmp_path):
    trace = corpus_path(ALEXNET)
    counts = _trace_kernels(trace)
    export, sm = _alexnet_export(tmp_path)
    exact, ncu_style, missing = list(sm)
    pool = next(n for n in counts if "max_pool_forward_nchw" in n)
    assert exact in counts and missing not in counts and ncu_style not in counts
    expected = min(len(sm[exact]), counts[exact]) + min(len(sm[ncu_style]), counts[pool])
    result = cli("kernels", trace, "--metrics", export, "--format", "json", "--no-cache")
    assert result.code == 0, result.err
    data = json.loads(result.out)["metrics"]
    assert data["profiled_launches"] == 6 and data["matched_launches"] == expected == 5
    assert data["unmatched_kernels"] == [missing]
    report = json.loads(cli("report", trace, "--metrics", export, "--format", "json", "--no-cache").out)
    strings = report["strings"]
    rows = {strings[r["raw_name"]]: r for r in report["kernels"]["rows"]}
    assert report["kernels"]["ncu"]["matched_launches"] == 5
    assert rows[exact]["ncu"]["launches"] == 3 and rows[exact]["ncu"]["sm_throughput_pct"] == pytest.approx(
        20.0
    )
    assert rows[pool]["ncu"]["sm_throughput_pct"] == pytest.approx(45.0)
    assert rows[pool]["ncu"]["achieved_occupancy_pct"] == pytest.approx(22.5)
    assert sum(1 for r in rows.values() if r["ncu"] is not None) == 2
    table = cli("report", trace, "--metrics", export, "--format", "markdown", "--no-cache").out
    assert "| SM % |" in table and "5 of 6 profiled launches matched" in table


def test_name_map_matches_mangled_and_demangled_names():
    from opscope.analysis.kernels.metrics import _name_map

    trace = ["kernel(float*)", "void at::native::<unnamed>::foo<int>(int)", "bar", "bar2"]
    ncu = ["_Z6kernelPf", "void at::native::(anonymous namespace)::foo<(int)4>(int)", "bar", "baz"]
    assert _name_map(ncu, trace) == {
        "_Z6kernelPf": "kernel(float*)",
        "void at::native::(anonymous namespace)::foo<(int)4>(int)": "void at::native::<unnamed>::foo<int>(int)",
        "bar": "bar",
    }
    assert _name_map(["_Z6kernelPf"], ["_Z6kernelPf"]) == {"_Z6kernelPf": "_Z6kernelPf"}
    assert _name_map([], []) == {} and _name_map(["x"], []) == {}
