"""Kineto event batches -> Arrow record batches in the event model's schema.

msgspec decodes each batch of whole events into small typed structs; `args` is kept raw and decoded in one
call per group (GPU activity, everything else) with a struct holding only the fields that group carries, so
each event's fields are touched once. Columns are then built with Arrow and numpy, not per-event Python.
Values of an unexpected type, integers beyond 64 bits and invalid UTF-8 are repaired and counted.
"""

from __future__ import annotations

import gc
import math
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from opscope.ingest.columns import kinds_from_codes
from opscope.ingest.jsonstream import SyntaxProblem
from opscope.ingest.kineto_structs import (
    ARGS_DECODERS,
    FLOAT_EXACT_US,
    INT64_MAX,
    LOOSE_DECODER,
    STRICT_DECODER,
    DecodeStats,
    Event,
    GpuArgs,
    HostArgs,
    LaunchArgs,
    MetaArgs,
    PythonArgs,
    as_float,
    as_str,
    loose_args,
    loose_to_strict,
)
from opscope.model.schema import CATEGORY_KINDS, COLUMNS, KIND_CODES, Col, Kind, arrow_schema


class BatchDecoder:
    """Decodes one `[...]` batch into an Arrow record batch; counts what it had to repair."""

    def __init__(self) -> None:
        self.stats = DecodeStats()

    def __call__(self, data: bytes) -> pa.RecordBatch:
        try:
            events = STRICT_DECODER.decode(data)
        except msgspec.ValidationError:
            events = self._loose(data)
        except msgspec.DecodeError as exc:
            if "UTF-8" not in str(exc):
                raise SyntaxProblem(str(exc)) from None
            self.stats.bad_utf8_batches += 1
            data = data.decode("utf-8", "replace").encode("utf-8")
            try:
                events = STRICT_DECODER.decode(data)
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

    def _loose(self, data: bytes) -> list[Event]:
        self.stats.loose_batches += 1
        try:
            return loose_to_strict(LOOSE_DECODER.decode(data))
        except msgspec.DecodeError as exc:
            raise SyntaxProblem(str(exc)) from None

    def _decode_args(self, raws: list[msgspec.Raw], struct: type) -> list[Any]:
        if not raws:
            return []
        try:
            return ARGS_DECODERS[struct].decode(b"[" + b",".join(raws) + b"]")  # type: ignore[no-any-return]
        except msgspec.ValidationError:
            self.stats.loose_batches += 1
            return loose_args(raws, struct)

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
        if isinstance(value, int) and -INT64_MAX <= value <= INT64_MAX:
            return value
        self.stats.clamped_values += 1
        return None

    @staticmethod
    def _floats(values: list[Any] | pa.Array, dtype: pa.DataType) -> pa.Array:
        if isinstance(values, pa.Array):
            return values.cast(dtype)
        try:
            return pa.array(values, type=dtype)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
            return pa.array([as_float(v) for v in values], type=dtype)

    @staticmethod
    def _strings(values: list[Any]) -> pa.DictionaryArray:
        try:
            arr = pa.array(values, type=pa.string())
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            try:  # all integers (pid / tid): encode the integers, then format only the distinct ones
                encoded = pa.array(values, type=pa.int64()).dictionary_encode()
                return pa.DictionaryArray.from_arrays(encoded.indices, encoded.dictionary.cast(pa.string()))
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                if None in values:
                    arr = pa.array([as_str(v) for v in values], type=pa.string())
                else:
                    arr = pa.array(list(map(str, values)), type=pa.string())
        return arr.dictionary_encode()

    @staticmethod
    def _raw_strings(values: list[msgspec.Raw]) -> pa.DictionaryArray:
        """JSON text of nested values (e.g. Input Dims) as strings; absent values as nulls."""
        return pa.array([bytes(v).decode("utf-8", "replace") if len(v) else None for v in values],
                        type=pa.string()).dictionary_encode()

    def _times_ns(self, values: list[Any] | pa.Array) -> pa.Array:
        """Durations in microseconds (as Kineto writes them) to integer nanoseconds."""
        floats = self._floats(values, pa.float64())
        mask = np.asarray(floats.is_null().to_numpy(zero_copy_only=False))
        us = floats.fill_null(0.0).to_numpy()
        whole = np.floor(us)
        # Whole and fractional microseconds apart, so that large values keep their nanosecond digits.
        ns = whole.astype(np.int64) * 1000 + np.rint((us - whole) * 1000).astype(np.int64)
        return pa.array(ns, type=pa.int64(), mask=mask if mask.any() else None)

    def _start_times_ns(self, values: list[Any]) -> pa.Array:
        """Start times to integer nanoseconds, exactly.

        Float literals arrive as text. Most traces use a monotonic clock (~1e12 us), where float64 keeps every
        nanosecond; epoch-based traces (~1.7e15 us) would lose up to 0.125 us in a float64, so for those the
        text is split at the decimal point and both parts are read as integers.
        """
        try:
            text = pa.array(values, type=pa.string())
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return self._times_ns([as_float(v) if isinstance(v, str) else v for v in values])
        try:
            floats = pc.cast(text, pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return self._times_ns([as_float(v) for v in values])
        top = pc.max(pc.abs(floats)).as_py()
        if top is None or top < FLOAT_EXACT_US:
            return self._times_ns(floats)
        parts = pc.extract_regex(text, r"^(?P<w>-?\d+)(?:\.(?P<f>\d*))?$")
        if parts.null_count > text.null_count:  # exponents or other forms: keep the float reading
            return self._times_ns(floats)
        whole = pc.cast(parts.field("w"), pa.int64())
        frac = pc.cast(pc.utf8_slice_codeunits(pc.utf8_rpad(parts.field("f"), 3, "0"), 0, 3), pa.int64())
        sign = pc.if_else(pc.starts_with(parts.field("w"), "-"), -1, 1)
        return pc.add(pc.multiply(whole, 1000), pc.multiply(frac, sign))

    def _columns(self, events: list[Event]) -> pa.RecordBatch:
        n = len(events)
        if n == 0:
            return pa.RecordBatch.from_pylist([], schema=arrow_schema())
        # One list comprehension per field is faster than transposing tuples.
        ph = [e.ph for e in events]
        cat = [e.cat for e in events]
        pid = [e.pid for e in events]
        tid = [e.tid for e in events]
        args = [e.args for e in events]
        cat_arr = self._strings(cat)
        ph_arr = self._strings(ph)
        kind = _kinds(cat_arr, ph_arr)
        cols: dict[str, pa.Array] = {
            Col.PH: ph_arr,
            Col.CAT: cat_arr,
            Col.KIND: kind,
            Col.NAME: self._strings([e.name for e in events]),
            Col.PID: self._strings(pid),
            Col.TID: self._strings(tid),
            Col.TS_NS: self._start_times_ns([e.ts for e in events]),
            Col.DUR_NS: self._times_ns([e.dur for e in events]),
            Col.FLOW_ID: self._ints([e.id for e in events], pa.int64()),
        }
        kind_codes = kind.indices.to_numpy()
        has_args = np.fromiter(map(len, args), dtype=np.int64, count=n) > 0
        scatter = _Scatter(n, self)
        claimed = np.zeros(n, dtype=bool)
        for struct, kinds in _GROUPS:
            member = np.isin(kind_codes, [KIND_CODES[k] for k in kinds]) if kinds else ~claimed
            claimed |= member
            idx = np.flatnonzero(member & has_args)
            if len(idx):
                self._scatter_group(scatter, struct, idx, self._decode_args([args[i] for i in idx], struct))
        cols.update(scatter.finish())
        _fill_gpu_placement(cols, pid, tid, np.isin(kind_codes, [KIND_CODES[k] for k in _GPU_KINDS]))
        return pa.RecordBatch.from_arrays([cols[c] for c in COLUMNS], schema=arrow_schema())

    def _scatter_group(self, scatter: _Scatter, struct: type, idx: np.ndarray, rows: list[Any]) -> None:
        if struct is LaunchArgs or struct is GpuArgs or struct is HostArgs:
            scatter.add(Col.EXTERNAL_ID, idx, [r.external_id if r.external_id is not None else r.external_id_old
                                               for r in rows])
            scatter.add(Col.CORRELATION, idx, [r.correlation for r in rows])
        if struct is GpuArgs or struct is HostArgs:
            scatter.add(Col.STREAM, idx, [r.stream for r in rows])
            scatter.add(Col.DEVICE, idx, [r.device for r in rows])
        if struct is GpuArgs:
            grid = [r.grid for r in rows]
            block = [r.block for r in rows]
            for axis, (gcol, bcol) in enumerate(((Col.GRID_X, Col.BLOCK_X), (Col.GRID_Y, Col.BLOCK_Y),
                                                 (Col.GRID_Z, Col.BLOCK_Z))):
                scatter.add(gcol, idx, _axis(grid, axis))
                scatter.add(bcol, idx, _axis(block, axis))
            scatter.add(Col.REGISTERS, idx, [r.registers for r in rows])
            scatter.add(Col.SHARED_MEMORY, idx, [r.shared_memory for r in rows])
            scatter.add(Col.BLOCKS_PER_SM, idx, [r.blocks_per_sm for r in rows])
            scatter.add(Col.WARPS_PER_SM, idx, [r.warps_per_sm for r in rows])
            scatter.add(Col.OCCUPANCY_PCT, idx, [r.occupancy for r in rows])
            scatter.add(Col.BYTES, idx, [r.nbytes for r in rows])
            scatter.add(Col.BANDWIDTH_GBPS, idx, [r.bandwidth for r in rows])
        elif struct is HostArgs:
            scatter.add_text(Col.INPUT_DIMS, idx, self._raw_strings(
                [r.input_dims if len(r.input_dims) else r.input_dims_old for r in rows]))
            scatter.add_text(Col.INPUT_TYPES, idx, self._raw_strings([r.input_types for r in rows]))
            scatter.add(Col.SEQ, idx, [r.seq for r in rows])
        elif struct is PythonArgs:
            scatter.add(Col.PY_ID, idx, [r.py_id for r in rows])
            scatter.add(Col.PY_PARENT_ID, idx, [r.py_parent for r in rows])
        elif struct is MetaArgs:
            scatter.add_text(Col.LABEL, idx, self._strings([r.label if isinstance(r.label, str) else None
                                                            for r in rows]))


_GPU_KINDS = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
# Which args struct decodes which kinds of events; the last group takes every event not claimed before.
_GROUPS: tuple[tuple[type, tuple[str, ...]], ...] = (
    (GpuArgs, _GPU_KINDS),
    (LaunchArgs, (Kind.RUNTIME, Kind.DRIVER)),
    (PythonArgs, (Kind.PYTHON,)),
    (MetaArgs, (Kind.METADATA,)),
    (HostArgs, ()),
)


def _axis(values: list[Any], axis: int) -> list[Any]:
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
    other = KIND_CODES[Kind.OTHER]
    mapped = np.array([KIND_CODES[CATEGORY_KINDS.get(c, Kind.OTHER)] if c is not None else other
                       for c in cat.dictionary.to_pylist()] or [0], dtype=np.int32)
    cat_idx = cat.indices.to_numpy(zero_copy_only=False)
    cat_valid = ~np.asarray(cat.is_null().to_numpy(zero_copy_only=False))
    out = np.where(cat_valid, mapped[np.where(cat_valid, cat_idx, 0).astype(np.int64)], other)
    ph_dict = ph.dictionary.to_pylist()
    ph_idx = ph.indices.to_numpy(zero_copy_only=False)
    ph_valid = ~np.asarray(ph.is_null().to_numpy(zero_copy_only=False))
    is_meta = np.array([p == "M" for p in ph_dict] or [False])[np.where(ph_valid, ph_idx, 0).astype(np.int64)]
    return kinds_from_codes(np.where(ph_valid & is_meta, KIND_CODES[Kind.METADATA], out))


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
        return value if abs(value) <= INT64_MAX else None
    if isinstance(value, str):
        digits = "".join(ch for ch in value if ch.isdigit())
        return int(digits) if digits and len(digits) < 18 else None
    return None


# -- worker-process entry points (see ingest/parallel.py) ---------------------------------------------------

_WORKER_DECODER: BatchDecoder | None = None
_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])


def decode_in_worker(data: bytes) -> tuple[pa.RecordBatch, DecodeStats]:
    """Decode one batch in a worker; returns the batch and what this call had to repair."""
    global _WORKER_DECODER
    if _WORKER_DECODER is None:
        # One decode per worker process: Arrow's own thread pool would only compete for the same cores.
        pa.set_cpu_count(1)
        _WORKER_DECODER = BatchDecoder()
    _WORKER_DECODER.stats = DecodeStats()
    batch = _WORKER_DECODER(data)
    return batch, _WORKER_DECODER.stats


def verify_batch(data: bytes) -> bytes:
    """Cheap structural check used by the splitter when decoding happens elsewhere: well-formed JSON only."""
    try:
        _RAW_LIST.decode(data)
    except msgspec.DecodeError as exc:
        if "UTF-8" not in str(exc):
            raise SyntaxProblem(str(exc)) from None
    return data

