"""Device-like events of a category opscope does not know: a warning instead of "a CPU-only capture?".

A new accelerator (or a new profiler version) may write its device work under a category that is not in
`model.kinds.CATEGORY_KINDS`; those events are read with kind "other" and are not counted as GPU time. An event
is *device-like* when it is a complete event (ph X) of an unknown category whose process id is a device id of
the trace's `deviceProperties`, or a process on which launch flows (ac2g and kin: kind "flow", ph f) end - the
way Kineto draws device work. Each such category is reported once, with its event count and summed duration.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from opscope.model.schema import CATEGORY_KINDS, Col, Kind
from opscope.model.trace import Trace


@dataclass(frozen=True)
class UnknownDeviceCategory:
    category: str
    events: int
    total_ns: int

    @property
    def warning(self) -> str:
        return (f"{self.events:,} events of category {self.category!r} ({self.total_ns / 1e6:,.3f} ms) look like "
                "device work (on a device's process or at the end of launch flows), but opscope does not know this "
                "category yet: they are read as kind 'other' and not counted as GPU time")


def unknown_device_categories(trace: Trace) -> tuple[UnknownDeviceCategory, ...]:
    # Filter on the categorical columns first and cast only what is left: casting every row's text to strings
    # cost more than the rest of a warm `opscope summary`.
    frame = trace.lazy().select(Col.PH, Col.CAT, Col.KIND, Col.PID, Col.DUR_NS)
    flow_ends = (
        frame.filter((pl.col(Col.KIND) == Kind.FLOW) & (pl.col(Col.PH) == "f"))
        .select(pl.col(Col.PID).cast(pl.String)).unique()
    )
    device_pids = {str(d.id) for d in trace.meta.devices}
    targets = set(flow_ends.collect()[Col.PID].drop_nulls().to_list()) | device_pids
    if not targets:
        return ()
    found = (
        frame.filter((pl.col(Col.KIND) == Kind.OTHER) & (pl.col(Col.PH) == "X") & pl.col(Col.CAT).is_not_null())
        .select(pl.col(Col.CAT).cast(pl.String), pl.col(Col.PID).cast(pl.String), Col.DUR_NS)
        .filter(~pl.col(Col.CAT).is_in(list(CATEGORY_KINDS)) & pl.col(Col.PID).is_in(sorted(targets)))
        .group_by(Col.CAT).agg(pl.len().alias("events"), pl.col(Col.DUR_NS).sum().alias("total"))
        .sort(Col.CAT).collect()
    )
    return tuple(UnknownDeviceCategory(r[Col.CAT], int(r["events"]), int(r["total"] or 0))
                 for r in found.iter_rows(named=True))
