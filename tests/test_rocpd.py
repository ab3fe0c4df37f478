"""rocpd databases (rocprofv3's default output since ROCm 7.0). No public rocpd file was found to test on, so these
databases are hand-made (labelled as such): their tables carry the names and columns of rocprofiler-sdk's
`rocpd_tables.sql`, in both revisions that share `schema_version` 3 (times on each row, or in the timestamp
table with the rest on a track row), with the run's uuid as the table suffix and the views rocprofv3 adds
(never read). Every value the reader produces is checked against what was written."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import polars as pl
import pytest

import opscope
from opscope.ingest.registry import detect
from opscope.model.schema import Col, Kind

UUID = "_0198f2a1_7c3e_7b11_9f00_a1b2c3d4e5f6"
STRINGS = {
    1: "hipLaunchKernel",
    2: "HIP_RUNTIME_API",
    3: "MARKER_CORE_API",
    4: "step 1",
    5: "MEMORY_COPY_HOST_TO_DEVICE",
    6: "hipMemcpyAsync",
    7: "KERNEL_DISPATCH",
    8: "mark",
    9: "MEMORY_COPY",
}
# (id, category, correlation id)
EVENTS = [(1, 2, 100), (2, 7, 100), (3, 3, None), (4, 2, 101), (5, 9, 101), (6, 3, None)]
# regions: (id, name, start, end, event)
REGIONS = [(1, 1, 1_000, 1_500, 1), (2, 6, 2_000, 2_600, 4), (3, 4, 500, 9_000, 3), (4, 8, 3_000, 3_000, 6)]
KERNEL = {"start": 1_800, "end": 2_900, "event": 2}
COPY = {"start": 2_700, "end": 3_700, "event": 5}


def _common(db: sqlite3.Connection, u: str) -> None:
    db.execute(
        f'CREATE TABLE "rocpd_metadata{u}" (id INTEGER PRIMARY KEY, tag TEXT NOT NULL, value TEXT NOT NULL)'
    )
    db.execute(f"INSERT INTO rocpd_metadata{u} (tag, value) VALUES ('schema_version', '3'), ('uuid', '{u}')")
    db.execute(
        f"CREATE TABLE rocpd_string{u} (id INTEGER PRIMARY KEY, guid TEXT, string TEXT NOT NULL UNIQUE)"
    )
    db.executemany(f"INSERT INTO rocpd_string{u} (id, string) VALUES (?, ?)", STRINGS.items())
    db.execute(
        f"CREATE TABLE rocpd_info_node{u} (id INTEGER PRIMARY KEY, guid TEXT, hash BIGINT, machine_id TEXT)"
    )
    db.execute(f"INSERT INTO rocpd_info_node{u} (id, hash, machine_id) VALUES (1, 7, 'm')")
    db.execute(
        f"CREATE TABLE rocpd_info_process{u} (id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, ppid INTEGER, pid INTEGER)"
    )
    db.execute(f"INSERT INTO rocpd_info_process{u} (id, nid, pid) VALUES (1, 1, 4242)")
    db.execute(
        f"CREATE TABLE rocpd_info_thread{u} (id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, tid INTEGER)"
    )
    db.execute(f"INSERT INTO rocpd_info_thread{u} (id, nid, pid, tid) VALUES (1, 1, 1, 4243)")
    db.execute(
        f"CREATE TABLE rocpd_info_agent{u} (id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, type TEXT, "
        "absolute_index INTEGER, logical_index INTEGER, type_index INTEGER, uuid INTEGER, name TEXT, "
        "generic_name TEXT, model_name TEXT, vendor_name TEXT, product_name TEXT, extdata JSONB)"
    )
    extdata = json.dumps(
        {"cu_count": 304, "wave_front_size": 64, "max_waves_per_cu": 32, "lds_size_in_kb": 64}
    )
    db.executemany(
        f"INSERT INTO rocpd_info_agent{u} (id, nid, pid, type, absolute_index, logical_index, type_index, name, "
        "product_name, extdata) VALUES (?, 1, 1, ?, ?, ?, ?, ?, ?, ?)",
        [
            (1, "CPU", 0, 0, 0, "AMD EPYC", "AMD EPYC", "{}"),
            (2, "GPU", 1, 1, 0, "gfx942", "AMD Instinct MI300X", extdata),
        ],
    )
    db.execute(
        f"CREATE TABLE rocpd_info_kernel_symbol{u} (id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, "
        "code_object_id INTEGER, kernel_name TEXT, display_name TEXT, group_segment_size INTEGER, "
        "sgpr_count INTEGER, arch_vgpr_count INTEGER, accum_vgpr_count INTEGER, extdata JSONB)"
    )
    db.execute(
        f"INSERT INTO rocpd_info_kernel_symbol{u} (id, nid, pid, code_object_id, kernel_name, display_name, "
        "arch_vgpr_count, accum_vgpr_count) VALUES (1, 1, 1, 1, '_Z11gemm_kernelPf.kd', 'gemm_kernel(float*)', 64, 32)"
    )
    db.execute(
        f"CREATE TABLE rocpd_event{u} (id INTEGER PRIMARY KEY, guid TEXT, category_id INTEGER, stack_id INTEGER, "
        "parent_stack_id INTEGER, correlation_id INTEGER, call_stack JSONB, line_info JSONB, extdata JSONB)"
    )
    db.executemany(f"INSERT INTO rocpd_event{u} (id, category_id, correlation_id) VALUES (?, ?, ?)", EVENTS)
    # the views rocprofv3 adds over the suffixed tables (never read)
    db.execute(f"CREATE VIEW IF NOT EXISTS rocpd_string AS SELECT * FROM rocpd_string{u}")


def _inline(db: sqlite3.Connection, u: str) -> None:
    """The revision with times and places on each row."""
    db.execute(
        f"CREATE TABLE rocpd_region{u} (id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, tid INTEGER, "
        'start BIGINT, "end" BIGINT, name_id INTEGER, event_id INTEGER, extdata JSONB)'
    )
    db.executemany(
        f'INSERT INTO rocpd_region{u} (id, nid, pid, tid, start, "end", name_id, event_id) VALUES (?, 1, 1, 1, ?, ?, ?, ?)',
        [(i, s, e, n, ev) for i, n, s, e, ev in REGIONS],
    )
    db.execute(
        f"CREATE TABLE rocpd_kernel_dispatch{u} (id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, "
        "tid INTEGER, agent_id INTEGER, kernel_id INTEGER, dispatch_id INTEGER, queue_id INTEGER, stream_id INTEGER, "
        'start BIGINT, "end" BIGINT, private_segment_size INTEGER, group_segment_size INTEGER, '
        "workgroup_size_x INTEGER, workgroup_size_y INTEGER, workgroup_size_z INTEGER, grid_size_x INTEGER, "
        "grid_size_y INTEGER, grid_size_z INTEGER, region_name_id INTEGER, event_id INTEGER, extdata JSONB)"
    )
    db.execute(
        f"INSERT INTO rocpd_kernel_dispatch{u} VALUES (1, NULL, 1, 1, 1, 2, 1, 1, 3, 7, ?, ?, 0, 1024, 256, 1, 1, "
        "65536, 1, 1, NULL, ?, '{}')",
        (KERNEL["start"], KERNEL["end"], KERNEL["event"]),
    )
    db.execute(
        f"CREATE TABLE rocpd_memory_copy{u} (id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, "
        'tid INTEGER, start BIGINT, "end" BIGINT, name_id INTEGER, dst_agent_id INTEGER, dst_address INTEGER, '
        "src_agent_id INTEGER, src_address INTEGER, size INTEGER, queue_id INTEGER, stream_id INTEGER, "
        "region_name_id INTEGER, event_id INTEGER, extdata JSONB)"
    )
    db.execute(
        f"INSERT INTO rocpd_memory_copy{u} VALUES (1, NULL, 1, 1, 1, ?, ?, 5, 2, 0, 1, 0, 4096, 3, 7, NULL, ?, '{{}}')",
        (COPY["start"], COPY["end"], COPY["event"]),
    )


def _tracked(db: sqlite3.Connection, u: str) -> None:
    """The revision with times in rocpd_timestamp and places on rocpd_track rows."""
    db.execute(
        f"CREATE TABLE rocpd_track{u} (id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, ppid INTEGER, pid INTEGER, "
        "tid INTEGER, agent_id INTEGER, queue_id INTEGER, stream_id INTEGER, name_id INTEGER, extdata JSONB)"
    )
    db.executemany(
        f"INSERT INTO rocpd_track{u} (id, nid, pid, tid, agent_id, queue_id, stream_id) VALUES (?, 1, 1, ?, ?, ?, ?)",
        [(1, 1, None, None, None), (2, None, 2, 3, 7)],  # the thread's track; the GPU stream's
    )
    db.execute(
        f"CREATE TABLE rocpd_timestamp{u} (id INTEGER PRIMARY KEY, guid TEXT, value BIGINT, phase INTEGER, track_id INTEGER)"
    )
    stamps = [(s, e) for _, _, s, e, _ in REGIONS] + [
        (KERNEL["start"], KERNEL["end"]),
        (COPY["start"], COPY["end"]),
    ]
    rows = [(2 * i + 1, s, 1) for i, (s, _) in enumerate(stamps)] + [
        (2 * i + 2, e, 2) for i, (_, e) in enumerate(stamps)
    ]
    db.executemany(f"INSERT INTO rocpd_timestamp{u} (id, value, phase) VALUES (?, ?, ?)", rows)
    db.execute(
        f"CREATE TABLE rocpd_region{u} (id INTEGER PRIMARY KEY, guid TEXT, track_id INTEGER, name_id INTEGER, "
        "start_id INTEGER, end_id INTEGER, event_id INTEGER, extdata JSONB)"
    )
    db.executemany(
        f"INSERT INTO rocpd_region{u} (id, track_id, name_id, start_id, end_id, event_id) VALUES (?, 1, ?, ?, ?, ?)",
        [(i, n, 2 * k + 1, 2 * k + 2, ev) for k, (i, n, _, _, ev) in enumerate(REGIONS)],
    )
    k = len(REGIONS)
    db.execute(
        f"CREATE TABLE rocpd_kernel_dispatch{u} (id INTEGER PRIMARY KEY, guid TEXT, track_id INTEGER, "
        "kernel_id INTEGER, dispatch_id INTEGER, start_id INTEGER, end_id INTEGER, private_segment_size INTEGER, "
        "group_segment_size INTEGER, workgroup_size_x INTEGER, workgroup_size_y INTEGER, workgroup_size_z INTEGER, "
        "grid_size_x INTEGER, grid_size_y INTEGER, grid_size_z INTEGER, region_name_id INTEGER, event_id INTEGER, "
        "extdata JSONB)"
    )
    db.execute(
        f"INSERT INTO rocpd_kernel_dispatch{u} VALUES (1, NULL, 2, 1, 1, ?, ?, 0, 1024, 256, 1, 1, 65536, 1, 1, "
        "NULL, ?, '{}')",
        (2 * k + 1, 2 * k + 2, KERNEL["event"]),
    )
    db.execute(
        f"CREATE TABLE rocpd_memory_copy{u} (id INTEGER PRIMARY KEY, guid TEXT, track_id INTEGER, start_id INTEGER, "
        "end_id INTEGER, name_id INTEGER, dst_agent_id INTEGER, dst_address INTEGER, src_agent_id INTEGER, "
        "src_address INTEGER, size INTEGER, region_name_id INTEGER, event_id INTEGER, extdata JSONB)"
    )
    db.execute(
        f"INSERT INTO rocpd_memory_copy{u} VALUES (1, NULL, 2, ?, ?, 5, 2, 0, 1, 0, 4096, NULL, ?, '{{}}')",
        (2 * k + 3, 2 * k + 4, COPY["event"]),
    )


def _database(path: Path, revision: str, uuids: tuple[str, ...] = (UUID,)) -> Path:
    with sqlite3.connect(path) as db:
        for u in uuids:
            _common(db, u)
            (_inline if revision == "inline" else _tracked)(db, u)
    return path


def _rows(trace: opscope.Trace, kind: str) -> list[dict]:
    frame = trace.events.with_columns(pl.col(Col.KIND, Col.NAME, Col.PID, Col.TID, Col.CAT).cast(pl.String))
    return frame.filter(pl.col(Col.KIND) == kind).sort(Col.TS_NS).to_dicts()


@pytest.mark.parametrize("revision", ["inline", "tracked"])
def test_both_schema_revisions_read_the_same(tmp_path: Path, revision: str) -> None:
    path = _database(tmp_path / "results.db", revision)
    assert detect(path, str(path)).name == "rocpd"
    trace = opscope.load(path, cache=False)
    (kernel,) = _rows(trace, Kind.KERNEL)
    assert (kernel[Col.NAME], kernel[Col.TS_NS], kernel[Col.DUR_NS]) == ("gemm_kernel(float*)", 1_800, 1_100)
    assert (kernel[Col.DEVICE], kernel[Col.STREAM], kernel[Col.PID], kernel[Col.CORRELATION]) == (
        0,
        7,
        "0",
        100,
    )
    assert (kernel[Col.GRID_X], kernel[Col.BLOCK_X], kernel[Col.REGISTERS], kernel[Col.SHARED_MEMORY]) == (
        256,
        256,
        96,
        1024,
    )
    (copy,) = _rows(trace, Kind.MEMCPY)
    assert (copy[Col.NAME], copy[Col.DEVICE], copy[Col.BYTES], copy[Col.CORRELATION]) == (
        "Memcpy HtoD",
        0,
        4096,
        101,
    )
    assert copy[Col.BANDWIDTH_GBPS] == pytest.approx(4096 / 1000)
    calls = {r[Col.NAME]: r for r in _rows(trace, Kind.RUNTIME)}
    assert set(calls) == {"hipLaunchKernel", "hipMemcpyAsync"}
    launch = calls["hipLaunchKernel"]
    assert (launch[Col.PID], launch[Col.TID], launch[Col.TS_NS], launch[Col.DUR_NS]) == (
        "4242",
        "4243",
        1_000,
        500,
    )
    assert (launch[Col.CORRELATION], launch[Col.CAT]) == (100, "hip_runtime_api")
    (step,) = _rows(trace, Kind.USER_ANNOTATION)
    assert (step[Col.NAME], step[Col.DUR_NS], step[Col.CORRELATION]) == ("step 1", 8_500, None)
    (mark,) = _rows(trace, Kind.INSTANT)
    assert (mark[Col.NAME], mark[Col.PH], mark[Col.DUR_NS]) == ("mark", "i", None)
    (gpu,) = trace.meta.devices
    assert (gpu.id, gpu.name, gpu.arch, gpu.sm_count, gpu.warp_size) == (
        0,
        "AMD Instinct MI300X",
        "gfx942",
        304,
        64,
    )
    assert trace.meta.format == "rocpd" and trace.meta.extra["rocpd_schema_version"] == "3"
    assert not any("views" in w for w in trace.meta.warnings), trace.meta.warnings


@pytest.mark.parametrize("revision", ["inline", "tracked"])
def test_the_commands_link_launches_to_kernels(tmp_path: Path, revision: str, cli) -> None:
    path = str(_database(tmp_path / "results.db", revision))
    analyze = json.loads(cli("analyze", path, "--format", "json").out)
    assert analyze["launch_delay_us"]["max"] == pytest.approx(0.8)  # 1,800 - 1,000 ns
    summary = json.loads(cli("summary", path, "--format", "json").out)
    assert summary["totals"] == {"gpu_time_us": 2.1, "calls": 2}
    for command in ("advise", "critical-path", "steps", "brief", "ops"):
        assert cli(command, path).code == 0, command


def test_a_merged_database_reads_every_process(tmp_path: Path) -> None:
    """Hand-made: two uuid table sets in one file (rocpd's merge): both read, and said once."""
    path = _database(tmp_path / "merged.db", "inline", (UUID, "_0198f2a1_0000_7b11_9f00_000000000002"))
    trace = opscope.load(path, cache=False)
    kernels = _rows(trace, Kind.KERNEL)
    launches = [r for r in _rows(trace, Kind.RUNTIME) if r[Col.NAME] == "hipLaunchKernel"]
    assert len(kernels) == len(launches) == 2
    # each process numbers its correlations from its own counter: kept apart, so a launch links its own kernel
    assert len({k[Col.CORRELATION] for k in kernels}) == 2
    assert {k[Col.CORRELATION] for k in kernels} == {r[Col.CORRELATION] for r in launches}
    assert any("2 processes merged" in w for w in trace.meta.warnings)


def test_the_reader_is_listed(cli) -> None:
    out = json.loads(cli("formats", "--format", "json").out)
    assert "rocpd" in {f["name"] for f in out["formats"]}


def test_per_process_databases_read_as_ranks_and_compare(tmp_path: Path, cli) -> None:
    """Hand-made: one database per process (rocprofv3 writes `<pid>_results.db`), one of each revision."""
    first = str(_database(tmp_path / "1001_results.db", "inline"))
    second = str(_database(tmp_path / "1002_results.db", "tracked"))
    ranks = json.loads(cli("ranks", first, second, "--format", "json").out)
    assert [r["rank"] for r in ranks["ranks"]] == [0, 1]
    assert [r["busy_us"] for r in ranks["ranks"]] == [
        1.9,
        1.9,
    ]  # kernel [1,800, 2,900) and copy [2,700, 3,700): union 1.9 us
    diff = json.loads(cli("diff", second, first, "--format", "json").out)
    assert all(row["before"] == row["after"] for row in diff["headline"]), diff["headline"]
