"""Nsight Systems SQLite reader (`nsys export --type sqlite`): kernels, memcpy, memset, CUDA API, NVTX.

Each activity table is streamed in bounded batches of integer columns (see `ingest.sqlite`) and turned into
the event model: names are resolved through `StringIds` on the distinct ids of each batch, threads are
decoded from `globalTid` (pid = (globalTid >> 24) & 0xFFFFFF, tid = globalTid & 0xFFFFFF), and the CUPTI
`correlationId` goes into `Col.CORRELATION` on both the API call and its GPU work, as in Kineto traces (in an
export of several processes, made unique per process: `_correlation`).
Names follow Kineto so that the same program reads the same from both profilers: kernels by their demangled
name, copies as "Memcpy HtoD (Pageable -> Device)", fills as "Memset (Device)", API calls without the
"_v7000" version suffix nsys stores, NVTX push/pop and start/end ranges as `user_annotation` ranges on the
CPU thread. Absent tables are simply empty: an export without a kernel table has no kernels.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from opscope.errors import InputError
from opscope.ingest import columns as C
from opscope.ingest import xla_nvtx
from opscope.ingest.source import is_gzip
from opscope.ingest.sqlite import NULL_INT, SqliteTrace, nullable
from opscope.model.meta import DeviceInfo, TraceMeta
from opscope.model.schema import Col, Kind

KERNEL, MEMCPY, MEMSET = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
)
RUNTIME, NVTX, STRINGS, GPUS = "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "StringIds", "TARGET_INFO_GPU"
NSYS_TABLES = (KERNEL, MEMCPY, MEMSET, RUNTIME, NVTX, STRINGS, GPUS)

# CUPTI copy kinds as Kineto abbreviates them; nsys adds 11-13 for unified memory.
COPY_KINDS = {
    0: "Unknown",
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    11: "Unified HtoD",
    12: "Unified DtoH",
    13: "Unified DtoD",
}
# nsys's ENUM_CUDA_MEM_KIND (note: not CUPTI's numbering); used when the export lacks the enum table.
MEM_KINDS = {
    0: "Pageable",
    1: "Pinned",
    2: "Device",
    3: "Array",
    4: "Managed",
    5: "Device Static",
    6: "Managed Static",
    7: "Unknown",
}
NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND, NVTX_DOMAIN = 34, 59, 60, 75
_VERSION_SUFFIX = re.compile(r"_v\d+$")
_DRIVER_CLASS = 1  # ENUM_NSYS_EVENT_CLASS: 0 CUDA runtime, 1 CUDA driver
_PID_MASK = 0xFFFFFF  # pid = (globalTid >> 24) & _PID_MASK; globalPid has the same layout


@dataclass
class _State:
    strings: StringTable
    devices: dict[int, DeviceInfo]
    pids: set[int] = field(default_factory=set)
    tids: set[int] = field(default_factory=set)  # globalTid values seen
    several_processes: bool = False  # CUDA API calls from more than one process: correlation ids per process


def _several_processes(db: SqliteTrace) -> bool:
    """Whether the export's CUDA API calls (or GPU work) come from more than one process."""
    found: set[int] = set()
    if RUNTIME in db.tables and "globalTid" in db.columns(RUNTIME):
        found.update(r[0] for r in db.rows(f"SELECT DISTINCT (globalTid >> 24) & {_PID_MASK} FROM {RUNTIME}"))
    for table in (KERNEL, MEMCPY, MEMSET):
        if table in db.tables and "globalPid" in db.columns(table):
            found.update(
                r[0] for r in db.rows(f"SELECT DISTINCT (globalPid >> 24) & {_PID_MASK} FROM {table}")
            )
    return len(found - {None}) > 1


