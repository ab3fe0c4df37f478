"""rocpd SQLite databases: what rocprofv3 writes by default since ROCm 7.0 (and rocprof-sys with ROCPROFSYS_USE_ROCPD).

rocprofiler-sdk's schema (its `rocpd_tables.sql`) names every table with the run's uuid as a suffix
(`rocpd_kernel_dispatch_0198f2...`) and adds views without it (`rocpd_kernel_dispatch`, `kernels`, `regions`,
...). The views are never read: several inner-join and drop rows (a dispatch without a region name, a copy
between agents the database does not describe). The base tables are, per uuid suffix (a merged database holds
several; each is one process).

Two revisions share `schema_version` 3, so the reader keys on the columns present:
- times inline (`start`, `end`) with `nid`, `pid`, `tid`, `agent_id`, `queue_id`, `stream_id` on each row;
- times in `rocpd_timestamp` (`start_id`, `end_id` -> `value`) and the rest on a `rocpd_track` row (`track_id`).

Into the event model, as Kineto names the same things on AMD:
- `rocpd_kernel_dispatch`: kernels named by their symbol's display name (`rocpd_info_kernel_symbol`), on the
  GPU's index among GPUs (the agent's `type_index`), the stream (else the queue); grid in workgroups (rocprofv3
  counts work-items), workgroup size, LDS bytes, registers = arch + accumulation VGPRs.
- `rocpd_memory_copy`: memcpys ("Memcpy HtoD", ...) on the GPU side of the copy, with their bytes.
- `rocpd_region`: HIP / HSA / RCCL API calls as runtime events on their thread (OS pid / tid from
  `rocpd_info_process` / `rocpd_info_thread`), roctx ranges (category `MARKER_*`) as annotations named by their
  message.
- links: every row's event (`rocpd_event`) carries the correlation id a launch shares with its GPU work.
- `rocpd_info_agent`: the GPUs, with their product name, arch and compute units.
Not read: samples, counters (`rocpd_pmc_event`), memory allocations, code objects.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from opscope.errors import InputError
from opscope.ingest import columns as C
from opscope.ingest.nsys import StringTable, string_names
from opscope.ingest.rocprof import copy_name, kernel_name
from opscope.ingest.source import is_gzip
from opscope.ingest.sqlite import NULL_INT, SqliteTrace, json_object, nullable
from opscope.model.meta import DeviceInfo, TraceMeta
from opscope.model.schema import KIND_CODES, Col, Kind

DISPATCH = "rocpd_kernel_dispatch"
COPY, REGION, EVENT, STRING = "rocpd_memory_copy", "rocpd_region", "rocpd_event", "rocpd_string"
SYMBOL, AGENT, TRACK, TIMESTAMP = (
    "rocpd_info_kernel_symbol",
    "rocpd_info_agent",
    "rocpd_track",
    "rocpd_timestamp",
)
PROCESS, THREAD, METADATA, CATEGORY = (
    "rocpd_info_process",
    "rocpd_info_thread",
    "rocpd_metadata",
    "rocpd_info_category",
)
_SUFFIX = re.compile(r"^rocpd_kernel_dispatch(_[0-9A-Za-z_]+)$")


def suffixes(names: set[str]) -> list[str]:
    """The uuid suffixes of the rocpd table sets in a database (one per process)."""
    return sorted(m.group(1) for n in names if (m := _SUFFIX.match(n)))


def sniff(head: bytes, path: Path) -> bool:
    from opscope.ingest.registry import SQLITE_MAGIC, sqlite_tables

    if not head.startswith(SQLITE_MAGIC):
        return False
    names = sqlite_tables(path)
    return any(f"{STRING}{s}" in names for s in suffixes(names))


@dataclass
class _Set:
    """One uuid suffix's tables: what each holds and how to reach it."""

    db: SqliteTrace
    suffix: str
    strings: StringTable
    devices: dict[int, DeviceInfo]  # agent row id -> the GPU (id = its index among GPUs)
    agent_index: dict[int, int]  # agent row id -> GPU index (GPUs only)
    scope: int = 0  # added to its correlation ids: each process numbers its own from 1 (a merged database)
    processes: dict[int, int] = field(default_factory=dict)  # process row id -> OS pid
    threads: dict[int, int] = field(default_factory=dict)  # thread row id -> OS tid

    def table(self, base: str) -> str | None:
        name = f"{base}{self.suffix}"
        return name if name in self.db.tables else None

    def has(self, base: str, column: str) -> bool:
        name = self.table(base)
        return name is not None and column in self.db.columns(name)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _rows(db: SqliteTrace, table: str | None, columns: list[str]) -> list[tuple[Any, ...]]:
    if table is None:
        return []
    have = db.columns(table)
    select = ", ".join(_quoted(c) if c in have else "NULL" for c in columns)
    return db.rows(f"SELECT {select} FROM {_quoted(table)}")


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _agents(db: SqliteTrace, table: str | None) -> tuple[dict[int, DeviceInfo], dict[int, int]]:
    columns = ["id", "type", "type_index", "logical_index", "name", "product_name", "model_name", "extdata"]
    devices: dict[int, DeviceInfo] = {}
    index: dict[int, int] = {}
    for row_id, kind, type_index, logical, name, product, model, extdata in _rows(db, table, columns):
        if _int(row_id) is None or str(kind or "").upper() != "GPU":
            continue
        gpu = _int(type_index) if _int(type_index) is not None else _int(logical)
        if gpu is None or abs(gpu) >= 2**31:
            continue
        index[int(row_id)] = gpu
        extra = json_object(extdata)
        waves, wave = _int(extra.get("max_waves_per_cu")), _int(extra.get("wave_front_size"))
        lds = _int(extra.get("lds_size_in_kb"))
        devices[int(row_id)] = DeviceInfo(
            id=gpu,
            name=str(product or model or name or f"GPU {gpu}"),
            sm_count=_int(extra.get("cu_count")),
            warp_size=wave,
            max_warps_per_sm=waves,
            max_threads_per_sm=waves * wave if waves and wave else None,
            max_threads_per_block=_int(extra.get("workgroup_max_size")) or None,
            shared_mem_per_block=lds * 1024 if lds else None,
            arch=str(name) if name else None,
        )
    return devices, index


