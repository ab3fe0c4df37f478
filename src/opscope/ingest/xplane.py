"""XLA / TSL profiler `.xplane.pb` reader (what `jax.profiler.trace` writes): an `XSpace` protobuf -> events.

Mapping (docs/readers.md, "JAX / XLA xplane"):
- planes `/device:GPU:N` (any `/device:<TYPE>:N`): lines named `Stream #S(...)` are GPU streams; their events are
  kernels, or memcpys (a `memcpy_details` stat, or a name starting with Memcpy / Copy) and memsets (Memset):
  `device` = N, `stream` = the line id S. Other device lines (derived lines such as "XLA Ops") become
  `gpu_user_annotation` rows, never GPU work.
- other planes (`/host:CPU`, ...): lines are threads. An event with a `correlation_id` stat is a runtime call (the
  launch of the device event with that id); a `$file:line function` event is a Python frame; a
  MemoryAllocation / MemoryDeallocation is an instant; any other event is a CPU op.
- times: `ts_ns` = floor((line.timestamp_ns * 1000 + offset_ps) / 1000), `dur_ns` = duration_ps / 1000 rounded
  half up (picoseconds -> nanoseconds).
- stats (event metadata stats first, the event's own stats override): `correlation_id` -> correlation,
  `hlo_op`, `hlo_module`, `program_id`, `name` (the JAX name stack), `step_num` (StepTraceAnnotation);
  `kernel_details` (grid, block, regs, static_shared + dynamic_shared or AMD group_mem, occ_pct) and
  `memcpy_details` (size) on device events. A `ref_value` stat names its value by a stat-metadata entry.
- pid = the plane name, tid = the line name; device planes' properties become `DeviceInfo`s.

The protobuf is decoded by the `protobuf` runtime (ingest/xplane_proto.py); a file that does not decode is a
one-line error.
"""

from __future__ import annotations

import dataclasses
import re
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from opscope.errors import InputError
from opscope.ingest import columns as C
from opscope.ingest.hlo_scopes import hlo_scopes, with_device_hlo
from opscope.model.meta import DeviceInfo, TraceMeta
from opscope.model.schema import Col, Kind

_DEVICE_PLANE = re.compile(r"^/device:([A-Za-z_]+):(\d+)")
_STREAM_LINE = re.compile(r"^Stream #(\d+)")
_I32 = (-(2**31), 2**31 - 1)
_I64 = (-(2**63), 2**63 - 1)
_INSTANTS = frozenset({"MemoryAllocation", "MemoryDeallocation"})
_MAX_BYTES = 2**31 - 1  # the protobuf runtime's limit for one message

_TEXT_COLS = (Col.PH, Col.CAT, Col.NAME, Col.PID, Col.TID, Col.HLO_OP, Col.HLO_MODULE, Col.NAME_STACK)
_INT_COLS = {
    Col.TS_NS: pa.int64(),
    Col.DUR_NS: pa.int64(),
    Col.DEVICE: pa.int32(),
    Col.STREAM: pa.int64(),
    Col.CORRELATION: pa.int64(),
    Col.GRID_X: pa.int32(),
    Col.GRID_Y: pa.int32(),
    Col.GRID_Z: pa.int32(),
    Col.BLOCK_X: pa.int32(),
    Col.BLOCK_Y: pa.int32(),
    Col.BLOCK_Z: pa.int32(),
    Col.REGISTERS: pa.int32(),
    Col.SHARED_MEMORY: pa.int64(),
    Col.BYTES: pa.int64(),
    Col.PROGRAM_ID: pa.int64(),
    Col.STEP_NUM: pa.int64(),
}
_FLOAT_COLS = {Col.OCCUPANCY_PCT: pa.float32()}


