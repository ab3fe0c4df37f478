"""The critical path's steps shared with worker processes (`critical_path.stats._per_window`, issue 25): a step's
graph is GIL-bound Python around numpy and polars, so on a long trace a second process takes batches of steps
from the back while this one takes them from the front. Whatever computes a step, every figure must be the
same: `critical-path` (with and without what-if rules) and `analyze` (the advice's what-if model) give the same
JSON as when this process computes every step, here with workers forced on small real traces (one step per
batch)."""

from __future__ import annotations

import json

import pytest

from conftest import corpus_path
from opscope.analysis.base import parallel
from opscope.analysis.critical_path import stats

NS_STEPS = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
RESNET = "kineto/tb_plugin_samples_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz"
QWEN = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"


@pytest.fixture
def forced(monkeypatch: pytest.MonkeyPatch):
    """Workers for any trace, one step per batch; returns a function that counts the workers started."""
    monkeypatch.setattr(stats, "PROCESS_MIN_ROWS", 0)
    monkeypatch.setattr(stats, "BATCHES", 10_000)
    # one worker whatever this machine (`process_workers` reads these; `OPSCOPE_PARALLEL=threads` still wins):
    # `stats` holds its own reference to `process_workers`, so patching that name here would change nothing
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    monkeypatch.setattr(parallel, "threads", lambda: 3)
    monkeypatch.setattr(parallel, "available_memory", lambda: None)
    monkeypatch.setattr(parallel, "address_limit", lambda: None)
    before = len(parallel.worker_peaks_kb())
    return lambda: len(parallel.worker_peaks_kb()) - before


def _json(cli, *argv: str) -> dict:
    result = cli(*argv, "--format", "json", "--no-cache")
    assert result.code == 0, result.err
    return json.loads(result.out)


@pytest.mark.parametrize("name", [NS_STEPS, RESNET, QWEN])
@pytest.mark.parametrize(
    "extra", [(), ("--top", "0", "--what-if", "aten::.*:0.5", "--what-if", "Memcpy.*:0")]
)
def test_critical_path_is_the_same_from_workers(cli, monkeypatch, forced, name: str, extra: tuple[str, ...]):
    path = str(corpus_path(name))
    with monkeypatch.context() as m:
        m.setenv("OPSCOPE_PARALLEL", "threads")
        expected = _json(cli, "critical-path", path, *extra)
    assert forced() == 0
    got = _json(cli, "critical-path", path, *extra)
    steps = len(got["steps"])
    assert forced() == (1 if steps >= 2 else 0)
    assert got == expected


def test_the_what_if_model_is_the_same_from_workers(cli, monkeypatch, forced):
    """`analyze` refines its findings' savings by the critical path of every step (`SavingModel`): the ResNet
    trace's findings have what-if remedies."""
    path = str(corpus_path(RESNET))
    with monkeypatch.context() as m:
        m.setenv("OPSCOPE_PARALLEL", "threads")
        expected = _json(cli, "analyze", path)
    got = _json(cli, "analyze", path)
    assert forced() == 1
    assert any(f.get("saving_model") for f in got["findings"])
    assert got == expected
