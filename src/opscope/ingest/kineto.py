"""Kineto / Chrome-trace JSON reader (`.json`, `.json.gz`; every schema generation, NVIDIA and AMD).

Two readers implement the same rules (`docs/ingest.md`): the native one (`opscope._native`, Rust: parallel
decoding with the GIL released, the default) and the Python reference (`ingest/pyreader.py`), chosen with
`$OPSCOPE_READER` (`native` or `python`). Both stream record batches and end with the same report; this module
turns that report into the trace metadata (`deviceProperties`, `distributedInfo`, `baseTimeNanoseconds`,
profiler flags) and the warnings, so metadata and messages are built by one piece of code for both.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pyarrow as pa

from opscope.errors import InputError
from opscope.ingest import progress
from opscope.ingest.jax_trace import JaxConventions
from opscope.ingest.registry import reader_name
from opscope.model.meta import DeviceInfo, TraceMeta

_FLAG_KEYS = ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules")


def open_reader(path: Path, batch_bytes: int | None = None) -> Any:
    """A reader object: iterate for record batches, then `finish()` for the report dict."""
    if reader_name() == "python":
        from opscope.ingest.pyreader import Reader

        return Reader(path, batch_bytes)
    from opscope import _native
    from opscope.ingest import headstart

    started = headstart.take(path) if batch_bytes is None else None
    if started is not None:
        return started
    try:
        return _native.Reader(str(path), batch_bytes, headstart.workers())
    except OSError as exc:
        raise InputError(f"{path}: cannot open: {exc}") from None


def read_batches(path: Path, name: str) -> tuple[Iterator[pa.RecordBatch], Callable[[], TraceMeta]]:
    """Start reading `path`; returns the batch iterator and a finisher that builds `TraceMeta` afterwards."""
    reader = open_reader(path)
    report = progress.current()
    size = path.stat().st_size

    jax = JaxConventions()

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            for batch in reader:
                if report is not None:
                    report(min(reader.position(), size), size)
                yield jax.apply(batch)
        except RuntimeError as exc:  # a failure inside the native reader: one line naming the file
            raise InputError(f"{name}: {exc}") from None
        yield from jax.finish()
        if report is not None:
            report(min(reader.position(), size), size)

    def finish() -> TraceMeta:
        try:
            report = reader.finish()
        except RuntimeError as exc:
            raise InputError(f"{name}: {exc}") from None
        meta = build_meta(path, name, report)
        extra = jax.warnings(name)
        return dataclasses.replace(meta, warnings=meta.warnings + extra) if extra else meta

    return batches(), finish


def _fatal(name: str, fatal: tuple[Any, ...]) -> InputError:
    what = fatal[0]
    if what == "empty":
        return InputError(f"{name}: the file is empty")
    if what == "not_json":
        return InputError(f"{name}: not JSON (starts with {bytes(fatal[1])!r})")
    if what == "malformed":
        return InputError(f"{name}: malformed JSON before the events array (at byte {fatal[1]:,})")
    return InputError(f'{name}: JSON, but not a trace (no "traceEvents" array)')


def warnings_of(name: str, report: dict[str, Any]) -> list[str]:
    """The warnings for a finished read, in a fixed order (the same for both readers)."""
    stats = report["stats"]
    out: list[str] = []
    problem = report["gzip_problem"]
    truncated = problem == "truncated" or not report["closed"]
    if truncated:
        where = "gzip stream" if problem == "truncated" else "JSON document"
        out.append(
            f"{name}: trace cut off mid-write ({where} ends at byte {report['bytes_total']:,} of the "
            f"decompressed data); salvaged {stats['events']:,} complete events up to byte "
            f"{report['salvaged_up_to']:,}"
        )
    if problem == "corrupt":
        out.append(
            f"{name}: damaged gzip data after {report['bytes_total']:,} decompressed bytes; "
            "kept everything before it"
        )
    elif problem == "bad_checksum":
        out.append(f"{name}: gzip checksum or length does not match the data (the file may be damaged)")
    elif problem == "trailing_junk":
        out.append(f"{name}: bytes after the end of the gzip data were ignored")
    skipped = [
        (stats["malformed"], "malformed"),
        (stats["not_objects"], "not JSON objects"),
        (stats["too_deep"], "nested deeper than 64 levels"),
        (stats["too_large"], "larger than 64 MiB"),
    ]
    for count, why in skipped:
        if count:
            out.append(f"{name}: skipped {count:,} events: {why}")
    if stats["bad_utf8"]:
        out.append(
            f"{name}: invalid UTF-8 in event text was replaced with U+FFFD "
            f"({stats['bad_utf8']:,} events affected)"
        )
    if stats["out_of_range"]:
        out.append(
            f"{name}: {stats['out_of_range']:,} integer values beyond 64 bits (or beyond their column's "
            "range) were left empty"
        )
    if stats["wrong_type"]:
        out.append(f"{name}: {stats['wrong_type']:,} values of an unexpected type were left empty")
    if stats["negative_durations"]:
        out.append(f"{name}: {stats['negative_durations']:,} negative durations were left empty")
    if report["skipped_meta_values"] or report["skipped_deep_meta_values"]:
        count = report["skipped_meta_values"] + report["skipped_deep_meta_values"]
        out.append(
            f"{name}: skipped {count:,} top-level metadata values larger than 16 MiB or nested deeper "
            "than 64 levels"
        )
    if report["closed"] and not truncated:
        if report["malformed_after_events_at"] is not None:
            out.append(
                f"{name}: malformed metadata after the events (at byte "
                f"{report['malformed_after_events_at']:,}); the rest of the document was ignored"
            )
        elif not report["document_closed"]:
            out.append(
                f"{name}: the document ends inside the metadata after the events; some metadata "
                "(e.g. deviceProperties) may be missing"
            )
        if report["trailing_data_at"] is not None:
            out.append(
                f"{name}: unexpected data after the end of the JSON document (at byte "
                f"{report['trailing_data_at']:,}) was ignored"
            )
    return out


def _members(report: dict[str, Any]) -> dict[str, Any]:
    """The top-level metadata values the scanner kept, decoded (a key or value that does not decode is left out)."""
    doc: dict[str, Any] = {}
    for key, value in report["members"]:
        try:
            name = msgspec.json.decode(b'"' + bytes(key) + b'"', type=str)
            doc[name] = msgspec.json.decode(bytes(value))
        except (msgspec.DecodeError, RecursionError):
            continue
    return doc


def build_meta(path: Path, name: str, report: dict[str, Any]) -> TraceMeta:
    fatal = report["fatal"]
    if fatal is not None:
        raise _fatal(name, tuple(fatal))
    doc = _members(report)
    warnings = warnings_of(name, report)
    truncated = report["gzip_problem"] == "truncated" or not report["closed"]
    devices = tuple(
        DeviceInfo.from_kineto(p) for p in doc.get("deviceProperties", []) or [] if isinstance(p, dict)
    )
    dist_raw = doc.get("distributedInfo")
    dist: dict[str, Any] = dist_raw if isinstance(dist_raw, dict) else {}
    base = doc.get("baseTimeNanoseconds")
    flags = {k: doc[k] for k in _FLAG_KEYS if k in doc}
    known = {
        "traceEvents",
        "deviceProperties",
        "distributedInfo",
        "baseTimeNanoseconds",
        "schemaVersion",
        "traceName",
        "displayTimeUnit",
        *_FLAG_KEYS,
    }
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