def sniff(head: bytes, path: Path) -> bool:
    """An XSpace: its first field is a plane (field 1, length-delimited) whose name (field 2, after an optional
    id) is a profiler plane name such as `/host:CPU`, `/device:GPU:0` or `Task Environment`."""
    if head[:1] != b"\x0a":
        return False
    pos = _skip_varint(head, 1)
    if pos is not None and head[pos : pos + 1] == b"\x08":  # XPlane.id
        pos = _skip_varint(head, pos + 1)
    if pos is None or head[pos : pos + 1] != b"\x12":  # XPlane.name
        return False
    start = _skip_varint(head, pos + 1)
    return (
        start is not None
        and head[start : start + 1] in (b"/", b"T")
        and (
            head[start : start + 6] in (b"/host:", b"/devic")
            or head[start : start + 16] == b"Task Environment"
        )
    )


def _varint(data: bytes, pos: int) -> tuple[int, int] | None:
    """(value, position after it) of the varint at `pos`, or None where it is cut off or longer than 10 bytes."""
    value = 0
    for shift, i in enumerate(range(pos, min(pos + 10, len(data)))):
        value |= (data[i] & 0x7F) << (7 * shift)
        if data[i] < 0x80:
            return value, i + 1
    return None


def _skip_varint(data: bytes, pos: int) -> int | None:
    found = _varint(data, pos)
    return None if found is None else found[1]


def complete_prefix(data: bytes) -> tuple[int, int]:
    """(end of the last whole top-level field of the XSpace, whole planes before it): only the framing of the
    top level is read here (tag, length), to find where a cut-off file stops; the fields themselves are decoded
    by the protobuf runtime."""
    pos = planes = 0
    while pos < len(data):
        tag = _varint(data, pos)
        if tag is None:
            break
        key, after = tag
        wire = key & 7
        if wire == 2:  # length-delimited: planes (field 1), errors, warnings, hostnames
            length = _varint(data, after)
            if length is None or length[1] + length[0] > len(data):
                break
            end = length[1] + length[0]
            planes += key >> 3 == 1
        elif wire == 0:
            value = _varint(data, after)
            if value is None:
                break
            end = value[1]
        elif wire in (1, 5):
            end = after + (8 if wire == 1 else 4)
            if end > len(data):
                break
        else:
            break
        pos = end
    return pos, planes


def _decompress(data: bytes, display: str) -> tuple[bytes, bool]:
    """The decompressed bytes of a gzip file, and whether its stream was cut off (what it held up to the cut is
    kept)."""
    inflater = zlib.decompressobj(wbits=31)
    try:
        out = inflater.decompress(data)
    except zlib.error as exc:
        raise InputError(f"{display}: damaged gzip data ({exc})") from None
    return out, not inflater.eof


def _whole_planes(data: bytes, display: str) -> tuple[Any, int]:
    """The XSpace of the whole top-level fields before the cut or the damage in `data`, and where they end;
    an `InputError` when no whole plane precedes it, or what precedes it does not decode either."""
    from google.protobuf.message import DecodeError

    from opscope.ingest.xplane_proto import messages

    end, planes = complete_prefix(data)
    if end < len(data) and planes == 0:
        raise InputError(
            f"{display}: cut off or damaged before the end of its first plane (byte {end:,} of "
            f"{len(data):,}); nothing to salvage"
        )
    if end < len(data):
        space = messages()["XSpace"]()
        try:
            space.ParseFromString(data[:end])
            return space, end
        except DecodeError:
            pass
    raise InputError(
        f"{display}: not a valid XSpace protobuf (truncated or damaged xplane.pb; {len(data):,} bytes)"
    )


