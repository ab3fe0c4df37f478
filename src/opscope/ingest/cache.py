"""The columnar cache: one Parquet file per trace, keyed on the trace's path, size, mtime, ctime and inode.

A trace is parsed once; later commands scan the cache and read only the columns they need. The cache is
written to a temporary name (`.tmp-<pid>-*.parquet`) and renamed into place, so a crash never leaves a
half-written file under the final name; temporary files whose process is gone are removed by the next writer.
Beside each cache file, `<name>.crc` holds the CRC-32 of its bytes: a cache file that fails to open, whose
key does not match or whose bytes do not match the CRC (damaged on disk, overwritten in place) is deleted and
rebuilt, never trusted. The key has the inode and ctime besides the mtime (as git's index does), so an
in-place edit that restores the mtime still invalidates it. A cache folder that cannot be used (read-only, a
file in the way, a full disk) is not an error: the loader warns once and reads without the cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from opscope.ingest.cache_size import crc_path, remove_table, touch
from opscope.ingest.derived import wait_for_saves
from opscope.model.meta import TraceMeta

if TYPE_CHECKING:
    import pyarrow as pa

CACHE_VERSION = "12"  # 12: cuda_profiler_range is a GPU annotation; 11: device work of unknown categories (TraceMeta.device_like); 10: xplane devices keep clock_rate and memory_bandwidth; 9: wait_on_stream / wait_on_correlation of cuda_sync events; 8: MTIA categories, GPU names for pmc_perf.csv; 7: XLA columns (hlo_op, hlo_module, program_id, name_stack, step_num), concrete_inputs and the mem_* columns of "[memory]" events; 5: native reader rules
_META_KEY = b"opscope.meta"
_KEY_KEY = b"opscope.key"


def cache_dir() -> Path:
    env = os.environ.get("OPSCOPE_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "opscope"


def _path_bytes(path: Path) -> bytes:
    # os.fsencode keeps file names that are not UTF-8 (surrogate-escaped in str) as their original bytes
    return os.fsencode(path.resolve())


def source_key(path: Path) -> str:
    stat = path.stat()
    name = _path_bytes(path).decode("utf-8", "backslashreplace")
    return (
        f"{name}|{stat.st_size}|{stat.st_mtime_ns}|{stat.st_ctime_ns}|{stat.st_ino}|{stat.st_dev}"
        f"|v{CACHE_VERSION}|{_schema_tag()}"
    )


def _schema_tag() -> str:
    """The table's column names and dtypes, hashed: a cache written with other columns (another opscope
    version, a branch that adds a column) is rebuilt instead of read, whatever CACHE_VERSION says."""
    from opscope.model.schema import COLUMNS

    text = ",".join(f"{name}:{dtype}" for name, dtype in COLUMNS.items())
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def cache_path(path: Path) -> Path:
    digest = hashlib.sha256(_path_bytes(path)).hexdigest()[:24]
    return cache_dir() / f"{digest}.parquet"


def _native_module() -> Any:
    """The native extension, or None in a source checkout without the built extension."""
    try:
        from opscope import _native
    except ImportError:  # pragma: no cover - a source checkout without the built extension
        return None
    return _native


def file_crc(path: Path) -> int:
    """CRC-32 of the file (zlib's polynomial): the native module's (SIMD, GIL released) when built."""
    native = _native_module()
    if native is not None:
        return native.file_crc32(str(path))
    crc = 0
    with open(path, "rb") as handle:
        while block := handle.read(8 << 20):
            crc = zlib.crc32(block, crc)
    return crc


def _remove(target: Path) -> None:
    wait_for_saves()  # this process's results being written beside the table: done before they go with it
    remove_table(target)


def read_cached(path: Path) -> tuple[TraceMeta, Path] | None:
    """The cached table for `path` if present and valid for the file as it is now; else None."""
    try:
        target = cache_path(path)
        if not target.is_file():
            return None
    except OSError:
        return None
    try:
        import polars as pl  # the key-value metadata alone: a warm run never imports pyarrow

        metadata = {k.encode(): v.encode() for k, v in pl.read_parquet_metadata(target).items()}
        if metadata.get(_KEY_KEY, b"").decode() != source_key(path):
            raise ValueError("stale")
        if int(crc_path(target).read_text().strip()) != file_crc(target):
            raise ValueError("damaged")
        meta = msgspec.json.decode(metadata[_META_KEY], type=TraceMeta)
        touch(target)  # its last use: the cache's size bound removes the least recently used first
        return meta, target
    except Exception:  # corrupt, damaged, stale, or from another version: rebuild
        _remove(target)
        return None


def cached_source(table: Path) -> str | None:
    """The path of the trace a cache table was written from (the first field of its key, `source_key`), or
    None when the table cannot be read."""
    try:
        import polars as pl

        key = pl.read_parquet_metadata(table).get(_KEY_KEY.decode())
    except Exception:  # missing, half-written, damaged: no path to show
        return None
    fields = key.rsplit("|", 7) if key else []
    return fields[0] if len(fields) == 8 else None


def _native_sink() -> Any:
    """The native module's `ParquetSink` class, or None (a source checkout without the built extension, or
    `OPSCOPE_CACHE_WRITER=pyarrow`)."""
    if os.environ.get("OPSCOPE_CACHE_WRITER", "").strip().lower() == "pyarrow":
        return None
    return getattr(_native_module(), "ParquetSink", None)


class _NativeWriter:
    """pyarrow's `ParquetWriter` calls the cache makes, over `_native.ParquetSink`."""

    def __init__(self, sink: Any) -> None:
        self._sink = sink
        self._metadata: dict[str | bytes, str | bytes] = {}

    def write_batch(self, batch: Any, row_group_size: int | None = None) -> None:
        self._sink.write(batch)  # one row group per batch, as row_group_size asks

    def add_key_value_metadata(self, metadata: dict[str | bytes, str | bytes]) -> None:
        self._metadata.update(metadata)

    def close(self) -> None:
        """Write the metadata and the footer: the file is complete."""
        text = [
            (k if isinstance(k, str) else k.decode(), v if isinstance(v, str) else v.decode())
            for k, v in self._metadata.items()
        ]
        self._sink.finish(text)

    def abort(self) -> None:
        """Stop the writer thread without finishing the file (the caller removes it)."""
        self._sink.abort()


