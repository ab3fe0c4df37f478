"""Kineto / Chrome-trace JSON reader (`.json`, `.json.gz`; every schema generation, NVIDIA and AMD).

`jsonstream` cuts the events array into batches of whole events, `kineto_batch` turns each batch into an
Arrow record batch, and this module builds the trace metadata (`deviceProperties`, `distributedInfo`,
`baseTimeNanoseconds`, profiler flags) from the document text around the array, plus the warnings for
anything that had to be salvaged or repaired.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pyarrow as pa

from opscope.ingest.jsonstream import EventSplitter
from opscope.ingest.kineto_batch import BatchDecoder
from opscope.ingest.source import ChunkReader
from opscope.model.meta import DeviceInfo, TraceMeta

# -- the reader --------------------------------------------------------------------------------------------

_FLAG_KEYS = ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules")


def read_batches(path: Path, name: str) -> tuple[Iterator[pa.RecordBatch], Any]:
    """Start reading `path`; returns the batch iterator and a finisher that builds `TraceMeta` afterwards."""
    reader = ChunkReader(path)
    decoder = BatchDecoder()
    splitter = EventSplitter(reader, decoder, name)

    def finish() -> TraceMeta:
        return _build_meta(path, name, reader, decoder, splitter)

    return iter(splitter), finish


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