def parse_space(path: Path, display: str) -> tuple[Any, str | None]:
    """The file's `XSpace` message (gzip-compressed files are decompressed) and, for a file cut off mid-write,
    the warning saying what was salvaged (every whole plane before the cut); bad content is one `InputError`."""
    from google.protobuf.message import DecodeError

    from opscope.ingest.xplane_proto import messages

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{display}: cannot read: {exc.strerror or exc}") from None
    gzip_cut = False
    if data[:2] == b"\x1f\x8b":
        data, gzip_cut = _decompress(data, display)
    if len(data) > _MAX_BYTES:
        raise InputError(f"{display}: an xplane larger than 2 GiB, beyond what the protobuf runtime decodes")
    space = messages()["XSpace"]()
    salvaged = None
    try:
        space.ParseFromString(data)
    except DecodeError:
        space, salvaged = _whole_planes(data, display)
    if not space.planes:
        raise InputError(f"{display}: an XSpace protobuf without planes (nothing was profiled)")
    warning = None
    if salvaged is not None or gzip_cut:
        kept = salvaged if salvaged is not None else len(data)
        if gzip_cut:
            warning = (
                f"{path.name}: trace cut off mid-write (gzip stream ends at byte {len(data):,} of the "
                f"decompressed data); salvaged {len(space.planes):,} complete planes up to byte {kept:,}"
            )
        else:
            warning = (
                f"{path.name}: trace cut off mid-write or damaged (the XSpace protobuf is unreadable after "
                f"byte {kept:,} of {len(data):,}); salvaged {len(space.planes):,} complete planes"
            )
    return space, warning


def _stat_value(stat: Any, names: dict[int, str]) -> Any:
    which = stat.WhichOneof("value")
    if which is None:
        return None
    value = getattr(stat, which)
    if which == "ref_value":
        return names.get(value)
    if which == "bytes_value":
        return None
    return value


def _stats(stats: Any, names: dict[int, str], into: dict[str, Any]) -> dict[str, Any]:
    for stat in stats:
        key = names.get(stat.metadata_id)
        if key is not None:
            into[key] = _stat_value(stat, names)
    return into


def _int(value: Any, bounds: tuple[int, int] = _I64) -> int | None:
    if value is None:
        return None
    if type(value) is int:
        return value if bounds[0] <= value <= bounds[1] else None
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        value = value.strip()
        if not value.lstrip("-").isdigit():
            return None
        value = int(value)
    if isinstance(value, int) and bounds[0] <= value <= bounds[1]:
        return value
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _details(text: Any) -> dict[str, str]:
    """`kernel_details` / `memcpy_details`: space-separated `key:value` pairs."""
    if not isinstance(text, str):
        return {}
    out = {}
    for token in text.split():
        key, sep, value = token.partition(":")
        if sep:
            out[key] = value
    return out


def _launch_config(row: dict[str, Any], details: dict[str, str]) -> None:
    for key, cols in (
        ("grid", (Col.GRID_X, Col.GRID_Y, Col.GRID_Z)),
        ("block", (Col.BLOCK_X, Col.BLOCK_Y, Col.BLOCK_Z)),
    ):
        parts = details.get(key, "").split(",")
        if len(parts) == 3:
            for col, part in zip(cols, parts):
                row[col] = _int(part, _I32)
    row[Col.REGISTERS] = _int(details.get("regs"), _I32)
    static, dynamic = _int(details.get("static_shared")), _int(details.get("dynamic_shared"))
    if static is not None or dynamic is not None:
        row[Col.SHARED_MEMORY] = (static or 0) + (dynamic or 0)
    else:
        row[Col.SHARED_MEMORY] = _int(details.get("group_mem"))
    try:
        occupancy = float(details.get("occ_pct", ""))
    except ValueError:
        occupancy = 0.0
    # XLA's ROCm tracer writes occ_pct:0 when it does not compute it: 0 is "unknown", left empty.
    row[Col.OCCUPANCY_PCT] = occupancy if 0.0 < occupancy <= 100.0 else None


