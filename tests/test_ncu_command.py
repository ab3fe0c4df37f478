"""`opscope ncu FILE` on the real Nsight Compute export of the corpus (ncu/apc_bert_flashattn_A100_nsight.csv:
details page, 10 launches of 7 kernels, no duration metric, ncu rule warnings). Every figure is checked against
an independent walk of the CSV rows with the csv module; the findings against the thresholds of docs/readers.md
and the occupancy limiter against ncu's own rule text."""

from __future__ import annotations

import contextlib
import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import corpus_path

VALIDITY_KEYS = {"validity", "validity_banners"}  # every document's (docs/validity.md)

EXPORT = "ncu/apc_bert_flashattn_A100_nsight.csv"
# The display names of this export's Launch Statistics and Occupancy sections -> the metric ids ncu's section
# files (LaunchStatistics.section, Occupancy.section) give for them.
LABELS = {
    "Block Size": "launch__block_size",
    "Grid Size": "launch__grid_size",
    "Registers Per Thread": "launch__registers_per_thread",
    "Shared Memory Configuration Size": "launch__shared_mem_config_size",
    "Driver Shared Memory Per Block": "launch__shared_mem_per_block_driver",
    "Dynamic Shared Memory Per Block": "launch__shared_mem_per_block_dynamic",
    "Static Shared Memory Per Block": "launch__shared_mem_per_block_static",
    "Threads": "launch__thread_count",
    "Waves Per SM": "launch__waves_per_multiprocessor",
    "Block Limit SM": "launch__occupancy_limit_blocks",
    "Block Limit Registers": "launch__occupancy_limit_registers",
    "Block Limit Shared Mem": "launch__occupancy_limit_shared_mem",
    "Block Limit Warps": "launch__occupancy_limit_warps",
    "Theoretical Active Warps per SM": "sm__maximum_warps_avg_per_active_cycle",
    "Theoretical Occupancy": "sm__maximum_warps_per_active_cycle_pct",
    "Achieved Occupancy": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "Achieved Active Warps Per SM": "sm__warps_active.avg.per_cycle_active",
}
KERNEL_KEYS = {
    "name",
    "raw_name",
    "launches",
    "duration_us",
    "sm_throughput_pct",
    "memory_throughput_pct",
    "dram_bytes",
    "l2_hit_pct",
    "l1_hit_pct",
    "achieved_occupancy_pct",
    "theoretical_occupancy_pct",
    "registers_per_thread",
    "shared_mem_per_block_bytes",
    "block_size",
    "grid_size",
    "waves_per_sm",
    "metrics",
}


def advise_finding_keys() -> set[str]:
    """The keys of an `opscope advise` finding (its JSON writer, on a finding built by hand)."""
    from opscope.analysis.findings import Finding
    from opscope.report.advice_view import finding_data

    finding = Finding("x", "info", "t", 0, 0.0, "m", 0.0, 0.0, (), "a", "own")
    return set(finding_data(finding))


def launches_of(path: Path) -> dict[int, dict[str, Any]]:
    """ID -> kernel name, metric values by id (display names mapped through LABELS) and rule rows."""
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    header = rows[0]
    at = {name: i for i, name in enumerate(header)}
    out: dict[int, dict[str, Any]] = {}
    for raw in rows[1:]:
        row = raw + [""] * (len(header) - len(raw))
        launch = out.setdefault(int(row[at["ID"]]), {"kernel": row[at["Kernel Name"]], "m": {}, "rules": []})
        name = row[at["Metric Name"]]
        if name:
            with contextlib.suppress(ValueError):  # text (the function cache configuration) is no figure
                launch["m"][LABELS.get(name, name)] = float(row[at["Metric Value"]].replace(",", ""))
        if row[at["Rule Name"]]:
            launch["rules"].append((row[at["Rule Name"]], row[at["Rule Type"]], row[at["Rule Description"]]))
    return out


def kernels_of(launches: dict[int, dict[str, Any]]) -> dict[str, list[int]]:
    """Kernel name -> its launch IDs, kernels in the order of their first launch."""
    out: dict[str, list[int]] = {}
    for launch_id in sorted(launches):
        out.setdefault(launches[launch_id]["kernel"], []).append(launch_id)
    return out


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


@pytest.fixture(scope="module")
def export() -> Path:
    return corpus_path(EXPORT)


