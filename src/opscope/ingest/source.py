"""Byte sources: open a trace file (plain or gzip, told apart by magic bytes) and read it in chunks.

Decompression uses ISA-L (`isal`) when installed, else zlib. A gzip stream cut off mid-write ends the
iteration early and is reported through `ChunkReader.truncated` instead of raising, so that everything
before the cut can be salvaged.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from opscope.errors import InputError
from opscope.ingest import progress

try:  # ISA-L's gzip is 2-4x faster than zlib's; optional so that a missing wheel is not fatal
    from isal import igzip as _gzip
except ImportError:  # pragma: no cover - exercised only where isal has no wheel
    import gzip as _gzip  # type: ignore[no-redef]

GZIP_MAGIC = b"\x1f\x8b"
CHUNK_BYTES = 4 << 20


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(2) == GZIP_MAGIC


def head_bytes(path: Path, size: int = 64 << 10) -> bytes:
    """The first `size` bytes of the (decompressed) content, for format detection."""
    reader = ChunkReader(path, chunk_bytes=size, report_progress=False)
    for chunk in reader:
        return chunk
    return b""


class ChunkReader:
    """Iterates over the decompressed content of a file in chunks; remembers whether it ended early."""

    def __init__(self, path: Path, chunk_bytes: int = CHUNK_BYTES, report_progress: bool = True) -> None:
        self.path = path
        self.chunk_bytes = chunk_bytes
        self.truncated = False
        self.error: str | None = None
        self.bytes_read = 0  # decompressed bytes delivered so far
        self.compressed_size = os.path.getsize(path)
        self._raw: BinaryIO | None = None  # the file on disk, under the decompressor when gzip
        self._progress = progress.current() if report_progress else None

    def _open(self) -> BinaryIO:
        raw = open(self.path, "rb")  # noqa: SIM115 (closed by __iter__, with the decompressor on top)
        self._raw = raw
        if raw.read(2) == GZIP_MAGIC:
            raw.seek(0)
            return _gzip.open(raw, "rb")  # type: ignore[return-value]
        raw.seek(0)
        return raw

    def __iter__(self) -> Iterator[bytes]:
        try:
            handle = self._open()
        except OSError as exc:
            raise InputError(f"{self.path}: cannot open: {exc.strerror or exc}") from None
        with handle, self._raw or handle:
            while True:
                try:
                    chunk = handle.read(self.chunk_bytes)
                except (EOFError, zlib.error, OSError, ValueError) as exc:
                    # A gzip member cut off mid-write (EOFError) or damaged (zlib/isal errors): keep what came.
                    self.truncated = True
                    self.error = str(exc) or type(exc).__name__
                    return
                if not chunk:
                    return
                self.bytes_read += len(chunk)
                if self._progress is not None:
                    self._progress(self.compressed_position() or 0, self.compressed_size)
                yield chunk

    def compressed_position(self) -> int | None:
        """Bytes of the file on disk consumed so far (read-ahead included), None before opening."""
        if self._raw is None or self._raw.closed:
            return None
        return min(self._raw.tell(), self.compressed_size)
