"""Nsight Compute metrics as the event model carries them: one row per profiled launch. `ingest/ncu.py` reads an
ncu CSV export into it; `analysis/kernels/metrics.py` joins it to a trace's kernels. Neither needs the other."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl


@dataclass(frozen=True)
class NcuMetrics:
    """One row per profiled launch: `id`, `kernel_name`, `device`, `stream`, `block`, `grid` and the fields of
    `ingest.ncu.FIELDS` (times in ns, sizes in bytes)."""

    path: str
    layout: str  # "raw" or "details"
    launches: pl.DataFrame
