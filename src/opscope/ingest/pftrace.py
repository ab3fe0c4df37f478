"""Perfetto protobuf traces (`.pftrace`, `.perfetto-trace`): rocprofv3's `--output-format pftrace` first, and the
track-event slices of any Perfetto trace.

A Perfetto trace is a stream of `TracePacket`s (field 1 of `Trace`, each length-delimited), decoded one at a time
with the message classes of Google's `perfetto` package (its generated `perfetto_trace_pb2`), so memory stays
bounded by a batch of events whatever the file size. What the reader keeps per packet sequence
(`trusted_packet_sequence_id`), as trace processor does:
- interned names (event names, categories, debug-annotation names), cleared when a packet says the sequence's
  incremental state was cleared;
- packet defaults (the timestamp clock, the default track);
- clocks: timestamps in the packet's clock (its own, else the sequence default, else the trace's BOOTTIME);
  an incremental clock (declared so in a `ClockSnapshot`) adds each delta to the last value; every clock is
  brought to BOOTTIME by the offsets of the latest snapshot that names both.
Track descriptors name tracks and tie them to a process / thread. A slice is a `TYPE_SLICE_BEGIN` closed by the
next `TYPE_SLICE_END` on its track (a stack per track); `TYPE_INSTANT` is an instant.

Into the event model, by category (rocprofv3 names them so: `sdk::perfetto_category`):
- `kernel_dispatch`: kernels, device from the `agent` annotation (its trailing number), stream from the track's
  name (`STREAM [n]`, else `QUEUE [n]`), correlation from `corr_id`;
- `memory_copy`: memcpys named from the operation (`MEMORY_COPY_HOST_TO_DEVICE` -> "Memcpy HtoD"), bytes from
  `copy_bytes`, device from `dst_agent`;
- `hip_api`, `hsa_api`, `rccl_api`, `rocdecode_api`, `rocjpeg_api`: runtime calls on their thread, with `corr_id`;
- `marker_api`: roctx ranges (annotations named by their message);
- any other slice (a Perfetto trace of another program): an annotation on its thread or track.
Counters, ftrace and every other packet kind are not read; a warning counts them.
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
from opscope.ingest.rocprof import copy_name
from opscope.ingest.source import ChunkReader
from opscope.model.meta import TraceMeta
from opscope.model.schema import KIND_CODES, Col, Kind

BATCH = 1 << 15
BOOTTIME = 6  # perfetto.protos.BuiltinClock.BUILTIN_CLOCK_BOOTTIME, the trace's default clock
SEQ_INCREMENTAL_STATE_CLEARED = 1
API_CATEGORIES = frozenset({"hip_api", "hsa_api", "rccl_api", "rocdecode_api", "rocjpeg_api", "ompt_api"})
_TRAILING_NUMBER = re.compile(r"(\d+)\D*$")
_STREAM = re.compile(r"(?:STREAM|QUEUE) \[(\d+)\]")


def _pb2() -> Any:
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2
    except ImportError:  # pragma: no cover - a core dependency
        raise InputError(
            "a Perfetto trace: the perfetto package is not installed (pip install perfetto)"
        ) from None
    return perfetto_trace_pb2


def _varint(data: bytes | memoryview, pos: int) -> tuple[int, int] | None:
    value = 0
    for shift, i in enumerate(range(pos, min(pos + 10, len(data)))):
        value |= (data[i] & 0x7F) << (7 * shift)
        if not data[i] & 0x80:
            return value, i + 1
    return None


def sniff(head: bytes, path: Path) -> bool:
    """A Perfetto trace: field 1 (a packet) first, and that packet, decoded, holds fields every Perfetto writer
    sets on its first packets (a sequence id, a clock snapshot, a track descriptor or event, the trace config,
    a timestamp). The XSpace reader, tried before, takes an xplane (also field 1 first)."""
    if head[:1] != b"\x0a":
        return False
    found = _varint(head, 1)
    if found is None or found[0] > len(head) - found[1] or found[0] == 0:
        return False
    size, start = found
    try:
        packet = _pb2().TracePacket.FromString(head[start : start + size])
    except Exception:  # a DecodeError: not a packet
        return False
    names = {f.name for f, _ in packet.ListFields()}
    return bool(
        names
        & {
            "trusted_packet_sequence_id",
            "clock_snapshot",
            "track_descriptor",
            "track_event",
            "trace_config",
            "timestamp",
            "trace_uuid",
            "first_packet_on_sequence",
            "synchronization_marker",
        }
    )


def packets(reader: ChunkReader) -> Iterator[bytes]:
    """The serialized packets of a `Trace` (field 1 of the top-level message), chunk by chunk. Other top-level
    fields are skipped; a packet cut off by the end of the file ends the stream (the reader says so)."""
    buffer = b""
    for chunk in reader:
        data = buffer + chunk
        pos = 0
        while True:
            tag = _varint(data, pos)
            if tag is None:
                break
            key, after = tag
            wire = key & 7
            if wire == 2:
                length = _varint(data, after)
                if length is None or length[1] + length[0] > len(data):
                    break
                if key >> 3 == 1:
                    yield bytes(data[length[1] : length[1] + length[0]])
                pos = length[1] + length[0]
            elif wire == 0:
                skip = _varint(data, after)
                if skip is None:
                    break
                pos = skip[1]
            else:
                raise InputError(f"{reader.path}: not a Perfetto trace (wire type {wire} at the top level)")
        buffer = data[pos:]
    if buffer:
        reader.problem = reader.problem or f"the last packet is cut off ({len(buffer):,} bytes)"


@dataclass
class _Sequence:
    names: dict[int, str] = field(default_factory=dict)
    categories: dict[int, str] = field(default_factory=dict)
    annotation_names: dict[int, str] = field(default_factory=dict)
    clock: int | None = None  # the default timestamp clock
    track: int | None = None  # the default track
    incremental: dict[int, tuple[int, int]] = field(
        default_factory=dict
    )  # clock -> (last value, ns per unit)


@dataclass
class _Track:
    name: str = ""
    pid: int | None = None
    tid: int | None = None
    parent: int | None = None


@dataclass
class _Open:
    ts: int
    name: str
    category: str
    annotations: dict[str, Any]
    flow: int | None


@dataclass
class _State:
    sequences: dict[int, _Sequence] = field(default_factory=dict)
    tracks: dict[int, _Track] = field(default_factory=dict)
    stacks: dict[int, list[_Open]] = field(default_factory=dict)
    offsets: dict[int, int] = field(default_factory=dict)  # clock -> its value minus BOOTTIME's
    other_packets: int = 0
    unclosed: int = 0
    unmatched_ends: int = 0
    rows: list[tuple[Any, ...]] = field(default_factory=list)


def _annotation(value: Any, names: dict[int, str]) -> tuple[str, Any]:
    name = value.name if value.HasField("name") else names.get(value.name_iid, "")
    which = value.WhichOneof("value")
    return name, getattr(value, which) if which else None


def _timestamp(packet: Any, seq: _Sequence, state: _State) -> int | None:
    if not packet.HasField("timestamp"):
        return None
    clock = packet.timestamp_clock_id if packet.HasField("timestamp_clock_id") else seq.clock
    clock = BOOTTIME if clock is None else clock
    value = int(packet.timestamp)
    if clock in seq.incremental:
        last, unit = seq.incremental[clock]
        last += value
        seq.incremental[clock] = (last, unit)
        return last * unit - state.offsets.get(clock, 0)
    return value - state.offsets.get(clock, 0)


def _clock_snapshot(snapshot: Any, seq: _Sequence, state: _State) -> None:
    clocks = {int(c.clock_id): c for c in snapshot.clocks}
    boot = clocks.get(BOOTTIME)
    for clock_id, c in clocks.items():
        unit = int(c.unit_multiplier_ns) if c.HasField("unit_multiplier_ns") else 1
        if c.is_incremental:
            seq.incremental[clock_id] = (int(c.timestamp), unit)
        if boot is not None and clock_id != BOOTTIME:
            state.offsets[clock_id] = int(c.timestamp) * unit - int(boot.timestamp)


def _descriptor(desc: Any, state: _State) -> None:
    track = state.tracks.setdefault(int(desc.uuid), _Track())
    if desc.HasField("name"):
        track.name = desc.name
    elif desc.HasField("static_name"):
        track.name = desc.static_name
    if desc.HasField("parent_uuid"):
        track.parent = int(desc.parent_uuid)
    if desc.HasField("thread"):
        track.pid, track.tid = int(desc.thread.pid), int(desc.thread.tid)
        track.name = track.name or desc.thread.thread_name
    elif desc.HasField("process"):
        track.pid = int(desc.process.pid)
        track.name = track.name or desc.process.process_name


def _interned(data: Any, seq: _Sequence) -> None:
    for entry in data.event_names:
        seq.names[int(entry.iid)] = entry.name
    for entry in data.event_categories:
        seq.categories[int(entry.iid)] = entry.name
    for entry in data.debug_annotation_names:
        seq.annotation_names[int(entry.iid)] = entry.name


def _event(event: Any, ts: int, seq: _Sequence, state: _State, pb2: Any) -> None:
    track_uuid = int(event.track_uuid) if event.HasField("track_uuid") else (seq.track or 0)
    kind = event.type
    if kind == pb2.TrackEvent.TYPE_SLICE_END:
        stack = state.stacks.get(track_uuid)
        if not stack:
            state.unmatched_ends += 1
            return
        begin = stack.pop()
        state.rows.append(
            (
                track_uuid,
                begin.ts,
                ts - begin.ts,
                begin.name,
                begin.category,
                begin.annotations,
                begin.flow,
                False,
            )
        )
        return
    if kind not in (pb2.TrackEvent.TYPE_SLICE_BEGIN, pb2.TrackEvent.TYPE_INSTANT):
        state.other_packets += 1  # counters and untyped legacy events
        return
    name = event.name if event.HasField("name") else seq.names.get(int(event.name_iid), "")
    categories = list(event.categories) or [seq.categories.get(int(i), "") for i in event.category_iids]
    annotations = dict(_annotation(a, seq.annotation_names) for a in event.debug_annotations)
    flow = int(event.flow_ids[0]) if len(event.flow_ids) else None
    category = categories[0] if categories else ""
    if kind == pb2.TrackEvent.TYPE_INSTANT:
        state.rows.append((track_uuid, ts, None, name, category, annotations, flow, True))
    else:
        state.stacks.setdefault(track_uuid, []).append(_Open(ts, name, category, annotations, flow))


def _trailing(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    found = _TRAILING_NUMBER.search(str(value)) if value is not None else None
    return int(found.group(1)) if found else None


def _process(track: _Track, state: _State) -> str | None:
    """The process of a CPU track: its own, else its parent track's (a thread track under a process track)."""
    if track.pid is not None:
        return str(track.pid)
    parent = state.tracks.get(track.parent) if track.parent is not None else None
    return str(parent.pid) if parent is not None and parent.pid is not None else None


