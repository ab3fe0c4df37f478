"""Results as frames and back, for results kept beside the trace cache (`Trace.persisted`).

- Result rows (flat frozen dataclasses): the frame's schema comes from the dataclass's own fields, so a stored
  table always has the columns of the code that reads it, and one whose columns differ (stored by other code)
  is refused and computed again.
- A whole typed result (nested dataclasses, tuples, numbers, text): msgspec's MessagePack in a one-row frame,
  decoded against the result's type, so a value of another shape is refused (and computed again) rather than
  read as this one; numbers come back exactly (integers, IEEE doubles).
- A JSON document (the HTML report's page data): the same frame, kept only when it reads back equal and
  encodes to the same bytes again.

numpy is imported only by results that hold arrays (they import it themselves): the report's page data is read
back without it (~50 ms of a second `report`)."""

from __future__ import annotations

import dataclasses
import io
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
import polars as pl

from opscope.model.trace import Trace

T = TypeVar("T")

# the field annotations (text: every module uses postponed annotations) a stored row may have
_DTYPES: dict[str, pl.DataType] = {
    "str": pl.String(),
    "str | None": pl.String(),
    "int": pl.Int64(),
    "int | None": pl.Int64(),
    "float": pl.Float64(),
    "float | None": pl.Float64(),
    "bool": pl.Boolean(),
    "bool | None": pl.Boolean(),
}


def row_schema(cls: type) -> pl.Schema:
    """The frame schema of the dataclass `cls`: one column per field, in field order."""
    out = {}
    for f in dataclasses.fields(cls):
        annotation = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", repr(f.type))
        if annotation not in _DTYPES:
            raise TypeError(f"{cls.__name__}.{f.name}: a {annotation} cannot be stored as a column")
        out[f.name] = _DTYPES[annotation]
    return pl.Schema(out)


def rows_frame(cls: type, rows: tuple[Any, ...] | list[Any]) -> pl.DataFrame:
    """`rows` (instances of `cls`) as a frame of `row_schema(cls)`."""
    schema = row_schema(cls)
    return pl.DataFrame([tuple(getattr(r, n) for n in schema) for r in rows], schema=schema, orient="row")


def rows_of(cls: type[T], frame: pl.DataFrame) -> tuple[T, ...]:
    """The instances of `cls` a frame of `rows_frame` holds; ValueError when its columns are not `cls`'s."""
    if frame.schema != row_schema(cls):
        raise ValueError(f"stored {cls.__name__} rows: other columns")
    return tuple(cls(*r) for r in frame.iter_rows())


def kept_value(trace: Trace, name: str, tag: str | None, kind: Any, compute: Callable[[], T]) -> T:
    """`compute()`, a value of type `kind`, kept beside the trace cache under `name-tag` (`Trace.persisted`):
    read back when it is there, else computed and kept if it reads back equal (`value_frames`); computed and
    not kept where there is no `tag` (`codetag.source_tag` could not read the sources)."""
    return _kept(
        trace,
        name,
        tag,
        compute,
        lambda value: value_frames(value, kind),
        lambda frames: value_of(kind, frames),
    )


def kept_document(
    trace: Trace, name: str, tag: str | None, compute: Callable[[], dict[str, Any]]
) -> dict[str, Any]:
    """`compute()`, a JSON document (dicts with text keys, lists, text, numbers, booleans, None), kept beside the
    trace cache under `name-tag` as its MessagePack bytes (`Trace.persisted`); kept only when the bytes read
    back equal (a tuple would come back a list: not kept) and encode to the same bytes again (an integer that
    would come back a float, or a bool an integer: not kept). Computed and not kept where there is no `tag`."""
    return _kept(trace, name, tag, compute, _document_frames, lambda frames: value_of(_DOCUMENT, frames))


def _kept(
    trace: Trace,
    name: str,
    tag: str | None,
    compute: Callable[[], T],
    encode: Callable[[T], dict[str, pl.DataFrame]],
    decode: Callable[[dict[str, pl.DataFrame]], T],
) -> T:
    if tag is None:
        return compute()
    return trace.persisted(f"{name}-{tag}", compute, encode, decode)


_DOCUMENT = dict[str, Any]


def _document_frames(document: dict[str, Any]) -> dict[str, pl.DataFrame]:
    blob = msgspec.msgpack.encode(document)
    back = msgspec.msgpack.decode(blob, type=_DOCUMENT)
    if back != document or msgspec.msgpack.encode(back) != blob:
        raise ValueError("the document would not read back equal")
    return _cell(blob)


def _cell(blob: bytes) -> dict[str, pl.DataFrame]:
    """MessagePack bytes as the one frame of one cell that `value_of` reads."""
    return {"value": pl.DataFrame({"msgpack": [blob]}, schema={"msgpack": pl.Binary})}


def value_frames(value: Any, kind: Any = None) -> dict[str, pl.DataFrame]:
    """`value` (dataclasses, tuples, dicts, numbers, text; one-dimensional numpy arrays and polars frames
    inside them) as one frame of one MessagePack cell. With `kind`, it is read back first and refused
    (ValueError: not kept) unless it reads back equal, arrays and frames compared by value and type."""
    frames = _cell(msgspec.msgpack.encode(value, enc_hook=_encode_part))
    if kind is not None and not same_value(value_of(kind, frames), value):
        raise ValueError("the value would not read back equal")
    return frames


def value_of(kind: Any, frames: dict[str, pl.DataFrame]) -> Any:
    """The value of type `kind` that `value_frames` stored; msgspec.ValidationError when it is of another
    shape (stored by other code)."""
    return msgspec.msgpack.decode(frames["value"]["msgpack"][0], type=kind, dec_hook=_decode_part)


def _numpy() -> Any:
    """numpy where something imported it (a value can hold an array only then), else None."""
    return sys.modules.get("numpy")


def _encode_part(obj: Any) -> Any:
    np = _numpy()
    if np is not None and isinstance(obj, np.ndarray):
        if obj.ndim != 1 or obj.dtype.hasobject:
            raise TypeError("only one-dimensional arrays of numbers are kept")
        return (obj.dtype.str, obj.tobytes())
    if isinstance(obj, pl.DataFrame):
        sink = io.BytesIO()
        obj.write_ipc(sink, compression="uncompressed")
        return sink.getvalue()
    raise TypeError(f"a {type(obj).__name__} is not kept")


def _decode_part(kind: type, obj: Any) -> Any:
    np = _numpy()
    if np is not None and kind is np.ndarray and isinstance(obj, (list, tuple)) and len(obj) == 2:
        return np.frombuffer(obj[1], dtype=np.dtype(obj[0])).copy()
    if kind is pl.DataFrame and isinstance(obj, bytes):
        return pl.read_ipc(io.BytesIO(obj))
    raise msgspec.ValidationError(f"expected a {kind.__name__}")


def same_value(a: Any, b: Any) -> bool:
    """Equal values, dataclasses field by field, arrays and frames by value and type."""
    if type(a) is not type(b):
        return False
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return all(same_value(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    np = _numpy()
    if np is not None and isinstance(a, np.ndarray):
        return a.dtype == b.dtype and bool(np.array_equal(a, b))
    if isinstance(a, pl.DataFrame):
        return a.schema == b.schema and a.equals(b)
    return bool(a == b)
