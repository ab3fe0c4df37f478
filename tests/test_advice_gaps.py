"""Gaps of issues 11 and 12 closed on branch h-adv: the `.item()` pattern of `sync_in_loop` needs a
device-to-host copy (real DLRM trace and HAND-MADE copies), `--steps` restricts `low_occupancy` and
`memory_near_capacity`, and the CSV outputs carry the JSON's scalar fields."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

import opscope
import reference as ref
from conftest import corpus_path
from handmade_traces import Event, cpu_op, document, step, write
from opscope.analysis.findings import Finding
from opscope.analysis.rules.advise import advise

DLRM = "param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json"
ITEM = ".item()"


@cache
def raw(rel: str) -> list[dict]:
    return ref.load(corpus_path(rel))


def sync_finding(path: Path) -> Finding | None:
    advice = advise(opscope.load(path, cache=False)).advice
    assert advice is not None
    return next((f for f in advice.findings if f.id == "sync_in_loop"), None)


# --- sync_in_loop: `.item()` only after a device-to-host copy ---------------------------------------------------


@pytest.mark.corpus
def test_item_pattern_only_after_a_device_to_host_copy_dlrm() -> None:
    """DLRM: 10 cudaStreamSynchronize inside aten::copy_; raw: the runtime call just before each (same thread)
    is a cudaMemcpyAsync whose memcpy (same correlation) is DtoH for 2 and HtoD for 8. Only the 2 are `.item()`."""
    events = raw(DLRM)
    runtime = [e for e in events if ref.is_x(e) and e.get("cat") == "cuda_runtime"]
    copies = {e["args"]["correlation"]: e["name"] for e in events if e.get("cat") == "gpu_memcpy"}
    direction = {"DtoH": 0, "other": 0}
    for call in (e for e in runtime if e["name"] == "cudaStreamSynchronize"):
        before = [
            e for e in runtime if (e["pid"], e["tid"]) == (call["pid"], call["tid"]) and e["ts"] < call["ts"]
        ]
        prev = max(before, key=lambda e: e["ts"])
        name = copies.get(prev["args"].get("correlation"), "")
        direction["DtoH" if "DtoH" in name else "other"] += 1
    assert direction == {"DtoH": 2, "other": 8}
    found = sync_finding(corpus_path(DLRM))
    assert found is not None
    streams = [e for e in found.evidence if e["call"] == "cudaStreamSynchronize"]
    assert sum(e["calls"] for e in streams if e["pattern"].startswith(ITEM)) == direction["DtoH"]
    assert sum(e["calls"] for e in streams if e["pattern"].startswith("blocking copy")) == direction["other"]
    assert all(e["op"] == "aten::copy_" for e in streams)


def copy_then_sync(name: str, direction: str, t0: float, corr: int) -> list[Event]:
    """HAND-MADE: `name` (an aten op) issues cudaMemcpyAsync (a `direction` memcpy on the GPU), then waits."""
    return [
        cpu_op(name, t0, 60),
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaMemcpyAsync",
            "pid": 100,
            "tid": 1,
            "ts": t0 + 5,
            "dur": 3,
            "args": {"correlation": corr},
        },
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": f"Memcpy {direction}",
            "pid": 0,
            "tid": 7,
            "ts": t0 + 10,
            "dur": 20,
            "args": {"device": 0, "stream": 7, "correlation": corr, "bytes": 4096},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaStreamSynchronize",
            "pid": 100,
            "tid": 1,
            "ts": t0 + 10,
            "dur": 25,
            "args": {},
        },
    ]


def test_host_to_device_copy_is_not_item(tmp_path: Path) -> None:
    """HAND-MADE: a blocking aten::copy_ host -> device (the op is one of those `.item()` also goes through)
    is a blocking copy; the same op copying device -> host is the `.item()` pattern."""
    events = [step(0, 0, 400), *copy_then_sync("aten::copy_", "HtoD (Pageable -> Device)", 100, 1)]
    found = sync_finding(write(tmp_path / "handmade_htod.json", document(events)))
    assert found is not None
    (only,) = found.evidence
    assert only["op"] == "aten::copy_" and only["pattern"].startswith("blocking copy")
    events.extend(copy_then_sync("aten::_local_scalar_dense", "DtoH (Device -> Pageable)", 200, 2))
    found = sync_finding(write(tmp_path / "handmade_both.json", document(events)))
    assert found is not None
    pattern = {e["op"]: e["pattern"] for e in found.evidence}
    assert pattern["aten::_local_scalar_dense"].startswith(ITEM)
    assert pattern["aten::copy_"].startswith("blocking copy")


def test_copy_in_another_op_does_not_make_the_wait_an_item(tmp_path: Path) -> None:
    """HAND-MADE: a DtoH copy issued by one op, then a synchronize in the next op: not `.item()` (the copy and
    the wait must lie in the same innermost op, unless the call itself launched the copy)."""
    events = [step(0, 0, 400), *copy_then_sync("aten::copy_", "DtoH (Device -> Pageable)", 100, 1)]
    events[-1] = {**events[-1], "ts": 170}
    events.append(cpu_op("aten::add", 165, 40))
    found = sync_finding(write(tmp_path / "handmade_other_op.json", document(events)))
    assert found is not None
    (only,) = found.evidence
    assert only["op"] == "aten::add" and only["pattern"] == "explicit synchronisation"


# --- --steps restricts low_occupancy and memory_near_capacity --------------------------------------------------

V100_NS = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"


@pytest.mark.corpus
def test_steps_restrict_low_occupancy() -> None:
    """V100 ResNet, step 102 only: the flagged launch configurations (name, block, registers, shared memory;
    occupancy does not depend on the grid) count only the raw kernels that start inside ProfilerStep#102."""
    events = raw(V100_NS)
    chosen = [(s, e) for n, s, e in ref.step_windows(events) if n == 102]
    advice = advise(opscope.load(corpus_path(V100_NS)), opscope.AnalyzeOptions(steps="102")).advice
    assert advice is not None
    (found,) = [f for f in (*advice.findings, *advice.withheld) if f.id == "low_occupancy"]
    assert len(found.evidence) < 10  # every flagged configuration is listed
    keys = {
        (e["kernel"], tuple(e["block"]), e["registers_per_thread"], e["shared_memory"])
        for e in found.evidence
    }

    def key(e: dict) -> tuple:
        a = e["args"]
        return e["name"], tuple(a.get("block", ())), a.get("registers per thread"), a.get("shared memory")

    kernels = [e for e in events if e.get("cat") == "kernel" and ref.is_x(e) and key(e) in keys]
    inside = [e for e in kernels if ref.in_steps(ref.span(e)[0], chosen)]
    assert sum(e["calls"] for e in found.evidence) == len(inside) < len(kernels)
    assert found.time_at_stake_ns == pytest.approx(
        sum(b - a for a, b in map(ref.span, inside)), abs=len(inside)
    )