def _correlation(batch: pa.RecordBatch, pid: np.ndarray, state: _State) -> pa.Array:
    """The CUPTI correlation id; in an export of several processes, `pid * 2**32 + correlationId`, because
    CUPTI numbers correlations per process (two processes both launch a kernel with id 5): launches then link
    to GPU work of their own process only. CUPTI's ids are 32-bit, so the two parts never overlap."""
    corr = batch.column("corr")
    if not state.several_processes:
        return nullable(corr)
    values = corr.to_numpy(zero_copy_only=False)
    known = _valid(values) & _valid(pid)
    scoped = np.where(known, (pid & _PID_MASK) * (1 << 32) + (values & 0xFFFFFFFF), 0)
    return pa.array(scoped, type=pa.int64(), mask=~known)


@dataclass(frozen=True)
class StringTable:
    """StringIds as two aligned arrays sorted by id: ids come from the file (10**12 is a valid integer), so
    names are found by a sorted search, never in a list indexed by id."""

    ids: np.ndarray  # int64, sorted, distinct
    values: pa.Array  # string, aligned with `ids`

    @classmethod
    def of(cls, rows: Iterable[tuple[Any, Any]]) -> StringTable:
        """From (id, text) rows as rpd and rocpd databases keep them (`rocpd_string`): an id must be a 64-bit
        integer; a text that is not one reads as ""."""
        by_id = {
            key: value if isinstance(value, str) else ""
            for key, value in rows
            if isinstance(key, int) and not isinstance(key, bool) and -(2**63) <= key < 2**63
        }
        ids = sorted(by_id)
        return cls(np.array(ids, dtype=np.int64), pa.array([by_id[i] for i in ids], type=pa.string()))

    def positions(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position in `values`, found) for each key."""
        return _positions(self.ids, keys)

    def get(self, key: object) -> str | None:
        if not isinstance(key, int) or isinstance(key, bool) or not -(2**63) <= key < 2**63:
            return None
        at, found = self.positions(np.array([key], dtype=np.int64))
        if not found[0]:
            return None
        value = self.values[int(at[0])].as_py()
        return value if isinstance(value, str) else None


def _string_table(db: SqliteTrace) -> StringTable:
    empty = StringTable(np.empty(0, dtype=np.int64), pa.array([], type=pa.string()))
    if STRINGS not in db.tables:
        return empty
    by_id: dict[int, str | None] = {}
    for key, value in db.rows(f"SELECT id, value FROM {STRINGS}"):
        if isinstance(key, int) and not isinstance(key, bool) and 0 <= key < 2**63:
            by_id[key] = value if isinstance(value, str) else None
    if not by_id:
        return empty
    ids = sorted(by_id)
    return StringTable(np.array(ids, dtype=np.int64), pa.array([by_id[i] for i in ids], type=pa.string()))


def string_names(
    ids: pa.Array, strings: StringTable, fix: Callable[[str], str] | None = None
) -> pa.DictionaryArray:
    """StringIds ids -> dictionary array over just the distinct ids of this batch (hash-encoded)."""
    encoded = ids.dictionary_encode()
    uniq = encoded.dictionary.to_numpy()
    at, in_range = strings.positions(uniq)
    dictionary = (
        strings.values.take(pa.array(np.where(in_range, at, 0)))
        if len(strings.ids)
        else pa.nulls(len(uniq), pa.string())
    )
    if not in_range.all() or fix is not None or dictionary.null_count:
        values = [d if ok else None for d, ok in zip(dictionary.to_pylist(), in_range)]
        if fix is not None:
            values = [fix(d) if d is not None else None for d in values]
        names = {i: v for i, v in enumerate(values)}
        return C.text_by_code(encoded.indices.to_numpy(), names)
    return pa.DictionaryArray.from_arrays(encoded.indices.cast(pa.int32()), dictionary)


def _devices(db: SqliteTrace) -> dict[int, DeviceInfo]:
    if GPUS not in db.tables:
        return {}
    have = db.columns(GPUS)
    wanted = [
        "id",
        "name",
        "smCount",
        "maxWarpsPerSm",
        "threadsPerWarp",
        "maxThreadsPerBlock",
        "maxRegistersPerSm",
        "maxRegistersPerBlock",
        "maxShmemPerSm",
        "maxShmemPerBlock",
        "maxShmemPerBlockOptin",
        "totalMemory",
        "computeMajor",
        "computeMinor",
        "maxBlocksPerSm",
        "chipName",
    ]
    select = ", ".join(c if c in have else "NULL" for c in wanted)
    out: dict[int, DeviceInfo] = {}
    for row in db.rows(f"SELECT {select} FROM {GPUS}"):
        r = dict(zip(wanted, row))
        if r["id"] is None or int(r["id"]) in out:
            continue
        warps, warp = r["maxWarpsPerSm"], r["threadsPerWarp"]
        cc = f"{r['computeMajor']}.{r['computeMinor']}" if r["computeMajor"] is not None else None
        out[int(r["id"])] = DeviceInfo(
            id=int(r["id"]),
            name=str(r["name"] or f"GPU {r['id']}"),
            sm_count=r["smCount"],
            max_threads_per_sm=warps * warp if warps and warp else None,
            max_threads_per_block=r["maxThreadsPerBlock"],
            regs_per_sm=r["maxRegistersPerSm"],
            regs_per_block=r["maxRegistersPerBlock"],
            shared_mem_per_sm=r["maxShmemPerSm"],
            shared_mem_per_block=r["maxShmemPerBlock"],
            shared_mem_per_block_optin=r["maxShmemPerBlockOptin"],
            warp_size=warp,
            total_memory=r["totalMemory"],
            compute_capability=cc,
            max_warps_per_sm=warps,
            max_blocks_per_sm=r["maxBlocksPerSm"],
            arch=r["chipName"],
        )
    return out


def _enum_labels(db: SqliteTrace, table: str, fallback: dict[int, str]) -> dict[int, str]:
    if table not in db.tables or "label" not in db.columns(table):
        return dict(fallback)
    return {int(k): str(v) for k, v in db.rows(f"SELECT id, label FROM {table}") if k is not None and v}


def _np(batch: pa.RecordBatch, name: str) -> np.ndarray:
    return batch.column(name).to_numpy()


def _valid(values: np.ndarray) -> np.ndarray:
    return values != NULL_INT


def _int32(db: SqliteTrace, where: str, values: np.ndarray) -> pa.Array:
    """A 32-bit column (device, grid, block, registers): SQL NULL is left empty, and so is a value beyond 32
    bits, counted for a warning that names `where` (TABLE.column), as the JSON reader does; either rejected the
    whole trace (`ArrowInvalid: Integer value ... not in range`, issue 32)."""
    present = values != NULL_INT
    fits = (values >= -(2**31)) & (values < 2**31)
    beyond = int(np.count_nonzero(present & ~fits))
    if beyond:
        db.out_of_range[where] = db.out_of_range.get(where, 0) + beyond
    valid = present & fits
    return pa.array(np.where(valid, values, 0).astype(np.int32), type=pa.int32(), mask=~valid)


def _gpu_columns(
    db: SqliteTrace, table: str, batch: pa.RecordBatch, category: str, kind: str, state: _State
) -> dict[str, pa.Array]:
    n = batch.num_rows
    gpid = _np(batch, "gpid")
    process = np.where(_valid(gpid), (gpid >> 24) & _PID_MASK, NULL_INT)
    device, stream = _np(batch, "device"), _np(batch, "stream")
    return {
        Col.PH: C.const_text("X", n),
        Col.CAT: C.const_text(category, n),
        Col.KIND: C.kinds(kind, n),
        Col.PID: C.text_of_ints(device),
        Col.TID: C.text_of_ints(stream),
        Col.TS_NS: batch.column("start"),
        Col.DUR_NS: batch.column("dur"),
        Col.DEVICE: _int32(db, f"{table}.deviceId", device),
        Col.STREAM: batch.column("stream"),
        Col.CORRELATION: _correlation(batch, process, state),
    }


def _kernels(db: SqliteTrace, state: _State) -> Iterator[pa.RecordBatch]:
    if KERNEL not in db.tables:
        return
    have = db.columns(KERNEL)
    name = "demangledName" if "demangledName" in have else "shortName"
    sql = (
        f"SELECT start, end - start, deviceId, streamId, {db.col(KERNEL, 'correlationId')}, {db.col(KERNEL, 'globalPid')}, "
        f"ifnull({name}, {NULL_INT}), gridX, gridY, gridZ, blockX, blockY, blockZ, "
        f"{db.col(KERNEL, 'registersPerThread')}, "
        f"{db.col(KERNEL, 'staticSharedMemory', '0')} + {db.col(KERNEL, 'dynamicSharedMemory', '0')} "
        f"FROM {KERNEL}"
    )
    names = [
        "start",
        "dur",
        "device",
        "stream",
        "corr",
        "gpid",
        "name",
        "gx",
        "gy",
        "gz",
        "bx",
        "by",
        "bz",
        "regs",
        "smem",
    ]
    sm_count = {d: info.sm_count for d, info in state.devices.items() if info.sm_count}
    warp_size = {d: info.warp_size or 32 for d, info in state.devices.items()}
    for batch in db.batches(sql, names):
        cols = _gpu_columns(db, KERNEL, batch, "kernel", Kind.KERNEL, state)
        cols[Col.NAME] = string_names(batch.column("name"), state.strings)
        for key, column, col in (
            ("gx", "gridX", Col.GRID_X),
            ("gy", "gridY", Col.GRID_Y),
            ("gz", "gridZ", Col.GRID_Z),
            ("bx", "blockX", Col.BLOCK_X),
            ("by", "blockY", Col.BLOCK_Y),
            ("bz", "blockZ", Col.BLOCK_Z),
            ("regs", "registersPerThread", Col.REGISTERS),
        ):
            cols[col] = _int32(db, f"{KERNEL}.{column}", _np(batch, key))
        cols[Col.SHARED_MEMORY] = batch.column("smem")
        cols.update(_per_sm(batch, sm_count, warp_size))
        yield C.record_batch(batch.num_rows, cols)


def _positions(known: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(position in the sorted, distinct `known`, found) for each key: the lookup of ids from the file, which
    never sizes a table by an id."""
    if len(known) == 0:
        return np.zeros(len(keys), dtype=np.int64), np.zeros(len(keys), dtype=bool)
    keys = keys.astype(np.int64, copy=False)
    at = np.clip(np.searchsorted(known, keys), 0, len(known) - 1)
    return at, known[at] == keys


