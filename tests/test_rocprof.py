"""rocprof readers: totals and counts recomputed independently from the raw JSON / CSV in the test."""

from __future__ import annotations

import csv
import gzip
import json
import math
import re
import shutil
from collections import Counter, defaultdict

import polars as pl
import pytest

import opscope
from conftest import corpus_path
from opscope.ingest.registry import detect

ROCPROF_JSON = "tracelens/rocprof__908_results.json.gz"
OMNIPERF = ["omniperf/vcopy_MI100__timestamps.csv", "omniperf/multikernel_MI200__timestamps.csv"]


def _load_gz(path):
    with gzip.open(path) as handle:
        return json.load(handle)


def _strip(name: str) -> str:
    return re.sub(r"(\s*\[clone \.kd\]|\.kd)$", "", name)


def _kernels(path):
    return (
        opscope.load(path, cache=False)
        .events.filter(pl.col("kind").cast(pl.String) == "kernel")
        .with_columns(pl.col("name").cast(pl.String))
    )


@pytest.mark.corpus
def test_rocprofv3_json_kernels_equal_raw_records():
    path = corpus_path(ROCPROF_JSON)
    tool = _load_gz(path)["rocprofiler-sdk-tool"][0]
    symbols = {s["kernel_id"]: s for s in tool["kernel_symbols"]}
    counts: Counter[str] = Counter()
    totals: defaultdict[str, int] = defaultdict(int)
    for rec in tool["buffer_records"]["kernel_dispatch"]:
        name = _strip(symbols[rec["dispatch_info"]["kernel_id"]]["formatted_kernel_name"])
        counts[name] += 1
        totals[name] += rec["end_timestamp"] - rec["start_timestamp"]
    got = _kernels(path).group_by("name").agg(pl.len(), pl.col("dur_ns").sum()).rows()
    assert {n: (c, t) for n, c, t in got} == {n: (counts[n], totals[n]) for n in counts}
    assert sum(counts.values()) == 43915


@pytest.mark.corpus
def test_rocprofv3_json_devices_streams_and_grid():
    path = corpus_path(ROCPROF_JSON)
    trace = opscope.load(path, cache=False)
    assert trace.meta.format == "rocprof"
    assert {d.name for d in trace.meta.devices} == {"AMD Instinct MI350X"}
    assert len(trace.meta.devices) == 8 and trace.meta.devices[0].sm_count == 256
    tool = _load_gz(path)["rocprofiler-sdk-tool"][0]
    first = min(
        tool["buffer_records"]["kernel_dispatch"], key=lambda r: (r["start_timestamp"], r["end_timestamp"])
    )
    info = first["dispatch_info"]
    row = (
        trace.events.filter(pl.col("kind").cast(pl.String) == "kernel")
        .sort("ts_ns", "dur_ns")
        .row(0, named=True)
    )
    assert row["grid_x"] == math.ceil(info["grid_size"]["x"] / info["workgroup_size"]["x"])
    assert row["block_x"] == info["workgroup_size"]["x"]
    assert row["stream"] == first["stream_id"]["handle"]
    assert row["correlation"] == first["correlation_id"]["internal"]
    assert row["device"] == 0  # agent 37946 is the first GPU (logical_node_type_id 0)


@pytest.mark.corpus
@pytest.mark.parametrize("rel", OMNIPERF)
def test_omniperf_timestamps_equal_csv_recomputation(rel):
    path = corpus_path(rel)
    counts: Counter[str] = Counter()
    totals: defaultdict[str, int] = defaultdict(int)
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            name = _strip(row["Kernel_Name"])
            counts[name] += 1
            totals[name] += int(row["End_Timestamp"]) - int(row["Start_Timestamp"])
    got = _kernels(path).group_by("name").agg(pl.len(), pl.col("dur_ns").sum()).rows()
    assert {n: (c, t) for n, c, t in got} == {n: (counts[n], totals[n]) for n in counts}


