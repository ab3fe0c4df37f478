"""Device-like events of a category opscope does not know: read as device work, with a warning.

A new accelerator (or a new profiler version) may write its device work under a category that is not in
`model.kinds.CATEGORY_KINDS`. An event is *device-like* when it is a complete event (ph X) of an unknown
category whose process id is a device id of the trace's `deviceProperties`, or a process on which launch flows
(ac2g and kin: kind "flow", ph f) end - the way Kineto draws device work. The reader finds them while it reads
(`ingest/device_like.py`, recorded in `TraceMeta.device_like`) and `Trace.lazy()` reads them as kernels; each
such category is reported once, with its event count and summed duration, so that nobody mistakes them for
a known kind of work.
"""

from __future__ import annotations

from dataclasses import dataclass

from opscope.model.trace import Trace


@dataclass(frozen=True)
class UnknownDeviceCategory:
    category: str
    events: int
    total_ns: int

    @property
    def warning(self) -> str:
        return (
            f"{self.events:,} events of category {self.category!r} ({self.total_ns / 1e6:,.3f} ms) look like "
            "device work (on a device's process or at the end of launch flows) of a category opscope does not "
            "know yet: they are read as kernels (device time), named as the trace names them"
        )


def unknown_device_categories(trace: Trace) -> tuple[UnknownDeviceCategory, ...]:
    return tuple(UnknownDeviceCategory(d.category, d.events, d.total_ns) for d in trace.meta.device_like)
