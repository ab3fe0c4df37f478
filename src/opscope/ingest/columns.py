"""Building blocks for readers that fill the event model column by column (Nsight, rocprof).

Each helper returns an Arrow array of the exact type the schema wants: text columns as dictionary<int32,
string> (few distinct values, stored once), the kind as a dictionary over every `Kind`. `record_batch`
assembles whatever columns a reader has and fills the rest with nulls, in schema order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa

from opscope.model.schema import COLUMNS, KIND_CODES, KINDS, arrow_schema

_KIND_INDEX = KIND_CODES


@lru_cache(maxsize=1)
def _kind_dict() -> pa.Array:
    # Built on first use: creating an Arrow array at import time makes pyarrow import pandas (~0.3 s).
    return pa.array(list(KINDS), type=pa.string())


def codes(indices: pa.Array) -> np.ndarray:
    """A dictionary column's codes as int32 numpy, read from the Arrow buffers without pyarrow.compute (whose
    import costs 60-90 ms of a cold run) or pandas (which `to_numpy` imports: 0.15-0.3 s); null rows are -1
    (a copy only then)."""
    if indices.type != pa.int32():
        return np.asarray(indices.fill_null(-1).cast(pa.int32()).to_pylist(), dtype=np.int32)
    buffers = indices.buffers()
    values = np.frombuffer(buffers[1], dtype=np.int32, count=len(indices), offset=indices.offset * 4)
    if not indices.null_count:
        return values
    bits = np.unpackbits(np.frombuffer(buffers[0], dtype=np.uint8), bitorder="little")
    valid = bits[indices.offset : indices.offset + len(indices)].astype(bool)
    return np.where(valid, values, np.int32(-1))


def row_indices(rows: np.ndarray) -> pa.Array:
    """Row positions as an Arrow int64 array (for `take`), built from the numpy buffer: `pa.array` asks pandas
    whether its input is array-like, and importing pandas cost 0.15-0.3 s of every cold read."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(rows), [None, pa.py_buffer(rows)])


def values_at(column: pa.Array, rows: np.ndarray) -> list[Any]:
    """The Python values of `column` at `rows` (positions): for a dictionary column, only the strings of the
    codes that occur are built (`to_pylist` of a taken dictionary array converts its whole dictionary, ~9x
    slower) and nothing imports pyarrow.compute (the metadata rows of every Kineto read come this way)."""
    if pa.types.is_dictionary(column.type):
        at = codes(column.indices)[rows]
        strings = {int(c): column.dictionary[int(c)].as_py() for c in np.unique(at[at >= 0])}
        return [strings.get(int(c)) for c in at]
    return column.take(row_indices(rows)).to_pylist()  # type: ignore[no-any-return]


def kinds_from_codes(codes: np.ndarray) -> pa.DictionaryArray:
    """The `kind` column from per-row codes (positions in KINDS)."""
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32, copy=False)), _kind_dict())


_SCHEMA = arrow_schema()


def text(values: Sequence[str | None]) -> pa.DictionaryArray:
    """Python strings -> dictionary array."""
    arr = pa.array(values, type=pa.string()).dictionary_encode()
    return arr.cast(pa.dictionary(pa.int32(), pa.string()))


def const_text(value: str | None, n: int) -> pa.DictionaryArray:
    """The same string (or null) n times."""
    if value is None:
        return pa.nulls(n, pa.dictionary(pa.int32(), pa.string()))
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), pa.array([value]))


def text_by_code(codes: np.ndarray, names: Mapping[int, str | None]) -> pa.DictionaryArray:
    """Integer codes -> their names (a code missing from `names` gives null), via the distinct codes only."""
    uniq, inverse = np.unique(codes, return_inverse=True)
    dictionary = [names.get(int(c)) for c in uniq]
    indices = pa.array(inverse.astype(np.int32))
    valid = [d is not None for d in dictionary]
    if not all(valid):
        mask = ~np.asarray(valid)[inverse]
        indices = pa.array(inverse.astype(np.int32), mask=mask)
        dictionary = [d if d is not None else "" for d in dictionary]
    return pa.DictionaryArray.from_arrays(indices, pa.array(dictionary, type=pa.string()))


def text_of_ints(values: np.ndarray, valid: np.ndarray | None = None) -> pa.DictionaryArray:
    """Integers -> their decimal text (pid, tid, device as text), nulls where not `valid` (hash-encoded)."""
    encoded = pa.array(values, type=pa.int64(), mask=None if valid is None else ~valid).dictionary_encode()
    dictionary = encoded.dictionary.cast(pa.string())
    return pa.DictionaryArray.from_arrays(encoded.indices.cast(pa.int32()), dictionary)


def kinds(kind: str, n: int) -> pa.DictionaryArray:
    return kinds_from_codes(np.full(n, _KIND_INDEX[kind], dtype=np.int32))


def kinds_of(per_row: Sequence[str]) -> pa.DictionaryArray:
    return kinds_from_codes(
        np.fromiter((_KIND_INDEX[k] for k in per_row), dtype=np.int32, count=len(per_row))
    )


def kinds_where(condition: np.ndarray, when_true: str, otherwise: str) -> pa.DictionaryArray:
    """Per-row kind chosen between two, vectorised."""
    return kinds_from_codes(np.where(condition, _KIND_INDEX[when_true], _KIND_INDEX[otherwise]))


def text_where(condition: np.ndarray, when_true: str, otherwise: str) -> pa.DictionaryArray:
    """Per-row text chosen between two strings, vectorised."""
    return pa.DictionaryArray.from_arrays(
        pa.array(condition.astype(np.int32)), pa.array([otherwise, when_true])
    )


def ints(values: np.ndarray | pa.Array, dtype: pa.DataType, valid: np.ndarray | None = None) -> pa.Array:
    if isinstance(values, pa.Array):
        return values.cast(dtype)
    return pa.array(values, type=dtype, mask=None if valid is None else ~valid)


def int32_where(values: np.ndarray, valid: np.ndarray) -> pa.Array:
    """A 32-bit column (device, grid, block, registers) from int64 values: empty where not `valid` or beyond 32
    bits (a value from the file that does not fit is left empty, never wrapped)."""
    ok = valid & (values >= -(2**31)) & (values < 2**31)
    return pa.array(np.where(ok, values, 0).astype(np.int32), type=pa.int32(), mask=~ok)


def record_batch(n: int, columns: Mapping[str, pa.Array]) -> pa.RecordBatch:
    """A batch with every schema column: the given ones (cast to the schema type), nulls for the rest."""
    arrays = []
    for field in _SCHEMA:
        given = columns.get(field.name)
        if given is None:
            arrays.append(pa.nulls(n, field.type))
        elif given.type != field.type:
            arrays.append(given.cast(field.type))
        else:
            arrays.append(given)
    assert len(arrays) == len(COLUMNS)
    return pa.RecordBatch.from_arrays(arrays, schema=_SCHEMA)