def _lookup(keys: np.ndarray, table: dict[int, int], missing: float) -> np.ndarray:
    """`table[key]` for each key (as float64), `missing` for keys not in the table."""
    known = np.array(sorted(table), dtype=np.int64)
    values = np.array([table[int(k)] for k in known], dtype=np.float64)
    at, found = _positions(known, keys)
    return np.where(found, values[at] if len(values) else missing, missing)


def _per_sm(
    batch: pa.RecordBatch, sm_count: dict[int, int], warp_size: dict[int, int]
) -> dict[str, pa.Array]:
    """Kineto's "blocks per SM" (grid blocks / SMs) and "warps per SM" (that times warps per block)."""
    if not sm_count:
        return {}
    device = _np(batch, "device")
    # A sorted search over the devices the export describes, not a table indexed by device id: ids come from the
    # file, and TARGET_INFO_GPU.id = 10**12 made a dense lookup table of 7 TiB.
    sms = _lookup(device, sm_count, 0.0)
    warp = _lookup(device, warp_size, 32.0)
    blocks = _np(batch, "gx").astype(np.float64) * _np(batch, "gy") * _np(batch, "gz")
    threads = _np(batch, "bx").astype(np.float64) * _np(batch, "by") * _np(batch, "bz")
    known = sms > 0
    per_sm = np.where(known, blocks / np.where(known, sms, 1.0), np.nan)
    warps = per_sm * np.ceil(threads / warp)
    return {
        Col.BLOCKS_PER_SM: pa.array(per_sm.astype(np.float32), mask=~known),
        Col.WARPS_PER_SM: pa.array(warps.astype(np.float32), mask=~known),
    }


