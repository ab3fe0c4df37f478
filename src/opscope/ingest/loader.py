"""`load`: a trace file -> a `Trace` (events in the columnar model + metadata), through the cache."""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from opscope.errors import InputError, OutputError
from opscope.ingest.cache import CacheWriteError, CacheWriter, cache_dir, read_cached, remove_orphans
from opscope.ingest.cache_size import prune_to_bound
from opscope.ingest.derived import DerivedStore
from opscope.ingest.inputs import resolve_input
from opscope.ingest.progress import ProgressCallback, reporting
from opscope.ingest.registry import Reader, detect
from opscope.model.meta import TraceMeta
from opscope.model.trace import Trace

if TYPE_CHECKING:  # pyarrow is imported on the parse path only
    import pyarrow as pa

log = logging.getLogger("opscope")


def load(
    path: str | os.PathLike[str] | None = None,
    *,
    cache: bool = True,
    strict: bool = False,
    progress: ProgressCallback | None = None,
) -> Trace:
    """Read a trace (a file, a folder's newest trace, or the default log folder) into a `Trace`.

    With `cache=True` the columnar table is kept in the cache folder and reused while the file is unchanged.
    Warnings (salvaged truncation, replaced bad UTF-8, ...) are logged and kept in `trace.meta.warnings`;
    with `strict=True` the first of them is raised as an `InputError` instead. `progress(done, total)` is
    called while the file is parsed (bytes of the file on disk; not called on a cache hit).
    """
    source = resolve_input(path)
    display = str(path) if path is not None and not Path(path).is_dir() else str(source)
    if cache and not _cache_usable():
        cache = False
    if cache:
        hit = read_cached(source)
        if hit is not None:
            meta, parquet = hit
            _log_warnings(meta, strict)
            return Trace.from_parquet(meta, parquet, store=DerivedStore(parquet))
    reader = detect(source, display)
    # numpy's RuntimeWarnings (a reader's 0/0 on damaged input) stay silent; imported only here, since a cache
    # hit (the warm path) runs no numpy and should not pay its import.
    import numpy as np

    with reporting(progress), np.errstate(all="ignore"):
        return _parse(reader, source, display, cache, strict)


def _parse(reader: Reader, source: Path, display: str, cache: bool, strict: bool) -> Trace:
    # Without the cache the table still goes to a Parquet file (a temporary one, removed with the Trace), so
    # memory stays as bounded as with the cache whatever the trace size.
    scratch = None if cache else Scratch.make()
    target = None if scratch is None else scratch.path / "events.parquet"
    writer: CacheWriter | None = None
    try:
        writer = CacheWriter(source, target)

        def write(batches: Iterable[pa.RecordBatch]) -> int:
            assert writer is not None
            writer.write_all(batches)
            return writer.rows

        meta = _read(reader, source, display, write)
        written = writer.finish(meta)
    except BaseException as exc:  # SIGTERM (cli.main.Terminated) included: nothing half-written stays
        if writer is not None:
            writer.abort()
        if scratch is not None:
            scratch.cleanup()
        if isinstance(exc, CacheWriteError) and scratch is None:
            _cache_failed(exc)  # the cache folder cannot be written (or filled up): read without it
            return _parse(reader, source, display, False, strict)
        if isinstance(exc, CacheWriteError):
            # not even the scratch table can be written (a full $TMPDIR): hold the table in memory, within
            # a bound, rather than fail to read a trace that is perfectly readable
            return _parse_in_memory(reader, source, display, strict, exc)
        raise
    _log_warnings(meta, strict)
    if scratch is None:  # the cache grew: its least recently used entries go, down to its bound
        prune_to_bound(written.parent, keep=written)
    store = DerivedStore(written) if scratch is None else None  # a scratch table dies with the Trace
    return Trace.from_parquet(meta, written, keepalive=scratch, store=store)


def _read(
    reader: Reader, source: Path, display: str, consume: Callable[[Iterable[pa.RecordBatch]], int]
) -> TraceMeta:
    """Stream the reader's batches into `consume` (which returns the rows it took) and build the metadata:
    kinds of device work watched in Kineto traces (other readers set every kind themselves), the path made
    printable, a trace cut off before its first event refused. One read path for the table on disk and in
    memory."""
    from opscope.ingest.device_like import DeviceLikeScan  # the parse path only (it imports pyarrow)

    batches, finish = reader.read(source, display)
    watch = DeviceLikeScan() if reader.name == "kineto" else None
    rows = consume(batches if watch is None else watch.observe(batches))
    meta = _printable_path(finish())
    if watch is not None:
        meta = dataclasses.replace(meta, device_like=watch.result(meta.devices))
    _check_nonempty(meta, rows, display)
    return meta


