"""The one schema of the event table: every column name and dtype lives here.

Every reader (Kineto JSON, Nsight SQLite, rocprof, ...) produces exactly these columns, and every analysis
refers to them through `Col`, never through string literals. Time is integer nanoseconds everywhere inside;
strings are stored once per distinct value (dictionary-encoded in the cache, categorical in memory).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Final

import polars as pl

if TYPE_CHECKING:
    import pyarrow as pa

from opscope.model.kinds import CATEGORY_KINDS, GPU_KINDS, KIND_CODES, KINDS, Col, Kind

__all__ = [
    "CATEGORY_KINDS",
    "COLUMNS",
    "GPU_KINDS",
    "KINDS",
    "KIND_CODES",
    "Col",
    "Kind",
    "arrow_schema",
    "conform",
    "empty_frame",
]


# dtype of every column, in table order. Text columns are categorical: each distinct string is stored once.
COLUMNS: Final[dict[str, pl.DataType]] = {
    Col.PH: pl.Categorical(),
    Col.CAT: pl.Categorical(),
    Col.KIND: pl.Categorical(),
    Col.NAME: pl.Categorical(),
    Col.PID: pl.Categorical(),
    Col.TID: pl.Categorical(),
    Col.TS_NS: pl.Int64(),
    Col.DUR_NS: pl.Int64(),
    Col.DEVICE: pl.Int32(),
    Col.STREAM: pl.Int64(),
    Col.CORRELATION: pl.Int64(),
    Col.EXTERNAL_ID: pl.Int64(),
    Col.FLOW_ID: pl.Int64(),
    Col.GRID_X: pl.Int32(),
    Col.GRID_Y: pl.Int32(),
    Col.GRID_Z: pl.Int32(),
    Col.BLOCK_X: pl.Int32(),
    Col.BLOCK_Y: pl.Int32(),
    Col.BLOCK_Z: pl.Int32(),
    Col.REGISTERS: pl.Int32(),
    Col.SHARED_MEMORY: pl.Int64(),
    Col.BLOCKS_PER_SM: pl.Float32(),
    Col.WARPS_PER_SM: pl.Float32(),
    Col.OCCUPANCY_PCT: pl.Float32(),
    Col.BYTES: pl.Int64(),
    Col.BANDWIDTH_GBPS: pl.Float64(),
    Col.INPUT_DIMS: pl.Categorical(),
    Col.INPUT_TYPES: pl.Categorical(),
    Col.PY_ID: pl.Int64(),
    Col.PY_PARENT_ID: pl.Int64(),
    Col.LABEL: pl.Categorical(),
    Col.SEQ: pl.Int64(),
    Col.MEM_ADDR: pl.Int64(),
    Col.MEM_BYTES: pl.Int64(),
    Col.MEM_ALLOCATED: pl.Int64(),
    Col.MEM_RESERVED: pl.Int64(),
    Col.MEM_DEVICE_TYPE: pl.Int32(),
    Col.MEM_DEVICE_ID: pl.Int32(),
    Col.CONCRETE_INPUTS: pl.Categorical(),
    Col.HLO_OP: pl.Categorical(),
    Col.HLO_MODULE: pl.Categorical(),
    Col.PROGRAM_ID: pl.Int64(),
    Col.NAME_STACK: pl.Categorical(),
    Col.STEP_NUM: pl.Int64(),
    Col.WAIT_ON_STREAM: pl.Int64(),
    Col.WAIT_ON_CORRELATION: pl.Int64(),
}


@functools.cache
def arrow_schema() -> pa.Schema:
    """The cache's Arrow schema (strings dictionary-encoded, the kind as dictionary too). pyarrow is imported
    here, not with the module: reading a cached trace needs only polars."""
    import pyarrow as pa

    _ARROW_TYPES: dict[type[pl.DataType], pa.DataType] = {
        pl.String: pa.string(),
        pl.Int64: pa.int64(),
        pl.Int32: pa.int32(),
        pl.Float32: pa.float32(),
        pl.Float64: pa.float64(),
    }
    fields = []
    for name, dtype in COLUMNS.items():
        if isinstance(dtype, pl.Categorical):
            fields.append(pa.field(name, pa.dictionary(pa.int32(), pa.string())))
        else:
            fields.append(pa.field(name, _ARROW_TYPES[type(dtype)]))
    return pa.schema(fields)


def empty_frame() -> pl.DataFrame:
    """A table with the schema and no rows."""
    return pl.DataFrame(schema=COLUMNS)


def conform(frame: pl.DataFrame) -> pl.DataFrame:
    """Give a reader's frame exactly the schema: missing columns as nulls, right dtypes, right order."""
    exprs = []
    for name, dtype in COLUMNS.items():
        if name in frame.columns:
            exprs.append(pl.col(name).cast(dtype, strict=False))
        else:
            exprs.append(pl.lit(None, dtype=dtype).alias(name))
    return frame.select(exprs)
