"""Composable event selections shared by the analyses (devices, streams, kinds, name patterns)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import polars as pl

from opscope.errors import UsageError
from opscope.model.schema import Col


def by_devices(frame: pl.LazyFrame, devices: Sequence[int] | None) -> pl.LazyFrame:
    return frame if not devices else frame.filter(pl.col(Col.DEVICE).is_in(list(devices)))


def by_streams(frame: pl.LazyFrame, streams: Sequence[int] | None) -> pl.LazyFrame:
    return frame if not streams else frame.filter(pl.col(Col.STREAM).is_in(list(streams)))


def by_kinds(frame: pl.LazyFrame, kinds: Sequence[str]) -> pl.LazyFrame:
    return frame.filter(pl.col(Col.KIND).cast(pl.String).is_in(list(kinds)))


def by_name(frame: pl.LazyFrame, pattern: str | None) -> pl.LazyFrame:
    if not pattern:
        return frame
    try:
        re.compile(pattern)
    except re.error as exc:
        raise UsageError(f"--filter: not a valid regular expression: {pattern!r} ({exc})") from None
    return frame.filter(pl.col(Col.NAME).cast(pl.String).str.contains(pattern))
