"""Nsight Compute export layouts and hostile exports. HAND-MADE FIXTURES (written by each test into tmp_path):
the corpus has one real export (details page, 2023.1 column set, no durations; tests/test_ncu_command.py), so
the other layouts are written here after ncu's documented formats: the raw page with and without its units
row, the details page of 2020.1 (`Kernel Time`, "GPU Speed Of Light", "SM [%]") and of 2023.2+ (`Block Size`,
`Grid Size`, `Device`, `CC`, `Estimated Speedup`), and damaged or hostile files. Expected figures are written
out by hand from the cells of each fixture."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from opscope.ingest.ncu_table import METRIC_ID, metric_table
from opscope.model.ncu import FIELDS

RAW_HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","device__attribute_display_name","dram__bytes.sum","gpu__time_duration.sum",'
    '"launch__shared_mem_per_block_static","launch__shared_mem_per_block_dynamic",'
    '"sm__throughput.avg.pct_of_peak_sustained_elapsed","sm__warps_active.avg.pct_of_peak_sustained_active"'
)
NEW_DETAILS = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value","Rule Name","Rule Type",'
    '"Rule Description","Estimated Speedup Type","Estimated Speedup"'
)
OLD_DETAILS = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Kernel Time","Context","Stream",'
    '"Section Name","Metric Name","Metric Unit","Metric Value"'
)


def write(tmp_path: Path, text: str, name: str = "ncu.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def ncu_json(cli, path: Path, *extra: str) -> dict[str, Any]:
    result = cli("ncu", path, "--format", "json", *extra)
    assert result.code == 0, result.err
    return json.loads(result.out)


def details_row(launch: int, kernel: str, section: str, metric: str, unit: str, value: str) -> str:
    return (
        f'"{launch}","1","app","host","{kernel}","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","{section}",'
        f'"{metric}","{unit}","{value}","","","","",""'
    )


def details_rule(launch: int, kernel: str, rule: str, kind: str, text: str, speedup: str) -> str:
    return (
        f'"{launch}","1","app","host","{kernel}","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","SpeedOfLight","",'
        f'"","","{rule}","{kind}","{text}","local","{speedup}"'
    )


def test_raw_page_with_units_row_converts_units_and_separators(cli, tmp_path):
    # Kbyte/block -> bytes, usecond -> ns, thousands separators; the program's output before the header
    text = "\n".join(
        [
            "==PROF== Connected to process 4242 (/usr/bin/python3)",
            "step 0 loss 1.25",
            RAW_HEADER,
            '"","","","","","","","","","","","","Mbyte","usecond","Kbyte/block","byte/block","%","%"',
            '"0","4242","python3","n1","gemm(float *)","1","7","(256, 1, 1)","(1,024, 1, 1)","0","9.0",'
            '"NVIDIA H100 80GB HBM3","2.5","1,234.5","1.024","2,048","81.5","40"',
            '"1","4242","python3","n1","gemm(float *)","1","7","(256, 1, 1)","(1,024, 1, 1)","0","9.0",'
            '"NVIDIA H100 80GB HBM3","3.5","765.5","1.024","0","78.5","60"',
        ]
    )
    data = ncu_json(cli, write(tmp_path, text))
    assert data["device"] == "NVIDIA H100 80GB HBM3" and data["warnings"] == []
    (row,) = data["kernels"]
    assert row["launches"] == 2
    assert row["duration_us"] == pytest.approx((1234.5 + 765.5) / 2)
    assert row["dram_bytes"] == pytest.approx((2.5e6 + 3.5e6) / 2)
    assert row["shared_mem_per_block_bytes"] == pytest.approx(((1024 + 2048) + (1024 + 0)) / 2)
    assert row["sm_throughput_pct"] == pytest.approx(80.0) and row["achieved_occupancy_pct"] == 50
    assert row["block_size"] == 256 and row["grid_size"] == 1024  # from the Block / Grid Size columns
    assert row["metrics"]["gpu__time_duration.sum"] == pytest.approx(1_000_000.0)  # ns


def test_raw_page_without_units_row_keeps_values_as_written(cli, tmp_path):
    text = "\n".join(
        [
            '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
            '"gpu__time_duration.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed"',
            '"0","1","a","h","k1","1","7","1,500","12.5"',
            '"1","1","a","h","k2","1","7","500","90"',
        ]
    )
    data = ncu_json(cli, write(tmp_path, text))
    assert [(k["name"], k["duration_us"], k["sm_throughput_pct"]) for k in data["kernels"]] == [
        ("k1", 1.5, 12.5),  # no units row: the value is taken in the base unit (ns)
        ("k2", 0.5, 90),
    ]


def test_details_page_new_column_set_with_estimated_speedup(cli, tmp_path):
    rows = [
        details_row(0, "k", "GPU Speed Of Light Throughput", "Duration", "msecond", "1.50"),
        details_row(0, "k", "GPU Speed Of Light Throughput", "Compute (SM) Throughput", "%", "35.5"),
        details_row(0, "k", "GPU Speed Of Light Throughput", "Memory Throughput", "%", "20"),
        details_row(0, "k", "Memory Workload Analysis", "Memory Throughput", "Gbyte/second", "1,200.5"),
        details_row(0, "k", "Memory Workload Analysis", "L1/TEX Hit Rate", "%", "n/a"),
        details_row(0, "k", "Memory Workload Analysis", "L2 Hit Rate", "%", "72.25"),
        details_row(0, "k", "Occupancy", "Achieved Occupancy", "%", "45"),
        details_rule(0, "k", "SOLBottleneck", "OPT", "This kernel grid is too small.", "33.3"),
    ]
    data = ncu_json(cli, write(tmp_path, "\n".join([NEW_DETAILS, *rows])))
    (row,) = data["kernels"]
    assert data["device"] == "compute capability 9.0"
    assert row["duration_us"] == 1500.0 and row["sm_throughput_pct"] == 35.5
    assert row["memory_throughput_pct"] == 20  # the % of Speed Of Light, not Memory Workload's byte/second
    assert row["metrics"]["dram__bytes.sum.per_second"] == pytest.approx(1200.5e9)
    assert row["l1_hit_pct"] is None and row["l2_hit_pct"] == 72.25
    assert row["block_size"] == 128 and row["grid_size"] == 64  # from the columns (no launch__ metrics)
    assert data["rules"] == [
        {
            "kernel": "k",
            "launch": 0,
            "rule": "SOLBottleneck",
            "type": "OPT",
            "message": "This kernel grid is too small.",
        }
    ]
    (rules,) = [f for f in data["findings"] if f["id"] == "ncu-rules"]
    assert rules["evidence"][0]["estimated_speedup"] == "33.3% (local)" and rules["value"] == 33.3


def test_details_page_of_2020_reads_old_labels_and_never_kernel_time(cli, tmp_path):
    row = '"0","1","cfd","h","cuda_compute_flux","2020-May-29 12:02:46","1","7","GPU Speed Of Light",'
    text = "\n".join(
        [
            OLD_DETAILS,
            row + '"SM [%]","%","22.48"',
            row + '"Memory [%]","%","46.47"',
            row + '"Duration","nsecond","8,992"',
            row + '"SOL FB","%","46.47"',
            row + '"Elapsed Cycles","cycle","10251"',
        ]
    )
    data = ncu_json(cli, write(tmp_path, text))
    (k,) = data["kernels"]
    assert k["sm_throughput_pct"] == 22.48 and k["memory_throughput_pct"] == 46.47
    assert k["duration_us"] == pytest.approx(8.992)  # Duration, not the Kernel Time date
    assert k["metrics"]["GPU Speed Of Light: SOL FB"] == 46.47  # a label the table does not know
    assert k["metrics"]["gpc__cycles_elapsed.max"] == 10251


def _timed(kernels: list[tuple[int, str, float, float, float, float]]) -> str:
    """Details rows with durations: (ID, kernel, duration us, SM %, memory %, achieved occupancy %)."""
    rows = [NEW_DETAILS]
    for launch, name, us, sm, memory, occ in kernels:
        rows += [
            details_row(launch, name, "GPU Speed Of Light Throughput", "Duration", "usecond", f"{us}"),
            details_row(
                launch, name, "GPU Speed Of Light Throughput", "Compute (SM) Throughput", "%", f"{sm}"
            ),
            details_row(launch, name, "GPU Speed Of Light Throughput", "Memory Throughput", "%", f"{memory}"),
            details_row(launch, name, "Occupancy", "Achieved Occupancy", "%", f"{occ}"),
        ]
    return "\n".join(rows)


def test_with_durations_findings_rank_by_time_and_skip_kernels_that_do_not_matter(cli, tmp_path):
    text = _timed(
        [
            (0, "small", 100.0, 50.0, 10.0, 80.0),  # 10% of the time, SM below 70%
            (1, "big", 400.0, 65.0, 10.0, 80.0),  # 40%, barely below
            (2, "big", 495.0, 65.0, 10.0, 80.0),
            (3, "tiny", 5.0, 1.0, 1.0, 5.0),  # 0.5% of 1000 us: does not matter
        ]
    )
    data = ncu_json(cli, write(tmp_path, text))
    assert [k["raw_name"] for k in data["kernels"]] == ["big", "small", "tiny"]  # by total time
    assert [(f["id"], f["evidence"][0]["kernel"]) for f in data["findings"]] == [
        ("ncu-low-sm-throughput", "big"),
        ("ncu-low-sm-throughput", "small"),
    ]
    big, small = data["findings"]
    assert (
        big["time_at_stake_us"] == 895.0
        and big["share"] == pytest.approx(0.895)
        and big["severity"] == "crit"
    )
    assert small["share"] == pytest.approx(0.1) and small["severity"] == "crit"
    assert big["evidence"][0]["sm_throughput_pct"] == 65 and "no duration" not in " ".join(data["warnings"])


def test_memory_bound_and_bank_conflicts(cli, tmp_path):
    rows = [NEW_DETAILS]
    for metric, unit, value in (
        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", "20"),
        ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "%", "85"),
        ("sm__inst_executed_pipe_tensor.sum", "inst", "0"),
        ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", "", "3,000"),
        ("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", "", "12,000"),
    ):
        rows.append(details_row(0, "copy_kernel", "Command line profiler metrics", metric, unit, value))
    data = ncu_json(cli, write(tmp_path, "\n".join(rows)))
    by_id = {f["id"]: f for f in data["findings"]}
    assert set(by_id) == {"ncu-memory-bound", "ncu-bank-conflicts"}  # memory-bound: no low-SM finding too
    assert by_id["ncu-memory-bound"]["value"] == 85 and "tensor cores" in by_id["ncu-memory-bound"]["advice"]
    assert by_id["ncu-memory-bound"]["severity"] == "warn"  # no durations: (85 - 60) / 40 = 0.625 >= 0.5
    assert by_id["ncu-bank-conflicts"]["value"] == pytest.approx(25.0)


def test_formula_and_control_characters_stay_text(cli, tmp_path):
    name = '=HYPERLINK(""http://evil"",""x"")'
    rows = [
        details_row(0, name, "GPU Speed Of Light Throughput", "Compute (SM) Throughput", "%", "10"),
        details_row(0, name, "GPU Speed Of Light Throughput", "Memory Throughput", "%", "=1+2"),
        details_rule(0, name, "Rule\x1b[31m", "WRN", "-cmd|' /C calc", ""),
    ]
    path = write(tmp_path, "\n".join([NEW_DETAILS, *rows]))
    data = ncu_json(cli, path)
    assert data["kernels"][0]["name"] == '=HYPERLINK("http://evil","x")'  # JSON: exact text
    assert data["kernels"][0]["memory_throughput_pct"] is None  # a formula is not a number
    assert data["rules"][0]["rule"] == "Rule\x1b[31m"
    csv_out = cli("ncu", path, "--format", "csv").out
    assert "\n\"'=HYPERLINK(" in csv_out  # a spreadsheet gets text, not a formula
    for fmt in ("table", "markdown", "csv"):
        out = cli("ncu", path, "--format", fmt).out
        assert "\x1b" not in out


def test_huge_values_and_ids_are_skipped_with_a_warning(cli, tmp_path):
    rows = [
        details_row(0, "k", "GPU Speed Of Light Throughput", "Compute (SM) Throughput", "%", "1e400"),
        details_row(0, "k", "Occupancy", "Achieved Occupancy", "%", "99999999999999999999999"),
        details_row(99999999999999999999999, "k", "Occupancy", "Achieved Occupancy", "%", "10"),
    ]
    data = ncu_json(cli, write(tmp_path, "\n".join([NEW_DETAILS, *rows])))
    assert data["kernels"][0]["sm_throughput_pct"] is None
    assert data["kernels"][0]["achieved_occupancy_pct"] == 1e23  # large, finite: kept
    warnings = " ".join(data["warnings"])
    assert "1 metric values that are not finite" in warnings and "1 rows whose ID is not a launch" in warnings


def test_duplicate_ids_keep_the_first(cli, tmp_path):
    raw = "\n".join(
        [
            '"ID","Kernel Name","sm__throughput.avg.pct_of_peak_sustained_elapsed"',
            '"0","a","50"',
            '"0","a","60"',
            '"1","b","70"',
        ]
    )
    data = ncu_json(cli, write(tmp_path, raw, "raw.csv"))
    assert [(k["name"], k["sm_throughput_pct"]) for k in data["kernels"]] == [("a", 50), ("b", 70)]
    assert "launch ID 0 appears on more than one row: kept the first" in data["warnings"]
    pasted = "\n".join(
        [
            NEW_DETAILS,
            details_row(0, "a", "S", "Compute (SM) Throughput", "%", "50"),
            NEW_DETAILS,  # a second export pasted below the first: its IDs start again at 0
            details_row(0, "b", "S", "Compute (SM) Throughput", "%", "90"),
            details_row(0, "a", "S", "Compute (SM) Throughput", "%", "55"),
        ]
    )
    data = ncu_json(cli, write(tmp_path, pasted, "pasted.csv"))
    assert [(k["name"], k["sm_throughput_pct"]) for k in data["kernels"]] == [("a", 50)]
    warnings = " ".join(data["warnings"])
    assert "1 rows whose ID is not a launch number" in warnings
    assert "launch ID 0 names more than one kernel" in warnings
    assert "appear twice for the same launch with different values: kept the first" in warnings


def test_missing_sections_are_said(cli, tmp_path):
    rows = [details_row(0, "k", "Launch Statistics", "Registers Per Thread", "register/thread", "32")]
    data = ncu_json(cli, write(tmp_path, "\n".join([NEW_DETAILS, *rows])))
    warnings = " ".join(data["warnings"])
    assert "no duration metric" in warnings and "--section SpeedOfLight" in warnings
    assert "--section Occupancy" in warnings and data["findings"] == []
    assert data["kernels"][0]["registers_per_thread"] == 32


def test_repeated_column_names_keep_the_first(cli, tmp_path):
    text = '"ID","Kernel Name","launch__grid_size","launch__grid_size"\n"0","k","8","9"\n'
    data = ncu_json(cli, write(tmp_path, text))
    assert data["kernels"][0]["grid_size"] == 8
    assert data["warnings"][0] == "columns named twice, the first kept: launch__grid_size"


def test_mangled_names_are_demangled_for_show(cli, tmp_path):
    text = '"ID","Kernel Name","launch__grid_size"\n"0","_Z6kernelPf","8"\n'
    (row,) = ncu_json(cli, write(tmp_path, text))["kernels"]
    assert row["raw_name"] == "_Z6kernelPf" and row["name"] == "kernel(float*)"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "not an Nsight Compute CSV"),
        ("a,b\n1,2\n", "not an Nsight Compute CSV"),
        ('"ID","Kernel Name","Metric Name","Metric Value"\n', "no profiled launches"),
        ('"ID","Kernel Name","Metric Name","Metric Value"\n"0","a","x__y.sum","1\n', "malformed"),
        ('"ID","Process ID"\n"0","1"\n', "without the Kernel Name column"),
        ('"ID","Kernel Name","x__y.sum"\n"", "", ""\n', "no profiled launches"),  # a units row only
    ],
)
def test_bad_exports_are_one_line_errors(cli, tmp_path, text, message):
    result = cli("ncu", write(tmp_path, text))
    assert result.code == 2 and message in result.err and result.err.count("\n") == 1, result.err


def test_missing_file_and_bad_options(cli, tmp_path):
    result = cli("ncu", tmp_path / "nope.csv")
    assert result.code == 2 and "no such file" in result.err
    path = write(tmp_path, '"ID","Kernel Name"\n"0","k"\n')
    assert cli("ncu", path, "--top", "-1").code == 2
    assert cli("ncu", path, "--by", "stream").code == 2
    result = cli("ncu", path, "-o", path)
    assert result.code == 2 and "refusing" in result.err


def test_metric_table_matches_the_model():
    table = metric_table()
    assert set(table.fields) == set(FIELDS)
    assert all(METRIC_ID.match(m) for ids in table.fields.values() for m in ids)
    assert all(METRIC_ID.match(metric) for _, _, metric in table.labels)
    assert table.convert("Kbyte") == (1000.0, "byte") and table.convert("Mbyte") == (1e6, "byte")
    assert table.convert("usecond") == (1000.0, "nsecond") and table.convert("msecond") == (1e6, "nsecond")
    assert table.convert("%") == (1.0, "%") and table.convert("Gbyte/second") == (1e9, "byte/second")
    assert table.convert("Kbyte/block") == (1000.0, "byte/block")
    assert table.metric_of("Memory Throughput", "%", "x").startswith("gpu__compute_memory_throughput")
    assert table.metric_of("Memory Throughput", "Gbyte/second", "x") == "dram__bytes.sum.per_second"


def test_ncu_spelling_of_anonymous_namespaces_and_lambdas_shortens_like_kinetos():
    from opscope.report.names import shorten

    ncu = (
        "void at::native::<unnamed>::distribution_kernel<float, void at::native::uniform_kernel(at::Tensor &)"
        "::[lambda() (instance 1)]::operator ()() const::[lambda(float) (instance 2)]>(int, float *)"
    )
    kineto = (
        "void at::native::(anonymous namespace)::distribution_kernel<float, void at::native::uniform_kernel(at::"
        "Tensor&)::{lambda()#1}::operator()() const::{lambda(float)#2}>(int, float*)"
    )
    assert (
        shorten(ncu, 60) == shorten(kineto, 60) == "distribution_kernel<float, void uniform_kernel::λ1::λ2>"
    )
