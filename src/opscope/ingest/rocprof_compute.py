"""rocprof-compute (omniperf's successor) analysis databases: `rocprof-compute analyze --output-format db`.

One SQLite file per analysis: `compute_kernel` names the kernels, `compute_dispatch` holds each dispatch with
its GPU and start / end (ns), `compute_metric_definition` every metric of the analysis (name, id such as
`2.1.17`, section, unit, description) and `compute_kernel_metric_value` their values per kernel (`Avg`, `Min`,
`Max`, `Pct of Peak`, `Value`, ...). `compute_kernel_roofline_data` holds each kernel's performance (GFLOP/s) and
arithmetic intensity at L1, L2 and HBM (FLOP per byte); `compute_workload` the system information (the GPU) and
the empirical roofs of rocprof-compute's own benchmark (`HBMBw` GB/s, `FP32Flops` GFLOP/s, ...).

Two readers share these tables:
- the timeline (`read_batches`): each dispatch a kernel on its GPU, one stream (the database records none),
  correlation = the dispatch id; the GPU from the system information; the roofline points and roofs in the
  trace's metadata (`efficiency` shows them). rocprof-compute replays each kernel once per counter pass and
  serialises them, so the dispatch times are real but the gaps between them are the profiler's: said once.
- the metrics (`read_metrics`): the same file as an `NcuMetrics`, so `opscope ncu DB` gives the per-kernel table
  (`analysis/kernels/ncu_report.py`): one launch per dispatch with its duration, the fields that have an AMD
  counterpart of the same meaning (occupancy, cache hit rates, matrix-core utilisation, registers, LDS, launch
  size), and every metric of the analysis with its unit and definition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from opscope.errors import InputError
from opscope.ingest import columns as C
from opscope.ingest.rocprof import kernel_name, sysinfo_devices
from opscope.ingest.source import is_gzip
from opscope.ingest.sqlite import NULL_INT, SqliteTrace, json_object, nullable
from opscope.model.meta import TraceMeta
from opscope.model.ncu import FIELDS, ID, KERNEL, LAUNCH_SCHEMA, VALUE_SCHEMA, NcuMetrics
from opscope.model.schema import Col, Kind

KERNELS, DISPATCHES, WORKLOAD, METADATA = (
    "compute_kernel",
    "compute_dispatch",
    "compute_workload",
    "compute_metadata",
)
DEFINITIONS, VALUES, ROOFLINE = (
    "compute_metric_definition",
    "compute_kernel_metric_value",
    "compute_kernel_roofline_data",
)
REQUIRED = (KERNELS, DISPATCHES)
REPLAYED = (
    "a rocprof-compute analysis: each kernel was replayed once per counter pass and the dispatches serialised, so "
    "their durations are real but the gaps between them are the profiler's, not the application's (no idle, "
    "launch or critical-path figure of this trace describes the program)"
)
# NcuMetrics fields with an AMD counterpart of the same meaning: field -> (metric id, value name, scale).
# Left empty: SM and memory throughput (ncu's "percent of the busiest unit" has no single AMD metric),
# theoretical occupancy and the block limits, DRAM / L2 / L1 bytes, waves.
FIELD_METRICS: dict[str, tuple[str, str, float]] = {
    "achieved_occupancy_pct": ("2.1.17", "Pct of Peak", 1.0),  # Wavefront Occupancy, percent of the peak
    "l1_hit_pct": ("2.1.20", "Avg", 1.0),  # vL1D Cache Hit Rate
    "l2_hit_pct": ("2.1.22", "Avg", 1.0),  # L2 Cache Hit Rate
    "tensor_pipe_pct": ("2.1.12", "Avg", 1.0),  # MFMA Utilization
    "block_size": ("7.1.1", "Avg", 1.0),  # Workgroup Size (work-items)
    "static_shared_mem_bytes": ("7.1.8", "Avg", 1.0),  # LDS Allocation (bytes per workgroup)
}
# rocprof-compute units -> (the base unit, its factor)
UNITS: dict[str, tuple[str, float]] = {
    "Gflop/s": ("flop/s", 1e9),
    "Giop/s": ("op/s", 1e9),
    "Gb/s": ("byte/s", 1e9),  # rocprof-compute's "Gb/s" is gigabytes per second
    "Percent": ("%", 1.0),
    "Nanoseconds": ("ns", 1.0),
    "Bytes": ("byte", 1.0),
}


def sniff(head: bytes, path: Path) -> bool:
    from opscope.ingest.registry import SQLITE_MAGIC, sqlite_tables

    return head.startswith(SQLITE_MAGIC) and set(REQUIRED) <= sqlite_tables(path)


def _open(path: Path, display: str) -> SqliteTrace:
    if is_gzip(path):
        raise InputError(f"{display}: a compressed SQLite file; decompress it first (gunzip)")
    db = SqliteTrace(path, display, own_views=True)  # its views: conveniences over its tables
    missing = [t for t in REQUIRED if t not in db.tables]
    if missing:
        db.close()
        raise InputError(
            f"{display}: an SQLite database, but not a rocprof-compute analysis (no {', '.join(missing)} table)"
        )
    return db


@dataclass(frozen=True)
class _Workload:
    sys_info: dict[str, Any]
    roofs: dict[str, float]
    data_types: tuple[str, ...]
    name: str | None


def _workload(db: SqliteTrace) -> _Workload:
    if WORKLOAD not in db.tables:
        return _Workload({}, {}, (), None)
    have = db.columns(WORKLOAD)
    wanted = ("name", "sys_info_extdata", "roofline_bench_extdata", "profiling_config_extdata")
    select = ", ".join(c if c in have else "NULL" for c in wanted)
    rows = db.rows(f"SELECT {select} FROM {WORKLOAD} ORDER BY workload_id LIMIT 1")
    if not rows:
        return _Workload({}, {}, (), None)
    name, sys_info, bench, config = rows[0]
    roofs = {
        str(k): float(v)
        for k, v in json_object(bench).items()
        if isinstance(v, int | float) and not isinstance(v, bool) and np.isfinite(v)
    }
    types = json_object(config).get("roofline_data_type")
    data_types = tuple(str(t) for t in types) if isinstance(types, list) else ()
    return _Workload(json_object(sys_info), roofs, data_types, str(name) if name is not None else None)


def _kernel_names(db: SqliteTrace) -> dict[int, str]:
    return {
        int(k): kernel_name(str(n or ""))
        for k, n in db.rows(f"SELECT kernel_uuid, kernel_name FROM {KERNELS}")
        if isinstance(k, int) and not isinstance(k, bool)
    }


def _roofline(db: SqliteTrace, names: dict[int, str]) -> list[dict[str, Any]]:
    """Each kernel's recorded roofline point: GFLOP/s and FLOP per byte at L1, L2, HBM (LDS where recorded)."""
    if ROOFLINE not in db.tables:
        return []
    have = db.columns(ROOFLINE)
    levels = [c for c in ("l1_cache_data", "l2_cache_data", "hbm_cache_data", "lds_cache_data") if c in have]
    if "kernel_uuid" not in have or "total_flops" not in have:
        return []
    out = []
    for row in db.rows(f"SELECT kernel_uuid, total_flops, {', '.join(levels) or 'NULL'} FROM {ROOFLINE}"):
        kernel, gflops, *intensity = row
        if kernel not in names:
            continue
        point: dict[str, Any] = {"kernel": names[kernel], "gflops": _finite(gflops)}
        for level, value in zip(levels, intensity, strict=False):
            point["ai_" + level.removesuffix("_cache_data")] = _finite(value)
        out.append(point)
    return out


