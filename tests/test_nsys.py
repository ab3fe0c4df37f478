"""Nsight Systems SQLite reader: every figure is recomputed independently with sqlite3 / csv in the test."""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
import statistics
from collections import Counter, defaultdict

import polars as pl
import pytest

import opscope
from conftest import corpus_path
from opscope.ingest import nsys
from opscope.ingest.registry import detect

CLOVER = "pipit/cloverleaf-nsys__perlmutter-cloverleaf-cuda.sqlite"
SAXPY = "pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"
NO_KERNELS = "lighttransport_gemm/profile.sqlite"


def _db(path):
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def _events(path, **kw):
    return opscope.load(path, cache=False).events.with_columns(
        pl.col("name").cast(pl.String), pl.col("kind").cast(pl.String)
    )


@pytest.mark.corpus
@pytest.mark.parametrize("rel", [CLOVER, SAXPY])
def test_kernels_equal_sql_group_by(rel):
    path = corpus_path(rel)
    expected = {
        name: (n, total)
        for name, n, total in _db(path).execute(
            "SELECT s.value, count(*), sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
            "JOIN StringIds s ON s.id = k.demangledName GROUP BY s.value"
        )
    }
    got = (
        _events(path)
        .filter(pl.col("kind") == "kernel")
        .group_by("name")
        .agg(pl.len(), pl.col("dur_ns").sum())
        .rows()
    )
    assert {name: (n, total) for name, n, total in got} == expected


@pytest.mark.corpus
@pytest.mark.parametrize("rel", [CLOVER, SAXPY])
def test_memcpy_runtime_nvtx_counts_equal_sql(rel):
    path = corpus_path(rel)
    db = _db(path)
    events = _events(path)
    memcpy = events.filter(pl.col("kind") == "memcpy")
    n, total, nbytes = db.execute(
        "SELECT count(*), sum(end - start), sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY"
    ).fetchone()
    assert (memcpy.height, memcpy["dur_ns"].sum(), memcpy["bytes"].sum()) == (n, total, nbytes)
    by_kind = dict(
        db.execute("SELECT copyKind, count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1").fetchall()
    )
    names = Counter(memcpy["name"].to_list())
    assert sum(v for k, v in names.items() if k.startswith("Memcpy HtoD")) == by_kind.get(1, 0)
    assert sum(v for k, v in names.items() if k.startswith("Memcpy DtoH")) == by_kind.get(2, 0)
    api = events.filter(pl.col("kind").is_in(["runtime", "driver"]))
    assert api.height == db.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    drivers = db.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass = 1").fetchone()[
        0
    ]
    assert events.filter(pl.col("kind") == "driver").height == drivers
    tables = {t for (t,) in db.execute("SELECT name FROM sqlite_master")}
    ranges = (
        db.execute("SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60)").fetchone()[0]
        if "NVTX_EVENTS" in tables
        else 0
    )
    assert events.filter(pl.col("kind") == "user_annotation").height == ranges


@pytest.mark.corpus
def test_nvtx_ranges_are_annotations_on_the_cpu_thread():
    path = corpus_path(SAXPY)
    expected = sorted(
        _db(path)
        .execute(
            "SELECT n.start, n.end - n.start, coalesce(n.text, s.value), (n.globalTid >> 24) & 16777215, "
            "n.globalTid & 16777215 FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
            "WHERE n.eventType = 59"
        )
        .fetchall()
    )
    got = (
        _events(path)
        .filter(pl.col("kind") == "user_annotation")
        .select(
            "ts_ns",
            "dur_ns",
            "name",
            pl.col("pid").cast(pl.String).cast(pl.Int64),
            pl.col("tid").cast(pl.String).cast(pl.Int64),
        )
        .sort("ts_ns")
        .rows()
    )
    assert sorted(got) == expected
    assert {"saxpy", "MPI_Send", "MPI_Recv"} <= {row[2] for row in got}