def _bandwidth(batch: pa.RecordBatch) -> pa.Array:
    nbytes, dur = _np(batch, "bytes").astype(np.float64), _np(batch, "dur").astype(np.float64)
    ok = dur > 0
    return pa.array(np.where(ok, nbytes / np.where(ok, dur, 1.0), 0.0), mask=~ok)  # bytes per ns = GB/s


def _memcpys(db: SqliteTrace, state: _State) -> Iterator[pa.RecordBatch]:
    if MEMCPY not in db.tables:
        return
    copy = _enum_labels(db, "ENUM_CUDA_MEMCPY_OPER", {})
    copy_names = {k: COPY_KINDS.get(k, copy.get(k, "Unknown")) for k in set(COPY_KINDS) | set(copy)}
    mem = _enum_labels(db, "ENUM_CUDA_MEM_KIND", MEM_KINDS)
    sql = (
        f"SELECT start, end - start, deviceId, streamId, {db.col(MEMCPY, 'correlationId')}, {db.col(MEMCPY, 'globalPid')}, bytes, copyKind, "
        f"{db.col(MEMCPY, 'srcKind')}, {db.col(MEMCPY, 'dstKind')} FROM {MEMCPY}"
    )
    names = ["start", "dur", "device", "stream", "corr", "gpid", "bytes", "copy", "src", "dst"]
    for batch in db.batches(sql, names):
        cols = _gpu_columns(db, MEMCPY, batch, "gpu_memcpy", Kind.MEMCPY, state)
        copy_kind, src, dst = _np(batch, "copy"), _np(batch, "src"), _np(batch, "dst")
        src, dst = np.where(_valid(src), src, 255), np.where(_valid(dst), dst, 255)
        codes = copy_kind * 65536 + src * 256 + dst
        labels = {}
        for code in np.unique(codes):
            c, s, d = int(code) // 65536, (int(code) // 256) % 256, int(code) % 256
            labels[int(code)] = (
                f"Memcpy {copy_names.get(c, 'Unknown')} ({mem.get(s, 'Unknown')} -> {mem.get(d, 'Unknown')})"
            )
        cols[Col.NAME] = C.text_by_code(codes, labels)
        cols[Col.BYTES] = batch.column("bytes")
        cols[Col.BANDWIDTH_GBPS] = _bandwidth(batch)
        yield C.record_batch(batch.num_rows, cols)


