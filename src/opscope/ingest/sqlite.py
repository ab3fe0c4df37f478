"""Read-only access to an SQLite trace (Nsight Systems export) as Arrow record batches.

Large tables are streamed in bounded batches straight into Arrow. When `adbc-driver-sqlite` is installed the
batches come from its C reader (about 5x faster than building Python tuples); otherwise the stdlib `sqlite3`
cursor is used with `fetchmany`. Queries handed to `batches` must return only integers, with SQL NULL written
as `ifnull(x, NULL_INT)`, so both paths yield identically typed int64 columns; `nullable` turns the sentinel
back into real nulls. Any SQLite error (a truncated or damaged file) becomes one `InputError`.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pyarrow as pa

from opscope.errors import InputError

NULL_INT = -(2**63)  # stands for SQL NULL inside integer-only queries; see `nullable`
BATCH_ROWS = 1 << 16


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


class SqliteTrace:
    """An open SQLite file: table/column discovery, small queries and streamed integer batches."""

    def __init__(self, path: Path, display: str, use_adbc: bool | None = None) -> None:
        self.path = path
        self.display = display
        available = _adbc_module() is not None
        self.use_adbc = available if use_adbc is None else (use_adbc and available)
        try:
            self.conn = sqlite3.connect(_uri(path), uri=True, check_same_thread=False)
            rows = self.conn.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
            ).fetchall()
        except sqlite3.Error as exc:
            raise self.damaged(exc) from None
        self.tables = {name for (name,) in rows}
        self._columns: dict[str, set[str]] = {}

    def damaged(self, exc: BaseException) -> InputError:
        return InputError(f"{self.display}: damaged or unreadable SQLite file ({exc})")

    def columns(self, table: str) -> set[str]:
        if table not in self._columns:
            rows = self.rows(f"PRAGMA table_info({table})") if table in self.tables else []
            self._columns[table] = {row[1] for row in rows}
        return self._columns[table]

    def col(self, table: str, column: str, default: str = str(NULL_INT)) -> str:
        """`ifnull(column, NULL_INT)` when the table has the column, else the default literal."""
        if column in self.columns(table):
            return f"ifnull({column}, {default})"
        return default

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
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

    def _sqlite_batches(self, sql: str, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        try:
            cursor = self.conn.execute(sql)
            while True:
                rows = cursor.fetchmany(BATCH_ROWS)
                if not rows:
                    return
                columns = [np.fromiter(col, dtype=np.int64, count=len(rows)) for col in zip(*rows)]
                yield pa.RecordBatch.from_arrays([pa.array(c) for c in columns], schema=schema)
        except sqlite3.Error as exc:
            raise self.damaged(exc) from None

    def _adbc_batches(self, sql: str, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        adbc = _adbc_module()
        assert adbc is not None
        try:
            with adbc.connect(_uri(self.path)) as conn, conn.cursor() as cursor:
                with contextlib.suppress(Exception):  # older drivers: keep their default batch size
                    cursor.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(BATCH_ROWS)})
                cursor.execute(sql)
                for batch in cursor.fetch_record_batch():
                    if batch.num_rows:
                        arrays = [batch.column(i).cast(pa.int64()) for i in range(batch.num_columns)]
                        yield pa.RecordBatch.from_arrays(arrays, schema=schema)
        except InputError:
            raise
        except Exception as exc:  # the driver's own error types; all mean the file could not be read
            raise self.damaged(exc) from None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()
