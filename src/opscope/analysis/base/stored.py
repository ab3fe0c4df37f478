"""Results as frames and back, for results kept beside the trace cache (`Trace.persisted`).

- Result rows (flat frozen dataclasses): the frame's schema comes from the dataclass's own fields, so a stored
  table always has the columns of the code that reads it, and one whose columns differ (stored by other code)
  is refused and computed again.
- A whole typed result (nested dataclasses, tuples, numbers, text): msgspec's MessagePack in a one-row frame,
  decoded against the result's type, so a value of another shape is refused (and computed again) rather than
  read as this one; numbers come back exactly (integers, IEEE doubles)."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import msgspec
import polars as pl

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


def value_frames(value: Any) -> dict[str, pl.DataFrame]:
    """`value` (dataclasses, tuples, dicts, numbers, text) as one frame of one MessagePack cell."""
    return {
        "value": pl.DataFrame({"msgpack": [msgspec.msgpack.encode(value)]}, schema={"msgpack": pl.Binary})
    }


def value_of(kind: Any, frames: dict[str, pl.DataFrame]) -> Any:
    """The value of type `kind` that `value_frames` stored; msgspec.ValidationError when it is of another
    shape (stored by other code)."""
    return msgspec.msgpack.decode(frames["value"]["msgpack"][0], type=kind)