def _memsets(db: SqliteTrace, state: _State) -> Iterator[pa.RecordBatch]:
    if MEMSET not in db.tables:
        return
    mem = _enum_labels(db, "ENUM_CUDA_MEM_KIND", MEM_KINDS)
    sql = (
        f"SELECT start, end - start, deviceId, streamId, {db.col(MEMSET, 'correlationId')}, {db.col(MEMSET, 'globalPid')}, bytes, "
        f"{db.col(MEMSET, 'memKind')} FROM {MEMSET}"
    )
    for batch in db.batches(sql, ["start", "dur", "device", "stream", "corr", "gpid", "bytes", "mem"]):
        cols = _gpu_columns(db, MEMSET, batch, "gpu_memset", Kind.MEMSET, state)
        labels = {k: f"Memset ({v})" for k, v in mem.items()}
        labels[NULL_INT] = "Memset (Unknown)"
        cols[Col.NAME] = C.text_by_code(_np(batch, "mem"), labels)
        cols[Col.BYTES] = batch.column("bytes")
        cols[Col.BANDWIDTH_GBPS] = _bandwidth(batch)
        yield C.record_batch(batch.num_rows, cols)


def _thread_columns(batch: pa.RecordBatch, state: _State) -> dict[str, pa.Array]:
    gtid = _np(batch, "gtid")
    valid = _valid(gtid)
    pid, tid = (gtid >> 24) & 0xFFFFFF, gtid & 0xFFFFFF
    state.tids.update(pa.array(gtid[valid]).unique().to_pylist())
    state.pids.update(pa.array(pid[valid]).unique().to_pylist())
    return {Col.PID: C.text_of_ints(pid, valid), Col.TID: C.text_of_ints(tid, valid)}