@pytest.mark.corpus
def test_launches_link_to_gpu_work_by_correlation():
    events = _events(corpus_path(CLOVER))
    launches = events.filter(pl.col("name") == "cudaLaunchKernel")
    kernels = events.filter(pl.col("kind") == "kernel")
    linked = kernels.join(launches.select("correlation", pl.col("tid").alias("launch_tid")), on="correlation")
    assert linked.height == kernels.height == launches.height == 1312
    memcpy = events.filter(pl.col("kind") == "memcpy")
    copies = events.filter(pl.col("name") == "cudaMemcpy")
    assert memcpy.join(copies.select("correlation"), on="correlation").height == memcpy.height


@pytest.mark.corpus
def test_devices_threads_and_launch_args():
    path = corpus_path(CLOVER)
    trace = opscope.load(path, cache=False)
    db = _db(path)
    gpus = dict(db.execute("SELECT id, smCount FROM TARGET_INFO_GPU").fetchall())
    assert {d.id: d.sm_count for d in trace.meta.devices} == gpus
    assert trace.meta.devices[0].name == "NVIDIA A100-SXM4-80GB"
    assert trace.meta.devices[0].compute_capability == "8.0"
    assert trace.meta.format == "nsys"
    tids = {
        (p, t)
        for p, t in db.execute(
            "SELECT DISTINCT (globalTid >> 24) & 16777215, globalTid & 16777215 FROM CUPTI_ACTIVITY_KIND_RUNTIME"
        )
    }
    got = (
        trace.events.filter(pl.col("kind").cast(pl.String) == "runtime")
        .select(pl.col("pid").cast(pl.String).cast(pl.Int64), pl.col("tid").cast(pl.String).cast(pl.Int64))
        .unique()
        .rows()
    )
    assert set(got) <= tids and tids == {(1701896, 1701896)}
    kernel = db.execute(
        "SELECT gridX, blockX, registersPerThread, staticSharedMemory + dynamicSharedMemory "
        "FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start LIMIT 1"
    ).fetchone()
    first = trace.events.filter(pl.col("kind").cast(pl.String) == "kernel").sort("ts_ns").row(0, named=True)
    assert (
        first["grid_x"],
        first["block_x"],
        first["registers_per_thread"],
        first["shared_memory"],
    ) == kernel
    assert first["blocks_per_sm"] == pytest.approx(kernel[0] / 108, rel=1e-6)


@pytest.mark.corpus
def test_agrees_with_pipit_csvs_of_the_same_run():
    path = corpus_path(CLOVER)
    gpu_csv = corpus_path("pipit/cloverleaf-nsys__cloverleaf_gpu_trace.csv")
    api_csv = corpus_path("pipit/cloverleaf-nsys__cloverleaf-cuda_api_trace.csv")
    counts: Counter[str] = Counter()
    totals: defaultdict[str, int] = defaultdict(int)
    with open(gpu_csv, newline="") as handle:
        for row in csv.DictReader(handle):
            if row["Event Type"] == "Enter":
                counts[row["Name"]] += 1
                totals[row["Name"]] += int(row["_matching_timestamp"]) - int(row["Timestamp (ns)"])
    events = _events(path)
    kernels = events.filter(pl.col("kind") == "kernel")
    for short in ("par_ranged1d_kernel", "par_ranged2d_kernel", "par_reduce_kernel"):
        mine = kernels.filter(pl.col("name").str.contains(f"::{short}<", literal=True))
        assert (mine.height, mine["dur_ns"].sum()) == (counts[short], totals[short])
    htod = events.filter(pl.col("name").str.starts_with("Memcpy HtoD"))
    assert (htod.height, htod["dur_ns"].sum()) == (
        counts["CUDA_MEMCPY_KIND_HTOD"],
        totals["CUDA_MEMCPY_KIND_HTOD"],
    )
    api: Counter[str] = Counter()
    with open(api_csv, newline="") as handle:
        for row in csv.DictReader(handle):
            if row["Event Type"] == "Enter":
                name = row["Name"]
                api[
                    name.rsplit("_v", 1)[0] if "_v" in name and name.rsplit("_v", 1)[1].isdigit() else name
                ] += 1
    mine_api = Counter(events.filter(pl.col("kind").is_in(["runtime", "driver"]))["name"].to_list())
    assert mine_api == api


