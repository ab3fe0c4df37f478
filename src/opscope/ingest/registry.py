"""Reader registry: each input format is one reader, chosen by looking at the file's content, not its name."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from opscope.errors import InputError
from opscope.ingest import kineto
from opscope.ingest.source import head_bytes
from opscope.model.meta import TraceMeta

BatchStream = tuple[Iterator[pa.RecordBatch], Callable[[], TraceMeta]]


@dataclass(frozen=True)
class Reader:
    """One input format: how to recognise it and how to stream it into record batches."""

    name: str
    description: str
    extensions: tuple[str, ...]
    sniff: Callable[[bytes, Path], bool]
    read: Callable[[Path, str], BatchStream]


def _sniff_kineto(head: bytes, path: Path) -> bool:
    text = head.lstrip()
    if text[:1] == b"[":
        return b'"ph"' in head or text[1:].lstrip()[:1] in (b"{", b"]", b"")
    return text[:1] == b"{" and (b'"traceEvents"' in head or b'"schemaVersion"' in head or len(head) >= (64 << 10))


READERS: list[Reader] = [
    Reader(
        name="kineto",
        description="PyTorch profiler / Kineto / Chrome-trace JSON (.json, .json.gz), NVIDIA and AMD",
        extensions=(".json", ".json.gz"),
        sniff=_sniff_kineto,
        read=kineto.read_batches,
    ),
]


def register(reader: Reader, first: bool = True) -> None:
    """Add a reader; readers are tried in order, so specific formats go before the generic JSON one."""
    if any(r.name == reader.name for r in READERS):
        return
    if first:
        READERS.insert(0, reader)
    else:
        READERS.append(reader)


def detect(path: Path, display: str) -> Reader:
    """The reader for `path`, decided by its first bytes (decompressed when gzip)."""
    try:
        head = head_bytes(path)
    except OSError as exc:
        raise InputError(f"{display}: cannot read: {exc.strerror or exc}") from None
    if not head.strip():
        raise InputError(f"{display}: the file is empty")
    for reader in READERS:
        if reader.sniff(head, path):
            return reader
    stripped = head.lstrip()
    if stripped[:1] in (b"{", b"["):
        raise InputError(f"{display}: JSON, but not a trace format opscope reads (see `opscope formats`)")
    raise InputError(f"{display}: not a trace: unrecognised content (starts with {stripped[:16]!r}); "
                     "see `opscope formats`")