@pytest.mark.corpus
def test_omniperf_sysinfo_names_the_gpu():
    trace = opscope.load(corpus_path(OMNIPERF[0]), cache=False)
    assert [(d.id, d.name, d.arch, d.sm_count) for d in trace.meta.devices] == [(2, "MI100", "gfx908", 120)]
    row = trace.events.row(0, named=True)
    assert (row["grid_x"], row["block_x"], row["registers_per_thread"]) == (1048576 // 256, 256, 16)


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("rel", "gpu"),
    [("omniperf/vcopy_MI100__pmc_perf.csv", "MI100"), ("omniperf/multikernel_MI200__pmc_perf.csv", "MI200")],
)
def test_omniperf_pmc_perf_names_the_gpu_too(cli, rel, gpu):
    """Issue 18: pmc_perf.csv showed "device <GPU_ID>" (a kernel-driver node id) where timestamps.csv showed the
    GPU's name from the sysinfo.csv beside both."""
    trace = opscope.load(corpus_path(rel), cache=False)
    assert [d.name for d in trace.meta.devices] == [gpu]
    assert f"devices: {gpu}" in cli("summary", corpus_path(rel)).out


# Hand-made CSVs following the two other documented layouts (rocprof v1 results.csv, rocprofv3 kernel_trace.csv).
V1 = (
    '"Index","KernelName","gpu-id","queue-id","queue-index","pid","tid","grd","wgr","lds","scr","arch_vgpr",'
    '"accum_vgpr","sgpr","wave_size","sig","obj","DispatchNs","BeginNs","EndNs","CompleteNs","DurationNs"\n'
    '0,"bodyForce(Body*, float, int) [clone .kd]",0,0,0,36706,36706,65536,256,0,0,20,4,16,64,"0x0","0x7f",'
    "1591372809346673,1591372809872935,1591372836189584,1591372836215944,26316649\n"
    '1,"bodyForce(Body*, float, int) [clone .kd]",0,0,2,36706,36706,65536,256,0,0,20,4,16,64,"0x0","0x7f",'
    "1591372836300000,1591372836400000,1591372836500000,1591372836600000,100000\n"
)
V3 = (
    '"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name","Correlation_Id",'
    '"Start_Timestamp","End_Timestamp","LDS_Block_Size","Scratch_Size","VGPR_Count","Accum_VGPR_Count","SGPR_Count",'
    '"Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z","Grid_Size_X","Grid_Size_Y","Grid_Size_Z"\n'
    '"KERNEL_DISPATCH","Agent 2",1,3,70,1,33,"matrixTranspose(float*, float*, int)",119662,1000,3500,512,0,8,0,'
    "16,4,4,1,1024,1024,1\n"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (V1, ("bodyForce(Body*, float, int)", [26316649, 100000], 256, 256, 24, 0, 0)),
        (V3, ("matrixTranspose(float*, float*, int)", [2500], 256, 4, 8, 2, 3)),
    ],
)
def test_other_csv_layouts_hand_made(tmp_path, text, expected):
    path = tmp_path / "kernels.csv"
    path.write_text(text)
    name, durs, grid_x, block_x, regs, device, stream = expected
    rows = _kernels(path).sort("ts_ns")
    assert rows["name"].unique().to_list() == [name]
    assert rows["dur_ns"].to_list() == durs
    first = rows.row(0, named=True)
    assert (first["grid_x"], first["block_x"], first["registers_per_thread"]) == (grid_x, block_x, regs)
    assert (first["device"], first["stream"]) == (device, stream)


@pytest.mark.corpus
def test_rocprof_json_detected_by_content(tmp_path):
    copy = tmp_path / "results.trace"
    shutil.copyfile(corpus_path(ROCPROF_JSON), copy)
    assert detect(copy, str(copy)).name == "rocprof"


def test_unknown_csv_and_ncu_csv_as_trace_are_one_line_errors(cli, tmp_path):
    unknown = tmp_path / "data.csv"
    unknown.write_text("a,b,c\n1,2,3\n")  # hand-made: a CSV of no profiler
    result = cli("summary", unknown, "--no-cache")
    assert result.code == 2 and "CSV with columns a, b, c" in result.err
    assert len(result.err.strip().splitlines()) == 1
    from conftest import REPO

    result = cli("summary", REPO / "tests" / "fixtures" / "ncu_raw_handmade.csv", "--no-cache")
    assert result.code == 2 and "--metrics" in result.err
