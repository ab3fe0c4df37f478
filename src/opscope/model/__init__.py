"""The event model: one columnar table per trace plus its metadata."""

from __future__ import annotations

from opscope.model.meta import DeviceInfo, TraceMeta
from opscope.model.schema import COLUMNS, GPU_KINDS, Col, Kind
from opscope.model.trace import Trace

__all__ = ["COLUMNS", "GPU_KINDS", "Col", "DeviceInfo", "Kind", "Trace", "TraceMeta"]
