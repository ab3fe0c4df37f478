"""Nsight Compute CSV reader: per-launch metrics from `ncu --csv --page raw` or `--page details`.

`--page raw` has one row per kernel launch, a metric per column (raw metric names such as
`sm__throughput.avg.pct_of_peak_sustained_elapsed`) and the units in the second row. `--page details` has one
row per (launch, section, metric) with the display names shown in the GUI ("Compute (SM) Throughput"). Both
become one table, one row per launch, of the fields in `FIELDS` with times in ns and sizes in bytes. Lines the
profiled program printed before the CSV header (and ncu's own "==PROF==" lines) are skipped; "n/a" values
become nulls.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from opscope.errors import InputError
from opscope.model.ncu import NcuMetrics

# field -> (raw-page metric names, details-page (section or "", metric name) pairs); first present wins.
FIELDS: dict[str, tuple[tuple[str, ...], tuple[tuple[str, str], ...]]] = {
    "duration_ns": (
        ("gpu__time_duration.sum", "gpu__time_duration.avg"),
        (("GPU Speed Of Light Throughput", "Duration"), ("", "Duration")),
    ),
    "sm_throughput_pct": (
        ("sm__throughput.avg.pct_of_peak_sustained_elapsed",),
        (("", "Compute (SM) Throughput"), ("", "SM [%]")),
    ),
    "memory_throughput_pct": (
        ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",),
        (("GPU Speed Of Light Throughput", "Memory Throughput"), ("", "Memory [%]")),
    ),
    "dram_throughput_pct": (
        (
            "dram__throughput.avg.pct_of_peak_sustained_elapsed",
            "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
        ),
        (("", "DRAM Throughput"),),
    ),
    "achieved_occupancy_pct": (
        ("sm__warps_active.avg.pct_of_peak_sustained_active",),
        (("", "Achieved Occupancy"),),
    ),
    "theoretical_occupancy_pct": (
        ("sm__maximum_warps_per_active_cycle_pct",),
        (("", "Theoretical Occupancy"),),
    ),
    "registers_per_thread": (("launch__registers_per_thread",), (("", "Registers Per Thread"),)),
    "l1_hit_rate_pct": (("l1tex__t_sector_hit_rate.pct",), (("", "L1/TEX Hit Rate"),)),
    "l2_hit_rate_pct": (("lts__t_sector_hit_rate.pct",), (("", "L2 Hit Rate"),)),
    "block_size": (("launch__block_size",), (("Launch Statistics", "Block Size"),)),
    "grid_size": (("launch__grid_size",), (("Launch Statistics", "Grid Size"),)),
    "static_shared_memory": (
        ("launch__shared_mem_per_block_static",),
        (("", "Static Shared Memory Per Block"),),
    ),
    "dynamic_shared_memory": (
        ("launch__shared_mem_per_block_dynamic",),
        (("", "Dynamic Shared Memory Per Block"),),
    ),
    "block_limit_registers": (("launch__occupancy_limit_registers",), (("", "Block Limit Registers"),)),
    "block_limit_shared_memory": (("launch__occupancy_limit_shared_mem",), (("", "Block Limit Shared Mem"),)),
    "block_limit_warps": (("launch__occupancy_limit_warps",), (("", "Block Limit Warps"),)),
    "block_limit_sm": (("launch__occupancy_limit_blocks",), (("", "Block Limit SM"),)),
    "waves_per_sm": (("launch__waves_per_multiprocessor",), (("", "Waves Per SM"),)),
}
_ID_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name")
_TIME = {"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}
_SIZE = {"byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "kib": 1024, "mib": 1 << 20, "gib": 1 << 30}


def _number(text: str | None, unit: str | None, field: str) -> float | None:
    if text is None:
        return None
    value = text.strip().replace(",", "")
    if not value or value.lower() in ("n/a", "nan", "-"):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    base = (unit or "").strip().lower().split("/")[0]
    if field == "duration_ns":
        return number * _TIME.get(base, 1)
    if field.endswith("shared_memory"):
        return number * _SIZE.get(base, 1)
    return number


def _csv_rows(path: Path, display: str) -> list[list[str]]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").lstrip("\ufeff")
    except OSError as exc:
        raise InputError(f"{display}: cannot read: {exc.strerror or exc}") from None
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        raise InputError(
            f'{display}: not an Nsight Compute CSV (no \'"ID","Process ID",...\' header; '
            "export with `ncu --csv --page raw` or `--page details`)"
        )
    try:
        return list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    except csv.Error as exc:
        raise InputError(f"{display}: malformed CSV ({exc})") from None


def _dims(text: str | None) -> str | None:
    """ "(256, 1, 1)" -> "256,1,1"."""
    if not text:
        return None
    parts = re.findall(r"\d+", text)
    return ",".join(parts) if parts else None


def read_ncu_csv(path: Path, display: str | None = None) -> NcuMetrics:
    """Parse an ncu CSV export (raw or details page) into per-launch metrics."""
    display = display or str(path)
    rows = _csv_rows(path, display)
    header = rows[0]
    missing = [c for c in ("ID", "Kernel Name") if c not in header]
    if missing:
        raise InputError(f"{display}: Nsight Compute CSV without the {', '.join(missing)} column")
    col = {name: i for i, name in enumerate(header)}
    details = "Metric Name" in col and "Metric Value" in col
    records = _details(rows[1:], col) if details else _raw(rows[1:], header, col)
    if not records:
        raise InputError(f"{display}: Nsight Compute CSV with no profiled launches")
    schema = {
        "id": pl.Int64,
        "kernel_name": pl.String,
        "device": pl.Int32,
        "stream": pl.Int64,
        "block": pl.String,
        "grid": pl.String,
        **{f: pl.Float64 for f in FIELDS},
    }
    frame = pl.DataFrame(records, schema=schema).sort("id")
    return NcuMetrics(path=str(path), layout="details" if details else "raw", launches=frame)


def _identity(row: Sequence[str], col: dict[str, int]) -> dict[str, object]:
    def get(name: str) -> str | None:
        i = col.get(name)
        return row[i] if i is not None and i < len(row) else None

    def as_int(name: str) -> int | None:
        value = (get(name) or "").replace(",", "").strip()
        return int(value) if value.lstrip("-").isdigit() else None

    return {
        "id": as_int("ID"),
        "kernel_name": get("Kernel Name"),
        "device": as_int("Device"),
        "stream": as_int("Stream"),
        "block": _dims(get("Block Size")),
        "grid": _dims(get("Grid Size")),
    }


def _raw(rows: list[list[str]], header: list[str], col: dict[str, int]) -> list[dict[str, object]]:
    units: list[str] = [""] * len(header)
    body = rows
    if rows and (rows[0][col["ID"]] if col["ID"] < len(rows[0]) else "") == "":
        units, body = rows[0] + [""] * (len(header) - len(rows[0])), rows[1:]
    where = {}
    for field, (raw_names, _) in FIELDS.items():
        where[field] = next((col[n] for n in raw_names if n in col), None)
    out = []
    for row in body:
        if not row or len(row) < len(_ID_COLUMNS):
            continue
        record = _identity(row, col)
        if record["id"] is None:
            continue
        for field, i in where.items():
            record[field] = _number(
                row[i] if i is not None and i < len(row) else None, units[i] if i is not None else None, field
            )
        out.append(record)
    return out


def _details(rows: list[list[str]], col: dict[str, int]) -> list[dict[str, object]]:
    section_i, name_i = col.get("Section Name"), col["Metric Name"]
    unit_i, value_i = col.get("Metric Unit"), col["Metric Value"]
    launches: dict[int, dict[str, object]] = {}
    lookup: dict[tuple[str, str], str] = {}
    for field, (_, pairs) in FIELDS.items():
        for section, metric in pairs:
            lookup.setdefault((section, metric), field)
    for row in rows:
        if len(row) <= max(name_i, value_i):
            continue
        ident = _identity(row, col)
        launch_id = ident["id"]
        if not isinstance(launch_id, int):
            continue
        record = launches.setdefault(launch_id, {**ident, **{f: None for f in FIELDS}})
        section = row[section_i] if section_i is not None and section_i < len(row) else ""
        metric = row[name_i]
        found = lookup.get((section, metric)) or lookup.get(("", metric))
        unit = row[unit_i] if unit_i is not None and unit_i < len(row) else ""
        if found is None or (found == "memory_throughput_pct" and unit.strip() != "%"):
            continue  # e.g. "Memory Throughput" in Gbyte/second under Memory Workload Analysis
        if record.get(found) is None:
            record[found] = _number(row[value_i], unit, found)
    return list(launches.values())