def _api_name(name: str) -> str:
    return _VERSION_SUFFIX.sub("", name)


def _runtime(db: SqliteTrace, state: _State) -> Iterator[pa.RecordBatch]:
    if RUNTIME not in db.tables:
        return
    sql = (
        f"SELECT start, end - start, {db.col(RUNTIME, 'globalTid')}, {db.col(RUNTIME, 'correlationId')}, "
        f"nameId, {db.col(RUNTIME, 'eventClass', '0')} FROM {RUNTIME}"
    )
    for batch in db.batches(sql, ["start", "dur", "gtid", "corr", "name", "cls"]):
        n = batch.num_rows
        driver = _np(batch, "cls") == _DRIVER_CLASS
        cols = _thread_columns(batch, state)
        gtid = _np(batch, "gtid")
        process = np.where(_valid(gtid), (gtid >> 24) & _PID_MASK, NULL_INT)
        cols.update(
            {
                Col.PH: C.const_text("X", n),
                Col.TS_NS: batch.column("start"),
                Col.DUR_NS: batch.column("dur"),
                Col.NAME: string_names(batch.column("name"), state.strings, _api_name),
                Col.CORRELATION: _correlation(batch, process, state),
                Col.CAT: C.text_where(driver, "cuda_driver", "cuda_runtime"),
                Col.KIND: C.kinds_where(driver, Kind.DRIVER, Kind.RUNTIME),
            }
        )
        yield C.record_batch(n, cols)


def _nvtx(db: SqliteTrace, state: _State) -> Iterator[pa.RecordBatch]:
    """NVTX ranges (push/pop, start/end) as user annotations, marks as instants; names resolved in SQL."""
    if NVTX not in db.tables:
        return
    have = db.columns(NVTX)
    domains = (
        {
            int(d): str(t)
            for d, t in db.rows(
                f"SELECT domainId, text FROM {NVTX} WHERE eventType = {NVTX_DOMAIN} AND text IS NOT NULL"
            )
            if d is not None
        }
        if "domainId" in have
        else {}
    )
    text = "coalesce(n.text, s.value)" if "textId" in have and STRINGS in db.tables else "n.text"
    join = f"LEFT JOIN {STRINGS} AS s ON s.id = n.textId" if "textId" in have and STRINGS in db.tables else ""
    domain = "ifnull(n.domainId, 0)" if "domainId" in have else "0"
    rows = db.rows(
        f"SELECT n.start, n.end, n.eventType, n.globalTid, {domain}, {text} FROM {NVTX} AS n {join} "
        f"WHERE n.eventType IN ({NVTX_MARK}, {NVTX_PUSHPOP}, {NVTX_STARTEND}) ORDER BY n.start"
    )
    step = 1 << 16
    for lo in range(0, len(rows), step):
        chunk = rows[lo : lo + step]
        n = len(chunk)
        start, end, etype, gtid, dom, name = zip(*chunk)
        gtid_np = np.array([g if g is not None else NULL_INT for g in gtid], dtype=np.int64)
        cols = _thread_columns(pa.record_batch([pa.array(gtid_np)], names=["gtid"]), state)
        mark = [t == NVTX_MARK for t in etype]
        dur = [None if m or e is None else e - s for m, s, e in zip(mark, start, end)]
        cols.update(
            {
                Col.PH: C.text(["i" if m else "X" for m in mark]),
                Col.CAT: C.text(["nvtx" if not d else f"nvtx:{domains.get(d, d)}" for d in dom]),
                Col.KIND: C.kinds_of([Kind.INSTANT if m else Kind.USER_ANNOTATION for m in mark]),
                Col.NAME: C.text(list(name)),
                Col.TS_NS: pa.array(start, type=pa.int64()),
                Col.DUR_NS: pa.array(dur, type=pa.int64()),
            }
        )
        cols.update(xla_nvtx.columns(list(name), mark))  # XLA module / thunk ranges (ingest/xla_nvtx.py)
        yield C.record_batch(n, cols)