def _batch(state: _State) -> pa.RecordBatch:
    """The slices gathered so far as events (a batch is at most `BATCH` slices)."""
    rows, state.rows = state.rows, []
    n = len(rows)
    kinds, cats, names, pids, tids, devices, streams, corrs, nbytes = ([] for _ in range(9))
    ts = np.empty(n, dtype=np.int64)
    dur = np.zeros(n, dtype=np.int64)
    timed = np.zeros(n, dtype=bool)
    phases = []
    for i, (track_uuid, start, length, name, category, notes, flow, instant) in enumerate(rows):
        track = state.tracks.get(track_uuid, _Track())
        ts[i] = start
        if length is not None:
            dur[i], timed[i] = length, True
        corr = _trailing(notes.get("corr_id"))
        corr = corr if corr is not None else flow
        device = stream = size = None
        if category == "kernel_dispatch":
            kind = Kind.KERNEL
            device = _trailing(notes.get("agent"))
        elif category == "memory_copy":
            kind, name = Kind.MEMCPY, copy_name(name)
            device = _trailing(notes.get("dst_agent"))
            size = _trailing(notes.get("copy_bytes"))
        elif category in API_CATEGORIES:
            kind = Kind.RUNTIME
        else:
            kind = Kind.INSTANT if instant else Kind.USER_ANNOTATION
            corr = None if category == "marker_api" else corr
        if kind in (Kind.KERNEL, Kind.MEMCPY):
            found = _STREAM.search(track.name)
            stream = int(found.group(1)) if found else track_uuid & 0x7FFFFFFF
            pid, tid = (str(device) if device is not None else None), str(stream)
        else:
            pid = _process(track, state)
            tid = str(track.tid) if track.tid is not None else str(_trailing(notes.get("tid")) or track_uuid)
        kinds.append(kind)
        cats.append(category or ("instant" if instant else "slice"))
        names.append(name)
        phases.append("i" if instant else "X")
        pids.append(pid)
        tids.append(tid)
        devices.append(device if device is not None and abs(device) < 2**31 else None)
        streams.append(stream)
        corrs.append(corr if corr is None or corr < 2**63 else None)
        nbytes.append(size)
    return C.record_batch(
        n,
        {
            Col.PH: C.text(phases),
            Col.CAT: C.text(cats),
            Col.KIND: C.kinds_from_codes(np.array([KIND_CODES[k] for k in kinds], dtype=np.int32)),
            Col.NAME: C.text(names),
            Col.PID: C.text(pids),
            Col.TID: C.text(tids),
            Col.TS_NS: pa.array(ts),
            Col.DUR_NS: pa.array(dur, mask=~timed),
            Col.DEVICE: pa.array(devices, type=pa.int32()),
            Col.STREAM: pa.array(streams, type=pa.int64()),
            Col.CORRELATION: pa.array(corrs, type=pa.int64()),
            Col.BYTES: pa.array(nbytes, type=pa.int64()),
        },
    )


