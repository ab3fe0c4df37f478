"""Byte sources: open a trace file (plain or gzip, told apart by magic bytes) and read it in chunks.

Gzip is decoded member by member with zlib's streaming decompressor, so that nothing already decodable is
lost: a stream cut off mid-write, damaged data, a checksum that does not match or bytes after the last member
end the iteration with every byte decoded before the problem delivered, and the problem is recorded in
`ChunkReader.problem` ("truncated", "corrupt", "bad_checksum", "trailing_junk"), the same categories the
native reader reports. This is the reference reader's source; the native core has its own (`source.rs`).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from opscope.errors import InputError
from opscope.ingest import progress

GZIP_MAGIC = b"\x1f\x8b"
CHUNK_BYTES = 4 << 20


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(2) == GZIP_MAGIC


def head_bytes(path: Path, size: int = 64 << 10) -> bytes:
    """The first `size` bytes of the (decompressed) content, for format detection. A gzip file is read `size`
    compressed bytes at a time, so that only about as much is decompressed as that takes (whole 1 MiB reads,
    ~10 MB decompressed, cost ~40 ms per detection)."""
    head = bytearray()
    for chunk in ChunkReader(path, chunk_bytes=size, report_progress=False, read_bytes=size):
        head += chunk
        if len(head) >= size:
            break
    return bytes(head[:size])


class ChunkReader:
    """Iterates over the decompressed content of a file in chunks; remembers how the gzip stream ended."""

    def __init__(
        self,
        path: Path,
        chunk_bytes: int = CHUNK_BYTES,
        report_progress: bool = True,
        read_bytes: int = 1 << 20,
    ) -> None:
        self.path = path
        self.chunk_bytes = chunk_bytes
        self.read_bytes = read_bytes  # compressed bytes per read of a gzip file
        self.problem: str | None = None
        self.gzip = False
        self.bytes_read = 0  # decompressed bytes delivered so far
        self.compressed_size = os.path.getsize(path)
        self._consumed = 0
        self._progress = progress.current() if report_progress else None

    @property
    def truncated(self) -> bool:
        return self.problem is not None

    @property
    def error(self) -> str | None:
        return self.problem

    def __iter__(self) -> Iterator[bytes]:
        try:
            raw = open(self.path, "rb")  # noqa: SIM115 (closed below)
        except OSError as exc:
            raise InputError(f"{self.path}: cannot open: {exc.strerror or exc}") from None
        with raw:
            head = raw.read(2)
            raw.seek(0)
            chunks = self._gzip(raw) if head == GZIP_MAGIC else self._plain(raw)
            for chunk in chunks:
                self.bytes_read += len(chunk)
                if self._progress is not None:
                    self._progress(min(self._consumed, self.compressed_size), self.compressed_size)
                yield chunk

    def _plain(self, raw: BinaryIO) -> Iterator[bytes]:
        while chunk := raw.read(self.chunk_bytes):
            self._consumed += len(chunk)
            yield chunk

    def _gzip(self, raw: BinaryIO) -> Iterator[bytes]:
        self.gzip = True
        pending = b""  # compressed bytes read but not yet given to a decompressor
        while True:
            decomp = zlib.decompressobj(zlib.MAX_WBITS | 16)
            while not decomp.eof:
                data = pending or raw.read(self.read_bytes)
                pending = b""
                if not data:
                    self.problem = "truncated"
                    return
                self._consumed += len(data)
                snapshot = decomp.copy()
                try:
                    out = decomp.decompress(data)
                except zlib.error as exc:
                    yield from _split(_salvage(snapshot, data), self.chunk_bytes)
                    self.problem = (
                        "bad_checksum" if "check" in str(exc) and "header" not in str(exc) else "corrupt"
                    )
                    return
                yield from _split(out, self.chunk_bytes)
            pending = decomp.unused_data
            if not pending:
                pending = raw.read(self.read_bytes)
                self._consumed += len(pending)
            if not pending:
                return
            if pending[:2] != GZIP_MAGIC or len(pending) < 2:
                self.problem = "trailing_junk"
                return

    def compressed_position(self) -> int | None:
        """Bytes of the file on disk consumed so far."""
        return min(self._consumed, self.compressed_size)


def _split(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def _salvage(decomp: zlib._Decompress, data: bytes) -> bytes:
    """The output of the longest prefix of `data` that decompresses without error (the decompressor failed on
    the whole of it; zlib gives no partial output with its error, so the prefix is found by bisection on
    copies of the decompressor's state)."""
    good, bad, out = 0, len(data), b""
    while bad - good > 1:
        mid = (good + bad) // 2
        try:
            attempt = decomp.copy().decompress(data[:mid])
        except zlib.error:
            bad = mid
            continue
        good, out = mid, attempt
    return out
