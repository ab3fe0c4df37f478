"""`opscope memory` over traces recorded with profile_memory=True: real traces (H100 CUDA, MI300X HIP, a PyTorch
1.9 trace without totals) against an independent recomputation from the raw events (memory_reference.py), a
trace captured here on the CPU with known answers, and hand-made edge cases."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memory_reference as mref
import opscope
import reference as ref
from conftest import corpus_path
from opscope.analysis.memory.events import device_name, pair_frees
from opscope.analysis.memory.peaks import peak_memory
from opscope.analysis.memory.summary import MemoryOptions, memory_stats
from opscope.report.memory_view import memory_data

REAL = [
    "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz",
    "tracelens/mi300__gaunernst_bert-small-uncased__1016001.json.gz",
    "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "particle_transformer/run1_chrome_traces__single_epoch_forward_pass_batch_size_2.json",
    "kineto/tb_plugin_samples_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz",
]


@pytest.mark.parametrize("relative", REAL, ids=lambda p: p.split("/")[-1][:40])
def test_real_traces_match_the_raw_events(relative: str) -> None:
    path = corpus_path(relative)
    events = ref.load(path)
    want = mref.summary(events)
    got = {d.device: d for d in memory_stats(opscope.load(path, cache=False), MemoryOptions(top=0)).devices}
    assert set(got) == set(want) and want
    for name, w in want.items():
        d = got[name]
        assert d.peak_allocated_bytes == w["peak_allocated_bytes"], name
        assert d.peak_allocated_ts_ns == w["peak_ts_ns"], name
        assert d.relative == w["relative"]
        assert d.peak_allocated_op == w["peak_allocated_op"]
        assert d.peak_allocated_step == w["peak_allocated_step"]
        assert d.peak_reserved_bytes == w["peak_reserved_bytes"]
        assert d.fragmentation_at_peak_bytes == w["fragmentation_at_peak_bytes"]
        assert d.max_fragmentation_bytes == w["max_fragmentation_bytes"]
        assert (d.alloc_count, d.alloc_bytes, d.free_count) == (
            w["alloc_count"],
            w["alloc_bytes"],
            w["free_count"],
        )
        assert d.unmatched_frees == w["unmatched"]
        live = None if d.live_at_end_count is None else (d.live_at_end_count, d.live_at_end_bytes)
        assert live == w["live"]
        if w["lifetime_ns"] is None:
            assert d.lifetime_ns is None
        else:
            assert d.lifetime_ns == pytest.approx(w["lifetime_ns"])


def test_real_trace_devices_steps_and_ops() -> None:
    path = corpus_path("tracelens/mi300__gaunernst_bert-small-uncased__1016001.json.gz")
    events = ref.load(path)
    stats = memory_stats(opscope.load(path, cache=False), MemoryOptions(top=0))
    assert [d.device for d in stats.devices] == ["hip:0", "cpu"]  # Device Type 6 is HIP
    hip = stats.devices[0]
    assert hip.capacity_bytes == 205571227648  # deviceProperties[0].totalGlobalMem (MI300X VF)
    assert stats.devices[1].capacity_bytes is None and stats.devices[1].peak_reserved_bytes is None
    want_steps = mref.step_rows(events)
    assert {
        (s.step, s.device): (s.start_allocated_bytes, s.end_allocated_bytes, s.peak_allocated_bytes)
        for s in stats.steps
    } == want_steps
    want_ops = mref.self_allocs(events, "hip:0")
    got_ops = {
        o.op: (o.self_alloc_bytes, o.self_alloc_count)
        for o in stats.top_ops
        if o.device == "hip:0" and o.self_alloc_count
    }
    assert got_ops == want_ops
    assert "aten::addmm (aten::empty)" in got_ops
    assert sum(o.self_alloc_bytes for o in stats.top_ops if o.device == "hip:0") == hip.alloc_bytes


OP_FIELDS = (
    "self_alloc_bytes",
    "self_alloc_count",
    "live_at_end_bytes",
    "self_increase_bytes",
    "alloc_bytes",
    "alloc_count",
)


def test_real_trace_op_rows_match_the_raw_events() -> None:
    # every (op, device) row of the Qwen H100 trace, self and inclusive, against brute-force containment
    path = corpus_path("tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
    events = ref.load(path)
    trace = opscope.load(path, cache=False)
    stats = memory_stats(trace, MemoryOptions(top=0))
    for device in ("cuda:0", "cpu"):
        want = mref.op_rows(events, device)
        got = {o.op: {f: getattr(o, f) for f in OP_FIELDS} for o in stats.top_ops if o.device == device}
        assert got == want, device
    cuda = mref.op_rows(events, "cuda:0")
    # not vacuous: workspaces freed inside their op, and ops whose inclusive figures exceed their own
    assert cuda["aten::addmm (aten::empty)"]["live_at_end_bytes"] == 0
    assert cuda["aten::linear"]["alloc_count"] > cuda["aten::addmm"]["alloc_count"] > 0
    assert cuda["ProfilerStep#*"]["alloc_count"] > 1000
    top = memory_stats(trace, MemoryOptions(top=5)).top_ops  # the top ops (default view) are those rows
    assert len(top) == 5
    for o in top:
        assert {f: getattr(o, f) for f in OP_FIELDS} == mref.op_rows(events, o.device)[o.op]


def test_old_trace_without_totals_is_relative(cli) -> None:
    path = corpus_path(
        "kineto/tb_plugin_samples_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz"
    )
    r = cli("memory", path, "--format", "json", "--no-cache")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["schema"] == "opscope.memory/1"
    cuda = doc["devices"][0]
    assert cuda["device"] == "cuda:0" and cuda["relative"] is True
    assert cuda["live_at_end"] is None and cuda["lifetime_us"] is None and cuda["peak_reserved_bytes"] is None
    assert cuda["capacity_bytes"] == 34084028416
    assert any("no allocator totals" in w for w in doc["warnings"])


def test_json_schema_fields(cli) -> None:
    path = corpus_path("tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz")
    r = cli("memory", path, "--format", "json", "--top", "3")
    doc = json.loads(r.out)
    assert set(doc) >= {"schema", "trace", "devices", "top_ops", "steps", "warnings"}
    dev = doc["devices"][0]
    assert set(dev) >= {
        "device",
        "peak_allocated_bytes",
        "peak_allocated_ts_us",
        "peak_allocated_op",
        "peak_allocated_step",
        "peak_reserved_bytes",
        "fragmentation_at_peak_bytes",
        "max_fragmentation_bytes",
        "capacity_bytes",
        "relative",
        "alloc_count",
        "alloc_bytes",
        "free_count",
        "live_at_end",
        "lifetime_us",
    }
    assert set(dev["live_at_end"]) == {"count", "bytes"} and set(dev["lifetime_us"]) == {"p50", "p95", "max"}
    assert len(doc["top_ops"]) == 3
    assert set(doc["top_ops"][0]) == {
        "op",
        "device",
        "self_alloc_bytes",
        "self_alloc_count",
        "live_at_end_bytes",
        "live_at_end_count",
        "self_increase_bytes",
        "alloc_bytes",
        "alloc_count",
    }
    assert set(doc["steps"][0]) == {
        "step",
        "device",
        "start_allocated_bytes",
        "end_allocated_bytes",
        "peak_allocated_bytes",
        "growth_bytes",
    }
    for fmt in ("table", "csv", "markdown"):
        assert cli("memory", path, "--format", fmt).code == 0
    only = json.loads(cli("memory", path, "--format", "json", "--device", "cpu").out)
    assert [d["device"] for d in only["devices"]] == ["cpu"]
    bad = cli("memory", path, "--device", "hip:3")
    assert bad.code == 2 and len(bad.err.strip().splitlines()) == 1


def test_steps_selection(cli) -> None:
    path = corpus_path("tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz")
    doc = json.loads(cli("memory", path, "--format", "json", "--steps", "6").out)
    assert {s["step"] for s in doc["steps"]} == {6}
    assert cli("memory", path, "--steps", "99").code == 2


# ---- a trace captured here, with known answers ------------------------------------------------------------------

CAPTURE = """
import sys, torch, opscope
keep = []
def work():
    x = torch.ones(256, 1024)      # 1 MiB, freed when work() returns
    y = x * 2                      # 1 MiB, freed too
    return float(y.sum())
