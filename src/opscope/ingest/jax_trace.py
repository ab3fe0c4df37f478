"""JAX's `trace.json.gz` (the XSpace converted to Chrome-trace JSON by `jax.profiler.trace`) through the Kineto
reader: its events have no `cat`, so their kind comes from JAX's process and thread names.

A trace is a JAX trace when a `process_name` metadata event names a TSL plane (`/host:CPU`, `/device:GPU:0`, ...).
Then every complete (`X`) event without a category gets the kind the xplane reader gives the same event
(ingest/xplane.py): on a `/device:<TYPE>:N` process, a thread named `Stream #S(...)` holds kernels / memcpys /
memsets (device N, stream S) and other threads GPU annotations; on other processes an event with a
correlation id (`correlation_id` arg) is a runtime call, one with a `step_num` a step marker (user annotation),
`$file:line function` a Python frame, anything else a CPU op. The launch calls that name an HLO op get the same
derived HLO op / module scopes as in the xplane reader. JAX writes the metadata events first; an event before
the name of its process or thread keeps the kind `other`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from opscope.ingest import columns as C
from opscope.ingest.hlo_scopes import hlo_scopes
from opscope.ingest.xplane import device_kind, host_kind
from opscope.model.schema import KIND_CODES, Col, Kind

_PLANE = re.compile(r"^/(host|device):")
_DEVICE = re.compile(r"^/device:[A-Za-z_]+:(\d+)")
_STREAM = re.compile(r"^Stream #(\d+)")
_OTHER = KIND_CODES[Kind.OTHER]


class JaxConventions:
    """Applied to each record batch of a Kineto read, in order; `finish()` gives the derived HLO scopes."""

    def __init__(self) -> None:
        self.process: dict[str | None, str] = {}
        self.thread: dict[tuple[str | None, str | None], str] = {}
        self.is_jax = False
        self._launches: list[dict[str, Any]] = []
        self.beyond = 0  # device / stream numbers in process and thread names too large for their column

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        cols = {name: batch.column(i) for i, name in enumerate(batch.schema.names)}
        kinds = C.codes(cols[Col.KIND].indices)
        meta = np.flatnonzero(kinds == KIND_CODES[Kind.METADATA])
        if meta.size:
            self._learn(cols, meta)
        if not self.is_jax:
            return batch
        ph = cols[Col.PH].to_pylist()
        cat = cols[Col.CAT]
        todo = [i for i in np.flatnonzero(kinds == _OTHER).tolist() if ph[i] == "X" and not cat[i].is_valid]
        if not todo:
            return batch
        rows = np.asarray(todo, dtype=np.int64)
        pid, tid, name = (C.values_at(cols[c], rows) for c in (Col.PID, Col.TID, Col.NAME))
        corr, step = (C.values_at(cols[c], rows) for c in (Col.CORRELATION, Col.STEP_NUM))
        device = cols[Col.DEVICE].to_pylist()
        stream = cols[Col.STREAM].to_pylist()
        new_kinds = kinds.copy()
        for j, i in enumerate(todo):
            process = self.process.get(pid[j])
            if process is None:
                continue
            match = _DEVICE.match(process)
            if match:
                thread = self.thread.get((pid[j], tid[j]), "")
                s = _STREAM.match(thread)
                kind = device_kind(name[j] or "", {}) if s else Kind.GPU_ANNOTATION
                device[i] = self._fitting(match.group(1), 31)
                if s:
                    stream[i] = self._fitting(s.group(1), 63)
            else:
                kind = host_kind(name[j] or "", {"correlation_id": corr[j], "step_num": step[j]})
            new_kinds[i] = KIND_CODES[kind]
        cols[Col.KIND] = C.kinds_from_codes(new_kinds)
        cols[Col.DEVICE] = pa.array(device, type=pa.int32())
        cols[Col.STREAM] = pa.array(stream, type=pa.int64())
        out = pa.RecordBatch.from_arrays(list(cols.values()), schema=batch.schema)
        self._keep_launches(out, np.flatnonzero(new_kinds == KIND_CODES[Kind.RUNTIME]))
        return out

    def _fitting(self, digits: str, bits: int) -> int | None:
        """The number, or None (counted) when a hostile name makes it too large for its column: it rejected the
        whole trace (`ArrowInvalid: Value ... too large`, issue 32)."""
        value = int(digits) if len(digits) <= 20 else 1 << 64
        if value < 1 << bits:
            return value
        self.beyond += 1
        return None

    def warnings(self, name: str) -> tuple[str, ...]:
        if not self.beyond:
            return ()
        return (
            f"{name}: {self.beyond:,} device or stream numbers in process / thread names beyond their "
            "column's range were left empty",
        )

    def _learn(self, cols: dict[str, Any], rows: np.ndarray) -> None:
        for name, pid, tid, label in zip(
            *(C.values_at(cols[c], rows) for c in (Col.NAME, Col.PID, Col.TID, Col.LABEL))
        ):
            if label is None:
                continue
            if name == "process_name":
                self.process[pid] = label
                self.is_jax = self.is_jax or _PLANE.match(label) is not None
            elif name == "thread_name":
                self.thread[(pid, tid)] = label

    def _keep_launches(self, batch: pa.RecordBatch, rows: np.ndarray) -> None:
        if not rows.size:
            return
        part = batch.take(C.row_indices(rows))
        fields = (
            Col.PID,
            Col.TID,
            Col.TS_NS,
            Col.DUR_NS,
            Col.HLO_OP,
            Col.HLO_MODULE,
            Col.PROGRAM_ID,
            Col.NAME_STACK,
        )
        for values in zip(*(part.column(f).to_pylist() for f in fields)):
            row = dict(zip(fields, values))
            if row[Col.TS_NS] is not None and (
                row[Col.HLO_OP] is not None or row[Col.HLO_MODULE] is not None
            ):
                self._launches.append(row)

    def finish(self) -> Iterator[pa.RecordBatch]:
        """The derived HLO op / module scopes of the launches seen (none for other traces)."""
        scopes = hlo_scopes(self._launches)
        if scopes:
            from opscope.ingest.xplane import scope_batch

            yield scope_batch(scopes)
