"""Regression policies as pure functions: recent values against a baseline of earlier runs.

`threshold` (the rule PyTorch's benchmark dashboard uses): a series regresses when EVERY recent value is worse
than threshold x the baseline median, so one spike is never a regression; it improves when every recent value
is better than baseline / threshold. `zscore`: every recent value lies more than `z` standard deviations of the
baseline (at least 0.5% of its mean, so that a perfectly flat baseline does not turn noise into alarms) on the
worse side of the baseline mean. Definitions: docs/history.md.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

POLICIES = ("threshold", "zscore")
CHECK_SCOPES = ("kernel", "op", "category", "step", "global")
DEFAULT_SCOPES = ("kernel", "op", "category", "global")
# The metrics each scope is judged on; higher is worse except where listed in LOWER_IS_WORSE. Times are
# normalised (issue 28): per step where the runs have steps, per second of window where they have none, so a
# capture of more steps of the same code is not a regression. Each metric is judged over the runs that have it.
NORMALISED = ("per_step_us", "per_s_us")
CHECKED: dict[str, tuple[str, ...]] = {
    "kernel": NORMALISED,
    "op": NORMALISED,
    "category": NORMALISED,
    "step": ("wall_us",),
    "global": (
        "gpu_time_per_step_mean_us",
        "gpu_time_per_s_us",
        "step_time_us",
        "gpu_time_per_step_us",
        "utilization",
        "peak_allocated_bytes",
    ),
}
LOWER_IS_WORSE = frozenset({"utilization"})
MIN_BASELINE = 3  # fewer baseline runs than this: "insufficient data"
MIN_SIGMA = 0.005  # zscore: the baseline's spread is taken as at least 0.5% of its mean


@dataclass(frozen=True)
class CheckOptions:
    recent: int = 2
    baseline: int = 10
    threshold: float = 1.10
    policy: str = "threshold"
    z: float = 3.0
    match_tags: tuple[str, ...] = ()
    scopes: tuple[str, ...] = DEFAULT_SCOPES
    min_share: float = 0.01


@dataclass(frozen=True)
class Finding:
    scope: str
    key: str
    metric: str
    baseline: float  # the baseline median (threshold) or mean (zscore)
    values: tuple[float, ...]  # the recent runs' values, oldest first
    ratio: float  # median of the recent values / baseline


def _direction(metric: str) -> float:
    return -1.0 if metric in LOWER_IS_WORSE else 1.0


def judge(
    metric: str, baseline: Sequence[float], recent: Sequence[float], options: CheckOptions
) -> str | None:
    """ "regression", "improvement" or None for one series. `baseline` and `recent` are oldest first."""
    if not recent or len(baseline) < MIN_BASELINE:
        return None
    sign = _direction(metric)
    if options.policy == "zscore":
        mean = statistics.fmean(baseline)
        sigma = max(statistics.stdev(baseline), MIN_SIGMA * abs(mean))
        if sigma == 0:
            return None
        scores = [sign * (v - mean) / sigma for v in recent]
        if all(s > options.z for s in scores):
            return "regression"
        if all(s < -options.z for s in scores):
            return "improvement"
        return None
    middle = statistics.median(baseline)
    if middle <= 0:
        return None
    worse = [sign * (v - middle * options.threshold**sign) > 0 for v in recent]
    better = [sign * (v - middle / options.threshold**sign) < 0 for v in recent]
    if all(worse):
        return "regression"
    if all(better):
        return "improvement"
    return None


def finding(
    scope: str,
    key: str,
    metric: str,
    baseline: Sequence[float],
    recent: Sequence[float],
    options: CheckOptions,
) -> Finding:
    centre = statistics.fmean(baseline) if options.policy == "zscore" else statistics.median(baseline)
    middle = statistics.median(recent)
    return Finding(
        scope=scope,
        key=key,
        metric=metric,
        baseline=centre,
        values=tuple(recent),
        ratio=middle / centre if centre else float("inf"),
    )
