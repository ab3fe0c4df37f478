"""The event model: the table's schema (`schema`, with plain names in `kinds`), trace metadata (`meta`) and
the `Trace` (`trace`). Names are imported on first use, so that importing `opscope.model.kinds` does not
import polars."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opscope.model.kinds import GPU_KINDS, Col, Kind
    from opscope.model.meta import DeviceInfo, TraceMeta
    from opscope.model.schema import COLUMNS
    from opscope.model.trace import Trace

_LAZY = {
    "DeviceInfo": "meta",
    "TraceMeta": "meta",
    "COLUMNS": "schema",
    "GPU_KINDS": "kinds",
    "Col": "kinds",
    "Kind": "kinds",
    "Trace": "trace",
}

__all__ = ["COLUMNS", "GPU_KINDS", "Col", "DeviceInfo", "Kind", "Trace", "TraceMeta"]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'opscope.model' has no attribute {name!r}")
    return getattr(importlib.import_module(f"opscope.model.{module}"), name)