def _nsys_kern_sum(path):
    """`nsys stats --report cuda_gpu_kern_sum` recomputed: its SQL with median/stdev as sqlite aggregates."""

    class Agg:
        def __init__(self):
            self.values = []

        def step(self, value):
            self.values.append(value)

    class Median(Agg):
        def finalize(self):
            return statistics.median(self.values)

    class Stdev(Agg):
        def finalize(self):
            return statistics.stdev(self.values) if len(self.values) > 1 else 0.0

    db = _db(path)
    db.create_aggregate("median", 1, Median)
    db.create_aggregate("stdev", 1, Stdev)
    rows = db.execute(
        "WITH summary AS (SELECT s.value AS name, sum(end - start) AS total, count(*) AS num, avg(end - start) AS avg,"
        " median(end - start) AS med, min(end - start) AS min, max(end - start) AS max, stdev(end - start) AS sd "
        "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName GROUP BY 1) "
        "SELECT round(total * 100.0 / (SELECT sum(total) FROM summary), 1), total, num, avg, med, min, max, sd, name "
        "FROM summary ORDER BY 2 DESC, 3, name"
    ).fetchall()
    return rows


@pytest.mark.corpus
@pytest.mark.parametrize("rel", [CLOVER, SAXPY])
def test_summary_reports_what_nsys_cuda_gpu_kern_sum_reports(cli, rel):
    path = corpus_path(rel)
    result = cli("summary", path, "--kind", "kernel", "--top", "0", "--format", "json", "--no-cache")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    rows = {r["name"]: r for r in data["rows"]}
    expected = _nsys_kern_sum(path)
    assert len(rows) == len(expected)
    kernel_time_us = sum(r["total_us"] for r in rows.values())
    for pct, total, num, avg, med, lo, hi, sd, name in expected:
        row = rows[name]
        assert row["calls"] == num
        assert row["total_us"] == pytest.approx(total / 1e3, abs=1e-3)
        for key, value in (
            ("avg_us", avg),
            ("median_us", med),
            ("min_us", lo),
            ("max_us", hi),
            ("stddev_us", sd),
        ):
            assert row[key] == pytest.approx(value / 1e3, abs=1e-3), key
        # nsys "Time %" is over kernels only; our share is over all GPU activity (kernels + memcpy + memset).
        nsys_pct = row["share"] * data["totals"]["gpu_time_us"] / kernel_time_us * 100
        assert round(nsys_pct, 1) == pytest.approx(pct, abs=0.051)


@pytest.mark.corpus
def test_export_without_kernel_table_is_valid(cli):
    path = corpus_path(NO_KERNELS)
    result = cli("summary", path, "--format", "json", "--no-cache")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["trace"]["kernels"] == 0 and data["rows"] == []
    assert data["trace"]["events"] >= 3
    assert result.err == ""


@pytest.mark.corpus
def test_stdlib_and_adbc_paths_give_the_same_table():
    pytest.importorskip("adbc_driver_sqlite")
    path = corpus_path(CLOVER)
    import pyarrow as pa

    tables = []
    for use_adbc in (True, False):
        batches, finish = nsys.read_batches(path, "x", use_adbc=use_adbc)
        tables.append(pa.Table.from_batches(list(batches)))
        finish()
    assert tables[0].equals(tables[1])


@pytest.mark.corpus
def test_detected_by_content_not_name(tmp_path):
    copy = tmp_path / "renamed.bin"
    shutil.copyfile(corpus_path(SAXPY), copy)
    assert detect(copy, str(copy)).name == "nsys"


def test_other_sqlite_and_damaged_sqlite_are_one_line_errors(cli, tmp_path):
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:  # hand-made: an SQLite file that is not an nsys export
        db.execute("CREATE TABLE t (x INTEGER)")
    result = cli("summary", other, "--no-cache")
    assert result.code == 2 and "not an Nsight Systems export" in result.err
    assert len(result.err.strip().splitlines()) == 1


