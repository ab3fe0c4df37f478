"""Device work of a category opscope does not know yet (a new accelerator, a new profiler version).

Such events are read with kind "other" by the Kineto readers (their category is not in
`model.kinds.CATEGORY_KINDS`). An event is *device-like* when it is a complete event (ph X) of an unknown
category whose process id is a device id of the trace's `deviceProperties`, or a process on which launch flows
(ac2g and kin: kind "flow", ph f) end - the way Kineto draws device work. While the batches stream past, this
module counts (category, pid) pairs and the flow ends; at the end the categories found on device-like processes
are recorded in `TraceMeta.device_like`, and `Trace.lazy()` reads those events as kernels (device from pid,
stream from tid), so that a new accelerator's work counts as device time instead of "a CPU-only capture?".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

import numpy as np
import polars as pl
import pyarrow as pa

from opscope.ingest import columns as C
from opscope.model.meta import DeviceInfo, DeviceLike
from opscope.model.schema import CATEGORY_KINDS, KIND_CODES, KINDS, Col, Kind

_OTHER, _FLOW = KIND_CODES[Kind.OTHER], KIND_CODES[Kind.FLOW]


def _code_of(column: pa.DictionaryArray, value: str) -> int:
    values = column.dictionary.to_pylist()
    return values.index(value) if value in values else -2


class DeviceLikeScan:
    """Watches record batches go by (`observe`) and names the device-like unknown categories (`result`)."""

    def __init__(self) -> None:
        self._events: Counter[tuple[str, str]] = Counter()
        self._total: Counter[tuple[str, str]] = Counter()
        self._flow_ends: set[str] = set()

    def observe(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            self._count(batch)
            yield batch

    def _count(self, batch: pa.RecordBatch) -> None:
        """Only the rows that can matter are looked at: kind "other" with ph X, and flow ends (dictionary codes
        compared in numpy; a 4.4 M-event trace costs a few tens of ms)."""
        names = batch.schema.names
        if not batch.num_rows or not all(
            c in names for c in (Col.PH, Col.CAT, Col.KIND, Col.PID, Col.DUR_NS)
        ):
            return
        kind, ph = batch.column(Col.KIND), batch.column(Col.PH)
        if kind.dictionary.to_pylist() != list(
            KINDS
        ):  # not the readers' fixed kind dictionary: look at all rows
            rows = np.arange(batch.num_rows)
            self._count_rows(batch, rows, rows)
            return
        kinds, phs = C.codes(kind.indices), C.codes(ph.indices)
        other = np.flatnonzero((kinds == _OTHER) & (phs == _code_of(ph, "X")))
        flow_ends = np.flatnonzero((kinds == _FLOW) & (phs == _code_of(ph, "f")))
        if flow_ends.size:  # the pids where flows end: their distinct dictionary codes, no table built
            pid = batch.column(Col.PID)
            for code in np.unique(C.codes(pid.indices)[flow_ends]):
                value = pid.dictionary[int(code)].as_py() if code >= 0 else None
                if value is not None:
                    self._flow_ends.add(str(value))
        if other.size:
            self._count_rows(batch, other, np.empty(0, dtype=np.int64))

    def _count_rows(self, batch: pa.RecordBatch, other: np.ndarray, flow_ends: np.ndarray) -> None:
        def take(rows: np.ndarray) -> pl.DataFrame:
            frame = pl.from_arrow(
                batch.select([Col.PH, Col.CAT, Col.KIND, Col.PID, Col.DUR_NS]).take(C.row_indices(rows))
            )
            assert isinstance(frame, pl.DataFrame)
            return frame

        if other.size:
            grouped = (
                take(other)
                .filter(
                    (pl.col(Col.KIND) == Kind.OTHER) & (pl.col(Col.PH) == "X") & pl.col(Col.CAT).is_not_null()
                )
                .select(pl.col(Col.CAT).cast(pl.String), pl.col(Col.PID).cast(pl.String), Col.DUR_NS)
                .filter(~pl.col(Col.CAT).is_in(list(CATEGORY_KINDS)))
                .group_by(Col.CAT, Col.PID)
                .agg(pl.len().alias("n"), pl.col(Col.DUR_NS).sum().alias("t"))
            )
            for cat, pid, n, t in grouped.iter_rows():
                self._events[(cat, pid)] += int(n)
                self._total[(cat, pid)] += int(t or 0)
        if flow_ends.size:
            flows = take(flow_ends).filter((pl.col(Col.KIND) == Kind.FLOW) & (pl.col(Col.PH) == "f"))
            self._flow_ends.update(flows[Col.PID].cast(pl.String).drop_nulls().unique().to_list())

    def result(self, devices: tuple[DeviceInfo, ...]) -> tuple[DeviceLike, ...]:
        targets = self._flow_ends | {str(d.id) for d in devices}
        found: dict[str, list[tuple[str, int, int]]] = {}
        for (cat, pid), n in self._events.items():
            if pid is not None and pid in targets:
                found.setdefault(cat, []).append((pid, n, self._total[(cat, pid)]))
        return tuple(
            DeviceLike(
                category=cat,
                pids=tuple(sorted(p for p, _, _ in rows)),
                events=sum(n for _, n, _ in rows),
                total_ns=sum(t for _, _, t in rows),
            )
            for cat, rows in sorted(found.items())
        )
