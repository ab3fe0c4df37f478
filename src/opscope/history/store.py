"""The storage layer: one connection to a SQLite file (stdlib `sqlite3`, WAL) or a PostgreSQL server (psycopg 3),
transactions, and the schema check / migration done on opening.

Callers write SQL once with `?` placeholders; PostgreSQL gets them as `%s`. Every database error leaves this
module as a `HistoryError`: one line (exit 2) that names the database (never its password).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from opscope.errors import InputError, MissingDependency
from opscope.extras import install_command
from opscope.history.schema import SCHEMA_VERSION, TABLES, VERSION_TABLE, statements
from opscope.ingest.sqlite_guard import PROGRESS_EVERY, Guard

DEFAULT_PATH = Path(".opscope") / "history.sqlite"
ENV = "OPSCOPE_HISTORY"
BUSY_TIMEOUT_S = 60  # how long a writer waits for another one (parallel CI jobs adding at once)
_MIGRATION_LOCK = 0x6F70_7363  # pg_advisory_xact_lock key: one migrating process at a time
# A statement's budget of SQLite VM steps (as for SQLite traces, `ingest/sqlite.py`): our queries scan a few
# dozen steps per row, and a row takes at least a few bytes of the file.
BUDGET_BASE = 200_000_000
BUDGET_PER_BYTE = 2_000


_T = TypeVar("_T")
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6  # SQLite's primary result codes (sqlite3.SQLITE_BUSY in Python >= 3.11)
_SQLITE_READONLY = 8
_SQLITE_OPTIONS: dict[str, Any] = {
    "timeout": BUSY_TIMEOUT_S,
    "isolation_level": None,
    "check_same_thread": False,
}


class HistoryError(InputError):
    """The history database cannot be opened, read or written, or is not one this opscope understands."""


class DatabaseBusy(HistoryError):
    """SQLite answered SQLITE_BUSY / SQLITE_LOCKED without waiting: it does so, despite the busy timeout, when
    waiting could deadlock (a read transaction that must become a write one) and while another connection
    switches the file to WAL or recovers its log. The whole operation is retried (`retrying`)."""


def _sqlite_error(url: str, exc: sqlite3.Error) -> HistoryError:
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if code in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return DatabaseBusy(f"history database {url}: {_first_line(exc)}")
    return HistoryError(f"history database {url}: {_first_line(exc)}")


def retrying(operation: Callable[[], _T], timeout_s: float = BUSY_TIMEOUT_S) -> _T:
    """`operation()`, run again (with a growing pause) while SQLite reports the database busy, for up to
    `timeout_s`; then the busy error. The operation must be a whole transaction, safe to repeat."""
    deadline = time.monotonic() + timeout_s
    pause = 0.02
    while True:
        try:
            return operation()
        except DatabaseBusy:
            if time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.5)


def resolve_db(db: str | os.PathLike[str] | None) -> str:
    """--db, else $OPSCOPE_HISTORY, else .opscope/history.sqlite in the current folder."""
    if db is not None and str(db) != "":
        return str(os.fspath(db))
    return os.environ.get(ENV) or str(DEFAULT_PATH)


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def display(url: str) -> str:
    """The database as shown in messages: a PostgreSQL URL without its password."""
    if not is_postgres(url):
        return url
    parts = urlsplit(url)
    host = parts.hostname or ""
    user = f"{parts.username}@" if parts.username else ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit((parts.scheme, f"{user}{host}{port}", parts.path, "", ""))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else type(exc).__name__


# Text that a database cannot hold (PostgreSQL `text` refuses NUL; neither driver encodes a lone surrogate,
# which a file name that is not UTF-8 becomes) is stored escaped: ESCAPED + its JSON string form, ASCII only.
# A string that happens to start with ESCAPED is escaped too, so reading back is exact for every string; any
# other string (nearly all) is stored as it is, and databases written before read the same.
ESCAPED = "\x1bopscope-json:"


def _needs_escape(text: str) -> bool:
    if "\x00" in text or text.startswith(ESCAPED):
        return True
    if text.isascii():
        return False
    try:
        text.encode("utf-8")  # a lone surrogate does not encode
    except UnicodeEncodeError:
        return True
    return False


def store_text(value: Any) -> Any:
    """A parameter as the database receives it (see ESCAPED)."""
    if isinstance(value, str) and _needs_escape(value):
        return ESCAPED + json.dumps(value, ensure_ascii=True)
    return value


def read_text(value: Any) -> Any:
    """A stored value as it was given (`store_text` reversed)."""
    if isinstance(value, str) and value.startswith(ESCAPED):
        try:
            decoded = json.loads(value[len(ESCAPED) :])
        except ValueError:
            return value
        return decoded if isinstance(decoded, str) else value
    return value


class Tx:
    """One open transaction: `execute` returns the rows of a query (an empty list for other statements). Text
    goes in through `store_text` and comes back through `read_text`, so every string survives the round trip."""

    def __init__(self, cursor: Any, dialect: str, guard: Guard | None = None) -> None:
        self._cursor = cursor
        self.dialect = dialect
        self._guard = guard

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.dialect == "postgresql" else sql

    @contextmanager
    def _guarded(self) -> Iterator[None]:
        """One statement under SQLite's progress handler (its budget, and signals honoured while it runs)."""
        if self._guard is None:
            yield
            return
        self._guard.start()
        with self._guard.catching():
            yield

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._guarded():
            self._cursor.execute(self._sql(sql), tuple(store_text(p) for p in params))
            rows = self._cursor.fetchall() if self._cursor.description else []
        return [tuple(read_text(v) for v in row) for row in rows]

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            with self._guarded():
                self._cursor.executemany(self._sql(sql), [tuple(store_text(v) for v in r) for r in rows])


