"""Before/after comparison of two traces: headline figures, then kernels and operators matched by name.

Input is two `TraceProfile`s (see `analysis.compare.profile`), so the traces can be read in parallel processes. Every
total is divided by the number of steps when comparing per step (the default when both traces have ProfilerStep
markers), so traces holding different numbers of steps compare fairly. Every delta is NEW minus BASE; swapping
the two negates every delta exactly and swaps added with removed. Definitions: docs/compare.md.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from opscope.analysis.compare.mismatch import model_mismatch, models
from opscope.analysis.compare.profile import OpTotal, ScopeProfile, TraceProfile, profile_trace
from opscope.errors import UsageError
from opscope.model.trace import Trace
from opscope.tables import Tabular, dataclass_rows

CHANGED, SAME, ADDED, REMOVED = "changed", "same", "added", "removed"
NS, SHARE = "ns", "share"
NAME_OVERLAP_WARNING = 0.5  # below this share of common names, the traces are probably different programs


@dataclass(frozen=True)
class DiffOptions:
    per_step: bool | None = None  # None: per step when both traces have step markers
    by_shape: bool = False
    key_ops: tuple[str, ...] = ()  # regexes, one headline row each; empty: the top ops of BASE
    key_op_count: int = 3


@dataclass(frozen=True)
class DiffRow:
    """One kernel (name, kind) or operator (name[, shape]); times are per step when comparing per step."""

    name: str
    kind: str  # kernel / memcpy / memset, or "op"
    shape: str | None
    status: str  # changed, same, added (only in NEW), removed (only in BASE)
    calls_before: float
    calls_after: float
    total_before_ns: float
    total_after_ns: float
    mean_before_ns: float | None  # per call, never divided by steps
    mean_after_ns: float | None
    delta_ns: float
    ratio: float | None  # after / before; None when before is 0
    cpu_before_ns: float | None = None  # operators compared by GPU time: their inclusive CPU time too
    cpu_after_ns: float | None = None


@dataclass(frozen=True)
class Figure:
    """A headline figure: `unit` is ns (per step when per-step) or share (0..1)."""

    key: str
    label: str
    unit: str
    before: float | None
    after: float | None

    @property
    def delta(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return self.after - self.before

    @property
    def change_pct(self) -> float | None:
        if self.before is None or self.after is None or self.before == 0:
            return None
        return (self.after - self.before) / self.before * 100.0


@dataclass(frozen=True)
class Side:
    path: str
    devices: tuple[str, ...]
    steps: int
    divisor: int  # what totals were divided by (steps, or 1)


@dataclass(frozen=True)
class TraceDiff(Tabular):
    base: Side
    new: Side
    per_step: bool
    op_metric: (
        str  # "gpu" (time of the kernels launched inside, when both traces link any) or "cpu" (inclusive)
    )
    figures: tuple[Figure, ...]
    categories: tuple[
        tuple[str, float, float], ...
    ]  # (category, before ns, after ns), per step when per-step
    kernels: tuple[DiffRow, ...]  # every row, sorted by |delta| (largest first), then name
    ops: tuple[DiffRow, ...]
    options: DiffOptions
    warnings: tuple[str, ...] = ()
    mismatches: tuple[
        str, ...
    ] = ()  # the warnings that change what the comparison means (also in `warnings`)
    cpu_ops: tuple[DiffRow, ...] = ()  # operators compared by CPU self time (CPU-side causes: a DataLoader)

    def figure(self, key: str) -> Figure:
        for figure in self.figures:
            if figure.key == key:
                return figure
        raise KeyError(key)

    def _table_rows(self) -> list[dict[str, Any]]:
        """Kernel rows, operator rows, then operators by CPU self time (`table`: kernel / op / op_cpu_self),
        every row, biggest change first."""
        tables = (("kernel", self.kernels), ("op", self.ops), ("op_cpu_self", self.cpu_ops))
        return [{"table": t, **r} for t, rows in tables for r in dataclass_rows(rows)]

    def _table_title(self) -> str:
        return f"TraceDiff: {self.new.path} vs {self.base.path}"


def _row(
    name: str,
    kind: str,
    shape: str | None,
    before: tuple[int, int] | None,
    after: tuple[int, int] | None,
    div_b: int,
    div_a: int,
) -> DiffRow:
    calls_b, total_b = before or (0, 0)
    calls_a, total_a = after or (0, 0)
    tb, ta = total_b / div_b, total_a / div_a
    status = ADDED if before is None else REMOVED if after is None else SAME if tb == ta else CHANGED
    return DiffRow(
        name=name,
        kind=kind,
        shape=shape,
        status=status,
        calls_before=calls_b / div_b,
        calls_after=calls_a / div_a,
        total_before_ns=tb,
        total_after_ns=ta,
        mean_before_ns=total_b / calls_b if calls_b else None,
        mean_after_ns=total_a / calls_a if calls_a else None,
        delta_ns=ta - tb,
        ratio=ta / tb if tb else None,
    )


def _sorted(rows: Iterable[DiffRow]) -> tuple[DiffRow, ...]:
    return tuple(sorted(rows, key=lambda r: (-abs(r.delta_ns), r.name, r.kind, r.shape or "")))


def _match(
    before: dict[tuple[str, str, str | None], tuple[int, int]],
    after: dict[tuple[str, str, str | None], tuple[int, int]],
    div_b: int,
    div_a: int,
) -> tuple[DiffRow, ...]:
    keys = sorted(set(before) | set(after), key=lambda k: (k[0], k[1], k[2] or ""))
    return _sorted(_row(k[0], k[1], k[2], before.get(k), after.get(k), div_b, div_a) for k in keys)


def _op_value(op: OpTotal, metric: str) -> int:
    return op.gpu_ns if metric == "gpu" else op.cpu_ns


def _op_table(scope: ScopeProfile, metric: str) -> dict[tuple[str, str, str | None], tuple[int, int]]:
    return {(o.name, "op", o.shape): (o.calls, _op_value(o, metric)) for o in scope.ops}


def _with_cpu(
    rows: tuple[DiffRow, ...], base: ScopeProfile, new: ScopeProfile, div_b: int, div_a: int
) -> tuple[DiffRow, ...]:
    cpu_b = {(o.name, o.shape): o.cpu_ns for o in base.ops}
    cpu_a = {(o.name, o.shape): o.cpu_ns for o in new.ops}
    return tuple(
        dataclasses.replace(
            r,
            cpu_before_ns=cpu_b.get((r.name, r.shape), 0) / div_b,
            cpu_after_ns=cpu_a.get((r.name, r.shape), 0) / div_a,
        )
        for r in rows
    )


def _key_ops(
    base: ScopeProfile, new: ScopeProfile, options: DiffOptions, metric: str, div_b: int, div_a: int
) -> list[Figure]:
    def total(scope: ScopeProfile, match: re.Pattern[str] | str) -> int:
        if isinstance(match, str):
            return sum(_op_value(o, metric) for o in scope.ops if o.name == match)
        return sum(_op_value(o, metric) for o in scope.ops if match.search(o.name))

    metric_label = "GPU" if metric == "gpu" else "CPU"
    figures = []
    if options.key_ops:
        for pattern in options.key_ops:
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise UsageError(f"--key-op: not a valid regular expression: {pattern!r} ({exc})") from None
            figures.append(
                Figure(
                    f"key_op:{pattern}",
                    f"ops /{pattern}/ ({metric_label})",
                    NS,
                    total(base, compiled) / div_b,
                    total(new, compiled) / div_a,
                )
            )
        return figures
    by_name: dict[str, int] = {}
    for op in base.ops:
        by_name[op.name] = by_name.get(op.name, 0) + _op_value(op, metric)
    ranked = sorted((v, n) for n, v in by_name.items() if v > 0)
    for _, name in sorted(ranked, key=lambda vn: (-vn[0], vn[1]))[: options.key_op_count]:
        figures.append(
            Figure(
                f"key_op:{name}",
                f"op {name} ({metric_label})",
                NS,
                total(base, name) / div_b,
                total(new, name) / div_a,
            )
        )
    return figures


def _utilization(scope: ScopeProfile) -> float | None:
    capacity = scope.length_ns * max(scope.devices, 1)
    return scope.busy_ns / capacity if capacity > 0 else None


def _figures(base: ScopeProfile, new: ScopeProfile, per_step: bool, div_b: int, div_a: int) -> list[Figure]:
    unit = " per step" if per_step else ""
    length = "step time (mean)" if per_step else "window (first to last activity)"
    figures = [
        Figure("time", length, NS, base.length_ns / div_b, new.length_ns / div_a),
        Figure(
            "gpu_time",
            f"GPU time{unit} (sum of kernel/copy durations)",
            NS,
            base.gpu_ns / div_b,
            new.gpu_ns / div_a,
        ),
        Figure(
            "gpu_busy", f"GPU busy{unit} (union over devices)", NS, base.busy_ns / div_b, new.busy_ns / div_a
        ),
        Figure(
            "utilization", "GPU utilization (busy / window)", SHARE, _utilization(base), _utilization(new)
        ),
    ]
    return figures


def _category_figures(
    categories: tuple[tuple[str, float, float], ...], base_total: float, new_total: float
) -> list[Figure]:
    figures = []
    for name, before, after in categories:
        share_b = before / base_total if base_total else 0.0
        share_a = after / new_total if new_total else 0.0
        if share_b >= 0.01 or share_a >= 0.01:
            figures.append(Figure(f"category:{name}", f"{name} share of GPU time", SHARE, share_b, share_a))
    return figures


def _name_overlap(base: ScopeProfile, new: ScopeProfile) -> float | None:
    names_b = {o.name for o in base.ops} or {k.name for k in base.kernels}
    names_a = {o.name for o in new.ops} or {k.name for k in new.kernels}
    if not names_b or not names_a:
        return None
    return len(names_b & names_a) / len(names_b | names_a)


def _warnings(base: TraceProfile, new: TraceProfile, b: ScopeProfile, a: ScopeProfile) -> list[str]:
    out = [f"{base.path}: {w}" for w in base.warnings] + [f"{new.path}: {w}" for w in new.warnings]
    out.extend(_mismatches(base, new))
    overlap = _name_overlap(b, a)
    if overlap is not None and overlap < NAME_OVERLAP_WARNING:
        out.append(
            f"the traces share only {overlap:.0%} of their operator/kernel names: different models or "
            "programs?"
        )
    return out


def _mismatches(base: TraceProfile, new: TraceProfile) -> list[str]:
    """Differences that change what the comparison means (shown first in every format)."""
    if model_mismatch(base.devices, new.devices) is None:
        return []
    return [
        f"different devices: BASE ran on {', '.join(sorted(models(base.devices)))}, NEW on "
        f"{', '.join(sorted(models(new.devices)))}: every change mixes hardware and code; kernel names differ "
        "between GPU models and libraries: compare the headline figures and the operators matched across hardware"
    ]


def _decide_per_step(base: TraceProfile, new: TraceProfile, requested: bool | None) -> tuple[bool, list[str]]:
    both = base.stepped is not None and new.stepped is not None
    if requested is True and not both:
        missing = base.path if base.stepped is None else new.path
        raise UsageError(f"--per-step: {missing} has no ProfilerStep markers")
    if requested is None and not both and (base.stepped is not None or new.stepped is not None):
        has = "BASE" if base.stepped is not None else "NEW"
        return False, [f"only {has} has ProfilerStep markers: comparing whole traces, not per step"]
    return (both if requested is None else requested), []


def diff_profiles(base: TraceProfile, new: TraceProfile, options: DiffOptions | None = None) -> TraceDiff:
    """Compare two profiles (NEW minus BASE); see the module doc."""
    opts = options or DiffOptions()
    per_step, notes = _decide_per_step(base, new, opts.per_step)
    b, a = base.scope(per_step), new.scope(per_step)
    div_b, div_a = (b.steps, a.steps) if per_step else (1, 1)
    metric = "gpu" if base.op_gpu and new.op_gpu else "cpu"
    kernels = _match(
        {(k.name, k.kind, None): (k.calls, k.total_ns) for k in b.kernels},
        {(k.name, k.kind, None): (k.calls, k.total_ns) for k in a.kernels},
        div_b,
        div_a,
    )
    ops = _match(_op_table(b, metric), _op_table(a, metric), div_b, div_a)
    if metric == "gpu":
        ops = _with_cpu(ops, b, a, div_b, div_a)
    categories = tuple(
        (name, before / div_b, dict(a.categories)[name] / div_a) for name, before in b.categories
    )
    figures = _figures(b, a, per_step, div_b, div_a)
    figures += _key_ops(b, a, opts, metric, div_b, div_a)
    figures += _category_figures(categories, b.gpu_ns / div_b, a.gpu_ns / div_a)
    return TraceDiff(
        base=Side(base.path, base.devices, b.steps, div_b),
        new=Side(new.path, new.devices, a.steps, div_a),
        per_step=per_step,
        op_metric=metric,
        figures=tuple(figures),
        categories=categories,
        kernels=kernels,
        ops=ops,
        options=opts,
        warnings=tuple(notes + _warnings(base, new, b, a)),
        mismatches=tuple(_mismatches(base, new)),
        cpu_ops=_match(
            {(o.name, "op", o.shape): (o.calls, o.cpu_self_ns) for o in b.ops},
            {(o.name, "op", o.shape): (o.calls, o.cpu_self_ns) for o in a.ops},
            div_b,
            div_a,
        ),
    )


def unmatched_key_ops(diff: TraceDiff) -> list[str]:
    """The `--key-op` patterns that match no operator of either trace (a typo would show a 0 -> 0 headline)."""
    return [p for p in diff.options.key_ops if not any(re.search(p, row.name) for row in diff.ops)]


def diff_traces(base: Trace, new: Trace, options: DiffOptions | None = None) -> TraceDiff:
    """`diff_profiles` of two loaded traces."""
    opts = options or DiffOptions()
    return diff_profiles(profile_trace(base, opts.by_shape), profile_trace(new, opts.by_shape), opts)


__all__ = [
    "DiffOptions",
    "DiffRow",
    "Figure",
    "TraceDiff",
    "diff_profiles",
    "diff_traces",
    "unmatched_key_ops",
]
