"""Kineto / Chrome-trace JSON reader (`.json`, `.json.gz`; every schema generation, NVIDIA and AMD).

`jsonstream` cuts the events array into batches of whole events, `kineto_batch` turns each batch into an
Arrow record batch, and this module builds the trace metadata (`deviceProperties`, `distributedInfo`,
`baseTimeNanoseconds`, profiler flags) from the document text around the array, plus the warnings for
anything that had to be salvaged or repaired.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pyarrow as pa

from opscope.ingest.jsonstream import EventSplitter, SyntaxProblem, scan_elements
from opscope.ingest.kineto_batch import BatchDecoder, DecodeStats, decode_in_worker, verify_batch
from opscope.ingest.parallel import ordered_map, plan_workers
from opscope.ingest.source import ChunkReader, is_gzip
from opscope.model.meta import DeviceInfo, TraceMeta

# -- the reader --------------------------------------------------------------------------------------------

_FLAG_KEYS = ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules")


def read_batches(path: Path, name: str) -> tuple[Iterator[pa.RecordBatch], Any]:
    """Start reading `path`; returns the batch iterator and a finisher that builds `TraceMeta` afterwards.

    Large traces are decoded by worker processes (see `ingest/parallel.py`); small ones in this process.
    """
    reader = ChunkReader(path)
    decoder = BatchDecoder()
    workers = plan_workers(_estimated_size(path, reader))
    if workers:
        splitter: EventSplitter[Any] = EventSplitter(reader, verify_batch, name)
        batches = _parallel(splitter, decoder, workers)
    else:
        splitter = EventSplitter(reader, decoder, name)
        batches = iter(splitter)

    def finish() -> TraceMeta:
        return _build_meta(path, name, reader, decoder, splitter)

    return batches, finish


def _estimated_size(path: Path, reader: ChunkReader) -> int:
    size = reader.compressed_size
    return size * 8 if is_gzip(path) else size


def _parallel(splitter: EventSplitter[bytes], decoder: BatchDecoder, workers: int) -> Iterator[pa.RecordBatch]:
    raw: deque[bytes] = deque()

    def remember(items: Iterator[bytes]) -> Iterator[bytes]:
        for item in items:
            raw.append(item)
            yield item

    results = ordered_map(_decode_or_error, remember(iter(splitter)), workers, "opscope.ingest.kineto_batch")
    for batch, stats, failed in results:
        data = raw.popleft()
        if failed or batch is None or stats is None:  # rare: a batch only the lenient path can read; redo it here, element by element
            yield from _decode_here(data, decoder, splitter)
            continue
        decoder.stats.merge(stats)
        yield batch


def _decode_or_error(data: bytes) -> tuple[pa.RecordBatch | None, DecodeStats | None, bool]:
    try:
        batch, stats = decode_in_worker(data)
        return batch, stats, False
    except SyntaxProblem:
        return None, None, True


def _decode_here(data: bytes, decoder: BatchDecoder, splitter: EventSplitter[Any]) -> Iterator[pa.RecordBatch]:
    body = data[1:-1]
    ends, _ = scan_elements(body)
    start = 0
    for end in ends:
        piece = body[start:end].lstrip(b" \t\r\n,")
        start = end
        try:
            yield decoder(b"[" + piece + b"]")
        except SyntaxProblem:
            splitter.report.skipped_elements += 1


def _decode_document_meta(header: bytes, trailer: bytes, bare: bool, closed: bool) -> dict[str, Any]:
    if bare:
        return {}
    text = header + b"[]" + (trailer if closed else b"}")
    try:
        doc = msgspec.json.decode(text)
    except msgspec.DecodeError:
        try:
            doc = msgspec.json.decode(header + b"[]}")
        except msgspec.DecodeError:
            return {}
    return doc if isinstance(doc, dict) else {}


def _build_meta(path: Path, name: str, reader: ChunkReader, decoder: BatchDecoder,
                splitter: EventSplitter[pa.RecordBatch]) -> TraceMeta:
    report = splitter.report
    doc = _decode_document_meta(report.header, report.trailer, report.bare_list, report.closed)
    warnings: list[str] = []
    truncated = reader.truncated or not report.closed
    if truncated:
        where = "gzip stream" if reader.truncated else "JSON document"
        warnings.append(
            f"{name}: trace cut off mid-write ({where} ends at byte {report.bytes_total:,} of the decompressed "
            f"data); salvaged {decoder.stats.events:,} complete events up to byte {report.salvaged_up_to:,}"
        )
    if report.skipped_elements:
        warnings.append(f"{name}: skipped {report.skipped_elements:,} malformed events")
    if decoder.stats.bad_utf8_batches:
        warnings.append(f"{name}: invalid UTF-8 in event text was replaced with U+FFFD "
                        f"({decoder.stats.bad_utf8_batches} batch(es) affected)")
    if decoder.stats.clamped_values:
        warnings.append(f"{name}: {decoder.stats.clamped_values:,} integer values beyond 64 bits were left empty")
    devices = tuple(DeviceInfo.from_kineto(p) for p in doc.get("deviceProperties", []) or [] if isinstance(p, dict))
    dist_raw = doc.get("distributedInfo")
    dist: dict[str, Any] = dist_raw if isinstance(dist_raw, dict) else {}
    base = doc.get("baseTimeNanoseconds")
    flags = {k: doc[k] for k in _FLAG_KEYS if k in doc}
    known = {"traceEvents", "deviceProperties", "distributedInfo", "baseTimeNanoseconds", "schemaVersion",
             "traceName", "displayTimeUnit", *_FLAG_KEYS}
    extra = {k: v for k, v in doc.items() if k not in known and isinstance(v, (str, int, float, bool))}
    if "displayTimeUnit" in doc:
        extra["displayTimeUnit"] = doc["displayTimeUnit"]
    return TraceMeta(
        path=str(path),
        format="kineto",
        devices=devices,
        rank=_int_or_none(dist.get("rank")),
        world_size=_int_or_none(dist.get("world_size")),
        backend=dist.get("backend") if isinstance(dist.get("backend"), str) else None,
        base_time_ns=_int_or_none(base),
        schema_version=_int_or_none(doc.get("schemaVersion")),
        trace_name=doc.get("traceName") if isinstance(doc.get("traceName"), str) else None,
        profiler_flags=flags,
        extra=extra,
        warnings=tuple(warnings),
        truncated=truncated,
    )


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None