def _open_set(db: SqliteTrace, suffix: str) -> _Set:
    s = _Set(db, suffix, StringTable(np.empty(0, np.int64), pa.array([], pa.string())), {}, {})
    s.strings = StringTable.of(_rows(db, s.table(STRING), ["id", "string"]))
    s.devices, s.agent_index = _agents(db, s.table(AGENT))
    s.processes = {
        int(i): int(p)
        for i, p in _rows(db, s.table(PROCESS), ["id", "pid"])
        if _int(i) is not None and _int(p)
    }
    s.threads = {
        int(i): int(t)
        for i, t in _rows(db, s.table(THREAD), ["id", "tid"])
        if _int(i) is not None and _int(t)
    }
    return s


def _select(s: _Set, base: str, wanted: dict[str, str]) -> tuple[str, list[str]] | None:
    """A query over `base` (alias k) giving `wanted` (output name -> column) as integers: a column the row lacks
    is taken from its track row (`track_id`), times from the timestamp table (`start_id` / `end_id`), the
    correlation and category from its event (`event_id`); a column found nowhere reads as NULL. Every join is
    on a primary key."""
    table = s.table(base)
    if table is None:
        return None
    have = s.db.columns(table)
    joins: list[str] = []
    track, stamps, event = s.table(TRACK), s.table(TIMESTAMP), s.table(EVENT)
    track_columns = s.db.columns(track) if track is not None and "track_id" in have else set()
    if track_columns:
        joins.append(f"LEFT JOIN {_quoted(str(track))} AS t ON t.id = k.track_id")
    event_columns = s.db.columns(event) if event is not None and "event_id" in have else set()
    if event_columns & {"correlation_id", "category_id"}:
        joins.append(f"LEFT JOIN {_quoted(str(event))} AS e ON e.id = k.event_id")
    exprs = []
    for column in wanted.values():
        if column in ("start", "end") and column not in have and f"{column}_id" in have and stamps:
            alias = f"ts_{column}"
            joins.append(f"LEFT JOIN {_quoted(stamps)} AS {alias} ON {alias}.id = k.{column}_id")
            expr = f"{alias}.value"
        elif column in ("correlation_id", "category_id"):
            expr = f"e.{column}" if column in event_columns else "NULL"
        elif column in have:
            expr = f"k.{_quoted(column)}"
        elif column in track_columns:
            expr = f"t.{_quoted(column)}"
        else:
            expr = "NULL"
        exprs.append(f"ifnull({expr}, {NULL_INT})")
    return f"SELECT {', '.join(exprs)} FROM {_quoted(table)} AS k {' '.join(joins)}", list(wanted)