def _finite(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and np.isfinite(value):
        return float(value)
    return None


def _versions(db: SqliteTrace) -> dict[str, str]:
    if METADATA not in db.tables:
        return {}
    have = db.columns(METADATA)
    found = {}
    for column in ("compute_version", "schema_version"):
        if column in have:
            rows = db.rows(f"SELECT {column} FROM {METADATA} LIMIT 1")
            if rows and rows[0][0] is not None:
                found[f"rocprof_compute_{column.removeprefix('compute_')}"] = str(rows[0][0])
    return found


def read_batches(path: Path, display: str) -> tuple[Iterator[pa.RecordBatch], Callable[[], TraceMeta]]:
    """The dispatches as kernels; returns the batch iterator and a finisher that builds `TraceMeta`."""
    db = _open(path, display)
    names = _kernel_names(db)
    gpus: set[int] = set()

    def batches() -> Iterator[pa.RecordBatch]:
        sql = (
            f"SELECT ifnull(start_timestamp, {NULL_INT}), ifnull(end_timestamp - start_timestamp, {NULL_INT}), "
            f"ifnull(gpu_id, {NULL_INT}), ifnull(dispatch_id, {NULL_INT}), ifnull(kernel_uuid, {NULL_INT}) "
            f"FROM {DISPATCHES}"
        )
        for batch in db.batches(sql, ["start", "dur", "gpu", "dispatch", "kernel"]):
            n = batch.num_rows
            gpu = batch.column("gpu").to_numpy()
            known = gpu != NULL_INT
            gpus.update(int(g) for g in np.unique(gpu[known]).tolist())
            yield C.record_batch(
                n,
                {
                    Col.PH: C.const_text("X", n),
                    Col.CAT: C.const_text("kernel", n),
                    Col.KIND: C.kinds(Kind.KERNEL, n),
                    Col.NAME: C.text_by_code(batch.column("kernel").to_numpy(), names),
                    Col.PID: C.text_of_ints(gpu, known),
                    Col.TID: C.const_text("0", n),
                    Col.TS_NS: nullable(batch.column("start")),
                    Col.DUR_NS: nullable(batch.column("dur")),
                    Col.DEVICE: C.int32_where(gpu, known),
                    Col.STREAM: pa.array(np.zeros(n, dtype=np.int64)),
                    Col.CORRELATION: nullable(batch.column("dispatch")),
                },
            )

    def finish() -> TraceMeta:
        try:
            work = _workload(db)
            devices = sysinfo_devices(work.sys_info, gpus) if work.sys_info else {}
            extra: dict[str, Any] = {**_versions(db), "replayed_dispatches": True}
            if work.name:
                extra["rocprof_compute_workload"] = work.name
            points = _roofline(db, names)
            if points:
                extra["roofline"] = points
                extra["roofline_peaks"] = work.roofs
                extra["roofline_data_types"] = list(work.data_types)
            return TraceMeta(
                path=str(path),
                format="rocprof-compute",
                devices=tuple(devices[g] for g in sorted(devices)),
                extra=extra,
                warnings=(REPLAYED, *db.warnings()),
            )
        finally:
            db.close()

    return batches(), finish


# -- the metrics, as `opscope ncu` reads them ----------------------------------------------------------------


def _metric_label(metric_id: str, section: str, name: str, value_name: str | None) -> str:
    """ "2.1.17 System Speed-of-Light: Wavefront Occupancy": the metric id keeps labels distinct (a section's name
    repeats across tables, and per-channel metrics are named by their channel); the value's kind in brackets
    unless it is the metric's own value (`Avg`, `Value`)."""
    label = f"{metric_id} {section}: {name}".strip()
    return label if value_name in (None, "", "Avg", "Value") else f"{label} ({value_name})"


def read_metrics(path: Path, display: str) -> NcuMetrics:
    """A rocprof-compute database as per-launch metrics: one launch per dispatch (its duration from the
    dispatch), the kernel's metrics (rocprof-compute keeps them per kernel) on each of its launches."""
    db = _open(path, display)
    try:
        names = _kernel_names(db)
        dispatches = db.rows(
            f"SELECT dispatch_id, kernel_uuid, gpu_id, end_timestamp - start_timestamp FROM {DISPATCHES} "
            "ORDER BY dispatch_id"
        )
        if not dispatches:
            raise InputError(f"{display}: a rocprof-compute analysis with no dispatches")
        definitions: dict[int, tuple[str, str, str, str, str]] = {}
        if DEFINITIONS in db.tables:
            have = db.columns(DEFINITIONS)
            section = "ifnull(sub_table_name, table_name)" if "sub_table_name" in have else "table_name"
            for uuid, metric_id, name, table, unit, description in db.rows(
                f"SELECT metric_uuid, metric_id, name, {section}, unit, description FROM {DEFINITIONS}"
            ):
                if isinstance(uuid, int) and not isinstance(uuid, bool):
                    definitions[uuid] = (
                        str(metric_id or ""),
                        str(name or ""),
                        str(table or ""),
                        str(unit or ""),
                        str(description or ""),
                    )
        per_kernel: dict[int, list[tuple[str, str, float]]] = {}
        raw: dict[int, dict[tuple[str, str], float]] = {}  # kernel -> (metric id, value name) -> value
        if VALUES in db.tables:
            for uuid, kernel, value_name, value in db.rows(
                f"SELECT metric_uuid, kernel_uuid, value_name, value FROM {VALUES}"
            ):
                number = _finite(value)
                definition = definitions.get(uuid)
                if number is None or definition is None or kernel not in names:
                    continue
                metric_id, name, table, unit, _ = definition
                base, factor = UNITS.get(unit, (unit, 1.0))
                if value_name == "Pct of Peak":
                    base, factor = "%", 1.0
                per_kernel.setdefault(kernel, []).append(
                    (_metric_label(metric_id, table, name, value_name), base, number * factor)
                )
                raw.setdefault(kernel, {})[(metric_id, str(value_name))] = number
        launches: list[dict[str, Any]] = []
        values: list[tuple[int, str, str, float]] = []
        for dispatch, kernel, gpu, duration in dispatches:
            if not isinstance(dispatch, int) or kernel not in names:
                continue
            row: dict[str, Any] = {f: None for f in FIELDS}
            row.update(_fields(raw.get(kernel, {})))
            row.update(
                {
                    ID: dispatch,
                    KERNEL: names[kernel],
                    "device": gpu if isinstance(gpu, int) and abs(gpu) < 2**31 else None,
                    "stream": None,
                    "block": None,
                    "grid": None,
                    "duration_ns": float(duration) if isinstance(duration, int) and duration >= 0 else None,
                }
            )
            launches.append(row)
            values.extend(
                (dispatch, label, unit, number) for label, unit, number in per_kernel.get(kernel, [])
            )
        work = _workload(db)
        device = str(work.sys_info.get("gpu_model") or "").strip() or None
        described = {
            _metric_label(metric_id, table, name, None): (UNITS.get(unit, (unit, 1.0))[0], description)
            for metric_id, name, table, unit, description in definitions.values()
        }
        return NcuMetrics(
            path=str(path),
            layout="rocprof-compute",
            launches=pl.DataFrame(launches, schema=LAUNCH_SCHEMA, orient="row")
            if launches
            else pl.DataFrame(schema=LAUNCH_SCHEMA),
            values=pl.DataFrame(values, schema=list(VALUE_SCHEMA.items()), orient="row"),
            device=device,
            warnings=(REPLAYED, *db.warnings()),
            definitions=described,
        )
    finally:
        db.close()


def _fields(raw: dict[tuple[str, str], float]) -> dict[str, float]:
    """The NcuMetrics fields a kernel's metrics give: those of `FIELD_METRICS`, registers (VGPRs + AGPRs, as
    the rocprof JSON reader counts them) and the grid in workgroups (rocprof-compute counts work-items)."""
    out = {f: raw[(m, vn)] * scale for f, (m, vn, scale) in FIELD_METRICS.items() if (m, vn) in raw}
    if ("7.1.5", "Avg") in raw:
        out["registers_per_thread"] = raw[("7.1.5", "Avg")] + raw.get(("7.1.6", "Avg"), 0.0)
    items, group = raw.get(("7.1.0", "Avg")), raw.get(("7.1.1", "Avg"))
    if items is not None and group:
        out["grid_size"] = float(np.ceil(items / group))
    return out
