"""Accelerators other than GPUs: the real Meta MTIA trace reads as device work (its `mtia_ccp_events` are the
device's events, `mtia_runtime` the launch calls, linked by ac2g flows), and device-like events of a category
opscope does not know are read as device work, with a warning, rather than "a CPU-only capture?"."""

from __future__ import annotations

import gzip
import json

import pytest

import opscope
from conftest import corpus_path
from opscope.analysis.kernels.unknown_device import unknown_device_categories

MTIA = "hta/mtia_inference_trace_mtia_inference_rank_0.json.gz"


def _raw(path):
    with gzip.open(path) as f:
        return json.load(f)


@pytest.mark.corpus
def test_mtia_device_events_are_device_work(cli):
    path = corpus_path(MTIA)
    raw = [e for e in _raw(path)["traceEvents"] if e.get("cat") == "mtia_ccp_events" and e.get("ph") == "X"]
    result = opscope.summary(opscope.load(path))
    # Independent recomputation: every device event's duration, in integer nanoseconds, summed.
    assert result.gpu_calls == len(raw) == 1313
    assert result.gpu_time_ns == pytest.approx(sum(e["dur"] for e in raw) * 1000, abs=len(raw))
    assert result.devices and "ARTEMIS" in result.devices[0]
    out = cli("summary", path).out
    assert "CPU-only" not in out and "event_wait" in out


@pytest.mark.corpus
def test_mtia_launches_link_to_device_events(cli):
    data = json.loads(cli("ops", corpus_path(MTIA), "--format", "json").out)
    linking = data["linking"]
    assert linking["gpu_events"] == 1313
    assert linking["linked_by_correlation"] + linking["linked_by_flow"] > 0


@pytest.mark.corpus
def test_cupti_range_profiler_ranges_are_gpu_ranges(cli):
    """The CUPTI range-profiler trace has no kernel events, only `cuda_profiler_range` events on the device: ranges
    over the work they measured (GPU annotations), neither device work of an unknown category nor a CPU-only
    capture."""
    path = corpus_path("hta/cupti_profiler_benchmark_result_924719_1679055439_trace.json.gz")
    raw = [e for e in _raw(path)["traceEvents"] if e.get("cat") == "cuda_profiler_range"]
    trace = opscope.load(path)
    assert unknown_device_categories(trace) == ()
    result = opscope.summary(trace)
    assert result.gpu_calls == 0 and result.gpu_ranges == len(raw) == 77
    out = cli("summary", path).out
    assert "a CPU-only capture?" not in out and "77 ranges on the GPU" in out


@pytest.mark.corpus
def test_handmade_unknown_accelerator_category_warns(cli, tmp_path):
    """Hand-made: the MTIA trace with its device category renamed to one opscope does not know."""
    doc = _raw(corpus_path(MTIA))
    for event in doc["traceEvents"]:
        if event.get("cat") == "mtia_ccp_events":
            event["cat"] = "nextgen_accel_events"
    path = tmp_path / "unknown_accel.json"
    path.write_text(json.dumps(doc))
    trace = opscope.load(path)
    (found,) = unknown_device_categories(trace)
    assert found.category == "nextgen_accel_events" and found.events == 1313
    result = cli("summary", path)
    assert "nextgen_accel_events" in result.out + result.err and "CPU-only" not in result.out
    # read as device work: the same calls and time as the known MTIA category gives
    raw = [e for e in doc["traceEvents"] if e.get("cat") == "nextgen_accel_events" and e.get("ph") == "X"]
    summary = opscope.summary(trace)
    assert summary.gpu_calls == len(raw) == 1313
    assert summary.gpu_time_ns == pytest.approx(sum(e["dur"] for e in raw) * 1000, abs=len(raw))
    warm = opscope.load(path)  # the cache keeps what was found
    assert unknown_device_categories(warm) == (found,) and opscope.summary(warm).gpu_calls == 1313


@pytest.mark.corpus
def test_cpu_only_trace_still_says_so(cli):
    path = corpus_path("hta/cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")
    assert unknown_device_categories(opscope.load(path)) == ()
    assert "CPU-only" in cli("summary", path).out