with opscope.profile(steps=4, profile_memory=True, memory_snapshot=True, log_dir=sys.argv[1],
                     activities=("cpu",)) as prof:
    for _ in range(4):
        work()
        keep.append(torch.zeros(64, 1024))   # 256 KiB kept alive each step: the leak
        prof.step()
print(prof.trace_path)
print(prof.warnings)
print(prof.snapshot_paths)
"""


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    pytest.importorskip("torch")
    import subprocess

    folder = tmp_path_factory.mktemp("memtrace")
    script = folder / "leak.py"
    script.write_text(CAPTURE)
    done = subprocess.run(
        [sys.executable, str(script), str(folder)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    return Path(lines[0]), lines[1], lines[2]


def test_captured_trace_known_answers(captured, cli) -> None:
    path, warnings, snapshots = captured
    assert "memory_snapshot=True skipped" in warnings and snapshots == "[]"  # CPU: no snapshot, a note
    doc = json.loads(cli("memory", path, "--format", "json").out)
    cpu = next(d for d in doc["devices"] if d["device"] == "cpu")
    assert cpu["relative"] is False
    assert cpu["live_at_end"] == {"count": 4, "bytes": 4 * 262144}  # exactly the four kept tensors
    growth = [s["growth_bytes"] for s in doc["steps"] if s["device"] == "cpu"]
    assert growth == [262144] * 4
    assert any("grew in 4 consecutive steps" in w for w in doc["warnings"])
    # step 3: three kept tensors, x and y, plus the few bytes of y.sum() and its float() copy
    assert 3 * 262144 + 2 * 1048576 <= cpu["peak_allocated_bytes"] <= 3 * 262144 + 2 * 1048576 + 64
    assert cpu["peak_allocated_step"] == 3
    blocks = doc["live_at_end_blocks"]
    assert [b["bytes"] for b in blocks] == [262144] * 4 and {b["op"] for b in blocks} == {
        "aten::zeros (aten::empty)"
    }
    want = mref.summary(ref.load(path))["cpu"]
    assert (
        cpu["peak_allocated_bytes"] == want["peak_allocated_bytes"]
        and cpu["alloc_count"] == want["alloc_count"]
    )


# ---- hand-made edge cases ---------------------------------------------------------------------------------------


def _mem(
    ts: float,
    nbytes: int,
    addr: int | None = 1000,
    total: int | None = None,
    reserved: int | None = None,
    dtype: int = 1,
    did: int = 0,
) -> dict:
    args: dict = {"Bytes": nbytes, "Device Type": dtype, "Device Id": did}
    if addr is not None:
        args["Addr"] = addr
    if total is not None:
        args["Total Allocated"] = total
    if reserved is not None:
        args["Total Reserved"] = reserved
    return {
        "ph": "i",
        "cat": "cpu_instant_event",
        "s": "t",
        "name": "[memory]",
        "pid": 1,
        "tid": 1,
        "ts": ts,
        "args": args,
    }


def _op(name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def _stats(tmp_path: Path, events: list[dict]):
    path = tmp_path / "hand.json"
    path.write_text(
        json.dumps({"traceEvents": events, "deviceProperties": [{"id": 0, "totalGlobalMem": 4096}]})
    )
    return memory_stats(opscope.load(path, cache=False), MemoryOptions(top=0)), events


def test_handmade_pairing_reuse_double_free_and_free_before_alloc(tmp_path: Path) -> None:
    # HAND-MADE: a free before any allocation, address reuse, a double free; totals given
    events = [
        _mem(1, -64, addr=5, total=0, reserved=512),  # freed before any allocation in the window
        _mem(2, 100, addr=7, total=100, reserved=512),
        _mem(3, -100, addr=7, total=0, reserved=512),
        _mem(4, 200, addr=7, total=200, reserved=1024),  # the same address, reused
        _mem(6, -200, addr=7, total=0, reserved=1024),
        _mem(7, -200, addr=7, total=0, reserved=1024),  # double free
        _mem(8, 50, addr=9, total=50, reserved=1024),  # never freed
    ]
    stats, _ = _stats(tmp_path, events)
    (d,) = stats.devices
    assert d.device == "cuda:0" and d.capacity_bytes == 4096
    assert d.unmatched_frees == 2
    assert (d.alloc_count, d.alloc_bytes, d.free_count) == (3, 350, 4)
    assert (d.live_at_end_count, d.live_at_end_bytes) == (1, 50)
    assert d.lifetime_ns == (1500.0, 1950.0, 2000.0)  # lifetimes 1 us and 2 us: p50 1.5, p95 1.95, max 2
    assert d.peak_allocated_bytes == 200 and d.peak_reserved_bytes == 1024
    assert d.fragmentation_at_peak_bytes == 824 and d.max_fragmentation_bytes == 1024
    assert any("2 free(s) without an allocation" in w for w in stats.warnings)


def test_handmade_missing_totals_and_hip(tmp_path: Path) -> None:
    # HAND-MADE: PyTorch 1.9 style (no Addr, no totals) on a HIP device
    events = [
        _mem(1, 100, addr=None, dtype=6),
        _mem(2, 300, addr=None, dtype=6),
        _mem(3, -100, addr=None, dtype=6),
    ]
    stats, _ = _stats(tmp_path, events)
    (d,) = stats.devices
    assert d.device == "hip:0" and d.relative
    assert d.peak_allocated_bytes == 400 and d.peak_allocated_ts_ns == 2000
    assert d.peak_reserved_bytes is None and d.fragmentation_at_peak_bytes is None
    assert d.live_at_end_count is None and d.lifetime_ns is None and d.unmatched_frees == 0


def test_handmade_relative_peak_counts_the_starting_zero(tmp_path: Path) -> None:
    # HAND-MADE: no totals; a free of 100 (made before the profiler started), then an allocation of 50:
    # the running sum is 0 (start), -100, -50, so the peak is the starting 0, not -50
    events = [_mem(1, -100, addr=None), _mem(2, 50, addr=None)]
    stats, _ = _stats(tmp_path, events)
    (d,) = stats.devices
    assert d.relative and d.peak_allocated_bytes == 0 and d.peak_allocated_ts_ns == 1000
    path = tmp_path / "hand.json"
    (p,) = peak_memory(opscope.load(path, cache=False))
    assert p.relative and p.peak_allocated_bytes == 0
    want = mref.summary(ref.load(path))["cuda:0"]
    assert (want["peak_allocated_bytes"], want["peak_ts_ns"]) == (0, 1000)
    # a level that does rise above 0 keeps its own peak
    stats, _ = _stats(tmp_path, [_mem(1, -100, addr=None), _mem(2, 150, addr=None), _mem(3, 10, addr=None)])
    assert stats.devices[0].peak_allocated_bytes == 60 and stats.devices[0].peak_allocated_ts_ns == 3000


def test_handmade_attribution_empty_rule_and_increase(tmp_path: Path) -> None:
    # HAND-MADE: aten::linear > aten::addmm > aten::empty; a workspace freed inside addmm, an output kept
    events = [
        _op("aten::linear", 10, 20),
        _op("aten::addmm", 11, 10),
        _op("aten::empty", 12, 1),
        _op("aten::empty", 14, 1),
        _mem(12.5, 64, addr=1, total=64, reserved=64),  # output (kept)
        _mem(14.5, 32, addr=2, total=96, reserved=128),  # workspace
        _mem(16, -32, addr=2, total=64, reserved=128),  # freed inside addmm
        _mem(25, 8, addr=3, total=72, reserved=128),  # directly in aten::linear
        _mem(40, 16, addr=4, total=88, reserved=128),  # outside every op
    ]
    stats, _ = _stats(tmp_path, events)
    ops = {o.op: o for o in stats.top_ops}
    e = ops["aten::addmm (aten::empty)"]
    assert (e.self_alloc_bytes, e.self_alloc_count, e.live_at_end_bytes) == (96, 2, 64)
    assert ops["aten::linear"].live_at_end_bytes == 8 and ops["(no op)"].live_at_end_bytes == 16
    # what the ops still hold at the end adds up to the device's live-at-end figure (64 + 8 + 16)
    (device,) = stats.devices
    assert sum(o.live_at_end_bytes or 0 for o in stats.top_ops) == device.live_at_end_bytes == 88
    assert (e.alloc_bytes, e.alloc_count) == (96, 2)
    assert ops["aten::addmm"].self_alloc_bytes == 0 and ops["aten::addmm"].alloc_bytes == 96
    assert ops["aten::linear"].self_alloc_bytes == 8 and ops["aten::linear"].alloc_bytes == 104
    assert ops["(no op)"].self_alloc_bytes == 16
    (d,) = stats.devices
    assert d.peak_allocated_op == "aten::empty" and d.peak_allocated_bytes == 96


def test_device_names() -> None:
    assert [
        device_name(t, i) for t, i in [(0, -1), (1, 2), (6, 0), (12, 1), (13, 0), (19, 3), (20, 0), (42, 1)]
    ] == ["cpu", "cuda:2", "hip:0", "xpu:1", "mps", "mtia:3", "privateuse1:0", "type42:1"]


def test_no_memory_events(cli) -> None:
    path = corpus_path("hta/triton_example_triton_example.json.gz")
    r = cli("memory", path, "--format", "json")
    assert r.code == 0 and json.loads(r.out)["devices"] == []
    out = cli("memory", path).out
    assert "profile_memory=True" in out
    # the reason first, not under two empty tables; CSV keeps its header for scripts
    assert "Peak MiB" not in out and "Who allocates" not in out
    assert out.index("No [memory] events") < out.index("Peak = the largest")
    assert "Peak MiB" not in cli("memory", path, "--format", "markdown").out
    assert cli("memory", path, "--format", "csv").out.startswith("device,peak,reserved")


def test_memory_data_is_json_serialisable(tmp_path: Path) -> None:
    stats, _ = _stats(tmp_path, [_mem(1, 10, total=10, reserved=20)])
    json.dumps(memory_data(stats))


def test_run_profile_memory_records_memory_events(cli, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    script = tmp_path / "job.py"
    script.write_text(
        "import torch, opscope\nkeep = []\nfor _ in range(3):\n"
        "    keep.append(torch.zeros(32, 1024))\n    opscope.step()\n"
    )
    r = cli(
        "run",
        "--profile-steps",
        "3",
        "--profile-memory",
        "--log-dir",
        tmp_path / "logs",
        "--",
        "python",
        script,
    )
    assert r.code == 0, r.err
    (trace,) = (tmp_path / "logs").glob("*.pt.trace.json.gz")
    doc = json.loads(cli("memory", trace, "--format", "json").out)
    cpu = next(d for d in doc["devices"] if d["device"] == "cpu")
    assert cpu["live_at_end"] == {"count": 3, "bytes": 3 * 131072}
    assert [s["growth_bytes"] for s in doc["steps"]] == [131072] * 3


def test_hostile_op_names_stay_inert(cli, tmp_path: Path) -> None:
    # HAND-MADE: an op name with a terminal escape and a spreadsheet formula allocates a block
    name = '=HYPERLINK("x")\x1b[2J'
    events = [_op(name, 10, 5), _mem(12, 4096, addr=7, total=4096, reserved=8192)]
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps({"traceEvents": events}))
    table = cli("memory", path, "--wide")
    assert table.code == 0 and "\x1b" not in table.out and "\\x1b[2J" in table.out
    csv = cli("memory", path, "--format", "csv").out
    assert "\x1b" not in csv and "'=HYPERLINK" in csv and ",=HYPERLINK" not in csv
    assert json.loads(cli("memory", path, "--format", "json").out)["top_ops"][0]["op"] == name


def test_one_command_reads_the_memory_events_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The peaks and the memory summary of one trace (`analyze`'s peaks and the advice's memory rule, the
    report's panel) share one read of the `[memory]` events, equal to a fresh one."""
    from opscope.analysis.memory import events

    reads: list[int] = []
    real = events._memory_events
    monkeypatch.setattr(events, "_memory_events", lambda trace: reads.append(1) or real(trace))
    trace = opscope.load(corpus_path(REAL[0]))
    peaks = peak_memory(trace)
    stats = memory_stats(trace)
    assert reads == [1] and peaks and stats.devices
    assert events.memory_events(trace).equals(real(opscope.load(corpus_path(REAL[0]))))


