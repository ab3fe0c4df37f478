"""Kineto event batches -> Arrow record batches in the event model's schema.

msgspec decodes each batch of whole events into small typed structs; `args` is kept raw and decoded in one
call per group (GPU activity, everything else) with a struct holding only the fields that group carries, so
each event's fields are touched once. Columns are then built with Arrow and numpy, not per-event Python.
Values of an unexpected type, integers beyond 64 bits and invalid UTF-8 are repaired and counted.
"""

from __future__ import annotations

import gc
import math
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
from msgspec import field

from opscope.ingest.jsonstream import SyntaxProblem
from opscope.model.schema import CATEGORY_KINDS, COLUMNS, KINDS, Col, Kind, arrow_schema

Num = int | float | str | None
_EMPTY = msgspec.Raw()


class _Event(msgspec.Struct, gc=False):
    """The fields every event may carry. `args` stays raw: it is decoded per kind below, in one call."""

    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: float | None = None
    dur: float | None = None
    id: int | str | None = None
    args: msgspec.Raw = _EMPTY


class _GpuArgs(msgspec.Struct, gc=False):
    """args of kernels, memcpys and memsets."""

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


class _HostArgs(msgspec.Struct, gc=False):
    """args of everything else (CPU ops, runtime calls, annotations, python functions, metadata)."""

    external_id: Num = field(name="External id", default=None)
    external_id_old: Num = field(name="external id", default=None)
    correlation: Num = None
    stream: Num = None
    device: Num = None
    input_dims: msgspec.Raw = field(name="Input Dims", default=_EMPTY)
    input_dims_old: msgspec.Raw = field(name="Input dims", default=_EMPTY)
    input_types: msgspec.Raw = field(name="Input type", default=_EMPTY)
    py_id: Num = field(name="Python id", default=None)
    py_parent: Num = field(name="Python parent id", default=None)
    label: Any = field(name="name", default=None)
    seq: Num = field(name="Sequence number", default=None)


