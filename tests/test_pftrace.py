"""Perfetto protobuf traces. No public rocprofv3 `.pftrace` was found, so the traces here are hand-made (labelled
as such) with the official `perfetto` package's `TraceProtoBuilder` and its `TracePacket` messages, laid out as
rocprofiler-sdk's `generatePerfetto.cpp` writes them: thread tracks for API calls and markers, `COMPUTE AGENT [n]
STREAM [s]` / `COPY to AGENT [n] STREAM [s]` tracks for kernels and copies, slice begin / end pairs with the
categories `hip_api`, `marker_api`, `kernel_dispatch`, `memory_copy`, debug annotations `corr_id`, `agent`,
`dst_agent`, `copy_bytes`, names and categories interned per sequence, and timestamps on an incremental clock as
the Perfetto SDK writes them. A second trace has what another program's Perfetto trace has (absolute
timestamps, names inline, nested slices, an instant, a counter) and is cut off mid-packet."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
from perfetto.trace_builder.proto_builder import TraceProtoBuilder

import opscope
from opscope.ingest.registry import detect
from opscope.model.schema import Col, Kind

SEQ = 7
INCREMENTAL_CLOCK = 64  # the first sequence-scoped clock id
BOOT = 1_000_000  # BOOTTIME at the clock snapshot
THREAD, GPU_STREAM, COPY_STREAM = 101, 202, 303
NAMES = {1: "hipLaunchKernel", 2: "gemm_kernel(float*, int)", 3: "MEMORY_COPY_HOST_TO_DEVICE", 4: "step 1"}
CATEGORIES = {1: "hip_api", 2: "kernel_dispatch", 3: "memory_copy", 4: "marker_api"}
ANNOTATIONS = {1: "corr_id", 2: "agent", 3: "dst_agent", 4: "copy_bytes"}


def _rocprofv3(path: Path) -> Path:
    builder = TraceProtoBuilder()
    first = builder.add_packet()
    first.trusted_packet_sequence_id = SEQ
    first.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    first.trace_packet_defaults.timestamp_clock_id = INCREMENTAL_CLOCK
    for key, value in NAMES.items():
        entry = first.interned_data.event_names.add()
        entry.iid, entry.name = key, value
    for key, value in CATEGORIES.items():
        entry = first.interned_data.event_categories.add()
        entry.iid, entry.name = key, value
    for key, value in ANNOTATIONS.items():
        entry = first.interned_data.debug_annotation_names.add()
        entry.iid, entry.name = key, value
    snapshot = builder.add_packet()
    snapshot.trusted_packet_sequence_id = SEQ
    for clock_id, value, incremental in (
        (pb.BUILTIN_CLOCK_BOOTTIME, BOOT, False),
        (INCREMENTAL_CLOCK, BOOT, True),
    ):
        clock = snapshot.clock_snapshot.clocks.add()
        clock.clock_id, clock.timestamp, clock.is_incremental = clock_id, value, incremental
    for uuid, name, thread in (
        (THREAD, "THREAD 0 (4243)", True),
        (GPU_STREAM, "COMPUTE AGENT [2] STREAM [5] (GPU)", False),
        (COPY_STREAM, "COPY to AGENT [2] STREAM [5] (GPU)", False),
    ):
        desc = builder.add_packet()
        desc.trusted_packet_sequence_id = SEQ
        desc.track_descriptor.uuid, desc.track_descriptor.name = uuid, name
        if thread:
            desc.track_descriptor.thread.pid, desc.track_descriptor.thread.tid = 4242, 4243
    now = BOOT

    def event(at: int, kind: int, track: int, name: int = 0, category: int = 0, **notes: int | str) -> None:
        nonlocal now
        packet = builder.add_packet()
        packet.trusted_packet_sequence_id = SEQ
        packet.timestamp, now = at - now, at  # a delta on the incremental clock
        packet.track_event.type, packet.track_event.track_uuid = kind, track
        if name:
            packet.track_event.name_iid = name
            packet.track_event.category_iids.append(category)
        for key, value in notes.items():
            note = packet.track_event.debug_annotations.add()
            note.name_iid = next(i for i, n in ANNOTATIONS.items() if n == key)
            if isinstance(value, int):
                note.uint_value = value
            else:
                note.string_value = value

    begin, end = pb.TrackEvent.TYPE_SLICE_BEGIN, pb.TrackEvent.TYPE_SLICE_END
    event(BOOT + 500, begin, THREAD, 4, 4, corr_id=7)  # roctx range "step 1"
    event(BOOT + 1_000, begin, THREAD, 1, 1, corr_id=100)
    event(BOOT + 1_500, end, THREAD)
    event(BOOT + 1_800, begin, GPU_STREAM, 2, 2, corr_id=100, agent="GPU-2")
    event(BOOT + 2_900, end, GPU_STREAM)
    event(BOOT + 3_000, begin, COPY_STREAM, 3, 3, corr_id=101, dst_agent="GPU-2", copy_bytes=4096)
    event(BOOT + 4_000, end, COPY_STREAM)
    event(BOOT + 9_000, end, THREAD)
    path.write_bytes(builder.serialize())
    return path


def _rows(trace: opscope.Trace, kind: str) -> list[dict]:
    frame = trace.events.with_columns(pl.col(Col.KIND, Col.NAME, Col.PID, Col.TID, Col.CAT).cast(pl.String))
    return frame.filter(pl.col(Col.KIND) == kind).sort(Col.TS_NS).to_dicts()


def test_a_rocprofv3_pftrace_reads_exactly(tmp_path: Path) -> None:
    path = _rocprofv3(tmp_path / "results.pftrace")
    assert detect(path, str(path)).name == "pftrace"
    trace = opscope.load(path, cache=False)
    (kernel,) = _rows(trace, Kind.KERNEL)
    assert (kernel[Col.NAME], kernel[Col.TS_NS], kernel[Col.DUR_NS]) == (
        "gemm_kernel(float*, int)",
        BOOT + 1_800,
        1_100,
    )
    assert (kernel[Col.DEVICE], kernel[Col.STREAM], kernel[Col.CORRELATION]) == (2, 5, 100)
    (copy,) = _rows(trace, Kind.MEMCPY)
    assert (copy[Col.NAME], copy[Col.DEVICE], copy[Col.BYTES], copy[Col.DUR_NS]) == (
        "Memcpy HtoD",
        2,
        4096,
        1_000,
    )
    (launch,) = _rows(trace, Kind.RUNTIME)
    assert (launch[Col.NAME], launch[Col.PID], launch[Col.TID], launch[Col.CORRELATION]) == (
        "hipLaunchKernel",
        "4242",
        "4243",
        100,
    )
    assert (launch[Col.TS_NS], launch[Col.DUR_NS]) == (BOOT + 1_000, 500)
    (step,) = _rows(trace, Kind.USER_ANNOTATION)
    assert (step[Col.NAME], step[Col.TS_NS], step[Col.DUR_NS], step[Col.CORRELATION]) == (
        "step 1",
        BOOT + 500,
        8_500,
        None,
    )
    assert trace.meta.format == "pftrace" and not trace.meta.warnings


def test_the_commands_link_the_launch_to_its_kernel(tmp_path: Path, cli) -> None:
    path = str(_rocprofv3(tmp_path / "results.pftrace"))
    analyze = json.loads(cli("analyze", path, "--format", "json").out)
    assert analyze["launch_delay_us"]["max"] == pytest.approx(0.8)
    summary = json.loads(cli("summary", path, "--format", "json").out)
    assert summary["totals"] == {"gpu_time_us": 2.1, "calls": 2}
    for command in ("advise", "critical-path", "steps", "brief"):
        assert cli(command, path).code == 0, command


def _general(path: Path) -> Path:
    """Another program's trace: absolute BOOTTIME stamps, names inline, nested slices, an instant, a counter."""
    builder = TraceProtoBuilder()
    desc = builder.add_packet()
    desc.trusted_packet_sequence_id = 1
    desc.track_descriptor.uuid, desc.track_descriptor.name = 9, "main"
    desc.track_descriptor.thread.pid, desc.track_descriptor.thread.tid = 10, 11

    def event(at: int, kind: int, name: str = "") -> None:
        packet = builder.add_packet()
        packet.trusted_packet_sequence_id = 1
        packet.timestamp = at
        packet.track_event.type, packet.track_event.track_uuid = kind, 9
        if name:
            packet.track_event.name = name

    begin, end = pb.TrackEvent.TYPE_SLICE_BEGIN, pb.TrackEvent.TYPE_SLICE_END
    event(100, begin, "outer")
    event(200, begin, "inner")
    event(300, end)
    event(350, pb.TrackEvent.TYPE_INSTANT, "tick")
    event(400, pb.TrackEvent.TYPE_COUNTER)
    event(900, end)
    event(950, begin, "never ends")
    data = builder.serialize()
    path.write_bytes(data + data[:3])  # then a packet cut off after its first byte
    return path