@pytest.fixture
def data(cli, export) -> dict[str, Any]:
    result = cli("ncu", export, "--format", "json")
    assert result.code == 0, result.err
    return json.loads(result.out)


@pytest.mark.corpus
def test_every_kernel_figure_matches_the_csv_rows(data, export):
    launches = launches_of(export)
    kernels = kernels_of(launches)
    assert (
        set(data)
        == {
            "schema",
            "file",
            "device",
            "kernels",
            "rules",
            "findings",
            "warnings",
            "layout",
            "metric_definitions",
        }
        | VALIDITY_KEYS
    )
    assert data["layout"] == "details" and data["metric_definitions"] == {}  # an ncu CSV defines no metrics
    assert data["validity"] == [] and data["validity_banners"] == []  # no trace read
    assert data["schema"] == "opscope.ncu/1" and data["device"] is None  # the export names no device
    assert [k["raw_name"] for k in data["kernels"]] == list(kernels)  # no durations: profile order
    assert len(kernels) == 7 and sum(len(ids) for ids in kernels.values()) == 10
    fields = {
        "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "memory_throughput_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "dram_bytes": "dram__bytes.sum",
        "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
        "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
        "registers_per_thread": "launch__registers_per_thread",
        "block_size": "launch__block_size",
        "grid_size": "launch__grid_size",
        "waves_per_sm": "launch__waves_per_multiprocessor",
    }
    for row in data["kernels"]:
        assert set(row) == KERNEL_KEYS
        ids = kernels[row["raw_name"]]
        ms = [launches[i]["m"] for i in ids]
        assert row["name"] == row["raw_name"]  # not mangled
        assert row["launches"] == len(ids)
        assert row["duration_us"] is None and row["l1_hit_pct"] is None and row["l2_hit_pct"] is None
        for key, metric in fields.items():
            assert row[key] == pytest.approx(mean([m[metric] for m in ms]), abs=1e-4), key
        smem = mean(
            [m["launch__shared_mem_per_block_static"] + m["launch__shared_mem_per_block_dynamic"] for m in ms]
        )
        assert row["shared_mem_per_block_bytes"] == pytest.approx(smem)
        every = {k for m in ms for k in m}
        assert set(row["metrics"]) == every
        for metric, value in row["metrics"].items():
            assert value == pytest.approx(mean([m[metric] for m in ms if metric in m]), abs=1e-4), metric


@pytest.mark.corpus
def test_rules_are_ncu_text_verbatim(data, export):
    launches = launches_of(export)
    expected = [
        {"kernel": launches[i]["kernel"], "launch": i, "rule": r, "type": t, "message": m}
        for i in sorted(launches)
        for r, t, m in launches[i]["rules"]
    ]
    assert len(expected) == 18 and data["rules"] == expected


def _limiter_in_ncu_text(rules: list[tuple[str, str, str]]) -> str | None:
    for name, _, text in rules:
        if name == "Occupancy":
            if "not impacted by any block limit" in text:
                return "none"
            if "number of required registers" in text:
                return "registers"
            if "amount of shared memory" in text:
                return "shared memory"
    return None


