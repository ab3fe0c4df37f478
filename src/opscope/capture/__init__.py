"""Capture: run PyTorch code under `torch.profiler` and write traces that the rest of opscope reads.

`profile` / `annotate` / `step` (profiler.py), the script runner behind `opscope run` (runner.py), tracing
overhead (overhead.py), strategy comparison behind `opscope bench` (compare.py, strategies.py) and the built-in
demo (demo.py, demo_model.py). torch is an optional extra: these modules import it only when they run.
"""

from __future__ import annotations

from opscope.capture.compare import StrategyComparison, VariantRun, compare_strategies
from opscope.capture.overhead import OverheadResult, measure_overhead
from opscope.capture.profiler import Profile, ProfileOptions, active, annotate, profile, step
from opscope.capture.schedule import Schedule
from opscope.capture.strategies import Strategy
from opscope.capture.summary import CaptureSummary

__all__ = [
    "CaptureSummary",
    "OverheadResult",
    "Profile",
    "ProfileOptions",
    "Schedule",
    "Strategy",
    "StrategyComparison",
    "VariantRun",
    "active",
    "annotate",
    "compare_strategies",
    "measure_overhead",
    "profile",
    "step",
]
