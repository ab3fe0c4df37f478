"""The SQLite history database as untrusted input (issue 32, items 1 and 7): the reading commands open it
read-only, so a history in a folder this user cannot write is read; a history whose own tables are views,
virtual tables, or carry triggers or generated columns is refused in one line (a `WITH RECURSIVE` view named
`opscope_runs` hung `history list` at 100% CPU, deaf to SIGTERM); every statement runs under SQLite's progress
handler. All databases here are hand-made in a temporary folder; the runs are inserted by the store itself."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deadline import Alarm, deadline
from opscope.history.api import History
from opscope.history.schema import TABLES, VERSION_TABLE
from opscope.history.store import HistoryError, Store

MAIN = "import sys\nfrom opscope.cli.main import main\nsys.exit(main(sys.argv[1:]))\n"
ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c)"


def history(path: Path, runs: int = 2) -> Path:
    """A history database with `runs` hand-made runs (no trace read)."""
    store = Store(str(path), create=True)
    with store.transaction(write=True) as tx:
        for k in range(runs):
            tx.execute(
                "INSERT INTO opscope_runs (sha256, added_at, path) VALUES (?, ?, ?)",
                (f"{k:064x}", f"2026-12-0{k + 1}T00:00:00+00:00", f"trace{k}.json"),
            )
    store.close()
    return path


def listed(cli, db: Path) -> list[int]:
    result = cli("history", "list", "--db", db, "--format", "json")
    assert result.code == 0, result.err
    return [run["id"] for run in json.loads(result.out)["runs"]]


def test_history_list_reads_a_database_in_a_read_only_folder(cli, tmp_path: Path) -> None:
    folder = tmp_path / "readonly"
    folder.mkdir()
    db = history(folder / "history.sqlite")
    if os.geteuid() == 0:
        # root writes through chmod: check instead that the reading commands' connection cannot write
        assert listed(cli, db) == [1, 2]
        with History(db) as reader:
            assert len(reader.runs()) == 2
            assert reader._store is not None and reader._store.read_only
            with (
                pytest.raises(HistoryError, match="readonly database"),
                reader._store.transaction(write=True) as tx,
            ):
                tx.execute("DELETE FROM opscope_runs")
            assert reader.prune(keep=1) == [1]  # a write after the reads reopens it for writing
        assert listed(cli, db) == [2]
        return
    folder.chmod(0o555)
    db.chmod(0o444)
    try:  # it failed: "attempt to write a readonly database"
        assert listed(cli, db) == [1, 2]
        assert sorted(p.name for p in folder.iterdir()) == ["history.sqlite"]
    finally:
        folder.chmod(0o755)
        db.chmod(0o644)


def test_a_read_of_an_empty_file_still_creates_the_tables(cli, tmp_path: Path) -> None:
    db = tmp_path / "empty.sqlite"
    db.touch()  # as before: a reading command on an empty file migrates it first
    assert listed(cli, db) == []
    with sqlite3.connect(db) as conn:
        assert conn.execute(f"SELECT count(*) FROM {VERSION_TABLE}").fetchone() == (1,)


ENDLESS_RUNS = (
    f"CREATE VIEW opscope_runs AS {ENDLESS} SELECT x AS id, 'v' AS sha256, 'v' AS added_at, 'v' AS path, "
    "'v' AS source_format, 'v' AS host, 'v' AS gpu_name, 1 AS gpu_count, 'v' AS torch_version, "
    "'v' AS cuda_version FROM c"
)
ENDLESS_TRIGGER = f"CREATE TRIGGER t AFTER INSERT ON opscope_runs BEGIN INSERT INTO opscope_names {ENDLESS} SELECT x, x FROM c; END"


@pytest.mark.parametrize(
    "statements",
    [("ALTER TABLE opscope_runs RENAME TO old_runs", ENDLESS_RUNS), (ENDLESS_TRIGGER,)],
    ids=["endless view", "trigger"],
)
def test_code_in_the_history_schema_is_refused_in_one_line(
    tmp_path: Path, statements: tuple[str, ...]
) -> None:
    # in a fresh process: before the fix the view ran forever, and a hung test would hang the suite
    db = history(tmp_path / "history.sqlite")
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA foreign_keys = OFF")
        for statement in statements:
            conn.execute(statement)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", MAIN, "history", "list", "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert time.monotonic() - started < 60
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "not a plain opscope history database" in done.stderr and "opscope_runs" in done.stderr


def test_a_signal_stops_a_running_statement(tmp_path: Path) -> None:
    store = Store(str(history(tmp_path / "history.sqlite")), read_only=True)
    started = time.monotonic()
    with pytest.raises(Alarm), deadline(1), store.transaction() as tx:
        tx.execute(f"{ENDLESS} SELECT count(*) FROM c")
    assert time.monotonic() - started < 10
    store.close()


@st.composite
def hostile_schemas(draw: st.DrawFn) -> list[str]:
    """Random code in a history's schema (hand-made): each of its tables left alone, missing, a view (simple
    or endless), a virtual table, a table with a generated column or with a trigger; columns of wrong types."""
    statements = []
    for table in (VERSION_TABLE, *TABLES):
        shape = draw(
            st.sampled_from(["keep", "missing", "view", "endless", "virtual", "generated", "trigger"])
        )
        if shape == "keep":
            continue
        statements.append(f"DROP TABLE {table}")
        if shape == "view":
            statements.append(f"CREATE VIEW {table} AS SELECT 1 AS version, 1 AS id")
        elif shape == "endless":
            statements.append(f"CREATE VIEW {table} AS {ENDLESS} SELECT x AS version, x AS id FROM c")
        elif shape == "virtual":
            statements.append(f"CREATE VIRTUAL TABLE {table} USING fts4(version, id)")
        elif shape == "generated":
            statements.append(f"CREATE TABLE {table} (version INTEGER, id INTEGER AS (version + 1))")
        elif shape == "trigger":
            statements.append(f"CREATE TABLE {table} (version TEXT, id TEXT)")  # wrong types, too
            statements.append(
                f"CREATE TRIGGER t_{table} AFTER INSERT ON {table} BEGIN DELETE FROM {table}; END"
            )
    return statements


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(hostile_schemas())
def test_any_history_schema_reads_or_fails_in_one_line(tmp_path: Path, statements: list[str]) -> None:
    db = tmp_path / f"random-{abs(hash(tuple(statements)))}.sqlite"
    for stale in tmp_path.glob(f"{db.name}*"):
        stale.unlink()
    history(db)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA foreign_keys = OFF")
        for statement in statements:
            conn.execute(statement)
    with deadline(60):
        try:
            with History(db) as reader:
                runs = reader.runs()
        except HistoryError as exc:
            assert "\n" not in str(exc)
            return
    # it read: the two runs (none when every table was dropped: an empty database, migrated as a new one), and
    # none of the history's tables is code (a table that a list does not read may be missing)
    code = ("CREATE VIEW", "CREATE VIRTUAL", "CREATE TRIGGER")
    emptied = len(statements) == 1 + len(TABLES) and all(s.startswith("DROP") for s in statements)
    assert len(runs) == (0 if emptied else 2)
    assert not [s for s in statements if s.startswith(code) or " AS (" in s], statements