class Store:
    """An open history database whose schema is at SCHEMA_VERSION. `create=False` refuses to create a missing
    SQLite file (reading commands on a history that does not exist). `read_only=True` (the reading commands)
    opens a SQLite file read-only (`mode=ro`), so that a history in a folder this user cannot write is read;
    a database that must first be migrated is opened for writing, as before."""

    def __init__(self, url: str, *, create: bool = False, read_only: bool = False) -> None:
        self.url = url
        self.dialect = "postgresql" if is_postgres(url) else "sqlite"
        self.read_only = read_only and self.dialect == "sqlite"
        self._errors: tuple[type[BaseException], ...] = (sqlite3.Error,)
        self._guard: Guard | None = None  # SQLite's progress handler (`_configured`)
        self._conn: Any = (
            self._connect_postgres() if self.dialect == "postgresql" else self._connect_sqlite(create)
        )
        try:
            retrying(self._migrate)  # only SQLite reports DatabaseBusy
        except BaseException:
            self.close()
            raise

    def _connect_sqlite(self, create: bool) -> sqlite3.Connection:
        path = Path(self.url)
        if not path.exists() and not create:
            raise HistoryError(
                f"no history database at {self.url} (add a run first: opscope history add TRACE)"
            )
        if path.is_dir():
            raise HistoryError(f"{self.url}: is a folder, not a history database file")
        try:
            if self.read_only:
                return self._connect_read_only(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            return self._configured(sqlite3.connect(path, **_SQLITE_OPTIONS))
        except (OSError, sqlite3.Error) as exc:
            raise HistoryError(f"history database {self.url}: {_first_line(exc)}") from None

    def _connect_read_only(self, path: Path) -> sqlite3.Connection:
        """`mode=ro`: nothing is created or written, a write fails. A WAL database whose folder this user cannot
        write cannot be read that way (SQLite must create its `-shm` file: SQLITE_READONLY_DIRECTORY); when no
        `-wal` file exists, every committed row is in the main file, and it is read as immutable instead (no
        locking: nobody can write there that this process could wait for)."""
        uri = path.absolute().as_uri() + "?mode=ro"
        conn = self._configured(sqlite3.connect(uri, uri=True, **_SQLITE_OPTIONS))
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError as exc:
            wal = path.with_name(path.name + "-wal")
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF != _SQLITE_READONLY or wal.exists():
                raise
            conn.close()
            conn = self._configured(sqlite3.connect(uri + "&immutable=1", uri=True, **_SQLITE_OPTIONS))
        return conn

    def _configured(self, conn: sqlite3.Connection) -> sqlite3.Connection:
        """The history file may come from elsewhere (a CI artefact), like a trace (issue 32): no SQL functions
        with side effects from its schema, and every statement under a progress handler whose budget of VM
        steps grows with the file, which lets SIGTERM and Ctrl-C stop a statement that SQLite runs."""
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_S * 1000}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA trusted_schema = OFF")
        try:
            size = Path(self.url).stat().st_size
        except OSError:
            size = 0
        self._guard = Guard(BUDGET_BASE + BUDGET_PER_BYTE * size)
        conn.set_progress_handler(self._guard, PROGRESS_EVERY)
        return conn

    def _use_wal(self) -> None:
        """Switch a SQLite history to write-ahead logging (persistent; concurrent writers then queue). Done only
        once the file is known to be a history or empty: another tool's database is never modified."""
        try:
            mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.Error as exc:
            raise _sqlite_error(self.url, exc) from None
        if str(mode).lower() != "wal":
            raise HistoryError(
                f"history database {self.url}: cannot use write-ahead logging (journal mode {mode})"
            )

    def _connect_postgres(self) -> Any:
        try:
            import psycopg
        except ImportError:
            raise MissingDependency(
                f"PostgreSQL histories need psycopg 3: {install_command('postgres')}"
            ) from None
        self._errors = (psycopg.Error,)
        try:
            return psycopg.connect(self.url, connect_timeout=10, autocommit=False)
        except psycopg.Error as exc:
            raise HistoryError(f"cannot connect to {display(self.url)}: {_first_line(exc)}") from None

    @contextmanager
    def transaction(self, write: bool = False) -> Iterator[Tx]:
        """One transaction, committed when the block ends and rolled back on any error. A SQLite writer takes the
        write lock at the start (BEGIN IMMEDIATE), so two writers queue instead of failing half-way."""
        try:
            if self.dialect == "sqlite":
                self._conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            cursor = self._conn.cursor()
        except self._errors as exc:
            raise self._error(exc) from None
        try:
            yield Tx(cursor, self.dialect, self._guard)
            if self.dialect == "sqlite":
                self._conn.execute("COMMIT")
            else:
                self._conn.commit()
        except BaseException as exc:
            self._rollback()
            if isinstance(exc, self._errors):
                raise self._error(exc) from None
            raise
        finally:
            cursor.close()

    def _error(self, exc: BaseException) -> BaseException:
        """The error for a failed statement: the signal's exception when one stopped it (SIGTERM, Ctrl-C), a
        budget error when the progress handler did, else the database's own error as a `HistoryError`."""
        if self._guard is not None and self._guard.raised is not None:
            return self._guard.raised
        if self._guard is not None and self._guard.exhausted:
            return HistoryError(
                f"history database {self.url}: a query ran past its budget "
                f"({self._guard.budget_calls * PROGRESS_EVERY:,} SQLite steps)"
            )
        if isinstance(exc, sqlite3.Error):
            return _sqlite_error(self.url, exc)
        return HistoryError(f"history database {display(self.url)}: {_first_line(exc)}")

    def _rollback(self) -> None:
        try:
            if self.dialect == "sqlite":
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
            else:
                self._conn.rollback()
        except self._errors:
            pass

    def _tables(self, tx: Tx) -> set[str]:
        if self.dialect == "sqlite":
            rows = tx.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        else:
            rows = tx.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
            )
        return {str(r[0]) for r in rows}

    def _version(self, tx: Tx) -> int:
        """The schema version stored; 0 for a database without history tables. Refuses another tool's tables."""
        tables = self._tables(tx)
        if VERSION_TABLE not in tables:
            foreign = tables & set(TABLES) if self.dialect == "postgresql" else tables
            if foreign:
                raise HistoryError(
                    f"{display(self.url)}: not an opscope history database (it has tables "
                    f"{', '.join(sorted(foreign)[:3])} but no {VERSION_TABLE})"
                )
            return 0
        rows = tx.execute(f"SELECT version FROM {VERSION_TABLE}")
        if len(rows) != 1 or not isinstance(rows[0][0], int):
            raise HistoryError(f"{display(self.url)}: damaged history database (no single schema version)")
        return int(rows[0][0])

    def _check(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise HistoryError(
                f"{display(self.url)}: history schema version {version} is newer than this opscope "
                f"reads ({SCHEMA_VERSION}); upgrade opscope"
            )

    def _refuse_code(self, tx: Tx) -> None:
        """A SQLite history whose own tables are views, virtual tables, or have triggers or generated columns is
        refused: that is SQL the file would run on our reads and writes, as long as it likes (issue 32: a
        `WITH RECURSIVE` view named `opscope_runs` hung `history list`, deaf to SIGTERM). A history database can
        come from elsewhere (a CI artefact) like a trace."""
        ours = {VERSION_TABLE, *TABLES}
        found = []
        for kind, name, table, sql in tx.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"):
            virtual = kind == "table" and str(sql or "").lstrip().upper().startswith("CREATE VIRTUAL")
            if name in ours and (kind == "view" or virtual):
                found.append(f"{'view' if kind == 'view' else 'virtual table'} {name}")
            elif kind == "trigger" and table in ours:
                found.append(f"trigger {name} on {table}")
        for table in sorted(ours & self._tables(tx)):
            if any(column[6] in (2, 3) for column in tx.execute(f"PRAGMA table_xinfo({table})")):
                found.append(f"generated columns in {table}")
        if found:
            shown = ", ".join(str(f) for f in found[:3]) + (
                f" and {len(found) - 3} more" if len(found) > 3 else ""
            )
            raise HistoryError(
                f"{self.url}: not a plain opscope history database ({shown}); opscope runs no SQL from a "
                "database file"
            )

    def _migrate(self) -> None:
        with self.transaction() as tx:
            if self.dialect == "sqlite":
                self._refuse_code(tx)
            version = self._version(tx)
        self._check(version)
        if self.read_only:
            if version == SCHEMA_VERSION:
                return  # reading needs neither write-ahead logging nor a migration
            self.read_only = False  # an empty file or an older schema: migrated first, as before
            self.close()
            self._conn = self._connect_sqlite(create=False)
        if self.dialect == "sqlite":
            self._use_wal()
        if version == SCHEMA_VERSION:
            return
        with self.transaction(write=True) as tx:
            if self.dialect == "postgresql":
                tx.execute("SELECT pg_advisory_xact_lock(?)", (_MIGRATION_LOCK,))
            version = self._version(tx)  # another process may have migrated while we waited
            self._check(version)
            if version < SCHEMA_VERSION:
                for statement in statements(self.dialect, version):
                    tx.execute(statement)
                tx.execute(f"DELETE FROM {VERSION_TABLE}")
                tx.execute(f"INSERT INTO {VERSION_TABLE} (version) VALUES (?)", (SCHEMA_VERSION,))

    def close(self) -> None:
        with suppress(*self._errors):
            self._conn.close()
