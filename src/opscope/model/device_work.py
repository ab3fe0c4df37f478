"""Reading device work of an unknown category as kernels (`TraceMeta.device_like`, found by
`ingest/device_like.py`): the transformation `Trace.lazy()` applies."""

from __future__ import annotations

import polars as pl

from opscope.model.meta import DeviceLike
from opscope.model.schema import Col, Kind


def as_device_work(frame: pl.LazyFrame, found: tuple[DeviceLike, ...]) -> pl.LazyFrame:
    """`frame` with the device-like events of `found` read as kernels: kind "kernel", device from the pid and
    stream from the tid where those are integers and the columns are empty."""
    if not found:
        return frame
    mask = pl.lit(False)
    for item in found:
        mask = mask | ((pl.col(Col.CAT) == item.category) & pl.col(Col.PID).is_in(list(item.pids)))
    mask = mask & (pl.col(Col.KIND) == Kind.OTHER) & (pl.col(Col.PH) == "X")
    return frame.with_columns(
        pl.when(mask)
        .then(pl.lit(Kind.KERNEL))
        .otherwise(pl.col(Col.KIND).cast(pl.String))
        .cast(pl.Categorical)
        .alias(Col.KIND),
        pl.when(mask & pl.col(Col.DEVICE).is_null())
        .then(pl.col(Col.PID).cast(pl.String).cast(pl.Int32, strict=False))
        .otherwise(pl.col(Col.DEVICE))
        .alias(Col.DEVICE),
        pl.when(mask & pl.col(Col.STREAM).is_null())
        .then(pl.col(Col.TID).cast(pl.String).cast(pl.Int64, strict=False))
        .otherwise(pl.col(Col.STREAM))
        .alias(Col.STREAM),
    )