@pytest.mark.corpus
def test_truncated_export_is_a_one_line_error(cli, tmp_path):
    data = corpus_path(CLOVER).read_bytes()
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(data[: len(data) // 3])
    result = cli("summary", cut, "--no-cache")
    assert result.code == 2, result.err
    assert "damaged or unreadable SQLite" in result.err
    assert len(result.err.strip().splitlines()) == 1


def _two_process_export(tmp_path, shift_ns=500):
    """HAND-MADE from a real export (no multi-process nsys export is in the corpus): the saxpy run copied as a
    second process - its CUDA API rows and GPU rows duplicated with another pid in globalTid / globalPid, the
    same CUPTI correlation ids (CUPTI numbers them per process), start/end shifted by `shift_ns` (so the copy's
    launches interleave with the original's), and its GPU work on streams + 100 (to tell the two apart)."""
    path = tmp_path / "two_processes.sqlite"
    shutil.copyfile(corpus_path(SAXPY), path)
    con = sqlite3.connect(path)
    (pid,) = con.execute(
        "SELECT DISTINCT (globalTid >> 24) & 16777215 FROM CUPTI_ACTIVITY_KIND_RUNTIME"
    ).fetchone()
    other = pid + 1
    delta = (other - pid) << 24
    for table, changes in (
        ("CUPTI_ACTIVITY_KIND_RUNTIME", {"globalTid": f"globalTid + {delta}"}),
        ("CUPTI_ACTIVITY_KIND_KERNEL", {"globalPid": f"globalPid + {delta}", "streamId": "streamId + 100"}),
        ("CUPTI_ACTIVITY_KIND_MEMCPY", {"globalPid": f"globalPid + {delta}", "streamId": "streamId + 100"}),
        ("CUPTI_ACTIVITY_KIND_MEMSET", {"globalPid": f"globalPid + {delta}", "streamId": "streamId + 100"}),
    ):
        if not con.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone():
            continue
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
        changes = {**changes, "start": f"start + {shift_ns}", "end": f"end + {shift_ns}"}
        exprs = [changes.get(c, "NULL" if c == "id" else c) if c != "rowid" else c for c in cols]
        con.execute(f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(exprs)} FROM {table}")
    con.commit()
    con.close()
    return path, pid, other


@pytest.mark.corpus
def test_several_processes_link_launches_within_their_own_process(tmp_path):
    from opscope.analysis.base.linking import link

    path, pid, other = _two_process_export(tmp_path)
    original = link(opscope.load(corpus_path(SAXPY), cache=False))
    linkage = link(opscope.load(path, cache=False))
    gpu = linkage.gpu.with_columns(pl.col("launch_pid").cast(pl.String))
    assert gpu.height == 2 * original.gpu.height
    # The real export repeats some ids within its one process; the copy adds as many, and none across processes.
    assert linkage.stats.duplicate_correlations == 2 * original.stats.duplicate_correlations
    assert gpu["launch_row"].null_count() == 2 * original.gpu["launch_row"].null_count()
    linked = gpu.filter(pl.col("launch_row").is_not_null())
    copies = linked["stream"] >= 100
    assert set(linked.filter(~copies)["launch_pid"]) == {str(pid)}
    assert set(linked.filter(copies)["launch_pid"]) == {str(other)}
    # Each copy's launch is its original's launch, shifted: same name, same offset to its GPU work.
    a = linked.filter(~copies).sort("ts_ns").select("launch_name", (pl.col("ts_ns") - pl.col("launch_ts_ns")))
    b = linked.filter(copies).sort("ts_ns").select("launch_name", (pl.col("ts_ns") - pl.col("launch_ts_ns")))
    assert a.equals(b)


@pytest.mark.corpus
def test_one_process_keeps_cupti_correlation_ids():
    events = _events(corpus_path(SAXPY))
    with _db(corpus_path(SAXPY)) as con:
        raw = {r[0] for r in con.execute("SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL")}
    kernels = events.filter(pl.col("kind").cast(pl.String) == "kernel")
    assert set(kernels["correlation"].to_list()) == raw