def test_another_programs_perfetto_trace(tmp_path: Path, cli) -> None:
    path = _general(tmp_path / "app.perfetto-trace")
    trace = opscope.load(path, cache=False)
    slices = [
        (r[Col.NAME], r[Col.TS_NS], r[Col.DUR_NS], r[Col.PID], r[Col.TID])
        for r in _rows(trace, Kind.USER_ANNOTATION)
    ]
    assert sorted(slices) == [("inner", 200, 100, "10", "11"), ("outer", 100, 800, "10", "11")]
    (tick,) = _rows(trace, Kind.INSTANT)
    assert (tick[Col.NAME], tick[Col.TS_NS]) == ("tick", 350)
    warnings = " ".join(trace.meta.warnings)
    assert "never ended" in warnings and "not read: 1 packets" in warnings
    assert "cut off" in warnings and trace.meta.truncated
    done = cli("summary", str(path))
    assert done.code == 0 and "Traceback" not in done.err


def test_a_file_that_only_starts_like_a_packet_is_not_a_perfetto_trace(tmp_path: Path, cli) -> None:
    path = tmp_path / "noise.bin"
    path.write_bytes(b"\x0a\x05hello world")
    done = cli("summary", str(path))
    assert done.code == 2 and done.err.count("\n") == 1
