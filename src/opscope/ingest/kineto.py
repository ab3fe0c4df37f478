"""Kineto / Chrome-trace JSON reader (`.json`, `.json.gz`; every schema generation, NVIDIA and AMD).

Batches of whole events from `jsonstream` are decoded by msgspec into small typed structs holding only the
fields later analyses need, then turned column by column into an Arrow record batch with the schema of
`opscope.model.schema`. Values of an unexpected type, integers beyond 64 bits and invalid UTF-8 are
handled per batch (lenient re-decode, nulls, replacement characters) and counted rather than fatal.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Iterator
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
from msgspec import field

from opscope.ingest.jsonstream import EventSplitter, SyntaxProblem
from opscope.ingest.source import ChunkReader
from opscope.model.meta import DeviceInfo, TraceMeta
from opscope.model.schema import CATEGORY_KINDS, COLUMNS, KINDS, Col, Kind, arrow_schema

Num = int | float | str | None


class _Args(msgspec.Struct, gc=False):
    external_id: Num = field(name="External id", default=None)
    external_id_old: Num = field(name="external id", default=None)
    correlation: Num = None
    stream: Num = None
    device: Num = None
    grid: list[Any] | None = None
    block: list[Any] | None = None
    registers: Num = field(name="registers per thread", default=None)
    shared_memory: Num = field(name="shared memory", default=None)
    blocks_per_sm: Num = field(name="blocks per SM", default=None)
    warps_per_sm: Num = field(name="warps per SM", default=None)
    occupancy: Num = field(name="est. achieved occupancy %", default=None)
    nbytes: Num = field(name="bytes", default=None)
    bandwidth: Num = field(name="memory bandwidth (GB/s)", default=None)
    input_dims: msgspec.Raw | None = field(name="Input Dims", default=None)
    input_dims_old: msgspec.Raw | None = field(name="Input dims", default=None)
    input_types: msgspec.Raw | None = field(name="Input type", default=None)
    py_id: Num = field(name="Python id", default=None)
    py_parent: Num = field(name="Python parent id", default=None)
    label: Any = field(name="name", default=None)
    seq: Num = field(name="Sequence number", default=None)


class _Event(msgspec.Struct, gc=False):
    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    id: Any = None
    args: _Args | None = None


class _LooseEvent(msgspec.Struct, gc=False):
    """Fallback when a typed field holds a value of another type: everything untyped, fixed up in Python."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    id: Any = None
    args: Any = None


_STRICT = msgspec.json.Decoder(list[_Event])
_LOOSE = msgspec.json.Decoder(list[_LooseEvent])
_ARG_FIELDS = {f.encode_name: f.name for f in msgspec.structs.fields(_Args)}
_NO_ARGS = _Args()
_INT64_MAX = 2**63 - 1


@dataclass
class DecodeStats:
    events: int = 0
    bad_utf8_batches: int = 0
    loose_batches: int = 0
    clamped_values: int = 0


def _loose_to_strict(events: list[_LooseEvent]) -> list[_Event]:
    out = []
    for ev in events:
        args = ev.args
        typed = _NO_ARGS
        if isinstance(args, dict):
            values = {}
            for key, attr in _ARG_FIELDS.items():
                if key in args:
                    value = args[key]
                    if attr.startswith("input_"):
                        value = msgspec.Raw(msgspec.json.encode(value))
                    elif attr in ("grid", "block"):
                        value = value if isinstance(value, list) else None
                    elif attr != "label" and not isinstance(value, (int, float, str, type(None))):
                        value = None
                    values[attr] = value
            typed = _Args(**values)
        out.append(_Event(ev.ph, ev.cat, ev.name, ev.pid, ev.tid, ev.ts, ev.dur, ev.id, typed))
    return out