def test_handmade_owners_match_the_raw_events(tmp_path: Path) -> None:
    # HAND-MADE: the op forest `owners.find_owners` walks as arrays: a factory run that climbs to a factory at
    # the root, factories inside factories under an op, a recursive op (inclusive counts the name once),
    # allocations outside every op and on a second thread; every op row against the raw-event reference
    def op(name: str, ts: float, dur: float, tid: int = 1) -> dict:
        return {**_op(name, ts, dur), "tid": tid}

    def mem(ts: float, nbytes: int, addr: int, tid: int = 1) -> dict:
        return {**_mem(ts, nbytes, addr=addr, total=0, reserved=4096), "tid": tid}

    events = [
        op("aten::empty_like", 0, 10),  # a factory at the root ...
        op("aten::empty", 1, 5),  # ... with a factory inside: charged "aten::empty_like (aten::empty)"
        mem(2, 8, 1),
        op("aten::linear", 20, 40),
        op("aten::linear", 21, 30),  # recursion: inclusive counts "aten::linear" once per allocation
        op("aten::addmm", 22, 20),
        op("aten::empty_strided", 23, 10),
        op("aten::empty", 24, 5),  # empty in empty_strided in addmm: "aten::addmm (aten::empty_strided)"
        mem(25, 16, 2),
        mem(26, -16, 2),
        mem(30, 32, 3),  # addmm's own
        mem(70, 64, 4),  # outside every op
        op("aten::mul", 80, 10, tid=2),
        mem(81, 4, 5, tid=2),  # on another thread: the op of its own thread
        mem(90, 4, 6, tid=1),
    ]
    stats, _ = _stats(tmp_path, events)
    got = {o.op: {f: getattr(o, f) for f in OP_FIELDS} for o in stats.top_ops}
    assert got == mref.op_rows(events, "cuda:0")
    assert {"aten::empty_like (aten::empty)", "aten::addmm (aten::empty_strided)", "(no op)"} <= set(got)
    assert got["aten::linear"]["alloc_count"] == 2  # two allocations, not one per linear instance


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([None, 1, 2, 3, 2**40]), st.sampled_from([-8, -1, 0, 1, 8])), max_size=60
    )
)
def test_pairing_is_a_stack_per_address(items: list[tuple[int | None, int]]) -> None:
    """`pair_frees` (bracket matching for every address at once) against a stack per address: a free takes the
    latest allocation of its address not yet taken; one with none open is unmatched."""
    addr, nbytes = [a for a, _ in items], [b for _, b in items]
    partner, open_allocs, unmatched = [-1] * len(items), {}, 0
    for i, (a, b) in enumerate(items):
        if a is None or b == 0:
            continue
        if b > 0:
            open_allocs.setdefault(a, []).append(i)
        elif open_allocs.get(a):
            j = open_allocs[a].pop()
            partner[i], partner[j] = j, i
        else:
            unmatched += 1
    got = pair_frees(pl.Series(addr, dtype=pl.Int64), pl.Series(nbytes, dtype=pl.Int64))
    assert got.partner.tolist() == partner and got.unmatched_frees == unmatched