def _lookup(keys: np.ndarray, table: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """`table[key]` per key by sorted search (ids come from the file), and which keys were found."""
    known = np.array(sorted(table), dtype=np.int64)
    values = np.array([table[int(k)] for k in known], dtype=np.int64)
    if not len(known):
        return np.zeros(len(keys), dtype=np.int64), np.zeros(len(keys), dtype=bool)
    at = np.clip(np.searchsorted(known, keys), 0, len(known) - 1)
    found = known[at] == keys
    return np.where(found, values[at], 0), found


def _np(batch: pa.RecordBatch, name: str) -> np.ndarray:
    return batch.column(name).to_numpy()


def _correlation(s: _Set, batch: pa.RecordBatch, drop: np.ndarray | None = None) -> pa.Array:
    """The event's correlation id, within its process's scope; none where `drop` (roctx ranges)."""
    corr = _np(batch, "corr")
    valid = corr != NULL_INT if drop is None else (corr != NULL_INT) & ~drop
    return pa.array(np.where(valid, corr + s.scope, 0), type=pa.int64(), mask=~valid)


def _symbols(s: _Set) -> tuple[dict[int, str], dict[int, int]]:
    """Kernel symbol row id -> (display) name, and -> registers (arch + accumulation VGPRs)."""
    names: dict[int, str] = {}
    registers: dict[int, int] = {}
    columns = ["id", "display_name", "kernel_name", "arch_vgpr_count", "accum_vgpr_count", "extdata"]
    for row_id, display, raw, arch, accum, extdata in _rows(s.db, s.table(SYMBOL), columns):
        if _int(row_id) is None:
            continue
        formatted = json_object(extdata).get("formatted_kernel_name")
        name = display or (formatted if isinstance(formatted, str) else None) or raw or "(unnamed kernel)"
        names[int(row_id)] = kernel_name(str(name))
        if _int(arch) is not None:
            registers[int(row_id)] = int(arch) + (_int(accum) or 0)
    return names, registers


def _on_gpu(
    s: _Set, batch: pa.RecordBatch, gpu: np.ndarray, on_gpu: np.ndarray, kind: str, category: str
) -> dict[str, pa.Array]:
    """The columns a kernel and a copy share: kind, time, device, stream (else the queue) and correlation."""
    n = batch.num_rows
    start, end = _np(batch, "start"), _np(batch, "end")
    timed = (start != NULL_INT) & (end != NULL_INT)
    stream = np.where(_np(batch, "stream") != NULL_INT, _np(batch, "stream"), _np(batch, "queue"))
    placed = stream != NULL_INT
    return {
        Col.PH: C.const_text("X", n),
        Col.CAT: C.const_text(category, n),
        Col.KIND: C.kinds(kind, n),
        Col.PID: C.text_of_ints(gpu, on_gpu),
        Col.TID: C.text_of_ints(stream, placed),
        Col.TS_NS: pa.array(np.where(timed, start, 0), type=pa.int64(), mask=~timed),
        Col.DUR_NS: pa.array(np.where(timed, end - start, 0), type=pa.int64(), mask=~timed),
        Col.DEVICE: C.int32_where(gpu, on_gpu),
        Col.STREAM: pa.array(np.where(placed, stream, 0), type=pa.int64(), mask=~placed),
        Col.CORRELATION: _correlation(s, batch),
    }


def _kernels(s: _Set) -> Iterator[pa.RecordBatch]:
    wanted = {
        "start": "start",
        "end": "end",
        "agent": "agent_id",
        "queue": "queue_id",
        "stream": "stream_id",
        "kernel": "kernel_id",
        "corr": "correlation_id",
        "wx": "workgroup_size_x",
        "wy": "workgroup_size_y",
        "wz": "workgroup_size_z",
        "gx": "grid_size_x",
        "gy": "grid_size_y",
        "gz": "grid_size_z",
        "lds": "group_segment_size",
    }
    query = _select(s, DISPATCH, wanted)
    if query is None:
        return
    names, registers = _symbols(s)
    for batch in s.db.batches(*query):
        gpu, on_gpu = _lookup(_np(batch, "agent"), s.agent_index)
        kernel = _np(batch, "kernel")
        regs, has_regs = _lookup(kernel, registers)
        cols = _on_gpu(s, batch, gpu, on_gpu, Kind.KERNEL, "kernel")
        cols[Col.NAME] = C.text_by_code(kernel, names)
        cols[Col.REGISTERS] = C.int32_where(regs, has_regs)
        cols[Col.SHARED_MEMORY] = nullable(batch.column("lds"))
        for axis in "xyz":
            group, items = _np(batch, f"w{axis}"), _np(batch, f"g{axis}")
            known = (group != NULL_INT) & (group > 0) & (items != NULL_INT)
            blocks = np.where(
                known, -(-items // np.where(known, group, 1)), 0
            )  # ceil: work-items -> workgroups
            cols[getattr(Col, f"GRID_{axis.upper()}")] = C.int32_where(blocks, known)
            cols[getattr(Col, f"BLOCK_{axis.upper()}")] = C.int32_where(group, known)
        yield C.record_batch(batch.num_rows, cols)


def _copies(s: _Set) -> Iterator[pa.RecordBatch]:
    wanted = {
        "start": "start",
        "end": "end",
        "name": "name_id",
        "dst": "dst_agent_id",
        "src": "src_agent_id",
        "bytes": "size",
        "queue": "queue_id",
        "stream": "stream_id",
        "corr": "correlation_id",
    }
    query = _select(s, COPY, wanted)
    if query is None:
        return
    for batch in s.db.batches(*query):
        dst, on_dst = _lookup(_np(batch, "dst"), s.agent_index)
        src, on_src = _lookup(_np(batch, "src"), s.agent_index)
        # the GPU side of the copy: the destination, else the source
        cols = _on_gpu(s, batch, np.where(on_dst, dst, src), on_dst | on_src, Kind.MEMCPY, "gpu_memcpy")
        codes = _np(batch, "name")
        labels = {int(c): copy_name(s.strings.get(int(c)) or "") for c in np.unique(codes).tolist()}
        start, end, nbytes = _np(batch, "start"), _np(batch, "end"), _np(batch, "bytes")
        dur = end - start
        sized = nbytes != NULL_INT
        rate = sized & (start != NULL_INT) & (end != NULL_INT) & (dur > 0)
        cols[Col.NAME] = C.text_by_code(codes, labels)
        cols[Col.BYTES] = pa.array(np.where(sized, nbytes, 0), type=pa.int64(), mask=~sized)
        cols[Col.BANDWIDTH_GBPS] = pa.array(
            np.where(rate, nbytes / np.where(rate, dur, 1), 0.0), type=pa.float64(), mask=~rate
        )
        yield C.record_batch(batch.num_rows, cols)


def _categories(s: _Set) -> dict[int, str]:
    """Event category id -> name: `rocpd_info_category` where the database has it, else the string table."""
    table = s.table(CATEGORY)
    if table is not None:
        return {int(i): str(n) for i, n in _rows(s.db, table, ["id", "name"]) if _int(i) is not None and n}
    return {}


def _regions(s: _Set) -> Iterator[pa.RecordBatch]:
    wanted = {
        "start": "start",
        "end": "end",
        "pid": "pid",
        "tid": "tid",
        "name": "name_id",
        "corr": "correlation_id",
        "cat": "category_id",
    }
    query = _select(s, REGION, wanted)
    if query is None:
        return
    categories = _categories(s)
    marker, api, instant = (
        KIND_CODES[Kind.USER_ANNOTATION],
        KIND_CODES[Kind.RUNTIME],
        KIND_CODES[Kind.INSTANT],
    )
    for batch in s.db.batches(*query):
        n = batch.num_rows
        start, end = _np(batch, "start"), _np(batch, "end")
        timed = (start != NULL_INT) & (end != NULL_INT)
        cat = _np(batch, "cat")
        labels = {
            int(c): categories.get(int(c)) or s.strings.get(int(c)) or "" for c in np.unique(cat).tolist()
        }
        is_marker = np.isin(
            cat,
            np.array([c for c, name in labels.items() if name.upper().startswith("MARKER")], dtype=np.int64),
        )
        point = is_marker & timed & (end == start)
        kind = np.where(point, instant, np.where(is_marker, marker, api)).astype(np.int32)
        pid, has_pid = _lookup(_np(batch, "pid"), s.processes)
        tid, has_tid = _lookup(_np(batch, "tid"), s.threads)
        keep = timed & ~point
        yield C.record_batch(
            n,
            {
                Col.PH: C.text_where(point, "i", "X"),
                Col.CAT: C.text_by_code(cat, {c: (name.lower() or "region") for c, name in labels.items()}),
                Col.KIND: C.kinds_from_codes(kind),
                Col.NAME: string_names(batch.column("name"), s.strings),
                Col.PID: C.text_of_ints(pid, has_pid),
                Col.TID: C.text_of_ints(tid, has_tid),
                Col.TS_NS: pa.array(np.where(timed, start, 0), type=pa.int64(), mask=~timed),
                Col.DUR_NS: pa.array(np.where(keep, end - start, 0), type=pa.int64(), mask=~keep),
                Col.CORRELATION: _correlation(s, batch, is_marker),
            },
        )


def _metadata(s: _Set) -> dict[str, str]:
    found = {}
    for tag, value in _rows(s.db, s.table(METADATA), ["tag", "value"]):
        if tag in ("schema_version", "uuid") and value is not None:
            found[f"rocpd_{tag}"] = str(value)
    return found


def read_batches(path: Path, display: str) -> tuple[Iterator[pa.RecordBatch], Callable[[], TraceMeta]]:
    """Start reading a rocpd database; returns the batch iterator and a finisher that builds `TraceMeta`."""
    if is_gzip(path):
        raise InputError(f"{display}: a compressed SQLite file; decompress it first (gunzip)")
    db = SqliteTrace(path, display, own_views=True)  # rocprofv3's views: conveniences
    found = suffixes(db.tables)
    if not found:
        db.close()
        raise InputError(
            f"{display}: an SQLite database, but not a rocpd database (no rocpd_kernel_dispatch_<uuid> table)"
        )
    sets = [_open_set(db, suffix) for suffix in found]
    if len(sets) > 1:  # correlation ids are per process: keep each set's apart (ids stay below 2**40)
        for index, s in enumerate(sets):
            s.scope = index << 40

    def batches() -> Iterator[pa.RecordBatch]:
        for s in sets:
            yield from _kernels(s)
            yield from _copies(s)
            yield from _regions(s)

    def finish() -> TraceMeta:
        try:
            devices: dict[int, DeviceInfo] = {}
            extra: dict[str, Any] = {}
            for s in sets:
                for info in s.devices.values():
                    devices.setdefault(info.id, info)
                extra.update(_metadata(s))
            warnings = list(db.warnings())
            if len(sets) > 1:
                extra["rocpd_processes"] = len(sets)
                warnings.append(f"{len(sets)} processes merged in one rocpd database: read as one trace")
            return TraceMeta(
                path=str(path),
                format="rocpd",
                devices=tuple(devices[k] for k in sorted(devices)),
                extra=extra,
                warnings=tuple(warnings),
            )
        finally:
            db.close()

    return batches(), finish
