"""rocprof readers (AMD): rocprofv3 / rocprofiler-sdk JSON and the rocprof kernel CSV files.

JSON (`rocprofv3 --output-format json`): `buffer_records.kernel_dispatch` joined to `kernel_symbols` for the
names and to `agents` for the device; `memory_copy` records become memcpys. The document is decoded in one
pass by msgspec into small typed structs that keep only these fields (everything else is skipped).
CSV, three layouts told apart by their columns: rocprof v1 `results.csv` (`KernelName`, `BeginNs`, `EndNs`),
omniperf / rocprof-compute `timestamps.csv` (`Kernel_Name`, `Start_Timestamp`, `End_Timestamp`; a
`sysinfo.csv` beside it names the GPU) and rocprofv3 `kernel_trace.csv` (`Kernel_Name`, `Start_Timestamp`,
`End_Timestamp`, `Grid_Size_X`, ...). AMD grid sizes count work-items; the model's grid counts blocks
(workgroups), so grid = ceil(grid size / workgroup size) per dimension. Kernel names lose the code-object
suffix (" [clone .kd]", ".kd") so they read as in Kineto traces of the same program.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from opscope.errors import InputError
from opscope.ingest import columns as C
from opscope.ingest.source import ChunkReader
from opscope.model.meta import DeviceInfo, TraceMeta
from opscope.model.schema import Col, Kind

BATCH = 1 << 16
_KD_SUFFIX = re.compile(r"(\s*\[clone \.kd\]|\.kd)$")
# rocprofiler_memory_copy_operation_t
_COPY_KINDS = {1: "HtoH", 2: "HtoD", 3: "DtoH", 4: "DtoD"}
# rocprofiler-sdk's memory copy operation names (MEMORY_COPY_HOST_TO_DEVICE, ...) -> Kineto's abbreviation
_COPY_DIRECTIONS = (
    ("HOST_TO_DEVICE", "HtoD"),
    ("DEVICE_TO_HOST", "DtoH"),
    ("DEVICE_TO_DEVICE", "DtoD"),
    ("HOST_TO_HOST", "HtoH"),
    ("PEER_TO_PEER", "PtoP"),
)


def copy_name(operation: str) -> str:
    """A memory copy named as Kineto names it ("Memcpy HtoD") from rocprofiler-sdk's operation name, as the
    rocpd and Perfetto outputs of rocprofv3 write it."""
    upper = operation.upper()
    for token, short in _COPY_DIRECTIONS:
        if token in upper:
            return f"Memcpy {short}"
    return "Memcpy Unknown"


def kernel_name(raw: str) -> str:
    """The kernel name without the code-object suffix rocprof appends."""
    return _KD_SUFFIX.sub("", raw)


# -- rocprofiler-sdk JSON ------------------------------------------------------------------------------------


class _Handle(msgspec.Struct, gc=False):
    handle: int = 0


class _Dim(msgspec.Struct, gc=False):
    x: int = 1
    y: int = 1
    z: int = 1


class _Corr(msgspec.Struct, gc=False):
    internal: int | None = None


class _DispatchInfo(msgspec.Struct, gc=False):
    agent_id: _Handle = msgspec.field(default_factory=_Handle)
    queue_id: _Handle = msgspec.field(default_factory=_Handle)
    kernel_id: int = 0
    group_segment_size: int | None = None
    workgroup_size: _Dim = msgspec.field(default_factory=_Dim)
    grid_size: _Dim = msgspec.field(default_factory=_Dim)


class _Dispatch(msgspec.Struct, gc=False):
    start_timestamp: int
    end_timestamp: int
    dispatch_info: _DispatchInfo
    correlation_id: _Corr = msgspec.field(default_factory=_Corr)
    stream_id: _Handle = msgspec.field(default_factory=_Handle)


class _Copy(msgspec.Struct, gc=False):
    start_timestamp: int
    end_timestamp: int
    operation: int = 0
    bytes: int | None = None
    dst_agent_id: _Handle = msgspec.field(default_factory=_Handle)
    src_agent_id: _Handle = msgspec.field(default_factory=_Handle)
    correlation_id: _Corr = msgspec.field(default_factory=_Corr)
    stream_id: _Handle = msgspec.field(default_factory=_Handle)


class _Symbol(msgspec.Struct, gc=False):
    kernel_id: int = 0
    kernel_name: str = ""
    formatted_kernel_name: str = ""
    demangled_kernel_name: str = ""
    arch_vgpr_count: int | None = None
    accum_vgpr_count: int | None = None
    group_segment_size: int | None = None


class _Agent(msgspec.Struct, gc=False):
    id: _Handle
    type: int = 0
    name: str = ""
    product_name: str = ""
    logical_node_type_id: int = 0
    cu_count: int | None = None
    wave_front_size: int | None = None
    max_waves_per_cu: int | None = None
    workgroup_max_size: int | None = None
    lds_size_in_kb: int | None = None


class _Records(msgspec.Struct, gc=False):
    kernel_dispatch: list[_Dispatch] = []
    memory_copy: list[_Copy] = []


class _Tool(msgspec.Struct, gc=False):
    agents: list[_Agent] = []
    kernel_symbols: list[_Symbol] = []
    buffer_records: _Records = msgspec.field(default_factory=_Records)


class _Document(msgspec.Struct, gc=False):
    tool: list[_Tool] = msgspec.field(name="rocprofiler-sdk-tool", default_factory=list)


def _gpu_agents(agents: Sequence[_Agent]) -> tuple[dict[int, int], dict[int, DeviceInfo]]:
    """Agent handle -> GPU index, and the GPUs as devices (CPU agents are type 1, GPUs type 2)."""
    index: dict[int, int] = {}
    devices: dict[int, DeviceInfo] = {}
    for agent in agents:
        if agent.type != 2:
            continue
        gpu = agent.logical_node_type_id
        index[agent.id.handle] = gpu
        waves = agent.max_waves_per_cu
        devices.setdefault(
            gpu,
            DeviceInfo(
                id=gpu,
                name=agent.product_name or agent.name or f"GPU {gpu}",
                sm_count=agent.cu_count,
                warp_size=agent.wave_front_size,
                max_warps_per_sm=waves,
                max_threads_per_sm=waves * agent.wave_front_size if waves and agent.wave_front_size else None,
                max_threads_per_block=agent.workgroup_max_size or None,
                shared_mem_per_block=agent.lds_size_in_kb * 1024 if agent.lds_size_in_kb else None,
                arch=agent.name or None,
            ),
        )
    return index, devices


def _blocks(grid: int, group: int) -> int:
    return math.ceil(grid / group) if group > 0 else grid


def _int32(values: np.ndarray, valid: np.ndarray, column: str, beyond: dict[str, int]) -> pa.Array:
    """A 32-bit column (device, grid, workgroup, VGPRs): a value beyond 32 bits is left empty and counted for a
    warning naming its column, as the JSON reader does (it rejected the whole file, issue 32)."""
    fits = (values >= -(2**31)) & (values < 2**31)
    count = int(np.count_nonzero(valid & ~fits))
    if count:
        beyond[column] = beyond.get(column, 0) + count
    return C.ints(np.where(fits, values, 0), pa.int32(), valid & fits)


def _beyond_warnings(display: str, beyond: dict[str, int]) -> tuple[str, ...]:
    return tuple(
        f"{display}: {count:,} {'value' if count == 1 else 'values'} of {column} beyond 32 bits: left empty"
        for column, count in sorted(beyond.items())
    )


def _int32_of(values: Sequence[int | None], column: str, beyond: dict[str, int]) -> pa.Array:
    """`_int32` over Python integers (None: empty; beyond 64 bits: empty and counted too)."""
    n = len(values)
    ok = np.fromiter((v is not None and -(2**63) <= v < 2**63 for v in values), dtype=bool, count=n)
    wide = np.fromiter(
        (v if good else 0 for v, good in zip(values, ok, strict=True)), dtype=np.int64, count=n
    )
    count = int(np.count_nonzero(~ok)) - sum(v is None for v in values)
    if count:
        beyond[column] = beyond.get(column, 0) + count
    return _int32(wide, ok, column, beyond)


def _dispatch_batch(
    chunk: Sequence[_Dispatch],
    names: dict[int, str],
    symbols: dict[int, _Symbol],
    agents: dict[int, int],
    beyond: dict[str, int],
) -> pa.RecordBatch:
    n = len(chunk)
    start = np.fromiter((r.start_timestamp for r in chunk), dtype=np.int64, count=n)
    end = np.fromiter((r.end_timestamp for r in chunk), dtype=np.int64, count=n)
    device = np.fromiter(
        (agents.get(r.dispatch_info.agent_id.handle, -1) for r in chunk), dtype=np.int64, count=n
    )
    stream = np.fromiter((r.stream_id.handle for r in chunk), dtype=np.int64, count=n)
    kernel = np.fromiter((r.dispatch_info.kernel_id for r in chunk), dtype=np.int64, count=n)
    infos = [r.dispatch_info for r in chunk]
    regs = [
        None
        if (s := symbols.get(i.kernel_id)) is None or s.arch_vgpr_count is None
        else s.arch_vgpr_count + (s.accum_vgpr_count or 0)
        for i in infos
    ]
    return C.record_batch(
        n,
        {
            Col.PH: C.const_text("X", n),
            Col.CAT: C.const_text("kernel", n),
            Col.KIND: C.kinds(Kind.KERNEL, n),
            Col.NAME: C.text_by_code(kernel, names),
            Col.PID: C.text_of_ints(device, device >= 0),
            Col.TID: C.text_of_ints(stream),
            Col.TS_NS: pa.array(start),
            Col.DUR_NS: pa.array(end - start),
            Col.DEVICE: _int32(device, device >= 0, "logical_node_type_id", beyond),
            Col.STREAM: pa.array(stream),
            Col.CORRELATION: pa.array([r.correlation_id.internal for r in chunk], type=pa.int64()),
            Col.GRID_X: _int32_of(
                [_blocks(i.grid_size.x, i.workgroup_size.x) for i in infos], "grid_size.x", beyond
            ),
            Col.GRID_Y: _int32_of(
                [_blocks(i.grid_size.y, i.workgroup_size.y) for i in infos], "grid_size.y", beyond
            ),
            Col.GRID_Z: _int32_of(
                [_blocks(i.grid_size.z, i.workgroup_size.z) for i in infos], "grid_size.z", beyond
            ),
            Col.BLOCK_X: _int32_of([i.workgroup_size.x for i in infos], "workgroup_size.x", beyond),
            Col.BLOCK_Y: _int32_of([i.workgroup_size.y for i in infos], "workgroup_size.y", beyond),
            Col.BLOCK_Z: _int32_of([i.workgroup_size.z for i in infos], "workgroup_size.z", beyond),
            Col.REGISTERS: _int32_of(regs, "arch_vgpr_count", beyond),
            Col.SHARED_MEMORY: pa.array([i.group_segment_size for i in infos], type=pa.int64()),
        },
    )


def _copy_batch(chunk: Sequence[_Copy], agents: dict[int, int], beyond: dict[str, int]) -> pa.RecordBatch:
    n = len(chunk)
    start = np.fromiter((r.start_timestamp for r in chunk), dtype=np.int64, count=n)
    end = np.fromiter((r.end_timestamp for r in chunk), dtype=np.int64, count=n)
    # The GPU side of the copy: the destination for host-to-device, else the source.
    device = np.fromiter(
        (agents.get(r.dst_agent_id.handle, agents.get(r.src_agent_id.handle, -1)) for r in chunk),
        dtype=np.int64,
        count=n,
    )
    nbytes = [r.bytes for r in chunk]
    dur = end - start
    return C.record_batch(
        n,
        {
            Col.PH: C.const_text("X", n),
            Col.CAT: C.const_text("gpu_memcpy", n),
            Col.KIND: C.kinds(Kind.MEMCPY, n),
            Col.NAME: C.text([f"Memcpy {_COPY_KINDS.get(r.operation, 'Unknown')}" for r in chunk]),
            Col.PID: C.text_of_ints(device, device >= 0),
            Col.TID: C.text_of_ints(
                np.fromiter((r.stream_id.handle for r in chunk), dtype=np.int64, count=n)
            ),
            Col.TS_NS: pa.array(start),
            Col.DUR_NS: pa.array(dur),
            Col.DEVICE: _int32(device, device >= 0, "logical_node_type_id", beyond),
            Col.STREAM: pa.array([r.stream_id.handle for r in chunk], type=pa.int64()),
            Col.CORRELATION: pa.array([r.correlation_id.internal for r in chunk], type=pa.int64()),
            Col.BYTES: pa.array(nbytes, type=pa.int64()),
            Col.BANDWIDTH_GBPS: pa.array(
                [b / d if b is not None and d > 0 else None for b, d in zip(nbytes, dur)], type=pa.float64()
            ),
        },
    )


def _read_all(path: Path, display: str) -> bytes:
    reader = ChunkReader(path)
    data = b"".join(reader)
    if reader.truncated:
        raise InputError(
            f"{display}: rocprofiler-sdk JSON cut off mid-write ({reader.error}); cannot salvage it"
        )
    return data


def read_json(path: Path, display: str) -> tuple[Iterator[pa.RecordBatch], Callable[[], TraceMeta]]:
    try:
        doc = msgspec.json.decode(_read_all(path, display), type=_Document)
    except msgspec.DecodeError as exc:
        raise InputError(f"{display}: not a valid rocprofiler-sdk JSON document ({exc})") from None
    devices: dict[int, DeviceInfo] = {}
    beyond: dict[str, int] = {}  # field -> values beyond 32 bits (left empty)

    def batches() -> Iterator[pa.RecordBatch]:
        for tool in doc.tool:
            agents, found = _gpu_agents(tool.agents)
            devices.update(found)
            symbols = {s.kernel_id: s for s in tool.kernel_symbols}
            names = {
                k: kernel_name(s.formatted_kernel_name or s.demangled_kernel_name or s.kernel_name)
                for k, s in symbols.items()
            }
            dispatches = tool.buffer_records.kernel_dispatch
            for lo in range(0, len(dispatches), BATCH):
                yield _dispatch_batch(dispatches[lo : lo + BATCH], names, symbols, agents, beyond)
            copies = tool.buffer_records.memory_copy
            for lo in range(0, len(copies), BATCH):
                yield _copy_batch(copies[lo : lo + BATCH], agents, beyond)

    def finish() -> TraceMeta:
        return TraceMeta(
            path=str(path),
            format="rocprof",
            devices=tuple(devices[k] for k in sorted(devices)),
            warnings=_beyond_warnings(display, beyond),
        )

    return batches(), finish


# -- rocprof CSV ---------------------------------------------------------------------------------------------

_ALIASES: dict[str, tuple[str, ...]] = {
    "name": ("Kernel_Name", "KernelName"),
    "start": ("Start_Timestamp", "BeginNs"),
    "end": ("End_Timestamp", "EndNs"),
    "device": ("GPU_ID", "gpu-id", "Agent_Id"),
    "stream": ("Stream_Id",),
    "queue": ("queue-id", "Queue_Id"),
    "corr": ("Correlation_Id",),
    "grid": ("Grid_Size", "grd"),
    "group": ("Workgroup_Size", "wgr"),
    "lds": ("LDS_Per_Workgroup", "lds", "LDS_Block_Size", "Group_Segment_Size"),
    "vgpr": ("Arch_VGPR", "arch_vgpr", "vgpr", "VGPR_Count"),
    "accum": ("Accum_VGPR", "accum_vgpr", "Accum_VGPR_Count"),
    **{f"grid_{d}": (f"Grid_Size_{d.upper()}",) for d in "xyz"},
    **{f"group_{d}": (f"Workgroup_Size_{d.upper()}",) for d in "xyz"},
}


def _header(head: bytes) -> list[str]:
    text = head.decode("utf-8", "replace").lstrip("\ufeff")
    first = text.splitlines()[0] if text else ""
    return next(csv.reader([first]), [])


def _columns(header: Sequence[str]) -> dict[str, str]:
    present = set(header)
    return {
        key: next(a for a in aliases if a in present)
        for key, aliases in _ALIASES.items()
        if any(a in present for a in aliases)
    }


def sniff_csv(head: bytes, path: Path) -> bool:
    found = _columns(_header(head))
    return {"name", "start", "end"} <= found.keys()


def _ints(table: pa.Table, column: str | None) -> np.ndarray | None:
    """A column as int64, parsing the digits out of text such as "Agent 2"; None when absent."""
    if column is None:
        return None
    values = table.column(column).to_pylist()
    out = np.empty(len(values), dtype=np.int64)
    for i, v in enumerate(values):
        digits = re.sub(r"\D", "", v or "")
        out[i] = int(digits) if digits and len(digits) < 19 else -1
    return out


def _sysinfo(path: Path, gpu_ids: set[int]) -> dict[int, DeviceInfo]:
    """The GPU named by `sysinfo.csv` beside an omniperf `timestamps.csv` or `pmc_perf.csv`, for each GPU id seen
    (their GPU_ID is a node id of the kernel driver - e.g. 11995 - not a name)."""
    sibling = path.with_name(re.sub(r"(timestamps|pmc_perf)\.csv$", "sysinfo.csv", path.name))
    if sibling == path or not sibling.is_file():
        return {}
    try:
        row = next(csv.DictReader(io.StringIO(sibling.read_text(encoding="utf-8", errors="replace"))), None)
    except (OSError, csv.Error):
        return {}
    if not row:
        return {}

    return sysinfo_devices(row, gpu_ids)


def sysinfo_devices(row: Mapping[str, object], gpu_ids: set[int]) -> dict[int, DeviceInfo]:
    """The GPU that omniperf / rocprof-compute's system information names (`sysinfo.csv`, or the workload's
    `sys_info_extdata` in a rocprof-compute database: the same keys), as each of `gpu_ids`."""

    def num(key: str) -> int | None:
        value = str(row.get(key) or "").strip()
        return int(value) if value.isdigit() else None

    model = str(row.get("gpu_model") or "").strip() or "AMD GPU"
    waves, wave = num("max_waves_per_cu"), num("wave_size")
    return {
        g: DeviceInfo(
            id=g,
            name=model,
            sm_count=num("cu_per_gpu"),
            warp_size=wave,
            max_warps_per_sm=waves,
            max_threads_per_sm=waves * wave if waves and wave else None,
            max_threads_per_block=num("workgroup_max_size"),
            arch=str(row.get("gpu_arch") or "").strip() or None,
        )
        for g in gpu_ids
    }


def read_csv(path: Path, display: str) -> tuple[Iterator[pa.RecordBatch], Callable[[], TraceMeta]]:
    with open(path, "rb") as handle:
        header = _header(handle.read(1 << 16))
    cols = _columns(header)
    if not {"name", "start", "end"} <= cols.keys():
        raise InputError(f"{display}: CSV without the rocprof kernel columns (name, start, end)")
    types = {c: pa.string() for c in header}
    types.update({cols[k]: pa.int64() for k in ("start", "end") if k in cols})
    gpu_ids: set[int] = set()
    beyond: dict[str, int] = {}  # column -> values beyond 32 bits (left empty)

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            reader = pacsv.open_csv(
                path,
                read_options=pacsv.ReadOptions(block_size=8 << 20),
                convert_options=pacsv.ConvertOptions(column_types=types),
            )
            for block in reader:
                if block.num_rows:
                    yield _csv_batch(pa.Table.from_batches([block]), cols, gpu_ids, beyond)
        except (pa.ArrowInvalid, OSError) as exc:
            raise InputError(f"{display}: malformed rocprof CSV ({str(exc).splitlines()[0]})") from None

    def finish() -> TraceMeta:
        devices = _sysinfo(path, gpu_ids)
        return TraceMeta(
            path=str(path),
            format="rocprof-csv",
            devices=tuple(devices[k] for k in sorted(devices)),
            warnings=_beyond_warnings(display, beyond),
        )

    return batches(), finish


def _csv_batch(
    table: pa.Table, cols: dict[str, str], gpu_ids: set[int], beyond: dict[str, int]
) -> pa.RecordBatch:
    n = table.num_rows
    start = table.column(cols["start"]).to_numpy()
    end = table.column(cols["end"]).to_numpy()
    device = _ints(table, cols.get("device"))
    stream = _ints(table, cols.get("stream") or cols.get("queue"))
    out: dict[str, pa.Array] = {
        Col.PH: C.const_text("X", n),
        Col.CAT: C.const_text("kernel", n),
        Col.KIND: C.kinds(Kind.KERNEL, n),
        Col.NAME: C.text([kernel_name(v or "") for v in table.column(cols["name"]).to_pylist()]),
        Col.TS_NS: pa.array(start),
        Col.DUR_NS: pa.array(end - start),
    }
    if device is not None:
        gpu_ids.update(int(d) for d in np.unique(device[device >= 0]))
        out[Col.DEVICE] = _int32(device, device >= 0, cols["device"], beyond)
        out[Col.PID] = C.text_of_ints(device, device >= 0)
    if stream is not None:
        out[Col.STREAM] = C.ints(stream, pa.int64(), stream >= 0)
        out[Col.TID] = C.text_of_ints(stream, stream >= 0)
    corr = _ints(table, cols.get("corr"))
    if corr is not None:
        out[Col.CORRELATION] = C.ints(corr, pa.int64(), corr >= 0)
    _csv_launch(table, cols, out, beyond)
    return C.record_batch(n, out)


def _csv_launch(
    table: pa.Table, cols: dict[str, str], out: dict[str, pa.Array], beyond: dict[str, int]
) -> None:
    """Grid (in workgroups), workgroup size, LDS and VGPRs, from whichever layout the file has."""
    dims: list[tuple[str, str, str, str]] = [
        ("grid_x", "group_x", Col.GRID_X, Col.BLOCK_X),
        ("grid_y", "group_y", Col.GRID_Y, Col.BLOCK_Y),
        ("grid_z", "group_z", Col.GRID_Z, Col.BLOCK_Z),
    ]
    if "grid_x" not in cols and "grid" in cols:  # 1-D layouts: total work-items and workgroup size
        dims = [("grid", "group", Col.GRID_X, Col.BLOCK_X)]
        out[Col.GRID_Y] = out[Col.GRID_Z] = out[Col.BLOCK_Y] = out[Col.BLOCK_Z] = pa.array(
            np.ones(table.num_rows, dtype=np.int32)
        )
    for grid_key, group_key, grid_col, block_col in dims:
        grid, group = _ints(table, cols.get(grid_key)), _ints(table, cols.get(group_key))
        if grid is None or group is None:
            continue
        ok = (grid >= 0) & (group > 0)
        blocks = np.where(ok, -(-grid // np.where(group > 0, group, 1)), 0)
        out[grid_col] = _int32(blocks, ok, cols[grid_key], beyond)
        out[block_col] = _int32(group, group >= 0, cols[group_key], beyond)
    lds = _ints(table, cols.get("lds"))
    if lds is not None:
        out[Col.SHARED_MEMORY] = C.ints(lds, pa.int64(), lds >= 0)
    vgpr, accum = _ints(table, cols.get("vgpr")), _ints(table, cols.get("accum"))
    if vgpr is not None:
        total = vgpr + (np.maximum(accum, 0) if accum is not None else 0)
        out[Col.REGISTERS] = _int32(total, vgpr >= 0, cols["vgpr"], beyond)


def describe_csv(head: bytes) -> str:
    """A short description of a CSV's columns, for the error when no reader takes it."""
    header = _header(head)
    shown = ", ".join(header[:6]) + (", ..." if len(header) > 6 else "")
    return f"CSV with columns {shown}" if header else "CSV without a header"