def _metadata(db: SqliteTrace, state: _State) -> Iterator[pa.RecordBatch]:
    """process_name / thread_name events (as Kineto writes them) for the processes and threads seen."""
    pids: list[str] = []
    tids: list[str | None] = []
    names: list[str] = []
    labels: list[str] = []
    if "PROCESSES" in db.tables and state.pids:
        for pid, pname in db.rows("SELECT pid, name FROM PROCESSES"):
            if pid in state.pids and pname:
                pids.append(str(pid))
                tids.append(None)
                names.append("process_name")
                labels.append(str(pname))
    if "ThreadNames" in db.tables and state.tids:
        for gtid, name_id in db.rows("SELECT globalTid, nameId FROM ThreadNames"):
            label = state.strings.get(name_id) if gtid in state.tids else None
            if label is not None:
                pids.append(str((gtid >> 24) & 0xFFFFFF))
                tids.append(str(gtid & 0xFFFFFF))
                names.append("thread_name")
                labels.append(label)
    if not names:
        return
    n = len(names)
    yield C.record_batch(
        n,
        {
            Col.PH: C.const_text("M", n),
            Col.KIND: C.kinds(Kind.METADATA, n),
            Col.NAME: C.text(names),
            Col.PID: C.text(pids),
            Col.TID: C.text(tids),
            Col.LABEL: C.text(labels),
        },
    )


def _meta(db: SqliteTrace, path: Path, state: _State) -> TraceMeta:
    extra: dict[str, str | int | float | bool] = {}
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if table in db.tables:
            for key, value in db.rows(f"SELECT name, value FROM {table}"):
                if key in ("EXPORT_PRODUCT_VERSION", "EXPORT_SCHEMA_VERSION") and value is not None:
                    extra[f"nsys_{key.removeprefix('EXPORT_').lower()}"] = str(value)
    base = None
    if "TARGET_INFO_SESSION_START_TIME" in db.tables and "utcEpochNs" in db.columns(
        "TARGET_INFO_SESSION_START_TIME"
    ):
        found = db.rows("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1")
        base = int(found[0][0]) if found and found[0][0] is not None else None
    # No kernel table is not a problem: such an export (CUDA API only) simply has no kernels.
    return TraceMeta(
        path=str(path),
        format="nsys",
        devices=tuple(state.devices[k] for k in sorted(state.devices)),
        base_time_ns=base,
        extra=extra,
        warnings=tuple(db.warnings()),
    )


def open_export(path: Path, display: str, use_adbc: bool | None = None) -> SqliteTrace:
    """Open and validate an nsys export; anything else is a one-line `InputError`."""
    if is_gzip(path):
        raise InputError(f"{display}: a compressed SQLite file; decompress it first (gunzip)")
    db = SqliteTrace(path, display, use_adbc=use_adbc)
    if not db.tables.intersection(NSYS_TABLES):
        db.close()
        raise InputError(
            f"{display}: an SQLite database, but not an Nsight Systems export "
            f"(none of {', '.join(NSYS_TABLES[:5])}, ... tables)"
        )
    return db


def read_batches(
    path: Path, display: str, use_adbc: bool | None = None
) -> tuple[Iterator[pa.RecordBatch], Callable[[], TraceMeta]]:
    """Start reading `path`; returns the batch iterator and a finisher that builds `TraceMeta` afterwards."""
    db = open_export(path, display, use_adbc)
    state = _State(strings=_string_table(db), devices=_devices(db), several_processes=_several_processes(db))

    def batches() -> Iterator[pa.RecordBatch]:
        for part in (_kernels, _memcpys, _memsets, _runtime, _nvtx, _metadata):
            yield from part(db, state)

    def finish() -> TraceMeta:
        try:
            return _meta(db, path, state)
        finally:
            db.close()

    return batches(), finish
