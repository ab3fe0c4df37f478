"""`opscope memory FILE.pickle`: allocator snapshots (`torch.cuda.memory._dump_snapshot`) read through a
restricted unpickler. No CUDA here, so the snapshot is HAND-MADE in the shape `torch.cuda.memory._snapshot()`
returns (the TypedDicts in torch/cuda/memory.py) and checked with torch's own `_memory_viz.segsum`."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from opscope.analysis.memory.snapshot import snapshot_stats
from opscope.errors import InputError
from opscope.ingest.snapshot import is_snapshot, loads_snapshot, read_snapshot

MiB = 1 << 20


def _frames(name: str) -> list[dict]:
    return [
        {"filename": "train.py", "line": 42, "name": name},
        {"filename": "torch/nn/modules/linear.py", "line": 125, "name": "forward"},
    ]


def handmade_snapshot() -> dict:
    """HAND-MADE: two devices; device 0 has a large segment (two live blocks, one cached) and a small one; an OOM
    in device 0's history."""
    seg0 = {
        "device": 0,
        "address": 0x7F0000000000,
        "total_size": 20 * MiB,
        "stream": 0,
        "segment_type": "large",
        "segment_pool_id": (0, 0),
        "allocated_size": 12 * MiB,
        "active_size": 12 * MiB,
        "requested_size": 0,
        "blocks": [
            {
                "address": 0x7F0000000000,
                "size": 8 * MiB,
                "requested_size": 8 * MiB - 512,
                "state": "active_allocated",
                "frames": _frames("make_weights"),
            },
            {
                "address": 0x7F0000800000,
                "size": 4 * MiB,
                "requested_size": 4 * MiB,
                "state": "active_allocated",
                "frames": _frames("forward"),
            },
            {
                "address": 0x7F0000C00000,
                "size": 8 * MiB,
                "requested_size": 0,
                "state": "inactive",
                "frames": [],
            },
        ],
    }
    seg1 = {
        "device": 0,
        "address": 0x7F1000000000,
        "total_size": 2 * MiB,
        "stream": 7,
        "segment_type": "small",
        "segment_pool_id": (0, 0),
        "allocated_size": 512,
        "active_size": 1024,
        "requested_size": 0,
        "blocks": [
            {
                "address": 0x7F1000000000,
                "size": 512,
                "requested_size": 500,
                "state": "active_allocated",
                "frames": [],
            },
            {
                "address": 0x7F1000000200,
                "size": 512,
                "requested_size": 512,
                "state": "active_awaiting_free",
                "frames": [],
            },
            {
                "address": 0x7F1000000400,
                "size": 2 * MiB - 1024,
                "requested_size": 0,
                "state": "inactive",
                "frames": [],
            },
        ],
    }
    seg2 = {
        "device": 1,
        "address": 0x7E0000000000,
        "total_size": 2 * MiB,
        "stream": 0,
        "segment_type": "small",
        "segment_pool_id": (0, 0),
        "allocated_size": 2 * MiB,
        "active_size": 2 * MiB,
        "requested_size": 0,
        "blocks": [
            {
                "address": 0x7E0000000000,
                "size": 2 * MiB,
                "requested_size": 2 * MiB,
                "state": "active_allocated",
                "frames": _frames("embed"),
            }
        ],
    }
    traces = [
        [
            {
                "action": "segment_alloc",
                "addr": 0x7F0000000000,
                "size": 20 * MiB,
                "stream": 0,
                "time_us": 10,
                "frames": [],
            },
            {
                "action": "alloc",
                "addr": 0x7F0000000000,
                "size": 8 * MiB,
                "stream": 0,
                "time_us": 11,
                "frames": _frames("make_weights"),
            },
            {
                "action": "oom",
                "size": 64 * MiB,
                "stream": 0,
                "time_us": 20,
                "device_free": 3 * MiB,
                "frames": _frames("forward"),
            },
        ],
        [],
    ]
    return {
        "segments": [seg0, seg1, seg2],
        "device_traces": traces,
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": ""},
    }


def test_figures_of_the_handmade_snapshot() -> None:
    stats = snapshot_stats(loads_snapshot(pickle.dumps(handmade_snapshot())), "s.pickle")
    d0, d1 = stats.devices
    assert (d0.device, d0.segments, d0.reserved_bytes) == ("cuda:0", 2, 22 * MiB)
    assert d0.allocated_bytes == (8 * MiB - 512) + 4 * MiB + 500
    assert d0.internal_free_bytes == 512 + 12
    assert d0.external_free_bytes == 8 * MiB + 512 + (2 * MiB - 1024)
    assert d0.reserved_bytes == d0.allocated_bytes + d0.internal_free_bytes + d0.external_free_bytes
    assert (d1.device, d1.allocated_bytes, d1.active_blocks) == ("cuda:1", 2 * MiB, 1)
    assert [b.size for b in stats.largest_blocks] == [8 * MiB, 4 * MiB, 2 * MiB, 512]
    assert stats.largest_blocks[0].stack[0] == "train.py:42 make_weights"
    (oom,) = stats.ooms
    assert (oom.device, oom.requested_bytes, oom.device_free_bytes, oom.time_us) == (
        "cuda:0",
        64 * MiB,
        3 * MiB,
        20,
    )
    assert stats.history_entries == 3 and stats.warnings == ()