def memory_event(ts: float, nbytes: int, allocated: int) -> Event:
    return {
        "ph": "i",
        "s": "t",
        "cat": "cpu_instant_event",
        "name": "[memory]",
        "pid": 100,
        "tid": 1,
        "ts": ts,
        "args": {
            "Addr": 4096,
            "Bytes": nbytes,
            "Total Allocated": allocated,
            "Total Reserved": allocated,
            "Device Type": 1,
            "Device Id": 0,
        },
    }


def test_steps_restrict_the_allocator_time(tmp_path: Path) -> None:
    """HAND-MADE: two steps with a cudaMalloc each (7 us in step 0, 11 us in step 1); the allocation in step 1
    brings the allocator to 95% of a 40 GiB device. All steps: 18 us at stake; --steps 1: 11 us."""
    gib = 2**30
    peak = 38 * gib

    def malloc(ts: float, dur: float) -> Event:
        return {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaMalloc",
            "pid": 100,
            "tid": 1,
            "ts": ts,
            "dur": dur,
            "args": {},
        }

    events = [
        step(0, 0, 100),
        step(1, 100, 100),
        malloc(10, 7),
        malloc(110, 11),
        memory_event(120, peak, peak),
        memory_event(190, -peak, 0),
    ]
    doc = document(events)
    doc["deviceProperties"] = [{"id": 0, "name": "Hand-made GPU", "totalGlobalMem": 40 * gib}]
    trace = opscope.load(write(tmp_path / "handmade_memory_steps.json", doc), cache=False)
    at_stake = {}
    for steps in (None, "1"):
        advice = advise(trace, opscope.AnalyzeOptions(steps=steps)).advice
        assert advice is not None
        (found,) = [f for f in (*advice.findings, *advice.withheld) if f.id == "memory_near_capacity"]
        at_stake[steps] = found.time_at_stake_ns
    assert at_stake == {None: 18_000, "1": 11_000}


# --- CSV carries the JSON's scalar fields ----------------------------------------------------------------------

RESNET_V100 = "kineto/tb_plugin_samples_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz"
BERT_H100 = "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"


def csv_rows(text: str) -> list[dict[str, str]]:
    import csv
    import io

    return list(csv.DictReader(io.StringIO(text)))


@pytest.mark.corpus
def test_advise_csv_carries_the_json_scalars(cli) -> None:
    path = corpus_path(RESNET_V100)
    data = __import__("json").loads(cli("advise", path, "--format", "json").out)
    out = cli("advise", path, "--format", "csv")
    assert out.code == 0, out.err
    header = out.out.splitlines()[0].split(",")
    assert header[:5] == ["severity", "id", "time_us", "share", "title"]  # the old columns, first, unrenamed
    rows = csv_rows(out.out)
    assert [r["id"] for r in rows] == [f["id"] for f in data["findings"]]
    for row, f in zip(rows, data["findings"], strict=True):
        for key in (
            "metric",
            "value",
            "threshold",
            "time_at_stake_us",
            "predicted_saving_us",
            "source",
            "advice",
        ):
            expected = f[key]
            if expected is None:
                assert row[key] == ""
            elif isinstance(expected, str):
                assert row[key] == expected
            else:
                assert float(row[key]) == pytest.approx(expected)


@pytest.mark.corpus
def test_efficiency_csv_carries_the_json_scalars(cli) -> None:
    path = corpus_path(BERT_H100)
    data = __import__("json").loads(cli("efficiency", path, "--format", "json", "--top", "0").out)
    out = cli("efficiency", path, "--format", "csv", "--top", "0")
    assert out.code == 0, out.err
    rows = csv_rows(out.out)
    assert len(rows) == len(data["rows"]) > 0
    assert list(rows[0])[:3] == ["op", "shape", "dtype"]
    for row, r in zip(rows, data["rows"], strict=True):
        assert row["op"] == r["op"]
        for key in (
            "gpu_time_us",
            "flops_per_call",
            "bytes_per_call",
            "intensity_flops_per_byte",
            "peak_tflops",
            "peak_tbps",
        ):
            assert (row[key] == "") if r[key] is None else float(row[key]) == pytest.approx(r[key])
