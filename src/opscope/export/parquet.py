"""The event table as one Parquet file (`opscope export --parquet -o FILE.parquet`), for DuckDB, pandas, Spark or
any Arrow reader: the columns of `model/schema.py`, times in integer nanoseconds, names as dictionary-encoded
strings. It streams from the lazy event table (polars' `sink_parquet`), so memory stays bounded on large traces;
it writes to a hidden file beside the target and renames it into place, so no half-written file is left."""

from __future__ import annotations

import os
from pathlib import Path

from opscope.errors import OutputError
from opscope.model.trace import Trace


def write_parquet(trace: Trace, path: Path) -> int:
    """Write `trace`'s event table to `path`; returns the number of rows written."""
    partial = path.with_name(f".{path.name}.partial")
    try:
        trace.lazy().sink_parquet(partial, compression="zstd")
        os.replace(partial, path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise OutputError(f"{path}: cannot write: {exc.strerror or exc}") from None
    return trace.count()
