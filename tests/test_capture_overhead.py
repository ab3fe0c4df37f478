"""`opscope.measure_overhead`: the procedure (warm-up, interleaved pairs) and every figure recomputed from the
samples it returns."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

import opscope
from opscope.capture import ProfileOptions, Schedule
from opscope.capture.timing import Spread
from opscope.errors import UsageError
from opscope.report import RenderOptions, render
from opscope.report.capture_view import overhead_document

torch = pytest.importorskip("torch", reason="torch is an optional extra (pip install opscope[torch])")


def test_spread_matches_numpy_percentiles():
    rng = np.random.default_rng(3)
    for size in (1, 2, 3, 7, 20):
        samples = rng.random(size).tolist()
        spread = Spread.of(samples)
        q1, median, q3 = np.percentile(samples, [25, 50, 75])
        assert (spread.q1, spread.median, spread.q3) == pytest.approx((q1, median, q3))
        assert (spread.min, spread.max, spread.n) == (min(samples), max(samples), size)


def test_measure_overhead_runs_and_reports_the_pairs():
    model = torch.nn.Linear(64, 64)
    calls = []

    def workload():
        calls.append(opscope.capture.active() is not None)  # traced or not
        for _ in range(20):
            model(torch.randn(16, 64))

    result = opscope.measure_overhead(workload, repeats=3, warmup=2)
    # 2 untraced warm-ups, 1 traced warm-up, then 3 pairs: untraced/traced, traced/untraced, untraced/traced.
    assert calls == [False, False, True, False, True, True, False, False, True]
    assert result.repeats == 3 and len(result.traced_s) == 3 and len(result.finalize_s) == 3
    assert result.device == "cpu" and result.timing == "perf_counter" and result.capture == "the whole block"
    ratios = [t / u - 1 for t, u in zip(result.traced_s, result.untraced_s, strict=True)]
    assert result.intrusion.median == pytest.approx(statistics.median(ratios))
    assert result.intrusion.min == pytest.approx(min(ratios)) and result.intrusion.max == pytest.approx(
        max(ratios)
    )
    assert result.untraced.median == pytest.approx(statistics.median(result.untraced_s))
    data = overhead_document(result).data
    assert data["schema"] == "opscope.overhead/1"
    assert data["intrusion"]["median"] == pytest.approx(statistics.median(ratios), abs=1e-6)
    assert data["samples"]["traced_s"] == [round(v, 6) for v in result.traced_s]
    text = render(overhead_document(result), "table", RenderOptions(width=100))
    assert "tracing intrusion:" in text and "median of 3 pairs" in text


def test_overhead_with_a_step_schedule_collects_its_warnings_once():
    def workload():
        torch.ones(8).sum()

    options = ProfileOptions(schedule=Schedule.build(2))
    result = opscope.measure_overhead(workload, repeats=2, warmup=0, options=options)
    assert result.capture == "active=2"
    assert len(result.warnings) == 1 and "step() was never called" in result.warnings[0]


@pytest.mark.parametrize(
    "kwargs, message",
    [({"repeats": 0}, "repeats"), ({"warmup": -1}, "warmup"), ({"repeats": True}, "repeats")],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(UsageError, match=message):
        opscope.measure_overhead(lambda: None, **kwargs)