def _plane_rows(plane: Any) -> Iterator[dict[str, Any]]:
    names = {key: meta.name for key, meta in plane.stat_metadata.items()}
    event_meta = {
        key: (meta.name or meta.display_name, _stats(meta.stats, names, {}))
        for key, meta in plane.event_metadata.items()
    }
    device_match = _DEVICE_PLANE.match(plane.name)
    device = _int(device_match.group(2), _I32) if device_match else None
    for line in plane.lines:
        tid = line.display_name or line.name or str(line.id)
        stream_line = device_match is not None and _STREAM_LINE.match(line.name) is not None
        base_ps = line.timestamp_ns * 1000
        for event in line.events:
            name, meta_stats = event_meta.get(event.metadata_id, ("", {}))
            stats = _stats(event.stats, names, dict(meta_stats)) if event.stats else meta_stats
            start_ps = base_ps + event.offset_ps
            row: dict[str, Any] = {
                Col.NAME: name,
                Col.PID: plane.name,
                Col.TID: tid,
                Col.TS_NS: start_ps // 1000,
                Col.DUR_NS: (event.duration_ps + 500) // 1000,
                Col.CORRELATION: _int(stats.get("correlation_id")),
                Col.HLO_OP: _text(stats.get("hlo_op")),
                Col.HLO_MODULE: _text(stats.get("hlo_module")),
                Col.PROGRAM_ID: _int(stats.get("program_id")),
                Col.NAME_STACK: _text(stats.get("name")),
                Col.STEP_NUM: _int(stats.get("step_num")),
                Col.PH: "X",
            }
            if device_match is not None:
                row[Col.DEVICE] = device
                if stream_line:
                    row[Col.STREAM] = line.id
                    kind = device_kind(name, stats)
                    if kind == Kind.KERNEL:
                        _launch_config(row, _details(stats.get("kernel_details")))
                    else:
                        row[Col.BYTES] = _int(_details(stats.get("memcpy_details")).get("size"))
                else:
                    kind = Kind.GPU_ANNOTATION
            else:
                kind = host_kind(name, stats)
                if kind == Kind.INSTANT:
                    row[Col.PH], row[Col.DUR_NS] = "i", None
            row[Col.KIND] = kind
            row[Col.CAT] = _CATS[kind]
            yield row


_CATS = {
    Kind.KERNEL: "kernel",
    Kind.MEMCPY: "gpu_memcpy",
    Kind.MEMSET: "gpu_memset",
    Kind.GPU_ANNOTATION: "gpu_user_annotation",
    Kind.RUNTIME: "runtime",
    Kind.PYTHON: "python_function",
    Kind.INSTANT: "cpu_instant_event",
    Kind.CPU_OP: "cpu_op",
    Kind.USER_ANNOTATION: "user_annotation",
}


def device_kind(name: str, stats: dict[str, Any]) -> str:
    """The kind of an event on a GPU stream line."""
    lower = name.lower()
    if "memset" in lower:
        return Kind.MEMSET
    if "memcpy_details" in stats or lower.startswith(("memcpy", "copy")):
        return Kind.MEMCPY
    return Kind.KERNEL


def host_kind(name: str, stats: dict[str, Any]) -> str:
    """The kind of an event on a host line."""
    if stats.get("correlation_id") is not None:
        return Kind.RUNTIME
    if stats.get("step_num") is not None:
        return Kind.USER_ANNOTATION
    if name.startswith("$"):
        return Kind.PYTHON
    if name in _INSTANTS:
        return Kind.INSTANT
    return Kind.CPU_OP


