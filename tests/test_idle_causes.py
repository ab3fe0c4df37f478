"""Why the GPU was idle (analysis/timeline/gap_causes.py, docs/analysis-timeline.md): on every corpus trace each
GPU's causes add up to its idle time exactly; on real single-process traces each cause equals an independent
recomputation from the raw events (tests/reference.py, plain Python); the views (analyze's JSON and table, the
HTML report's table) carry the same figures; host-side patterns recorded on the CPU with torch are named."""

from __future__ import annotations

import json
from functools import cache

import pytest

import opscope
import reference as ref
from conftest import corpus_path
from opscope.analysis.overview import Analysis, analyze
from opscope.analysis.timeline.gap_causes import CAUSES
from test_categories import corpus_traces

RESNET_NW0 = "kineto/tb_plugin_samples_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz"
DLRM = "param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json"
QWEN_H100 = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"


@cache
def analysis_of(rel: str) -> Analysis:
    return analyze(opscope.load(corpus_path(rel)))


@pytest.mark.corpus
@pytest.mark.parametrize("rel", corpus_traces())
def test_causes_add_up_to_the_idle_time(rel: str) -> None:
    result = analysis_of(rel)
    for d in result.idle.devices:
        assert tuple(c.cause for c in d.causes) == CAUSES
        assert all(c.ns >= 0 for c in d.causes)
        assert sum(c.ns for c in d.causes) == d.idle_ns
        for c in d.causes:
            assert all(0 < n.ns <= c.ns for n in c.top)
    # step by step: each step's causes add up to that step's idle time as `opscope steps` has it (wall - busy,
    # computed apart from the causes), and no cause has more in the steps than in the whole window
    idle_of = {(row.window.step, dev.device): dev.idle_ns for row in result.steps.rows for dev in row.devices}
    for d in result.idle.devices:
        for c in d.causes:
            assert len(c.per_step) == len(result.idle.steps)
            assert sum(c.per_step) <= c.ns
        for k, window in enumerate(result.idle.steps):
            if (window.step, d.device) in idle_of:
                assert sum(c.per_step[k] for c in d.causes) == idle_of[(window.step, d.device)], (
                    window,
                    d.device,
                )


@pytest.mark.corpus
@pytest.mark.parametrize("rel", [RESNET_NW0, DLRM, QWEN_H100])
def test_causes_match_the_raw_events(rel: str) -> None:
    """Each cause against the classification redone from the raw JSON, per device, to the nanosecond."""
    result = analysis_of(rel)
    events = ref.load(corpus_path(rel))
    lo, hi = result.timeline.window_start_ns, result.timeline.window_end_ns
    assert lo is not None and hi is not None
    for d in result.idle.devices:
        expected = ref.idle_causes(events, lo, hi, d.device)
        assert {c.cause: c.ns for c in d.causes} == expected


@pytest.mark.corpus
def test_dataloader_is_the_first_cause_on_resnet_without_workers(cli) -> None:
    """ResNet-50 with DataLoader(num_workers=0): three quarters of the GPU's idle time is the loader, and the
    JSON, the terminal table and the report's rows say so with the loader's name."""
    out = cli("analyze", corpus_path(RESNET_NW0), "--format", "json")
    assert out.code == 0, out.err
    (device,) = json.loads(out.out)["devices"]
    causes = device["idle_breakdown"]["causes"]
    assert [c["cause"] for c in causes] == list(CAUSES)
    assert sum(c["us"] for c in causes) == pytest.approx(device["idle_us"], abs=0.01)
    loader = max(causes, key=lambda c: c["us"])
    assert loader["cause"] == "dataloader" and loader["share"] > 0.7
    assert loader["top"][0]["name"].startswith("enumerate(DataLoader)")
    per_step = device["idle_breakdown"]["per_step"]
    assert [s["step"] for s in per_step] == [5, 6, 7, 8, 9, 10]
    for step in per_step:  # every step: the DataLoader first, the causes adding up to its idle time
        assert max(step["causes"], key=step["causes"].get) == "dataloader"
        assert sum(step["causes"].values()) == pytest.approx(step["idle_us"], abs=0.01)
    text = cli("analyze", corpus_path(RESNET_NW0), "--width", "200").out
    assert "Why the GPU was idle, step by step" in text
    assert "Why the GPU was idle" in text and "dataloader" in text
