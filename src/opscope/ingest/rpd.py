"""rocmProfileData (rpd) SQLite reader: the GPU ops, the HIP API calls and their links, roctx markers.

rpd (`runTracer.sh`, `rpd_tracer`; used by vLLM and SGLang on ROCm) keeps one row per GPU op in `rocpd_op`
(kernel executions, copies, fills, barriers), one per API call in `rocpd_api`, their links in `rocpd_api_ops`,
each copy's size in `rocpd_copyapi`, and every text in `rocpd_string`. The base tables are read, never the
convenience views (`kernel`, `copyop`, ... inner-join and drop the ops without an API row). Ids may carry a
session in their upper 32 bits (`4294968319`): they are int64 throughout and looked up by sorted search.

Into the event model, as Kineto names the same things on AMD:
- a `KernelExecution` op (or a `Task`: a kernel node of a HIP graph) is a kernel named by its description (the
  kernel name); a `Copy*` op a memcpy
  ("Memcpy HtoD", ... with its bytes); `FillBuffer` a memset; other op types (barrier and marker packets, no
  work of their own) are counted in a warning and not read. Device = `gpuId`, stream = `queueId`.
- an API row is a HIP runtime call (`hipLaunchKernel`, `hipMemcpyWithStream`, ...) on its pid / tid, except
  `UserMarker` rows: roctx ranges (instants when start == end), named by their message (`args`), and PyTorch
  operators where rpd's autograd hook lists them in `ext_autogradapi` (cpu_op events named `aten::mm`, ...).
- the link: an op's correlation is the id of its API call (the lowest, should `rocpd_api_ops` list several);
  an API call's correlation is its own id, so each launch links to its GPU work as in a Kineto trace.
Not read: the launch configuration (`rocpd_kernelapi` stores grid sizes in different units depending on the
launch API), `rocpd_monitor` (clock samples), HSA API tables, and the memory of hipMalloc / hipFree (their sizes
are only in argument text). The device has no name or properties in an rpd file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from opscope.errors import InputError
from opscope.ingest import columns as C
from opscope.ingest.nsys import StringTable, string_names
from opscope.ingest.rocprof import kernel_name
from opscope.ingest.source import is_gzip
from opscope.ingest.sqlite import NULL_INT, SqliteTrace, nullable
from opscope.model.meta import TraceMeta
from opscope.model.schema import KIND_CODES, Col, Kind

OP, API, API_OPS, COPY_API, STRINGS, METADATA = (
    "rocpd_op",
    "rocpd_api",
    "rocpd_api_ops",
    "rocpd_copyapi",
    "rocpd_string",
    "rocpd_metadata",
)
RPD_TABLES = (OP, API, STRINGS)  # what makes an SQLite file an rpd database
KERNEL_OPS = ("KernelExecution", "Task")  # a dispatch; a kernel node of a HIP graph (hipGraphLaunch)
FILL_OP, MARKER_API = "FillBuffer", "UserMarker"
AUTOGRAD = "ext_autogradapi"  # rpd's PyTorch hook: which UserMarker rows are autograd ops, and their names
# rpd's copy op types as Kineto abbreviates the direction
CATEGORIES = {Kind.KERNEL: "kernel", Kind.MEMCPY: "gpu_memcpy", Kind.MEMSET: "gpu_memset"}  # Kineto's
COPY_OPS = {
    "CopyHostToDevice": "HtoD",
    "CopyDeviceToHost": "DtoH",
    "CopyDeviceToDevice": "DtoD",
    "CopyHostToHost": "HtoH",
    "CopyDeviceToPeer": "PtoP",
    "CopyPeerToDevice": "PtoP",
}


def sniff(head: bytes, path: Path) -> bool:
    from opscope.ingest.registry import SQLITE_MAGIC, sqlite_tables

    return head.startswith(SQLITE_MAGIC) and set(RPD_TABLES) <= sqlite_tables(path)


@dataclass
class _State:
    strings: StringTable
    skipped_ops: dict[str, int] = field(default_factory=dict)  # op type -> ops not read
    threads: set[tuple[int, int]] = field(default_factory=set)


def _np(batch: pa.RecordBatch, name: str) -> np.ndarray:
    return batch.column(name).to_numpy()


def _kind_index(kind: str) -> int:
    return int(KIND_CODES[kind])


def _op_kinds(types: np.ndarray, strings: StringTable) -> dict[int, tuple[str, str | None]]:
    """(kind, name for copies and fills) by op-type id, for the distinct op types of a batch; op types that
    are no work of their own (barriers, markers) are left out."""
    found: dict[int, tuple[str, str | None]] = {}
    for key in np.unique(types).tolist():
        label = strings.get(int(key)) or ""
        if label in KERNEL_OPS:
            found[key] = (Kind.KERNEL, None)
        elif label.startswith("Copy"):
            found[key] = (Kind.MEMCPY, f"Memcpy {COPY_OPS.get(label, label.removeprefix('Copy'))}")
        elif label == FILL_OP:
            found[key] = (Kind.MEMSET, "Memset (Device)")
    return found


def _op_names(
    is_kernel: np.ndarray,
    desc: np.ndarray,
    types: np.ndarray,
    labels: dict[int, str | None],
    strings: StringTable,
) -> pa.DictionaryArray:
    """Kernels by their description (the kernel name, its code-object suffix dropped; the op type where it is
    empty, as rpd2tracing does), copies and fills by their type: one dictionary over the distinct ids."""
    kernel_ids, kernel_at = np.unique(desc[is_kernel], return_inverse=True)
    other_ids, other_at = np.unique(types[~is_kernel], return_inverse=True)
    kernel_names = [kernel_name(strings.get(int(k)) or KERNEL_OPS[0]) for k in kernel_ids.tolist()]
    other_names = [labels.get(int(t)) or "" for t in other_ids.tolist()]
    index = np.empty(len(desc), dtype=np.int32)
    index[is_kernel] = kernel_at
    index[~is_kernel] = len(kernel_ids) + other_at
    return pa.DictionaryArray.from_arrays(
        pa.array(index), pa.array(kernel_names + other_names, type=pa.string())
    )


def _ops(db: SqliteTrace, state: _State) -> Iterator[pa.RecordBatch]:
    """The GPU ops with their API call (the lowest linked id) and, for copies, the size of their copy call."""
    link = (
        f"LEFT JOIN (SELECT op_id, min(api_id) AS api FROM {API_OPS} GROUP BY op_id) AS l ON l.op_id = o.id"
        if API_OPS in db.tables
        else "LEFT JOIN (SELECT NULL AS api) AS l ON 0"
    )
    size, copies = str(NULL_INT), ""
    if COPY_API in db.tables:
        size, copies = f"ifnull(c.size, {NULL_INT})", f"LEFT JOIN {COPY_API} AS c ON c.api_ptr_id = l.api"
    sql = (
        f"SELECT o.start, o.end - o.start, ifnull(o.gpuId, {NULL_INT}), ifnull(o.queueId, {NULL_INT}), "
        f"ifnull(l.api, {NULL_INT}), ifnull(o.description_id, {NULL_INT}), ifnull(o.opType_id, {NULL_INT}), "
        f"{size} FROM {OP} AS o {link} {copies}"
    )
    names = ["start", "dur", "device", "queue", "api", "desc", "type", "bytes"]
    for batch in db.batches(sql, names):
        types = _np(batch, "type")
        found = _op_kinds(types, state.strings)
        keys = np.array(sorted(found), dtype=np.int64)
        at = np.clip(np.searchsorted(keys, types), 0, max(len(keys) - 1, 0))
        known = keys[at] == types if len(keys) else np.zeros(len(types), dtype=bool)
        skipped, counts = np.unique(types[~known], return_counts=True)
        for key, count in zip(skipped.tolist(), counts.tolist(), strict=True):
            label = state.strings.get(int(key)) or "(no type)"
            state.skipped_ops[label] = state.skipped_ops.get(label, 0) + int(count)
        if not known.all():
            batch, types, at = batch.filter(pa.array(known)), types[known], at[known]
        n = batch.num_rows
        if not n:
            continue
        kind = np.array([_kind_index(found[int(k)][0]) for k in keys.tolist()], dtype=np.int32)[at]
        is_kernel, is_copy = kind == _kind_index(Kind.KERNEL), kind == _kind_index(Kind.MEMCPY)
        labels = {key: label for key, (_, label) in found.items()}
        device, queue, nbytes, dur = (_np(batch, c) for c in ("device", "queue", "bytes", "dur"))
        has_bytes = is_copy & (nbytes != NULL_INT)
        rate = has_bytes & (dur > 0)
        yield C.record_batch(
            n,
            {
                Col.PH: C.const_text("X", n),
                Col.CAT: C.text_by_code(kind, {_kind_index(k): c for k, c in CATEGORIES.items()}),
                Col.KIND: C.kinds_from_codes(kind),
                Col.NAME: _op_names(is_kernel, _np(batch, "desc"), types, labels, state.strings),
                Col.PID: C.text_of_ints(device, device != NULL_INT),
                Col.TID: C.text_of_ints(queue, queue != NULL_INT),
                Col.TS_NS: nullable(batch.column("start")),
                Col.DUR_NS: nullable(batch.column("dur")),
                Col.DEVICE: C.int32_where(device, device != NULL_INT),
                Col.STREAM: nullable(batch.column("queue")),
                Col.CORRELATION: nullable(batch.column("api")),
                Col.BYTES: pa.array(np.where(has_bytes, nbytes, 0), type=pa.int64(), mask=~has_bytes),
                Col.BANDWIDTH_GBPS: pa.array(  # bytes per ns = GB/s
                    np.where(rate, nbytes / np.where(rate, dur, 1), 0.0), type=pa.float64(), mask=~rate
                ),
            },
        )


def _api(db: SqliteTrace, state: _State) -> Iterator[pa.RecordBatch]:
    """HIP API calls (runtime events) and roctx markers (`UserMarker`: annotations named by their message,
    instants when they last no time); a marker that rpd's PyTorch hook lists in `ext_autogradapi` is an
    operator (cpu_op) named as autograd names it (`aten::mm`)."""
    ids, values = state.strings.ids.tolist(), state.strings.values.to_pylist()
    markers = ", ".join(str(key) for key, value in zip(ids, values, strict=True) if value == MARKER_API)
    autograd, join = str(NULL_INT), ""
    if AUTOGRAD in db.tables and {"api_ptr_id", "autogradName_id"} <= db.columns(AUTOGRAD):
        autograd, join = (
            f"ifnull(e.autogradName_id, {NULL_INT})",
            f"LEFT JOIN {AUTOGRAD} AS e ON e.api_ptr_id = a.id",
        )
    sql = (
        f"SELECT a.start, a.end - a.start, ifnull(a.pid, {NULL_INT}), ifnull(a.tid, {NULL_INT}), a.id, "
        f"ifnull(a.apiName_id, {NULL_INT}), ifnull(a.args_id, {NULL_INT}), "
        f"ifnull(a.apiName_id IN ({markers or NULL_INT}), 0), {autograd} FROM {API} AS a {join}"
    )
    codes = {k: _kind_index(k) for k in (Kind.RUNTIME, Kind.USER_ANNOTATION, Kind.INSTANT, Kind.CPU_OP)}
    names = ["start", "dur", "pid", "tid", "id", "name", "args", "marker", "autograd"]
    for batch in db.batches(sql, names):
        n = batch.num_rows
        dur, op_name = _np(batch, "dur"), _np(batch, "autograd")
        marker = _np(batch, "marker") == 1
        op = marker & (op_name != NULL_INT)
        instant = marker & ~op & (dur == 0)
        kind = np.select(
            [op, instant, marker],
            [codes[Kind.CPU_OP], codes[Kind.INSTANT], codes[Kind.USER_ANNOTATION]],
            codes[Kind.RUNTIME],
        ).astype(np.int32)
        pid, tid = _np(batch, "pid"), _np(batch, "tid")
        timed = ~instant & (dur != NULL_INT)
        label = np.where(op, op_name, np.where(marker, _np(batch, "args"), _np(batch, "name")))
        category = {codes[Kind.CPU_OP]: "cpu_op", codes[Kind.INSTANT]: "user_annotation"}
        category |= {codes[Kind.USER_ANNOTATION]: "user_annotation", codes[Kind.RUNTIME]: "cuda_runtime"}
        yield C.record_batch(
            n,
            {
                Col.PH: C.text_where(instant, "i", "X"),
                Col.CAT: C.text_by_code(kind, category),
                Col.KIND: C.kinds_from_codes(kind),
                Col.NAME: string_names(pa.array(label), state.strings),
                Col.PID: C.text_of_ints(pid, pid != NULL_INT),
                Col.TID: C.text_of_ints(tid, tid != NULL_INT),
                Col.TS_NS: nullable(batch.column("start")),
                Col.DUR_NS: pa.array(np.where(timed, dur, 0), type=pa.int64(), mask=~timed),
                Col.CORRELATION: pa.array(_np(batch, "id"), type=pa.int64(), mask=marker),
            },
        )


def _meta(db: SqliteTrace, path: Path, state: _State) -> TraceMeta:
    extra: dict[str, str | int | float | bool] = {}
    if METADATA in db.tables and {"tag", "value"} <= db.columns(METADATA):
        for tag, value in db.rows(f"SELECT tag, value FROM {METADATA}"):
            if tag in ("schema_version", "session_count") and value is not None:
                extra[f"rpd_{tag}"] = str(value)
    warnings = list(db.warnings())
    if state.skipped_ops:
        parts = ", ".join(f"{label} {count:,}" for label, count in sorted(state.skipped_ops.items()))
        warnings.append(f"not read: GPU ops of types with no work of their own ({parts})")
    return TraceMeta(path=str(path), format="rpd", extra=extra, warnings=tuple(warnings))


def read_batches(
    path: Path, display: str, use_adbc: bool | None = None
) -> tuple[Iterator[pa.RecordBatch], Callable[[], TraceMeta]]:
    """Start reading an rpd database; returns the batch iterator and a finisher that builds `TraceMeta`."""
    if is_gzip(path):
        raise InputError(f"{display}: a compressed SQLite file; decompress it first (gunzip)")
    db = SqliteTrace(path, display, use_adbc=use_adbc, own_views=True)  # rpd's views: conveniences
    missing = [t for t in RPD_TABLES if t not in db.tables]
    if missing:
        db.close()
        raise InputError(
            f"{display}: an SQLite database, but not an rpd file (no {', '.join(missing)} table)"
        )
    state = _State(strings=StringTable.of(db.rows(f"SELECT id, string FROM {STRINGS}")))

    def batches() -> Iterator[pa.RecordBatch]:
        yield from _ops(db, state)
        yield from _api(db, state)

    def finish() -> TraceMeta:
        try:
            return _meta(db, path, state)
        finally:
            db.close()

    return batches(), finish
