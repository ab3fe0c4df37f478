"""Nsight Compute metrics as the event model carries them: one row per profiled launch, every numeric metric of
every launch, and ncu's own rule results. `ingest/ncu.py` reads an ncu CSV export into it; `analysis/kernels/
metrics.py` joins it to a trace's kernels and `analysis/kernels/ncu_report.py` reads it on its own. Neither
needs the other.

The field names (`FIELDS`) are the columns of `NcuMetrics.launches`; which metric ids fill them is data
(opscope/data/ncu_metrics.json), checked against this list by the tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import polars as pl

# The per-launch figures, in base units: time in ns, sizes in bytes, percentages 0..100, counts as counted.
FIELDS: Final[tuple[str, ...]] = (
    "duration_ns",
    "sm_throughput_pct",
    "memory_throughput_pct",
    "dram_throughput_pct",
    "dram_bytes",
    "l2_bytes",
    "l1_bytes",
    "l1_hit_pct",
    "l2_hit_pct",
    "achieved_occupancy_pct",
    "theoretical_occupancy_pct",
    "registers_per_thread",
    "static_shared_mem_bytes",
    "dynamic_shared_mem_bytes",
    "block_size",
    "grid_size",
    "waves_per_sm",
    "block_limit_registers",
    "block_limit_shared_mem",
    "block_limit_warps",
    "block_limit_sm",
    "tensor_pipe_pct",
    "tensor_inst",
    "shared_bank_conflicts",
    "shared_wavefronts",
)
# `launches` columns besides FIELDS
ID, KERNEL, DEVICE, STREAM, BLOCK, GRID = "id", "kernel_name", "device", "stream", "block", "grid"
# `values` columns: one row per (launch, metric)
METRIC, UNIT, VALUE = "metric", "unit", "value"
# `rules` columns: one row per rule result of a launch
SECTION, RULE, RULE_TYPE, MESSAGE, SPEEDUP_TYPE, SPEEDUP = (
    "section",
    "rule",
    "type",
    "message",
    "speedup_type",
    "speedup",
)

LAUNCH_SCHEMA: Final[dict[str, pl.DataType]] = {
    ID: pl.Int64(),
    KERNEL: pl.String(),
    DEVICE: pl.Int32(),
    STREAM: pl.Int64(),
    BLOCK: pl.String(),
    GRID: pl.String(),
    **{f: pl.Float64() for f in FIELDS},
}
VALUE_SCHEMA: Final[dict[str, pl.DataType]] = {
    ID: pl.Int64(),
    METRIC: pl.String(),
    UNIT: pl.String(),
    VALUE: pl.Float64(),
}
RULE_SCHEMA: Final[dict[str, pl.DataType]] = {
    ID: pl.Int64(),
    KERNEL: pl.String(),
    SECTION: pl.String(),
    RULE: pl.String(),
    RULE_TYPE: pl.String(),
    MESSAGE: pl.String(),
    SPEEDUP_TYPE: pl.String(),
    SPEEDUP: pl.Float64(),
}


@dataclass(frozen=True)
class NcuMetrics:
    """An Nsight Compute export. `launches`: one row per profiled launch (`LAUNCH_SCHEMA`: ncu's ID, kernel name
    as exported, device, stream, block and grid as "x,y,z" text, and `FIELDS`), in ID order. `values`: every
    numeric metric of every launch (`VALUE_SCHEMA`; metric ids, or "Section: Name" for display names the
    table does not know; values in base units, `unit` the base unit). `rules`: ncu's rule results
    (`RULE_SCHEMA`; the text verbatim). `warnings`: what was skipped or could not be read."""

    path: str
    layout: (
        str  # "raw" (one row per launch) or "details" (one row per metric); "rocprof-compute" (a database)
    )
    launches: pl.DataFrame
    values: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=VALUE_SCHEMA))
    rules: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=RULE_SCHEMA))
    device: str | None = None
    warnings: tuple[str, ...] = ()
    # metric -> (its base unit, definition), where the export defines its metrics (a rocprof-compute database)
    definitions: dict[str, tuple[str, str]] = field(default_factory=dict)