class _LooseEvent(msgspec.Struct, gc=False):
    """Fallback when a field holds a value of an unexpected type: everything untyped, fixed up in Python."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    id: Any = None
    args: msgspec.Raw = _EMPTY


_STRICT = msgspec.json.Decoder(list[_Event])
_LOOSE = msgspec.json.Decoder(list[_LooseEvent])
_GPU_ARGS = msgspec.json.Decoder(list[_GpuArgs])
_HOST_ARGS = msgspec.json.Decoder(list[_HostArgs])
_LOOSE_ARGS = msgspec.json.Decoder(list[Any])
_INT64_MAX = 2**63 - 1
_GPU_CATEGORIES = frozenset(c for c, k in CATEGORY_KINDS.items() if k in (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET))


@dataclass
class DecodeStats:
    events: int = 0
    bad_utf8_batches: int = 0
    loose_batches: int = 0
    clamped_values: int = 0


def _as_str(value: Any) -> str | None:
    return value if value is None or isinstance(value, str) else str(value)


def _as_float(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _loose_to_strict(events: list[_LooseEvent]) -> list[_Event]:
    out = []
    for ev in events:
        ident = ev.id if isinstance(ev.id, (int, str)) and not isinstance(ev.id, bool) else None
        pid = ev.pid if isinstance(ev.pid, (int, str)) and not isinstance(ev.pid, bool) else _as_str(ev.pid)
        tid = ev.tid if isinstance(ev.tid, (int, str)) and not isinstance(ev.tid, bool) else _as_str(ev.tid)
        out.append(_Event(_as_str(ev.ph), _as_str(ev.cat), _as_str(ev.name), pid, tid, _as_float(ev.ts),
                          _as_float(ev.dur), ident, ev.args))
    return out


def _loose_args(raws: list[msgspec.Raw], struct: type[msgspec.Struct]) -> list[Any]:
    """Decode args one dict at a time, dropping values of the wrong type instead of failing the batch."""
    out = []
    names = {f.encode_name: f for f in msgspec.structs.fields(struct)}
    for item in _LOOSE_ARGS.decode(b"[" + b",".join(raws) + b"]"):
        values: dict[str, Any] = {}
        if isinstance(item, dict):
            for key, spec in names.items():
                if key not in item:
                    continue
                value = item[key]
                if spec.type is msgspec.Raw:
                    values[spec.name] = msgspec.Raw(msgspec.json.encode(value))
                elif spec.name in ("grid", "block"):
                    values[spec.name] = value if isinstance(value, list) else None
                elif spec.name == "label" or (isinstance(value, (int, float, str)) and not isinstance(value, bool)):
                    values[spec.name] = value
        out.append(struct(**values))
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
        enabled = gc.isenabled()
        gc.disable()  # millions of short-lived objects: the cyclic GC only costs time here
        try:
            return self._columns(events)
        finally:
            if enabled:
                gc.enable()

    def _loose(self, data: bytes) -> list[_Event]:
        self.stats.loose_batches += 1
        try:
            return _loose_to_strict(_LOOSE.decode(data))
        except msgspec.DecodeError as exc:
            raise SyntaxProblem(str(exc)) from None

    def _decode_args(self, raws: list[msgspec.Raw], decoder: msgspec.json.Decoder, struct: type) -> list[Any]:
        if not raws:
            return []
        try:
            return decoder.decode(b"[" + b",".join(raws) + b"]")  # type: ignore[no-any-return]
        except msgspec.ValidationError:
            self.stats.loose_batches += 1
            return _loose_args(raws, struct)

    # -- columns -------------------------------------------------------------------------------------------

    def _ints(self, values: list[Any], dtype: pa.DataType) -> pa.Array:
        try:
            return pa.array(values, type=dtype)
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

    @staticmethod
    def _floats(values: list[Any], dtype: pa.DataType) -> pa.Array:
        try:
            return pa.array(values, type=dtype)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
            return pa.array([_as_float(v) for v in values], type=dtype)

    @staticmethod
    def _strings(values: list[Any]) -> pa.DictionaryArray:
        try:
            arr = pa.array(values, type=pa.string())
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            try:  # all integers (pid / tid): let Arrow format them
                arr = pa.array(values, type=pa.int64()).cast(pa.string())
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                if None in values:
                    arr = pa.array([_as_str(v) for v in values], type=pa.string())
                else:
                    arr = pa.array(list(map(str, values)), type=pa.string())
        return arr.dictionary_encode()

    @staticmethod
    def _raw_strings(values: list[msgspec.Raw]) -> pa.DictionaryArray:
        return pa.array([bytes(v).decode("utf-8", "replace") if len(v) else None for v in values],
                        type=pa.string()).dictionary_encode()

    def _times_ns(self, values: list[Any]) -> pa.Array:
        """Microseconds (as Kineto writes them) to integer nanoseconds, keeping sub-microsecond digits."""
        floats = self._floats(values, pa.float64())
        mask = np.asarray(floats.is_null().to_numpy(zero_copy_only=False))
        us = floats.fill_null(0.0).to_numpy()
        whole = np.floor(us)
        # Whole and fractional microseconds apart, so that epoch-scale values keep their ns digits.
        ns = whole.astype(np.int64) * 1000 + np.rint((us - whole) * 1000).astype(np.int64)
        return pa.array(ns, type=pa.int64(), mask=mask if mask.any() else None)

    def _columns(self, events: list[_Event]) -> pa.RecordBatch:
        n = len(events)
        if n == 0:
            return pa.RecordBatch.from_pylist([], schema=arrow_schema())
        ph, cat, name, pid, tid, ts, dur, fid, args = (
            list(col) for col in zip(*map(attrgetter("ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "args"),
                                           events))
        )
        cat_arr = self._strings(cat)
        ph_arr = self._strings(ph)
        kind = _kinds(cat_arr, ph_arr)
        gpu_cats = {i for i, c in enumerate(cat_arr.dictionary.to_pylist()) if c in _GPU_CATEGORIES}
        cat_codes = cat_arr.indices.fill_null(-1).to_numpy()
        is_gpu = np.isin(cat_codes, list(gpu_cats)) if gpu_cats else np.zeros(n, dtype=bool)
        has_args = np.fromiter(map(len, args), dtype=np.int64, count=n) > 0
        gpu_idx = np.flatnonzero(is_gpu & has_args)
        host_idx = np.flatnonzero(~is_gpu & has_args)
        gpu_args = self._decode_args([args[i] for i in gpu_idx], _GPU_ARGS, _GpuArgs)
        host_args = self._decode_args([args[i] for i in host_idx], _HOST_ARGS, _HostArgs)
        cols: dict[str, pa.Array] = {
            Col.PH: ph_arr,
            Col.CAT: cat_arr,
            Col.KIND: kind,
            Col.NAME: self._strings(name),
            Col.PID: self._strings(pid),
            Col.TID: self._strings(tid),
            Col.TS_NS: self._times_ns(ts),
            Col.DUR_NS: self._times_ns(dur),
            Col.FLOW_ID: self._ints(fid, pa.int64()),
        }
        scatter = _Scatter(n, self)
        if len(gpu_args):
            g = list(zip(*map(attrgetter(
                "external_id", "external_id_old", "correlation", "stream", "device", "grid", "block", "registers",
                "shared_memory", "blocks_per_sm", "warps_per_sm", "occupancy", "nbytes", "bandwidth"), gpu_args)))
            scatter.add(Col.EXTERNAL_ID, gpu_idx, _coalesce(g[0], g[1]))
            scatter.add(Col.CORRELATION, gpu_idx, g[2])
            scatter.add(Col.STREAM, gpu_idx, g[3])
            scatter.add(Col.DEVICE, gpu_idx, g[4])
            for axis, (gcol, bcol) in enumerate(((Col.GRID_X, Col.BLOCK_X), (Col.GRID_Y, Col.BLOCK_Y),
                                                 (Col.GRID_Z, Col.BLOCK_Z))):
                scatter.add(gcol, gpu_idx, _axis(g[5], axis))
                scatter.add(bcol, gpu_idx, _axis(g[6], axis))
            for col, values in zip((Col.REGISTERS, Col.SHARED_MEMORY, Col.BLOCKS_PER_SM, Col.WARPS_PER_SM,
                                    Col.OCCUPANCY_PCT, Col.BYTES, Col.BANDWIDTH_GBPS), g[7:]):
                scatter.add(col, gpu_idx, values)
        if len(host_args):
            h = list(zip(*map(attrgetter(
                "external_id", "external_id_old", "correlation", "stream", "device", "input_dims", "input_dims_old",
                "input_types", "py_id", "py_parent", "label", "seq"), host_args)))
            scatter.add(Col.EXTERNAL_ID, host_idx, _coalesce(h[0], h[1]))
            scatter.add(Col.CORRELATION, host_idx, h[2])
            scatter.add(Col.STREAM, host_idx, h[3])
            scatter.add(Col.DEVICE, host_idx, h[4])
            scatter.add_text(Col.INPUT_DIMS, host_idx, self._raw_strings(
                [a if len(a) else b for a, b in zip(h[5], h[6])]))
            scatter.add_text(Col.INPUT_TYPES, host_idx, self._raw_strings(list(h[7])))
            scatter.add(Col.PY_ID, host_idx, h[8])
            scatter.add(Col.PY_PARENT_ID, host_idx, h[9])
            scatter.add_text(Col.LABEL, host_idx, self._strings([v if isinstance(v, str) else None for v in h[10]]))
            scatter.add(Col.SEQ, host_idx, h[11])
        cols.update(scatter.finish())
        _fill_gpu_placement(cols, pid, tid, is_gpu)
        return pa.RecordBatch.from_arrays([cols[c] for c in COLUMNS], schema=arrow_schema())


def _coalesce(first: tuple[Any, ...], second: tuple[Any, ...]) -> list[Any]:
    return [a if a is not None else b for a, b in zip(first, second)]


def _axis(values: tuple[Any, ...], axis: int) -> list[Any]:
    return [v[axis] if isinstance(v, list) and len(v) > axis else None for v in values]


class _Scatter:
    """Builds full-length columns from values known only for a subset of rows (nulls elsewhere)."""

    def __init__(self, n: int, decoder: BatchDecoder) -> None:
        self.n = n
        self.decoder = decoder
        self.parts: dict[str, list[tuple[np.ndarray, pa.Array]]] = {}

    def add(self, col: str, idx: np.ndarray, values: Any) -> None:
        dtype = _ARROW[col]
        values = list(values)
        if pa.types.is_integer(dtype):
            arr = self.decoder._ints(values, dtype)
        else:
            arr = self.decoder._floats(values, dtype)
        self.parts.setdefault(col, []).append((idx, arr))

    def add_text(self, col: str, idx: np.ndarray, arr: pa.DictionaryArray) -> None:
        self.parts.setdefault(col, []).append((idx, arr))

    def finish(self) -> dict[str, pa.Array]:
        out: dict[str, pa.Array] = {}
        for col, dtype in _ARROW.items():
            parts = self.parts.get(col)
            if not parts:
                out[col] = pa.nulls(self.n, type=dtype)
                continue
            if pa.types.is_dictionary(dtype):
                out[col] = _scatter_text(self.n, parts)
                continue
            np_type = np.int64 if pa.types.is_integer(dtype) else np.float64
            values = np.zeros(self.n, dtype=np_type)
            valid = np.zeros(self.n, dtype=bool)
            for idx, arr in parts:
                values[idx] = arr.fill_null(0).to_numpy(zero_copy_only=False)
                valid[idx] = ~np.asarray(arr.is_null().to_numpy(zero_copy_only=False))
            out[col] = pa.array(values, mask=~valid, type=pa.int64() if np_type is np.int64 else pa.float64()).cast(dtype)
        return out


def _scatter_text(n: int, parts: list[tuple[np.ndarray, pa.DictionaryArray]]) -> pa.DictionaryArray:
    """Merge per-subset dictionary arrays into one full-length dictionary array (nulls elsewhere)."""
    lookup: dict[str, int] = {}
    codes = np.full(n, -1, dtype=np.int32)
    for idx, arr in parts:
        remap = np.array([lookup.setdefault(v, len(lookup)) for v in arr.dictionary.to_pylist()] or [0],
                         dtype=np.int32)
        sub = arr.indices.fill_null(-1).to_numpy()
        codes[idx] = np.where(sub >= 0, remap[np.maximum(sub, 0)], -1)
    mask = codes < 0
    indices = pa.array(np.maximum(codes, 0), type=pa.int32(), mask=mask if mask.any() else None)
    return pa.DictionaryArray.from_arrays(indices, pa.array(list(lookup), type=pa.string()))


_ARROW: dict[str, pa.DataType] = {
    f.name: f.type for f in arrow_schema() if f.name in (
        Col.EXTERNAL_ID, Col.CORRELATION, Col.STREAM, Col.DEVICE, Col.GRID_X, Col.GRID_Y, Col.GRID_Z, Col.BLOCK_X,
        Col.BLOCK_Y, Col.BLOCK_Z, Col.REGISTERS, Col.SHARED_MEMORY, Col.BLOCKS_PER_SM, Col.WARPS_PER_SM,
        Col.OCCUPANCY_PCT, Col.BYTES, Col.BANDWIDTH_GBPS, Col.INPUT_DIMS, Col.INPUT_TYPES, Col.PY_ID,
        Col.PY_PARENT_ID, Col.LABEL, Col.SEQ)
}


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


def _fill_gpu_placement(columns: dict[str, pa.Array], pid: list[Any], tid: list[Any], is_gpu: np.ndarray) -> None:
    """GPU work without args.device / args.stream (old traces, AMD): take them from pid / tid."""
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