@pytest.mark.corpus
def test_findings_follow_the_thresholds_and_ncu_agrees_on_the_limiter(data, export):
    launches = launches_of(export)
    kernels = kernels_of(launches)
    expected = set()
    distance = {}
    for ids in kernels.values():
        sm = mean([launches[i]["m"]["sm__throughput.avg.pct_of_peak_sustained_elapsed"] for i in ids])
        mem = mean(
            [
                launches[i]["m"]["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"]
                for i in ids
            ]
        )
        achieved = mean([launches[i]["m"]["sm__warps_active.avg.pct_of_peak_sustained_active"] for i in ids])
        first = ids[0]
        assert not (mem >= 60 and sm < mem)  # nothing memory-bound in this export
        if sm < 70:
            expected.add(("ncu-low-sm-throughput", first))
            distance[("ncu-low-sm-throughput", first)] = (70 - sm) / 70
        if achieved < 50:
            expected.add(("ncu-low-occupancy", first))
            distance[("ncu-low-occupancy", first)] = (50 - achieved) / 50
        conflicts = sum(launches[i]["m"]["l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"] for i in ids)
        wavefronts = sum(launches[i]["m"]["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"] for i in ids)
        assert wavefronts and 100 * conflicts / wavefronts < 10  # measured; at most 4.4% (ID 8): no finding
        if any(launches[i]["rules"] for i in ids):
            expected.add(("ncu-rules", first))
            distance[("ncu-rules", first)] = 0.0  # no estimated speedups in this export
    found = []
    keys = advise_finding_keys()
    for f in data["findings"]:
        assert set(f) == keys  # the advise finding schema
        assert f["predicted_saving_us"] is None and f["saving_share"] == 0  # no saving model without a trace
        first = int(re.search(r"\(ID (\d+)\)$", f["title"]).group(1))
        found.append((f["id"], first))
        assert f["time_at_stake_us"] == 0 and f["share"] == 0  # no durations
        assert f["severity"] == ("warn" if distance[(f["id"], first)] >= 0.5 else "info")
        if f["id"] == "ncu-low-occupancy":
            ids = kernels[launches[first]["kernel"]]
            assert f["evidence"][0]["limiter"] == _limiter_in_ncu_text(launches[first]["rules"])
            assert f["evidence"][0]["launches"] == len(ids)
        if f["id"] == "ncu-rules":
            assert f["source"] == "ncu"
            messages = {e["message"] for e in f["evidence"]}
            assert messages == {
                m for i in kernels[launches[first]["kernel"]] for _, _, m in launches[i]["rules"]
            }
    assert set(found) == expected and len(found) == len(expected) == 21
    ranks = [distance[key] for key in found]
    assert ranks == sorted(ranks, reverse=True)  # no durations: furthest from the threshold first


@pytest.mark.corpus
def test_by_launch_gives_each_launch_its_own_values(cli, export):
    launches = launches_of(export)
    result = cli("ncu", export, "--by", "launch", "--top", "0", "--format", "json")
    assert result.code == 0, result.err
    rows = json.loads(result.out)["kernels"]
    assert [r["launch"] for r in rows] == sorted(launches) == list(range(10))
    for row in rows:
        m = launches[row["launch"]]["m"]
        assert set(row) == KERNEL_KEYS | {"launch"} and row["launches"] == 1
        assert row["sm_throughput_pct"] == pytest.approx(
            m["sm__throughput.avg.pct_of_peak_sustained_elapsed"]
        )
        assert row["registers_per_thread"] == m["launch__registers_per_thread"]
        assert row["metrics"]["l1tex__t_bytes.sum"] == m["l1tex__t_bytes.sum"]


@pytest.mark.corpus
def test_top_and_filter(cli, export):
    data = json.loads(cli("ncu", export, "--top", "2", "--format", "json").out)
    assert len(data["kernels"]) == 2 and len(data["findings"]) == 21  # findings cover every kernel
    data = json.loads(cli("ncu", export, "--filter", "cutlass", "--format", "json").out)
    assert [k["launches"] for k in data["kernels"]] == [1, 1]
    assert all("cutlass" in r["kernel"] for r in data["rules"]) and len(data["rules"]) == 4
    result = cli("ncu", export, "--filter", "(")
    assert result.code == 2 and result.err.count("\n") == 1 and "not a valid regular expression" in result.err


@pytest.mark.corpus
def test_text_formats(cli, export):
    table = cli("ncu", export, "--width", "120")
    assert table.code == 0 and "Findings, furthest from the threshold first" in table.out
    assert "no duration metric in this export" in table.out and "Nsight Compute rule results" in table.out
    rows = list(csv.reader(cli("ncu", export, "--format", "csv").out.splitlines()))
    assert rows[0][:3] == ["name", "launches", "duration_us"] and len(rows) == 1 + 7
    assert "sm_throughput_pct_min" in rows[0] and "sm_throughput_pct_max" in rows[0]
    sm_min = rows[0].index("sm_throughput_pct_min")
    assert float(rows[1][sm_min]) == pytest.approx(0.12)  # the uniform RNG kernel: launches 0-3, min at ID 3
    markdown = cli("ncu", export, "--format", "markdown")
    assert markdown.code == 0 and markdown.out.startswith("### Nsight Compute")


@pytest.mark.corpus
def test_summary_on_an_ncu_export_points_to_opscope_ncu(cli, export):
    result = cli("summary", export)
    assert result.code == 2 and "opscope ncu" in result.err and result.err.count("\n") == 1