def test_torch_segsum_agrees() -> None:
    """torch's own accounting over the same dictionary (it asserts reserved = allocated + free)."""
    viz = pytest.importorskip("torch.cuda._memory_viz")
    snap = handmade_snapshot()
    text = viz.segsum(snap)
    stats = snapshot_stats(snap)
    total = sum(d.reserved_bytes for d in stats.devices)
    assert f"segments: {len(snap['segments'])}" in text
    assert f"total_reserved: {viz.Bytes(total)}" in text
    assert f"total_allocated: {viz.Bytes(sum(d.allocated_bytes for d in stats.devices))}" in text


def test_cli_on_a_snapshot_file(cli, tmp_path: Path) -> None:
    path = tmp_path / "snap.pickle"
    path.write_bytes(pickle.dumps(handmade_snapshot()))
    r = cli("memory", path, "--format", "json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["schema"] == "opscope.memory_snapshot/1"
    assert [d["device"] for d in doc["devices"]] == ["cuda:0", "cuda:1"]
    assert doc["ooms"][0]["device_free_bytes"] == 3 * MiB
    table = cli("memory", path)
    assert table.code == 0 and "Out-of-memory events" in table.out and "make_weights" in table.out
    only = json.loads(cli("memory", path, "--format", "json", "--device", "1").out)
    assert [d["device"] for d in only["devices"]] == ["cuda:1"] and only["ooms"] == []
    for unknown in ("cuda:7", "7", "hip:0"):  # a device the snapshot lacks: one line, exit 2, as for a trace
        bad = cli("memory", path, "--device", unknown)
        assert bad.code == 2 and bad.out == "", unknown
        (line,) = bad.err.strip().splitlines()
        assert "--device" in line and "cuda:0, cuda:1" in line
    renamed = tmp_path / "snapshot.bin"  # recognised by content too (pickle protocol header)
    renamed.write_bytes(pickle.dumps(handmade_snapshot(), protocol=4))
    assert is_snapshot(renamed) and cli("memory", renamed, "--format", "json").code == 0


class _Evil:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("protocol", [0, 2, 5])
def test_hostile_pickle_runs_nothing(cli, tmp_path: Path, protocol: int) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pickle"
    path.write_bytes(pickle.dumps({"segments": [_Evil(marker)]}, protocol=protocol))
    r = cli("memory", path)
    assert r.code == 2
    assert len(r.err.strip().splitlines()) == 1 and "refusing" in r.err and "Traceback" not in r.err
    assert not marker.exists()


@pytest.mark.parametrize(
    "payload",
    [
        b"not a pickle at all",
        b"\x80\x04\x95",  # a cut pickle
        pickle.dumps([1, 2, 3]),  # a pickle, but not a snapshot
        pickle.dumps({"segments": [{"total_size": "big", "blocks": []}]}),  # a field of the wrong type
        pickle.dumps({"segments": [{"total_size": 10, "blocks": [7]}]}),
        pickle.dumps({"segments": [], "device_traces": [[{"action": "oom", "size": None}]]}),
        pickle.dumps({1, 2}),  # a set: builtins.set in protocol 2 (refused), EMPTY_SET in 4
    ],
)
def test_bad_snapshots_get_one_line(cli, tmp_path: Path, payload: bytes) -> None:
    path = tmp_path / "bad.pickle"
    path.write_bytes(payload)
    r = cli("memory", path)
    assert r.code == 2, r.out
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err


def test_read_errors() -> None:
    with pytest.raises(InputError):
        read_snapshot("/nonexistent/snap.pickle")
    assert not is_snapshot("/nonexistent/trace.json")


def test_capture_snapshot_helpers_call_torch_as_documented(tmp_path: Path) -> None:
    """No CUDA here: the CUDA branch of profile(memory_snapshot=True) is checked against a recording stand-in
    for torch, and the names and parameters it uses against the installed torch's own signatures."""
    import inspect
    from types import SimpleNamespace

    from opscope.capture import memory_snapshot

    calls: list[tuple[str, dict]] = []
    memory = SimpleNamespace(
        _record_memory_history=lambda **kw: calls.append(("record", kw)),
        _dump_snapshot=lambda filename: (
            calls.append(("dump", {"filename": filename})),
            Path(filename).write_bytes(pickle.dumps(handmade_snapshot())),
        ),
    )
    fake = SimpleNamespace(cuda=SimpleNamespace(is_available=lambda: True, memory=memory))
    trace = tmp_path / "host_1.123.pt.trace.json.gz"
    assert memory_snapshot.start(fake)
    written = memory_snapshot.dump(fake, trace)
    memory_snapshot.stop(fake)
    assert written == tmp_path / "host_1.123.memory_snapshot.pickle"
    assert calls == [
        ("record", {"max_entries": memory_snapshot.MAX_ENTRIES}),
        ("dump", {"filename": str(written)}),
        ("record", {"enabled": None}),
    ]
    assert read_snapshot(written)["segments"]  # what was written reads back through the safe reader
    assert not memory_snapshot.start(SimpleNamespace(cuda=SimpleNamespace(is_available=lambda: False)))
    real = pytest.importorskip("torch.cuda.memory")
    assert {"max_entries", "enabled"} <= set(inspect.signature(real._record_memory_history).parameters)
    assert "filename" in inspect.signature(real._dump_snapshot).parameters


def test_steps_make_no_sense_for_a_snapshot(cli, tmp_path: Path) -> None:
    path = tmp_path / "snap.pickle"
    path.write_bytes(pickle.dumps(handmade_snapshot()))
    r = cli("memory", path, "--steps", "3")
    assert r.code == 2 and "no steps" in r.err
