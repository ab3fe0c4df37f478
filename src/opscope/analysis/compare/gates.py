"""Regression gates and the noise threshold of `opscope diff`, as pure functions over a `TraceDiff`.

A gate compares a time of NEW with the same time of BASE (per step when the diff is per step) and trips when it
grew by more than its limit, in percent: the GPU time (`--fail-above`), the summed time of the kernels whose
name matches a regex (`--fail-kernel REGEX:PCT`), or the GPU time of a kernel category
(`--fail-category NAME:PCT`). Something that was zero in BASE and is not in NEW counts as an infinite increase.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from opscope.analysis.compare.diff import DiffRow, TraceDiff
from opscope.analysis.kernels.category_rules import CATEGORIES
from opscope.errors import UsageError

GPU_TIME, KERNEL, CATEGORY = "gpu_time", "kernel", "category"
_UNITS_NS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}


@dataclass(frozen=True)
class Gate:
    target: str  # gpu_time, kernel or category
    pattern: str | None  # the regex (kernel) or category name
    limit_pct: float

    def describe(self) -> str:
        if self.target == KERNEL:
            return f"kernels /{self.pattern}/"
        if self.target == CATEGORY:
            return f"category {self.pattern}"
        return "GPU time"


@dataclass(frozen=True)
class GateResult:
    gate: Gate
    before_ns: float
    after_ns: float
    change_pct: float | None  # None when both are zero; inf when BASE was zero
    matched: int  # kernel rows the regex matched (kernel gates); 1 otherwise
    tripped: bool

    def reason(self, per_step: bool) -> str:
        unit = " per step" if per_step else ""
        change = "new" if self.change_pct == math.inf else f"{self.change_pct or 0.0:+.1f}%"
        verdict = ">" if self.tripped else "<="
        return (
            f"{self.gate.describe()}{unit}: {self.before_ns / 1e3:,.1f} us -> {self.after_ns / 1e3:,.1f} us "
            f"({change}) {verdict} {self.gate.limit_pct:g}%"
        )


@dataclass(frozen=True)
class MinDelta:
    """Rows whose |delta| is below `ns`, or below `pct` percent of BASE's step time (or window), are hidden."""

    ns: float | None = None
    pct: float | None = None

    def threshold_ns(self, reference_ns: float) -> float:
        if self.ns is not None:
            return self.ns
        return (self.pct or 0.0) / 100.0 * reference_ns

    def keep(self, rows: tuple[DiffRow, ...], reference_ns: float) -> tuple[DiffRow, ...]:
        """The rows not hidden by `--min-delta` (in their order)."""
        threshold = self.threshold_ns(reference_ns)
        return tuple(r for r in rows if abs(r.delta_ns) >= threshold)


def parse_pct(text: str, option: str) -> float:
    """'5', '5%' or '2.5%' -> 5.0 / 2.5 (percent, not negative)."""
    raw = text.strip().removesuffix("%").strip()
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"{option}: expected a percentage like 5 or 5%, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise UsageError(f"{option}: the percentage must be a finite number >= 0, got {text!r}")
    return value


def parse_min_delta(text: str) -> MinDelta:
    """'50us', '1.5ms', '200ns', '0.1s' (a time) or '2%' (of BASE's step time or window)."""
    raw = text.strip()
    if raw.endswith("%"):
        return MinDelta(pct=parse_pct(raw, "--min-delta"))
    match = re.fullmatch(r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ns|us|µs|ms|s)", raw)
    if not match:
        raise UsageError(
            f"--min-delta: expected a time with its unit (50us, 1ms, 200ns) or a percentage (2%), "
            f"got {text!r}"
        )
    return MinDelta(ns=float(match.group(1)) * _UNITS_NS[match.group(2)])


def parse_gate(text: str, target: str) -> Gate:
    """'REGEX:PCT' (kernel) or 'NAME:PCT' (category), split at the last colon (regexes may hold colons)."""
    option = "--fail-kernel" if target == KERNEL else "--fail-category"
    head, sep, tail = text.rpartition(":")
    if not sep or not head:
        raise UsageError(f"{option}: expected {'REGEX' if target == KERNEL else 'NAME'}:PCT, got {text!r}")
    limit = parse_pct(tail, option)
    if target == KERNEL:
        try:
            re.compile(head)
        except re.error as exc:
            raise UsageError(f"{option}: not a valid regular expression: {head!r} ({exc})") from None
        return Gate(KERNEL, head, limit)
    name = head.strip().lower()
    if name not in CATEGORIES:
        raise UsageError(f"{option}: unknown category {head!r}; known: {', '.join(CATEGORIES)}")
    return Gate(CATEGORY, name, limit)


def _result(gate: Gate, before: float, after: float, matched: int) -> GateResult:
    if before == 0:
        change = None if after == 0 else math.inf
    else:
        change = (after - before) / before * 100.0
    tripped = change is not None and change > gate.limit_pct
    return GateResult(gate, before, after, change, matched, tripped)


def _kernel_totals(rows: tuple[DiffRow, ...], pattern: str) -> tuple[float, float, int]:
    compiled = re.compile(pattern)
    chosen = [r for r in rows if compiled.search(r.name)]
    return sum(r.total_before_ns for r in chosen), sum(r.total_after_ns for r in chosen), len(chosen)


def check_gates(diff: TraceDiff, gates: tuple[Gate, ...]) -> tuple[GateResult, ...]:
    """Evaluate each gate on the diff (all rows, whatever `--min-delta` and `--top` hide)."""
    results = []
    for gate in gates:
        if gate.target == GPU_TIME:
            figure = diff.figure("gpu_time")
            results.append(_result(gate, figure.before or 0.0, figure.after or 0.0, 1))
        elif gate.target == KERNEL:
            assert gate.pattern is not None
            before, after, matched = _kernel_totals(diff.kernels, gate.pattern)
            results.append(_result(gate, before, after, matched))
        else:
            before, after = next((b, a) for name, b, a in diff.categories if name == gate.pattern)
            results.append(_result(gate, before, after, 1))
    return tuple(results)
