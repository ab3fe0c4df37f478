"""Read-only access to an SQLite trace (Nsight Systems export) as Arrow record batches.

Large tables are streamed in bounded batches straight into Arrow. When `adbc-driver-sqlite` is installed the
batches come from its C reader (about 5x faster than building Python tuples); otherwise the stdlib `sqlite3`
cursor is used with `fetchmany`. Queries handed to `batches` must return only integers, with SQL NULL written
as `ifnull(x, NULL_INT)`, so both paths yield identically typed int64 columns; `nullable` turns the sentinel
back into real nulls. Any SQLite error (a truncated or damaged file) becomes one `InputError`.

The file is untrusted input (issue 32): it is opened read-only with `trusted_schema=OFF`; only its real tables
are read (views, virtual tables and triggers can run arbitrary, even endless, SQL: a `WITH RECURSIVE` view named
like a kernel table hung a read forever), and they are named in a warning; every query on the stdlib connection
runs under a progress handler that stops it when its budget of SQLite VM steps (derived from the file's size)
is spent, or when a signal (Ctrl-C, SIGTERM) arrived meanwhile, so no SQLite input can run forever.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pyarrow as pa

from opscope.errors import InputError
from opscope.ingest.sqlite_guard import PROGRESS_EVERY, Guard

_FROM = re.compile(r"\bFROM\s+([A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE)
log = logging.getLogger("opscope")
NULL_INT = -(2**63)  # stands for SQL NULL inside integer-only queries; see `nullable`
BATCH_ROWS = 1 << 16
# A query's budget of VM instructions: a scan costs a few dozen per row and a row takes at least a few bytes of
# the file, so this bounds any query of ours on a real table many times over, and an endless one at seconds.
BUDGET_BASE = 200_000_000
BUDGET_PER_BYTE = 2_000


def _adbc_module() -> Any:
    """The optional accelerator (Arrow-native SQLite reads), imported on first use: its import pulls in
    pyarrow.dataset and pandas (~0.3 s), which commands that never read SQLite should not pay for."""
    try:
        import adbc_driver_sqlite.dbapi as adbc
    except ImportError:  # pragma: no cover - exercised where the wheel is missing
        return None
    return adbc


def _uri(path: Path) -> str:
    # immutable=1: the export is never written while we read it; no locking, no -journal probing.
    return f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1"


def nullable(column: pa.Array) -> pa.Array:
    """The column with `NULL_INT` sentinels replaced by nulls (a no-op copy-free pass when there are none)."""
    values = column.to_numpy(zero_copy_only=False)
    missing = values == NULL_INT
    if not missing.any():
        return column
    return pa.array(values, type=column.type, mask=missing)


def _sentinel(column: pa.Array) -> pa.Array:
    """SQL NULL as `NULL_INT`, as the stdlib path reads it: the ADBC reader hands real nulls for a column the
    query did not wrap in `ifnull` (a NULL `deviceId` rejected the whole trace, issue 32)."""
    return column.fill_null(NULL_INT) if column.null_count else column


def _quoted(name: str) -> str:
    """An SQL identifier, quoted (names come from the file)."""
    return '"' + name.replace('"', '""') + '"'


class SqliteTrace:
    """An open SQLite file: table/column discovery, small queries and streamed integer batches."""

    def __init__(
        self, path: Path, display: str, use_adbc: bool | None = None, own_views: bool = False
    ) -> None:
        """`own_views`: the format defines views over its own tables (rpd, rocpd, rocprof-compute): they are
        not read, as no view is, but not worth a warning either (a virtual table or a generated column still
        gets one)."""
        self.path = path
        self.display = display
        available = _adbc_module() is not None
        self.use_adbc = available if use_adbc is None else (use_adbc and available)
        try:
            size = path.stat().st_size
        except OSError:
            size = 0
        self.guard = Guard(BUDGET_BASE + BUDGET_PER_BYTE * size)
        try:
            self.conn = sqlite3.connect(_uri(path), uri=True, check_same_thread=False)
            self.conn.set_progress_handler(self.guard, PROGRESS_EVERY)
            self.conn.execute("PRAGMA trusted_schema = OFF")
            rows = self.conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
        except sqlite3.Error as exc:
            raise self.damaged(exc) from None
        # Real tables only: a view, a virtual table or a trigger is code, not data.
        self.tables = {
            name
            for kind, name, sql in rows
            if kind == "table" and not str(sql or "").lstrip().upper().startswith("CREATE VIRTUAL")
        }
        # A generated column is an expression evaluated on every read: also code, not data.
        try:
            generated = {
                name
                for name in self.tables
                if any(col[6] in (2, 3) for col in self.conn.execute(f"PRAGMA table_xinfo({_quoted(name)})"))
            }
        except sqlite3.Error as exc:
            raise self.damaged(exc) from None
        self.tables -= generated
        self.ignored = sorted(
            str(name)
            for kind, name, sql in rows
            if (kind == "table" or (kind == "view" and not own_views)) and name not in self.tables
        )
        self._columns: dict[str, set[str]] = {}
        self.odd_values: dict[str, int] = {}  # table.column -> values that were not integers (left empty)
        self.out_of_range: dict[
            str, int
        ] = {}  # table.column -> integers beyond their column's type (left empty)

    def warnings(self) -> list[str]:
        """What was left unread or empty, for the trace's warnings."""
        found = [
            f"{count:,} {'value' if count == 1 else 'values'} of {where} not integers (text or fractions): left empty"
            for where, count in sorted(self.odd_values.items())
        ] + [
            f"{count:,} {'value' if count == 1 else 'values'} of {where} beyond 32 bits: left empty"
            for where, count in sorted(self.out_of_range.items())
        ]
        if not self.ignored:
            return found
        names = ", ".join(self.ignored[:5]) + (
            f" and {len(self.ignored) - 5} more" if len(self.ignored) > 5 else ""
        )
        return [
            f"not read: {len(self.ignored)} views, virtual tables or tables with generated columns ({names}); "
            "only plain tables are read",
            *found,
        ]

    def damaged(self, exc: BaseException) -> BaseException:
        """The error to raise for a failed statement: the signal's exception when one stopped it, a budget error
        when the guard stopped it, else the file is damaged."""
        if self.guard.raised is not None:
            return self.guard.raised
        if self.guard.exhausted:
            return InputError(
                f"{self.display}: an SQLite query ran past its budget ({self.guard.budget_calls * PROGRESS_EVERY:,}"
                " steps); the file is not a plain profiler database (its tables do not read as one)"
            )
        return InputError(f"{self.display}: damaged or unreadable SQLite file ({exc})")

    def columns(self, table: str) -> set[str]:
        if table not in self._columns:
            rows = self.rows(f"PRAGMA table_info({_quoted(table)})") if table in self.tables else []
            self._columns[table] = {row[1] for row in rows}
        return self._columns[table]

    def col(self, table: str, column: str, default: str = str(NULL_INT)) -> str:
        """`ifnull(column, NULL_INT)` when the table has the column, else the default literal."""
        if column in self.columns(table):
            return f"ifnull({column}, {default})"
        return default

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        self.guard.start()
        try:
            with self.guard.catching():
                return self.conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise self.damaged(exc) from None

    def batches(self, sql: str, names: Sequence[str]) -> Iterator[pa.RecordBatch]:
        """Stream an integer-only query as record batches of int64 columns called `names`."""
        schema = pa.schema([pa.field(n, pa.int64()) for n in names])
        if self.use_adbc:
            yield from self._adbc_batches(sql, schema)
        else:
            yield from self._sqlite_batches(sql, schema)

    def _sqlite_batches(self, sql: str, schema: pa.Schema, skip: int = 0) -> Iterator[pa.RecordBatch]:
        """The stdlib path. `skip`: rows already delivered by the ADBC path before it gave up on a value."""
        self.guard.start()
        try:
            with self.guard.catching():
                cursor = self.conn.execute(sql)
            while True:
                with self.guard.catching():
                    rows = cursor.fetchmany(BATCH_ROWS)
                if not rows:
                    return
                if skip:
                    dropped = min(skip, len(rows))
                    rows, skip = rows[dropped:], skip - dropped
                    if not rows:
                        continue
                columns = [
                    self._integers(sql, name, col) for name, col in zip(schema.names, zip(*rows), strict=True)
                ]
                yield pa.RecordBatch.from_arrays([pa.array(c) for c in columns], schema=schema)
        except sqlite3.Error as exc:
            raise self.damaged(exc) from None

    def _integers(self, sql: str, name: str, values: Sequence[Any]) -> np.ndarray:
        """A column of integers; a value that is none (text, a fraction, a blob: SQLite stores what it is given)
        becomes NULL_INT, an empty value, and is counted for a warning, as the JSON reader does."""
        if all(type(v) is int for v in values):  # the common case; a float would be truncated silently below
            try:
                return np.fromiter(values, dtype=np.int64, count=len(values))
            except OverflowError:
                pass
        out = np.empty(len(values), dtype=np.int64)
        odd = 0
        for i, value in enumerate(values):
            if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63:
                out[i] = value
            elif isinstance(value, float) and value.is_integer() and -(2.0**63) <= value < 2.0**63:
                out[i] = int(value)
            else:
                out[i] = NULL_INT
                odd += value is not None
        if odd:
            match = _FROM.search(sql)
            key = f"{match.group(1) if match else 'query'}.{name}"
            self.odd_values[key] = self.odd_values.get(key, 0) + odd
        return out

    def _adbc_batches(self, sql: str, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        adbc = _adbc_module()
        assert adbc is not None
        delivered = 0
        try:
            with adbc.connect(_uri(self.path)) as conn, conn.cursor() as cursor:
                with contextlib.suppress(Exception):  # older drivers: keep their default batch size
                    cursor.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(BATCH_ROWS)})
                cursor.execute(sql)
                for batch in cursor.fetch_record_batch():
                    if batch.num_rows:
                        arrays = [
                            _sentinel(batch.column(i).cast(pa.int64())) for i in range(batch.num_columns)
                        ]
                        yield pa.RecordBatch.from_arrays(arrays, schema=schema)
                        delivered += batch.num_rows
        except InputError:
            raise
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            # a value that is not an integer (text in an integer column, a fraction): the stdlib path reads
            # the rest value by value, leaving such values empty (same query, same order)
            log.debug("ADBC gave up on %s (%s); reading on", self.display, exc)
            yield from self._sqlite_batches(sql, schema, skip=delivered)
        except Exception as exc:  # the driver's own error types: the file could not be read
            if "parse" in str(exc).lower() or "convert" in str(exc).lower():
                yield from self._sqlite_batches(sql, schema, skip=delivered)
                return
            raise self.damaged(exc) from None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


def json_object(text: object) -> dict[str, Any]:
    """A JSON text column (an `extdata`, a workload's system information) as a dict; {} for anything else."""
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
