"""rocprof-compute analysis databases, read three ways and each checked against a direct SQL walk of the real MI350
database in the corpus (`rocprof_compute/mi350_monte_carlo_pi.rocprof_compute.db`, ROCm 7.3, rocprof-compute
3.5.0: 7 kernels, 10 dispatches, 48 k metric values, roofline data): the dispatches as a timeline, the metrics
as `opscope ncu`'s per-kernel table, the roofline points in `efficiency`. Edge cases on hand-made databases
(labelled as such) with the same tables."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import polars as pl
import pytest

import opscope
from conftest import corpus_path
from opscope.ingest.registry import detect
from opscope.ingest.rocprof import kernel_name
from opscope.model.schema import Col, Kind

MI350 = "rocprof_compute/mi350_monte_carlo_pi.rocprof_compute.db"


def _sql(path: Path, query: str, params: tuple = ()) -> list[tuple]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return db.execute(query, params).fetchall()


def _kernel_metric(path: Path, kernel: str, metric_id: str, value_name: str) -> float:
    (value,) = _sql(
        path,
        "SELECT v.value FROM compute_kernel_metric_value v JOIN compute_metric_definition d USING (metric_uuid) "
        "JOIN compute_kernel k USING (kernel_uuid) WHERE d.metric_id = ? AND v.value_name = ? AND k.kernel_name = ?",
        (metric_id, value_name, kernel),
    )[0]
    return float(value)


@pytest.mark.corpus
def test_the_dispatches_are_the_timeline() -> None:
    path = corpus_path(MI350)
    assert detect(path, str(path)).name == "rocprof-compute"
    trace = opscope.load(path, cache=False)
    kernels = trace.events.filter(pl.col(Col.KIND).cast(pl.String) == Kind.KERNEL)
    expected = sorted(
        (kernel_name(name), start, end - start, gpu, dispatch)
        for name, start, end, gpu, dispatch in _sql(
            path,
            "SELECT k.kernel_name, d.start_timestamp, d.end_timestamp, d.gpu_id, d.dispatch_id "
            "FROM compute_dispatch d JOIN compute_kernel k USING (kernel_uuid)",
        )
    )
    got = sorted(
        kernels.select(
            pl.col(Col.NAME).cast(pl.String), Col.TS_NS, Col.DUR_NS, Col.DEVICE, Col.CORRELATION
        ).iter_rows()
    )
    assert got == expected and len(got) == 10
    (device,) = trace.meta.devices
    assert (device.name, device.arch, device.sm_count, device.warp_size) == ("MI350", "gfx950", 256, 64)
    assert any("replayed once per counter pass" in w for w in trace.meta.warnings)
    assert trace.meta.extra["rocprof_compute_version"] == "3.5.0"


@pytest.mark.corpus
def test_summary_totals_equal_the_database(cli) -> None:
    path = corpus_path(MI350)
    out = json.loads(cli("summary", str(path), "--format", "json").out)
    ((total, count),) = _sql(
        path, "SELECT sum(end_timestamp - start_timestamp), count(*) FROM compute_dispatch"
    )
    assert (round(out["totals"]["gpu_time_us"] * 1000), out["totals"]["calls"]) == (total, count)


@pytest.mark.corpus
def test_ncu_reads_the_metrics_with_units_and_definitions(cli) -> None:
    path = corpus_path(MI350)
    done = cli("ncu", str(path), "--top", "0", "--format", "json")
    assert done.code == 0, done.err
    out = json.loads(done.out)
    assert out["layout"] == "rocprof-compute" and out["device"] == "MI350"
    rows = {r["raw_name"]: r for r in out["kernels"]}
    assert len(rows) == 7
    durations = dict(
        _sql(
            path,
            "SELECT k.kernel_name, avg(d.end_timestamp - d.start_timestamp) FROM compute_dispatch d "
            "JOIN compute_kernel k USING (kernel_uuid) GROUP BY k.kernel_name",
        )
    )
    for raw, row in rows.items():
        assert row["duration_us"] == pytest.approx(durations[raw] / 1e3, abs=1e-3)
        occupancy = _kernel_metric(path, raw, "2.1.17", "Pct of Peak")
        assert row["achieved_occupancy_pct"] == pytest.approx(occupancy, abs=1e-4)
        label = "2.1.17 System Speed-of-Light: Wavefront Occupancy (Pct of Peak)"
        assert row["metrics"][label] == pytest.approx(occupancy, abs=1e-4)
        vgpr, agpr = (_kernel_metric(path, raw, m, "Avg") for m in ("7.1.5", "7.1.6"))
        assert row["registers_per_thread"] == vgpr + agpr
        items, group = (_kernel_metric(path, raw, m, "Avg") for m in ("7.1.0", "7.1.1"))
        assert row["grid_size"] == math.ceil(items / group) and row["block_size"] == group
        # Gflop/s in the database, flop/s (the base unit) in the table
        flops = _kernel_metric(path, raw, "2.1.0", "Avg")
        assert row["metrics"]["2.1.0 System Speed-of-Light: VALU FLOPs"] == pytest.approx(
            flops * 1e9, rel=1e-6
        )
    definitions = out["metric_definitions"]
    ((description, unit),) = _sql(
        path, "SELECT description, unit FROM compute_metric_definition WHERE metric_id = '2.1.17'"
    )
    assert unit == "Wavefronts"
    assert definitions["2.1.17 System Speed-of-Light: Wavefront Occupancy"]["definition"] == description
    assert definitions["2.1.0 System Speed-of-Light: VALU FLOPs"]["unit"] == "flop/s"
    assert any(f["id"] == "ncu-low-occupancy" for f in out["findings"])
    text = cli("ncu", str(path)).out
    assert text.startswith("rocprof-compute: per-kernel metrics") and "SpeedOfLight" not in text


@pytest.mark.corpus
def test_efficiency_shows_the_recorded_roofline(cli) -> None:
    path = corpus_path(MI350)
    out = json.loads(cli("efficiency", str(path), "--format", "json").out)
    recorded = out["recorded_roofline"]
    ((bench,),) = _sql(path, "SELECT roofline_bench_extdata FROM compute_workload")
    roofs = json.loads(bench)
    compute = max(roofs["FP32Flops"], roofs["MFMAF32Flops"])  # the analysis was run for FP32
    assert recorded["data_types"] == ["FP32"] and recorded["compute_roof_gflops"] == compute
    points = {p["kernel"]: p for p in recorded["points"]}
    rows = _sql(
        path,
        "SELECT k.kernel_name, r.total_flops, r.l1_cache_data, r.l2_cache_data, r.hbm_cache_data "
        "FROM compute_kernel_roofline_data r JOIN compute_kernel k USING (kernel_uuid)",
    )
    assert len(points) == len(rows) == 7
    for name, gflops, l1, l2, hbm in rows:
        point = points[kernel_name(name)]
        assert point["gflops"] == gflops
        assert point["intensity_flops_per_byte"] == {"l1": l1, "l2": l2, "hbm": hbm}
        if gflops and hbm:
            attainable = min(compute, hbm * roofs["HBMBw"])
            assert point["pct_of_roof"] == pytest.approx(100 * gflops / attainable, abs=1e-3)
            assert point["bound"] == ("memory" if hbm * roofs["HBMBw"] < compute else "compute")
        else:
            assert point["pct_of_roof"] is None and point["bound"] is None
    text = cli("efficiency", str(path)).out
    assert "Roofline as rocprof-compute measured it" in text


@pytest.mark.corpus
def test_every_view_runs(cli) -> None:
    path = str(corpus_path(MI350))
    for command in ("analyze", "advise", "steps", "brief", "critical-path", "kernels", "report"):
        args = [command, path] + (["-o", "/dev/null"] if command == "report" else [])
        done = cli(*args)
        assert done.code == 0, (command, done.err)


def test_a_database_without_metrics_or_roofline(tmp_path: Path, cli) -> None:
    """Hand-made: only the kernel and dispatch tables. The timeline reads; ncu has durations and no metrics;
    efficiency has no recorded roofline."""
    path = tmp_path / "bare.db"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE compute_kernel (kernel_uuid INTEGER PRIMARY KEY, workload_id INTEGER, kernel_name TEXT)"
        )
        db.execute(
            "CREATE TABLE compute_dispatch (dispatch_uuid INTEGER PRIMARY KEY, kernel_uuid INTEGER, dispatch_id "
            "INTEGER, gpu_id INTEGER, start_timestamp INTEGER, end_timestamp INTEGER)"
        )
        db.execute("INSERT INTO compute_kernel VALUES (1, 1, 'k1.kd')")
        db.executemany(
            "INSERT INTO compute_dispatch VALUES (?, 1, ?, 0, ?, ?)",
            [(1, 0, 1_000, 3_000), (2, 1, 5_000, 6_000)],
        )
    summary = json.loads(cli("summary", str(path), "--format", "json").out)
    assert summary["rows"][0]["name"] == "k1" and summary["totals"]["gpu_time_us"] == 3.0
    ncu = json.loads(cli("ncu", str(path), "--format", "json").out)
    assert ncu["kernels"][0]["launches"] == 2 and ncu["kernels"][0]["metrics"] == {}
    efficiency = json.loads(cli("efficiency", str(path), "--format", "json").out)
    assert efficiency["recorded_roofline"] is None
