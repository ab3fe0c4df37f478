"""SQLite inputs are untrusted (issue 32, item 1): views, virtual tables, triggers and generated columns are not
read (they are code: a `WITH RECURSIVE` view named like the kernel table hung a read forever), every query runs
under a budget of SQLite VM steps, and a signal stops a running query. All files here are hand-made edge cases,
built in a temporary folder."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import opscope
from deadline import Alarm, deadline
from opscope.errors import InputError, OpscopeError
from opscope.ingest import sqlite as untrusted_sqlite
from opscope.ingest.sqlite import SqliteTrace
from opscope.model.schema import Col

KERNEL_COLUMNS = (
    "start, end, deviceId, streamId, correlationId, globalPid, demangledName, shortName, gridX, gridY, gridZ, "
    "blockX, blockY, blockZ, registersPerThread, staticSharedMemory, dynamicSharedMemory"
)
ENDLESS_VIEW = (
    "CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "
    "SELECT x*10 AS start, x*10+5 AS end, 0 AS deviceId, 7 AS streamId, x AS correlationId, "
    "16777216 AS globalPid, 1 AS demangledName, 1 AS shortName, 1 AS gridX, 1 AS gridY, 1 AS gridZ, "
    "1 AS blockX, 1 AS blockY, 1 AS blockZ, 1 AS registersPerThread, 0 AS staticSharedMemory, "
    "0 AS dynamicSharedMemory FROM c"
)


def export(path: Path, *statements: str) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT)")
    conn.execute("INSERT INTO StringIds VALUES(1, 'k')")
    conn.execute(
        "CREATE TABLE TARGET_INFO_GPU(id INTEGER, name TEXT, smCount INTEGER, threadsPerWarp INTEGER, "
        "maxWarpsPerSm INTEGER)"
    )
    conn.execute("INSERT INTO TARGET_INFO_GPU VALUES(0, 'G', 132, 32, 64)")
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()
    return path


def test_the_endless_view_of_the_report_is_not_read(cli, tmp_path: Path) -> None:
    path = export(tmp_path / "view_recursive.sqlite", ENDLESS_VIEW)  # the reproduction
    started = time.monotonic()
    with deadline(60):
        result = cli("summary", path, "--format", "json")
    assert result.code == 0, result.err
    assert time.monotonic() - started < 30
    data = json.loads(result.out)
    assert data["trace"]["kernels"] == 0
    assert any("CUPTI_ACTIVITY_KIND_KERNEL" in w and "not read" in w for w in data["warnings"])


def test_real_tables_are_read_and_code_is_not(tmp_path: Path) -> None:
    path = export(
        tmp_path / "mixed.sqlite",
        f"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL({KERNEL_COLUMNS})",
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES(10, 20, 0, 7, 1, 16777216, 1, 1, 1,1,1, 1,1,1, 1, 0, 0)",
        "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY(start INTEGER, end INTEGER, x INTEGER GENERATED ALWAYS AS "
        "(start * 2) VIRTUAL)",
        "CREATE VIEW CUPTI_ACTIVITY_KIND_MEMSET AS SELECT 1 AS start",
        "CREATE TRIGGER t AFTER INSERT ON StringIds BEGIN DELETE FROM StringIds; END",
    )
    with deadline(60):
        trace = opscope.load(path, cache=False)
    assert opscope.summary(trace, top=0).kernels == 1
    (warning,) = [w for w in trace.meta.warnings if "not read" in w]
    assert "CUPTI_ACTIVITY_KIND_MEMCPY" in warning and "CUPTI_ACTIVITY_KIND_MEMSET" in warning
    db = SqliteTrace(path, "mixed.sqlite")
    assert "CUPTI_ACTIVITY_KIND_KERNEL" in db.tables
    assert not {"CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"} & db.tables
    db.close()


def test_a_query_past_its_budget_is_stopped_with_one_line(tmp_path: Path, monkeypatch) -> None:
    path = export(tmp_path / "small.sqlite")
    monkeypatch.setattr(untrusted_sqlite, "BUDGET_BASE", 1_000_000)
    monkeypatch.setattr(untrusted_sqlite, "BUDGET_PER_BYTE", 0)
    db = SqliteTrace(path, "small.sqlite")
    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c"
    with deadline(60), pytest.raises(InputError, match="ran past its budget"):
        db.rows(endless)
    assert db.rows("SELECT count(*) FROM StringIds") == [(1,)]  # the next query has a budget of its own
    db.close()


def test_a_signal_stops_a_running_query(tmp_path: Path) -> None:
    db = SqliteTrace(export(tmp_path / "small.sqlite"), "small.sqlite")
    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c"
    started = time.monotonic()
    with pytest.raises(Alarm), deadline(1):
        db.rows(endless)
    assert time.monotonic() - started < 10
    db.close()


TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "StringIds",
)


@st.composite
def schemas(draw: st.DrawFn) -> list[str]:
    """Random structures over the tables the reader looks for (hand-made): each missing, a plain table with
    a row, a view (simple or endless) or a table with a generated column; plus triggers."""
    statements = []
    for table in TABLES[:3]:
        shape = draw(st.sampled_from(["missing", "table", "view", "endless", "generated", "odd"]))
        if shape == "table":
            statements.append(f"CREATE TABLE {table}({KERNEL_COLUMNS})")
            statements.append(
                f"INSERT INTO {table} VALUES(10, 20, 0, 7, 1, 16777216, 1, 1, 1,1,1, 1,1,1, 1, 0, 0)"
            )
        elif shape == "odd":  # wrong types: text, fractions and blobs where integers belong
            statements.append(f"CREATE TABLE {table}({KERNEL_COLUMNS})")
            statements.append(
                f"INSERT INTO {table} VALUES('abc', 20.5, 0, 7, 1.5, x'00', 1, 1, 1,1,1, 1,1,1, 1, 0, 0)"
            )
        elif shape == "view":
            statements.append(f"CREATE VIEW {table} AS SELECT 1 AS start, 2 AS end")
        elif shape == "endless":
            statements.append(ENDLESS_VIEW.replace("CUPTI_ACTIVITY_KIND_KERNEL", table))
        elif shape == "generated":
            statements.append(f"CREATE TABLE {table}(start INTEGER, end INTEGER AS (start + 1))")
            statements.append(f"INSERT INTO {table}(start) VALUES (5)")
    if draw(st.booleans()):
        statements.append("CREATE TRIGGER t AFTER INSERT ON TARGET_INFO_GPU BEGIN DELETE FROM StringIds; END")
    return statements


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(schemas())
def test_any_schema_reads_or_fails_in_one_line_and_never_hangs(tmp_path: Path, statements: list[str]) -> None:
    path = tmp_path / f"random-{abs(hash(tuple(statements)))}.sqlite"
    path.unlink(missing_ok=True)
    export(path, *statements)
    with deadline(60):
        try:
            trace = opscope.load(path, cache=False)
        except OpscopeError as exc:
            assert "\n" not in str(exc)
            return
    kernels = opscope.summary(trace, top=0).kernels
    expected = 1 if f"CREATE TABLE {TABLES[0]}({KERNEL_COLUMNS})" in statements else 0
    assert kernels == expected


@pytest.mark.parametrize("big", [2**31, 2**53, 10**12])
def test_ids_from_the_file_index_nothing_dense(tmp_path: Path, big: int) -> None:
    """Issue 32 item 3 (hand-made): string ids and GPU ids of 2^31, 2^53 and 10^12 are looked up, never used
    as the size of a table (TARGET_INFO_GPU.id = 10**12 allocated a 7 TiB table; StringIds ids did the same)."""
    path = export(
        tmp_path / "big.sqlite",
        f"INSERT INTO StringIds VALUES({big}, 'kernel_at_a_big_id')",
        f"INSERT INTO TARGET_INFO_GPU VALUES({big}, 'G2', 108, 32, 64)",
        f"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL({KERNEL_COLUMNS})",
        f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES(10, 20, 0, 7, {big}, 16777216, {big}, {big}, "
        "264,1,1, 128,1,1, 1, 0, 0)",
    )
    with deadline(60):
        trace = opscope.load(path, cache=False)
    (row,) = opscope.summary(trace, top=0).rows
    assert row.name == "kernel_at_a_big_id" and row.calls == 1
    # a device id beyond the table's int32 column: one line, no allocation
    bad = export(
        tmp_path / "bad.sqlite",
        f"INSERT INTO TARGET_INFO_GPU VALUES({big}, 'G2', 108, 32, 64)",
        f"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL({KERNEL_COLUMNS})",
        f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES(10, 20, {big}, 7, 1, 16777216, 1, 1, 1,1,1, 1,1,1, 1, 0, 0)",
    )
    with deadline(60):
        try:
            loaded = opscope.load(bad, cache=False)
        except OpscopeError as exc:
            assert "\n" not in str(exc)
        else:
            assert opscope.summary(loaded, top=0).kernels == 1


@pytest.mark.parametrize("use_adbc", [True, False])
def test_odd_values_are_left_empty_and_counted(tmp_path: Path, use_adbc: bool, monkeypatch) -> None:
    """Issue 32 item 7 (hand-made): `start = 'abc'`, a REAL correlation id and a blob rejected the whole trace
    with `ArrowInvalid`; now each such value is left empty and counted, and the good rows are read."""
    from opscope.ingest import nsys

    path = export(
        tmp_path / "odd.sqlite",
        f"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL({KERNEL_COLUMNS})",
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES(10, 20, 0, 7, 1, 16777216, 1, 1, 1,1,1, 1,1,1, 1, 0, 0)",
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES('abc', 40, 0, 7, 2.5, 16777216, 1, 1, 1,1,1, 1,1,1, 1, 0, 0)",
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES(50, 60, 0, 7, x'01', 16777216, 1, 1, 1,1,1, 1,1,1, 1, 0, 0)",
    )
    original = nsys.SqliteTrace

    def chosen(p: Path, display: str, use_adbc: bool | None = None) -> SqliteTrace:
        return original(p, display, use_adbc=use_adbc_choice)

    use_adbc_choice = use_adbc
    monkeypatch.setattr(nsys, "SqliteTrace", chosen)
    with deadline(60):
        trace = opscope.load(path, cache=False)
    assert opscope.summary(trace, top=0).kernels == 3
    odd = [w for w in trace.meta.warnings if "not integers" in w]
    assert any("KERNEL.start" in w and w.startswith("1 value ") for w in odd), odd
    assert any(w.startswith("2 values ") for w in odd), odd  # the fraction and the blob


@pytest.mark.parametrize("use_adbc", [True, False])
def test_values_beyond_32_bits_and_null_devices_are_left_empty(
    tmp_path: Path, use_adbc: bool, monkeypatch
) -> None:
    """Issue 32 item 7 (hand-made): a `deviceId` of 10^12 or a `gridX` of 2^32 rejected the whole trace
    (`ArrowInvalid: Integer value ... not in range`), and so did a NULL `deviceId` through the ADBC reader;
    now such a value is left empty, a value beyond 32 bits counted in a warning naming its column."""
    from opscope.ingest import nsys

    path = export(
        tmp_path / "wide.sqlite",
        f"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL({KERNEL_COLUMNS})",
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES(10, 20, 0, 7, 1, 16777216, 1, 1, 1,1,1, 1,1,1, 1, 0, 0)",
        f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES(30, 40, {10**12}, 7, 2, 16777216, 1, 1, 1,1,1, 1,1,1, "
        "1, 0, 0)",
        f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES(50, 60, 0, 7, 3, 16777216, 1, 1, {2**32},1,1, 1,1,1, "
        f"{-(2**40)}, 0, 0)",
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES(70, 80, NULL, 7, 4, 16777216, 1, 1, NULL,1,1, 1,1,1, 1, 0, 0)",
    )
    original = nsys.SqliteTrace
    monkeypatch.setattr(nsys, "SqliteTrace", lambda p, d, use_adbc=None: original(p, d, use_adbc=chosen))
    chosen = use_adbc
    with deadline(60):
        trace = opscope.load(path, cache=False)
    events = trace.events.sort(Col.TS_NS)
    assert events[Col.DEVICE].to_list() == [0, None, 0, None]
    assert events[Col.GRID_X].to_list() == [1, 1, None, None]
    assert events[Col.REGISTERS].to_list() == [1, 1, None, 1]
    beyond = sorted(w for w in trace.meta.warnings if "beyond 32 bits" in w)
    assert beyond == [
        "1 value of CUPTI_ACTIVITY_KIND_KERNEL.deviceId beyond 32 bits: left empty",
        "1 value of CUPTI_ACTIVITY_KIND_KERNEL.gridX beyond 32 bits: left empty",
        "1 value of CUPTI_ACTIVITY_KIND_KERNEL.registersPerThread beyond 32 bits: left empty",
    ]
    assert opscope.summary(trace, top=0).kernels == 4
