"""Ingest: turn a trace file into a `Trace` (events in the columnar model + metadata), through the cache.

Readers (one module per format: `kineto` with the native core `opscope._native` and the Python reference
`pyreader`, `nsys`, `rocprof`) are chosen by content in `registry`; `loader.load` runs one and writes the
cache (`cache`). The names below are imported on first use, so that listing the formats or parsing the
command line does not import pyarrow or polars.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opscope.ingest.inputs import resolve_input
    from opscope.ingest.loader import load
    from opscope.ingest.registry import READERS, Reader, register

_LAZY = {
    "load": "loader",
    "resolve_input": "inputs",
    "READERS": "registry",
    "Reader": "registry",
    "register": "registry",
}

__all__ = ["READERS", "Reader", "load", "register", "resolve_input"]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'opscope.ingest' has no attribute {name!r}")
    return getattr(importlib.import_module(f"opscope.ingest.{module}"), name)