class CacheWriteError(OSError):
    """The cache file could not be written (read-only folder, a file in the way, a full disk...)."""


class CacheWriter:
    """Writes record batches into a Parquet file as they arrive (bounded memory), then publishes it. Every
    failure to write is a `CacheWriteError`, so the caller can tell it from a failure to read the trace."""

    def __init__(self, source: Path, target: Path | None = None) -> None:
        self.tmp: Path | None = None
        try:
            self._open(source, target)
        except BaseException as exc:
            self.abort()  # whatever stopped it (SIGTERM included), no temporary file stays behind
            if isinstance(exc, OSError):
                raise CacheWriteError(exc.errno, exc.strerror or str(exc), exc.filename) from exc
            raise

    def _open(self, source: Path, target: Path | None) -> None:
        self.source = source
        self.target = target or cache_path(source)
        self.target.parent.mkdir(parents=True, exist_ok=True)
        remove_orphans(self.target.parent)
        # The name is recorded before the file exists: a signal between creating it and recording its name (seen
        # under load: SIGTERM right after mkstemp returned) would otherwise leave it behind. O_EXCL: never
        # another's file.
        self.tmp = self.target.parent / f".tmp-{os.getpid()}-{secrets.token_hex(6)}.parquet"
        os.close(os.open(self.tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        self.key = source_key(source)
        self.rows = 0
        # Plain pages, dictionaries for the text columns only (their Arrow dictionaries are written as they
        # are): measured on 4.4 M events, 1.21 s against 1.85 s for dictionaries on every column (numbers are
        # mostly distinct: hashing them buys nothing) and 1.88 s with lz4 pages, for a 30% larger file. The
        # native module writes the same file with arrow-rs on a thread of its own, for ~35% less CPU than
        # pyarrow's writer (docs/ingest.md); pyarrow's writer is the fallback without the extension.
        from opscope.model.schema import arrow_schema

        schema = arrow_schema()
        sink = _native_sink()
        if sink is not None:
            self._writer: Any = _NativeWriter(sink(str(self.tmp), schema))
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        text = [f.name for f in schema if pa.types.is_dictionary(f.type)]
        self._writer = pq.ParquetWriter(
            self.tmp, schema, compression="none", use_dictionary=text, write_statistics=False
        )

    def write_all(self, batches: Iterable[pa.RecordBatch]) -> None:
        for batch in batches:
            if batch.num_rows:
                try:
                    self._writer.write_batch(batch, row_group_size=max(batch.num_rows, 1))
                except OSError as exc:
                    raise CacheWriteError(exc.errno, exc.strerror or str(exc), str(self.tmp)) from exc
                self.rows += batch.num_rows

    def finish(self, meta: TraceMeta) -> Path:
        try:
            self._writer.add_key_value_metadata(
                {_KEY_KEY: self.key.encode(), _META_KEY: msgspec.json.encode(meta)}
            )
            self._writer.close()
            assert self.tmp is not None  # set by _open, which succeeded
            crc_path(self.target).write_text(f"{file_crc(self.tmp)}\n")
            os.replace(self.tmp, self.target)
        except OSError as exc:
            raise CacheWriteError(exc.errno, exc.strerror or str(exc), exc.filename) from exc
        return self.target

    def abort(self) -> None:
        if hasattr(self, "_writer"):
            with contextlib.suppress(Exception):
                getattr(self._writer, "abort", self._writer.close)()
        if self.tmp is not None:
            with contextlib.suppress(OSError):
                self.tmp.unlink()


def remove_orphans(folder: Path) -> None:
    """Delete temporary cache files (and half-written derived results) left by processes that no longer run
    (killed mid-write)."""
    for tmp in (
        *folder.glob(".tmp-*.parquet"),
        *folder.glob("*.parquet.derived/.tmp-*"),
        *folder.glob(".scratch-*"),
    ):
        pid_text = tmp.name.split("-")[1]
        if not pid_text.isdigit():
            continue
        try:
            os.kill(int(pid_text), 0)
        except ProcessLookupError:
            with contextlib.suppress(OSError):
                if tmp.is_dir():
                    shutil.rmtree(tmp)
                else:
                    tmp.unlink()
        except OSError:  # alive (another user's process): not ours to remove
            continue
