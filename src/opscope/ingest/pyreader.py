"""The reference Kineto reader, in Python: `OPSCOPE_READER=python` selects it instead of the native one.

It has the native reader's interface (iterate for record batches, then `finish()` for the report, as a dict
with the same keys) and its rules; it exists to define them in readable code and to check the native
reader against (`tests/test_native_reader.py`), not for speed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from opscope.ingest.pydecode import Decoder
from opscope.ingest.pyscan import Scanner
from opscope.ingest.source import ChunkReader

BATCH_BYTES = 4 << 20


class Reader:
    def __init__(self, path: str | Path, batch_bytes: int | None = None) -> None:
        self._source = ChunkReader(Path(path), report_progress=False)  # kineto.read_batches reports
        self._scanner = Scanner(batch_bytes or BATCH_BYTES)
        self._decoder = Decoder()
        self._iter = self._batches()
        self._done = False

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return self._iter

    def __next__(self) -> pa.RecordBatch:
        return next(self._iter)

    def _batches(self) -> Iterator[pa.RecordBatch]:
        for chunk in self._source:
            self._scanner.feed(chunk)
            for batch in self._scanner.take_batches():
                yield self._decoder.decode(batch.elements)
            if self._scanner.done():
                break
        self._scanner.finish()
        for batch in self._scanner.take_batches():
            yield self._decoder.decode(batch.elements)
        self._done = True

    def position(self) -> int:
        return self._source.compressed_position() or 0

    def finish(self) -> dict[str, Any]:
        for _ in self._iter:
            pass
        report = dataclasses.asdict(self._scanner.outline)
        report["members"] = [(bytes(k), bytes(v)) for k, v in self._scanner.outline.members]
        report["gzip"] = self._source.gzip
        report["gzip_problem"] = self._source.problem
        report["stats"] = dict(self._decoder.stats)
        return report
