"""Type stub of the native ingest core (native/python/src/lib.rs), built by maturin."""

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

__version__: str

class Reader:
    """Reads one Kineto / Chrome-trace JSON file (plain or gzip) into record batches of the event table."""

    def __init__(self, path: str, batch_bytes: int | None = None, workers: int | None = None) -> None: ...
    def __iter__(self) -> Iterator[pa.RecordBatch]: ...
    def __next__(self) -> pa.RecordBatch: ...
    def position(self) -> int:
        """Bytes of the file read so far (compressed bytes for gzip)."""
    def finish(self) -> dict[str, Any]:
        """The report: document outline, metadata members, counts, gzip problem."""

def columns() -> list[tuple[str, str]]: ...
def kinds() -> tuple[list[str], list[tuple[str, str]]]: ...
def limits() -> tuple[int, int, int]: ...
def file_crc32(path: str) -> int:
    """CRC-32 of a whole file, equal to zlib.crc32 over its bytes."""

def demangle(names: list[str]) -> list[str | None]:
    """Itanium C++ demangling (cpp_demangle); None where a name is not a mangled symbol or does not parse."""

class ParquetSink:
    """The cache file written by arrow-rs on a thread of its own (see native/python/src/sink.rs)."""

    def __init__(self, path: str, schema: pa.Schema) -> None: ...
    def write(self, batch: pa.RecordBatch) -> None: ...
    def finish(self, metadata: list[tuple[str, str]]) -> None: ...
    def abort(self) -> None: ...