MEMORY_TABLE_BYTES = 1 << 30  # the largest event table held in memory when no scratch file can be written


def _parse_in_memory(reader: Reader, source: Path, display: str, strict: bool, cause: OSError) -> Trace:
    """The trace's table in memory (the cache and the scratch folder cannot be written): read again from the
    start; beyond MEMORY_TABLE_BYTES it is an `OutputError` that names the scratch folder, not the input."""
    import polars as pl
    import pyarrow as pa

    from opscope.model.schema import arrow_schema

    where = os.fsdecode(cause.filename) if cause.filename else tempfile.gettempdir()
    log.warning(f"cannot write the scratch table ({cause.strerror or cause}: {where}); holding it in memory")
    kept: list[pa.RecordBatch] = []

    def keep(batches: Iterable[pa.RecordBatch]) -> int:
        size = 0
        for batch in batches:
            if batch.num_rows:
                kept.append(batch)
                size += batch.nbytes
                if size > MEMORY_TABLE_BYTES:
                    raise OutputError(
                        f"cannot write the scratch table for {display} ({cause.strerror or cause}: {where}), "
                        "and the trace is too large to hold in memory; free space there or set TMPDIR"
                    )
        return sum(b.num_rows for b in kept)

    meta = _read(reader, source, display, keep)
    _log_warnings(meta, strict)
    table = pa.Table.from_batches(kept, schema=arrow_schema())
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    if meta.device_like:  # what Trace.lazy() does to a cached table, done once here
        from opscope.model.device_work import as_device_work

        frame = as_device_work(frame.lazy(), meta.device_like).collect()
    return Trace.from_frame(meta, frame)


class Scratch:
    """The folder of an uncached trace's table, removed when the `Trace` holding it goes (or at exit). It lives
    in the cache folder as `.scratch-<pid>-*`, so a process killed with SIGKILL leaves nothing that the next
    cache write does not sweep (`cache.remove_orphans`); in the system's temporary folder when the cache
    folder cannot be written. `weakref.finalize` cleans up without the ResourceWarning of TemporaryDirectory."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(path), True)

    @classmethod
    def make(cls) -> Scratch:
        prefix = f".scratch-{os.getpid()}-"
        try:
            folder = cache_dir()
            folder.mkdir(parents=True, exist_ok=True)
            remove_orphans(folder)  # scratch folders of killed processes go here
            return cls(Path(tempfile.mkdtemp(prefix=prefix, dir=folder)))
        except OSError:
            return cls(Path(tempfile.mkdtemp(prefix=f"opscope{prefix}")))

    def cleanup(self) -> None:
        self._finalizer()


def _printable_path(meta: TraceMeta) -> TraceMeta:
    """A file name that is not UTF-8 (surrogate-escaped in a str) becomes visible `\\xff` escapes, so that the
    metadata can be written as JSON and printed; the file itself is still opened by its real name."""
    path = meta.path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return meta if path == meta.path else dataclasses.replace(meta, path=path)


# Cache folders that failed in this process: each is warned about once, then reads skip it.
_CACHE_BROKEN: set[str] = set()


def _cache_usable() -> bool:
    return str(cache_dir()) not in _CACHE_BROKEN


def _cache_failed(exc: OSError) -> None:
    folder = str(cache_dir())
    if folder not in _CACHE_BROKEN:
        _CACHE_BROKEN.add(folder)
        reason = f"{exc.strerror or exc}" + (f": {os.fsdecode(exc.filename)}" if exc.filename else "")
        log.warning(f"the cache folder {folder} cannot be used ({reason}); reading without the cache")


def _check_nonempty(meta: TraceMeta, rows: int, display: str) -> None:
    if rows == 0 and meta.truncated:
        raise InputError(f"{display}: cut off before the first complete event; nothing to salvage")


def _log_warnings(meta: TraceMeta, strict: bool) -> None:
    if strict and meta.warnings:
        raise InputError(f"{meta.warnings[0]} (--strict)")
    for message in meta.warnings:
        log.warning(message)