def scope_batch(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    """Rows (column -> value dicts) as a record batch of the event table."""
    n = len(rows)
    cols: dict[str, pa.Array] = {col: C.text([r.get(col) for r in rows]) for col in _TEXT_COLS}
    cols[Col.KIND] = C.kinds_of([r[Col.KIND] for r in rows])
    for col, dtype in {**_INT_COLS, **_FLOAT_COLS}.items():
        cols[col] = pa.array([r.get(col) for r in rows], type=dtype)
    return C.record_batch(n, cols)


def _device_info(plane: Any, ordinal: int) -> DeviceInfo:
    names = {key: meta.name for key, meta in plane.stat_metadata.items()}
    props = _stats(plane.stats, names, {})
    vendor = _text(props.get("device_vendor"))
    amd = (vendor or "").lower().startswith("amd")
    major, minor = _int(props.get("compute_cap_major")), _int(props.get("compute_cap_minor"))
    return DeviceInfo(
        id=ordinal,
        # "gpu_device_name" on NVIDIA (JAX 0.11 on an H200: "NVIDIA H200"), "device_name" elsewhere
        name=_text(props.get("device_name"))
        or _text(props.get("gpu_device_name"))
        or f"{vendor or 'unknown'} {_DEVICE_PLANE.match(plane.name).group(1)}",  # type: ignore[union-attr]
        sm_count=_int(props.get("core_count")),
        total_memory=_int(props.get("memory_size")),
        clock_rate_khz=_int(props.get("clock_rate")),
        memory_bandwidth_bytes_per_s=_int(props.get("memory_bandwidth")),
        # ROCm fills compute_cap_major/minor with the gfx version (9.4 = gfx94x), which is not a CUDA compute
        # capability: kept only for NVIDIA (the occupancy tables are NVIDIA's), see build_meta for AMD.
        compute_capability=f"{major}.{minor}"
        if major is not None and minor is not None and not amd
        else None,
    )


def read_batches(path: Path, display: str) -> tuple[Iterator[pa.RecordBatch], Callable[[], TraceMeta]]:
    """Start reading `path`; returns the batch iterator and a finisher that builds `TraceMeta` afterwards."""
    space, salvage = parse_space(path, display)

    def batches() -> Iterator[pa.RecordBatch]:
        device_hlo: dict[int, dict[str, Any]] = {}
        launches: list[dict[str, Any]] = []
        marks: dict[tuple[str, str], list[int]] = {}
        for plane in space.planes:
            rows: list[dict[str, Any]] = []
            for row in _plane_rows(plane):
                rows.append(row)
                if row[Col.KIND] == Kind.RUNTIME:
                    launches.append(row)
                elif row.get(Col.STREAM) is None and row[Col.DUR_NS] is not None:
                    marks.setdefault((row[Col.PID], row[Col.TID]), []).extend(
                        (row[Col.TS_NS], row[Col.TS_NS] + row[Col.DUR_NS])
                    )
                if (
                    row.get(Col.STREAM) is not None
                    and row[Col.CORRELATION] is not None
                    and (row[Col.HLO_OP] is not None or row[Col.HLO_MODULE] is not None)
                ):
                    device_hlo[row[Col.CORRELATION]] = row
                if len(rows) >= 65536:
                    yield scope_batch(rows)
                    rows = []
            if rows:
                yield scope_batch(rows)
        for values in marks.values():
            values.sort()
        scopes = hlo_scopes([with_device_hlo(launch, device_hlo) for launch in launches], marks)
        for lo in range(0, len(scopes), 65536):
            yield scope_batch(scopes[lo : lo + 65536])

    def finish() -> TraceMeta:
        meta = build_meta(space, path)
        if salvage is None:
            return meta
        return dataclasses.replace(meta, warnings=(salvage, *meta.warnings), truncated=True)

    return batches(), finish


def build_meta(space: Any, path: Path) -> TraceMeta:
    devices = []
    extra: dict[str, Any] = {}
    for plane in space.planes:
        match = _DEVICE_PLANE.match(plane.name)
        if match is not None and _int(match.group(2), _I32) is not None:
            devices.append(_device_info(plane, int(match.group(2))))
            names = {key: meta.name for key, meta in plane.stat_metadata.items()}
            props = _stats(plane.stats, names, {})
            if str(props.get("device_vendor", "")).lower().startswith("amd") and "compute_cap_major" in props:
                extra["xplane_gfx_version"] = (
                    f"{props['compute_cap_major']}.{props.get('compute_cap_minor', 0)}"
                )
        elif plane.name == "Task Environment":
            names = {key: meta.name for key, meta in plane.stat_metadata.items()}
            for key, value in _stats(plane.stats, names, {}).items():
                if isinstance(value, (str, int, float)) and not isinstance(value, bool):
                    extra[f"xplane_{key}"] = value
    hosts = [h for h in space.hostnames if h]
    if hosts:
        extra["hostnames"] = ",".join(hosts)
    warnings = tuple(
        f"{path.name}: the profiler reported: {text}" for text in (*space.errors, *space.warnings)
    )
    return TraceMeta(
        path=str(path),
        format="xplane",
        devices=tuple(sorted(devices, key=lambda d: d.id)),
        trace_name=hosts[0] if hosts else None,
        extra=extra,
        warnings=warnings,
    )
