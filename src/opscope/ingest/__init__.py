"""Ingest: turn a trace file into a `Trace` (events in the columnar model + metadata), through the cache."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import polars as pl
import pyarrow as pa

from opscope.errors import InputError
from opscope.ingest.cache import CacheWriter, read_cached
from opscope.ingest.inputs import resolve_input
from opscope.ingest.progress import ProgressCallback, reporting
from opscope.ingest.registry import READERS, Reader, detect, register
from opscope.model.meta import TraceMeta
from opscope.model.schema import COLUMNS, arrow_schema
from opscope.model.trace import Trace

log = logging.getLogger("opscope")

__all__ = ["READERS", "Reader", "load", "register", "resolve_input"]


def _to_frame(table: pa.Table) -> pl.DataFrame:
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame.with_columns(pl.col(c).cast(t) for c, t in COLUMNS.items())


def load(path: str | os.PathLike[str] | None = None, *, cache: bool = True, strict: bool = False,
         progress: ProgressCallback | None = None) -> Trace:
    """Read a trace (a file, a folder's newest trace, or the default log folder) into a `Trace`.

    With `cache=True` the columnar table is kept in the cache folder and reused while the file is unchanged.
    Warnings (salvaged truncation, replaced bad UTF-8, ...) are logged and kept in `trace.meta.warnings`;
    with `strict=True` the first of them is raised as an `InputError` instead. `progress(done, total)` is
    called while the file is parsed (bytes of the file on disk; not called on a cache hit).
    """
    source = resolve_input(path)
    display = str(path) if path is not None and not Path(path).is_dir() else str(source)
    if cache:
        hit = read_cached(source)
        if hit is not None:
            meta, parquet = hit
            _log_warnings(meta, strict)
            return Trace.from_parquet(meta, parquet)
    reader = detect(source, display)
    with reporting(progress):
        return _parse(reader, source, display, cache, strict)


def _parse(reader: Reader, source: Path, display: str, cache: bool, strict: bool) -> Trace:
    batches, finish = reader.read(source, display)
    if cache:
        writer = CacheWriter(source)
        try:
            writer.write_all(batches)
            meta = finish()
            _check_nonempty(meta, writer.rows, display)
            target = writer.finish(meta)
        except BaseException:
            writer.abort()
            raise
        _log_warnings(meta, strict)
        return Trace.from_parquet(meta, target)
    collected = [b for b in batches if b.num_rows]
    meta = finish()
    rows = sum(b.num_rows for b in collected)
    _check_nonempty(meta, rows, display)
    table = pa.Table.from_batches(collected, schema=arrow_schema())
    _log_warnings(meta, strict)
    return Trace.from_frame(meta, _to_frame(table))


def _check_nonempty(meta: TraceMeta, rows: int, display: str) -> None:
    if rows == 0 and meta.truncated:
        raise InputError(f"{display}: cut off before the first complete event; nothing to salvage")


def _log_warnings(meta: TraceMeta, strict: bool) -> None:
    if strict and meta.warnings:
        raise InputError(f"{meta.warnings[0]} (--strict)")
    for message in meta.warnings:
        log.warning(message)