class BatchDecoder:
    """Decodes one `[...]` batch into an Arrow record batch; counts what it had to repair."""

    def __init__(self) -> None:
        self.stats = DecodeStats()

    def __call__(self, data: bytes) -> pa.RecordBatch:
        try:
            events = _STRICT.decode(data)
        except msgspec.ValidationError:
            events = self._loose(data)
        except msgspec.DecodeError as exc:
            if "UTF-8" not in str(exc):
                raise SyntaxProblem(str(exc)) from None
            self.stats.bad_utf8_batches += 1
            data = data.decode("utf-8", "replace").encode("utf-8")
            try:
                events = _STRICT.decode(data)
            except msgspec.ValidationError:
                events = self._loose(data)
            except msgspec.DecodeError as again:
                raise SyntaxProblem(str(again)) from None
        self.stats.events += len(events)
        return self._columns(events)

    def _loose(self, data: bytes) -> list[_Event]:
        self.stats.loose_batches += 1
        try:
            return _loose_to_strict(_LOOSE.decode(data))
        except msgspec.DecodeError as exc:
            raise SyntaxProblem(str(exc)) from None

    # -- columns -------------------------------------------------------------------------------------------

    def _ints(self, values: list[Any], dtype: pa.DataType) -> pa.Array:
        try:
            return pa.array(values, type=dtype, from_pandas=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
            return pa.array([self._as_int(v) for v in values], type=dtype)

    def _as_int(self, value: Any) -> int | None:
        if value is None or isinstance(value, bool):
            return None
        if isinstance(value, float):
            return int(value) if math.isfinite(value) and abs(value) < 2**62 else None
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("stream "):
                text = text[7:]
            try:
                value = int(text, 0)
            except ValueError:
                return None
        if isinstance(value, int) and -_INT64_MAX <= value <= _INT64_MAX:
            return value
        self.stats.clamped_values += 1
        return None

    def _floats(self, values: list[Any], dtype: pa.DataType) -> pa.Array:
        try:
            return pa.array(values, type=dtype)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
            clean = [float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None for v in values]
            return pa.array(clean, type=dtype)

    @staticmethod
    def _strings(values: list[Any]) -> pa.Array:
        try:
            arr = pa.array(values, type=pa.string())
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            arr = pa.array([None if v is None else str(v) for v in values], type=pa.string())
        return arr.dictionary_encode()

    def _times_ns(self, values: list[Any]) -> pa.Array:
        """Microseconds (int or float, as Kineto writes them) to integer nanoseconds."""
        try:
            # Let Arrow infer the type: asking for int64 directly silently truncates 7.136 to 7 (pyarrow 26).
            inferred = pa.array(values)
            if pa.types.is_integer(inferred.type) or pa.types.is_null(inferred.type):
                return pa.compute.multiply(inferred.cast(pa.int64()), 1000)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
            pass
        floats = self._floats(values, pa.float64()).to_numpy(zero_copy_only=False)
        mask = np.isnan(floats)
        # Split whole and fractional microseconds so that epoch-scale values keep their ns digits.
        whole = np.floor(np.where(mask, 0.0, floats))
        ns = whole.astype(np.int64) * 1000 + np.rint((np.where(mask, 0.0, floats) - whole) * 1000).astype(np.int64)
        return pa.array(ns, type=pa.int64(), mask=mask)

    def _columns(self, events: list[_Event]) -> pa.RecordBatch:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._columns_inner(events)
        finally:
            if enabled:
                gc.enable()

    def _columns_inner(self, events: list[_Event]) -> pa.RecordBatch:
        n = len(events)
        if n == 0:
            return pa.RecordBatch.from_pylist([], schema=arrow_schema())
        ph, cat, name, pid, tid, ts, dur, fid, args = (
            list(col) for col in zip(*map(attrgetter("ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "args"), events))
        )
        args = [a if a is not None else _NO_ARGS for a in args]
        (ext, ext_old, corr, stream, device, grid, block, regs, smem, bps, wps, occ, nbytes, bw, dims, dims_old,
         types, py_id, py_parent, label, seq) = (list(col) for col in zip(*map(attrgetter(
            "external_id", "external_id_old", "correlation", "stream", "device", "grid", "block", "registers",
            "shared_memory", "blocks_per_sm", "warps_per_sm", "occupancy", "nbytes", "bandwidth", "input_dims",
            "input_dims_old", "input_types", "py_id", "py_parent", "label", "seq"), args)))

        cat_arr = self._strings(cat)
        kind = _kinds(cat_arr, self._strings(ph))
        ext = [a if a is not None else b for a, b in zip(ext, ext_old)]
        dims = [a if a is not None else b for a, b in zip(dims, dims_old)]
        gx, gy, gz = _triples(grid)
        bx, by, bz = _triples(block)
        label = [v if isinstance(v, str) else None for v in label]
        pid_s = self._strings([_text(v) for v in pid])
        tid_s = self._strings([_text(v) for v in tid])
        columns: dict[str, pa.Array] = {
            Col.PH: self._strings(ph),
            Col.CAT: cat_arr,
            Col.KIND: kind,
            Col.NAME: self._strings(name),
            Col.PID: pid_s,
            Col.TID: tid_s,
            Col.TS_NS: self._times_ns(ts),
            Col.DUR_NS: self._times_ns(dur),
            Col.DEVICE: self._ints(device, pa.int32()),
            Col.STREAM: self._ints(stream, pa.int64()),
            Col.CORRELATION: self._ints(corr, pa.int64()),
            Col.EXTERNAL_ID: self._ints(ext, pa.int64()),
            Col.FLOW_ID: self._ints(fid, pa.int64()),
            Col.GRID_X: self._ints(gx, pa.int32()),
            Col.GRID_Y: self._ints(gy, pa.int32()),
            Col.GRID_Z: self._ints(gz, pa.int32()),
            Col.BLOCK_X: self._ints(bx, pa.int32()),
            Col.BLOCK_Y: self._ints(by, pa.int32()),
            Col.BLOCK_Z: self._ints(bz, pa.int32()),
            Col.REGISTERS: self._ints(regs, pa.int32()),
            Col.SHARED_MEMORY: self._ints(smem, pa.int64()),
            Col.BLOCKS_PER_SM: self._floats(bps, pa.float32()),
            Col.WARPS_PER_SM: self._floats(wps, pa.float32()),
            Col.OCCUPANCY_PCT: self._floats(occ, pa.float32()),
            Col.BYTES: self._ints(nbytes, pa.int64()),
            Col.BANDWIDTH_GBPS: self._floats(bw, pa.float64()),
            Col.INPUT_DIMS: self._strings([None if v is None else bytes(v).decode("utf-8", "replace") for v in dims]),
            Col.INPUT_TYPES: self._strings([None if v is None else bytes(v).decode("utf-8", "replace") for v in types]),
            Col.PY_ID: self._ints(py_id, pa.int64()),
            Col.PY_PARENT_ID: self._ints(py_parent, pa.int64()),
            Col.LABEL: self._strings(label),
            Col.SEQ: self._ints(seq, pa.int64()),
        }
        _fill_gpu_placement(columns, pid, tid, n)
        return pa.RecordBatch.from_arrays([columns[c] for c in COLUMNS], schema=arrow_schema())


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return str(value)


def _triples(values: list[Any]) -> tuple[list[Any], list[Any], list[Any]]:
    xs: list[Any] = []
    ys: list[Any] = []
    zs: list[Any] = []
    for v in values:
        if isinstance(v, list) and len(v) == 3:
            xs.append(v[0])
            ys.append(v[1])
            zs.append(v[2])
        else:
            xs.append(None)
            ys.append(None)
            zs.append(None)
    return xs, ys, zs


def _kinds(cat: pa.DictionaryArray, ph: pa.DictionaryArray) -> pa.DictionaryArray:
    """Normalised kind per event, computed on the dictionaries (few distinct values), not per event."""
    cat_dict = cat.dictionary.to_pylist()
    kinds = list(KINDS)
    index = {k: i for i, k in enumerate(kinds)}
    mapped = np.array([index[CATEGORY_KINDS.get(c, Kind.OTHER)] if c is not None else index[Kind.OTHER]
                       for c in cat_dict] or [0], dtype=np.int32)
    cat_idx = cat.indices.to_numpy(zero_copy_only=False)
    cat_valid = ~np.asarray(cat.is_null().to_numpy(zero_copy_only=False))
    out = np.where(cat_valid, mapped[np.where(cat_valid, cat_idx, 0).astype(np.int64)], index[Kind.OTHER])
    ph_dict = ph.dictionary.to_pylist()
    ph_idx = ph.indices.to_numpy(zero_copy_only=False)
    ph_valid = ~np.asarray(ph.is_null().to_numpy(zero_copy_only=False))
    is_meta = np.array([p == "M" for p in ph_dict] or [False])[np.where(ph_valid, ph_idx, 0).astype(np.int64)]
    out = np.where(ph_valid & is_meta, index[Kind.METADATA], out)
    return pa.DictionaryArray.from_arrays(pa.array(out.astype(np.int32)), pa.array(kinds, type=pa.string()))


def _fill_gpu_placement(columns: dict[str, pa.Array], pid: list[Any], tid: list[Any], n: int) -> None:
    """GPU work without args.device / args.stream (old traces, AMD): take them from pid / tid."""
    kind = columns[Col.KIND]
    kinds = kind.dictionary.to_pylist()
    gpu_codes = [i for i, k in enumerate(kinds) if k in (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)]
    is_gpu = np.isin(kind.indices.to_numpy(zero_copy_only=False), gpu_codes)
    if not is_gpu.any():
        return
    for col, raw in ((Col.DEVICE, pid), (Col.STREAM, tid)):
        arr = columns[col]
        missing = np.asarray(arr.is_null().to_numpy(zero_copy_only=False)) & is_gpu
        if not missing.any():
            continue
        values = arr.to_pylist()
        for i in np.flatnonzero(missing):
            values[i] = _placement_int(raw[i])
        columns[col] = pa.array(values, type=arr.type)


def _placement_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if abs(value) <= _INT64_MAX else None
    if isinstance(value, str):
        digits = "".join(ch for ch in value if ch.isdigit())
        return int(digits) if digits and len(digits) < 18 else None
    return None


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
    dist = doc.get("distributedInfo") if isinstance(doc.get("distributedInfo"), dict) else {}
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