def read_batches(path: Path, display: str) -> tuple[Iterator[pa.RecordBatch], Callable[[], TraceMeta]]:
    """Stream a Perfetto trace's track events as events; returns the batch iterator and the `TraceMeta` finisher."""
    pb2 = _pb2()
    reader = ChunkReader(path)
    state = _State()

    def batches() -> Iterator[pa.RecordBatch]:
        from google.protobuf.message import DecodeError

        for raw in packets(reader):
            try:
                packet = pb2.TracePacket.FromString(raw)
            except DecodeError:
                reader.problem = reader.problem or "a packet that does not decode"
                break
            seq_id = int(packet.trusted_packet_sequence_id)
            if packet.sequence_flags & SEQ_INCREMENTAL_STATE_CLEARED or packet.incremental_state_cleared:
                state.sequences[seq_id] = _Sequence()
            seq = state.sequences.setdefault(seq_id, _Sequence())
            if packet.HasField("trace_packet_defaults"):
                defaults = packet.trace_packet_defaults
                if defaults.HasField("timestamp_clock_id"):
                    seq.clock = int(defaults.timestamp_clock_id)
                if defaults.HasField("track_event_defaults") and defaults.track_event_defaults.HasField(
                    "track_uuid"
                ):
                    seq.track = int(defaults.track_event_defaults.track_uuid)
            if packet.HasField("clock_snapshot"):
                _clock_snapshot(packet.clock_snapshot, seq, state)
            if packet.HasField("interned_data"):
                _interned(packet.interned_data, seq)
            if packet.HasField("track_descriptor"):
                _descriptor(packet.track_descriptor, state)
            ts = _timestamp(packet, seq, state)
            if packet.HasField("track_event"):
                if ts is not None:
                    _event(packet.track_event, ts, seq, state, pb2)
            elif not (
                packet.HasField("track_descriptor")
                or packet.HasField("clock_snapshot")
                or packet.HasField("interned_data")
                or packet.HasField("trace_packet_defaults")
            ):
                state.other_packets += 1
            if len(state.rows) >= BATCH:
                yield _batch(state)
        state.unclosed = sum(len(stack) for stack in state.stacks.values())
        if state.rows:
            yield _batch(state)

    def finish() -> TraceMeta:
        warnings = []
        if reader.truncated:
            warnings.append(f"Perfetto trace cut off: {reader.error}; the packets before it are read")
        if state.other_packets:
            warnings.append(
                f"not read: {state.other_packets:,} packets that are no track-event slice (counters, ftrace, "
                "process stats, ...)"
            )
        if state.unclosed or state.unmatched_ends:
            warnings.append(
                f"{state.unclosed:,} slices never ended and {state.unmatched_ends:,} ends without a begin: left out"
            )
        return TraceMeta(
            path=str(path), format="pftrace", warnings=tuple(warnings), truncated=reader.truncated
        )

    return batches(), finish
