"""A trace reduced to what a comparison needs: per-kernel and per-operator totals and the headline figures,
for the whole trace and, when it has ProfilerStep markers, for its steps.

A `TraceProfile` is small (a few hundred rows) and plain data, so it is what worker processes send back when
`opscope diff` reads its two traces in parallel; `analysis.compare.diff` compares two of them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import polars as pl

from opscope.analysis.base.codetag import analysis_tag
from opscope.analysis.base.linking import Linkage, link
from opscope.analysis.base.stored import kept_value
from opscope.analysis.compare import headline
from opscope.analysis.kernels.categories import CATEGORY, with_category
from opscope.analysis.kernels.category_rules import CATEGORIES
from opscope.model.schema import Col
from opscope.model.trace import Trace


@dataclass(frozen=True)
class KernelTotal:
    name: str
    kind: str  # kernel, memcpy or memset
    calls: int
    total_ns: int


@dataclass(frozen=True)
class OpTotal:
    name: str
    shape: str | None  # `Input Dims` text (whitespace removed) when grouped by shape, else None
    calls: int
    cpu_ns: int  # summed inclusive CPU duration
    gpu_ns: int  # GPU time of the kernels launched inside it (`analysis.attribution.ops` gpu_total)
    cpu_self_ns: int = 0  # CPU self time (`analysis.attribution.ops` cpu_self)


@dataclass(frozen=True)
class ScopeProfile:
    """Totals over one scope (all steps together, or the whole trace); nothing is divided by steps here."""

    steps: int  # 0: the whole trace
    length_ns: int  # summed step durations, or the activity window
    gpu_ns: int  # summed durations of GPU activity in scope
    busy_ns: int  # union of GPU intervals within the windows, summed over devices
    devices: int  # devices with GPU activity in the windows
    kernels: tuple[KernelTotal, ...]
    ops: tuple[OpTotal, ...]
    categories: tuple[tuple[str, int], ...]  # (category, GPU ns), every category, fixed order


@dataclass(frozen=True)
class TraceProfile:
    path: str
    devices: tuple[str, ...]
    whole: ScopeProfile
    stepped: ScopeProfile | None  # None: no ProfilerStep markers
    by_shape: bool
    op_gpu: bool  # some GPU time is attributed to operators (else operators compare CPU time)
    warnings: tuple[str, ...] = ()

    def scope(self, per_step: bool) -> ScopeProfile:
        if per_step:
            assert self.stepped is not None
            return self.stepped
        return self.whole


def _kernels(activity: pl.DataFrame) -> tuple[KernelTotal, ...]:
    grouped = (
        activity.group_by(Col.NAME, Col.KIND)
        .agg(pl.len().alias("calls"), pl.col(Col.DUR_NS).sum().alias("t"))
        .with_columns(pl.col(Col.NAME, Col.KIND).cast(pl.String))  # text of the groups only
    )
    return tuple(
        KernelTotal(name=r[0] or "", kind=r[1], calls=int(r[2]), total_ns=int(r[3]))
        for r in grouped.sort(Col.NAME, Col.KIND).iter_rows()
    )


def _ops(table: pl.DataFrame) -> tuple[OpTotal, ...]:
    rows = table.sort(Col.NAME, headline.SHAPE, nulls_last=False)
    return tuple(
        OpTotal(
            name=r[0] or "",
            shape=r[1],
            calls=int(r[2]),
            cpu_ns=int(r[3]),
            gpu_ns=int(r[4]),
            cpu_self_ns=int(r[5]),
        )
        for r in rows.iter_rows()
    )


def _categories(activity: pl.DataFrame) -> tuple[tuple[str, int], ...]:
    totals = dict(with_category(activity).group_by(CATEGORY).agg(pl.col(Col.DUR_NS).sum()).iter_rows())
    return tuple((c, int(totals.get(c, 0) or 0)) for c in CATEGORIES)


def scope_profile(trace: Trace, scope: headline.Scope, by_shape: bool, linkage: Linkage) -> ScopeProfile:
    # name and kind categorical: the kernels grouped by them, the categories classified per distinct pair
    activity = headline.gpu_activity(trace, scope, linkage, text=False)
    busy, devices = headline.busy_ns(_all_gpu(trace), scope)
    return ScopeProfile(
        steps=scope.steps,
        length_ns=scope.length_ns,
        gpu_ns=int(activity[Col.DUR_NS].sum() or 0),
        busy_ns=busy,
        devices=devices,
        kernels=_kernels(activity),
        ops=_ops(headline.op_table(trace, scope, by_shape, linkage)),
        categories=_categories(activity),
    )


def _all_gpu(trace: Trace) -> pl.DataFrame:
    """Every GPU activity's ts_ns, dur_ns, device: read once per trace (`Trace.derived`; the whole-trace and
    the step scopes and the device names ask)."""
    return trace.derived(
        "compare.all_gpu", lambda: trace.gpu_events().select(Col.TS_NS, Col.DUR_NS, Col.DEVICE).collect()
    )


def device_names(trace: Trace) -> tuple[str, ...]:
    """Names of the devices that ran GPU activity (all described devices when none ran any)."""
    used = _all_gpu(trace)[Col.DEVICE].unique().drop_nulls().to_list()
    return trace.meta.used_device_names(int(d) for d in used)


def profile_trace(trace: Trace, by_shape: bool = False) -> TraceProfile:
    """The comparison profile of `trace`: its whole-trace totals, and its step totals when it has steps. Kept
    beside the trace cache (`Trace.persisted`, typed: `base/stored.py`): a trace compared again (the baseline
    of every `diff` in a loop) is read back (issue 25)."""
    name = f"compare_profile-{'shape' if by_shape else 'name'}"
    kept = kept_value(trace, name, analysis_tag(), TraceProfile, lambda: _profile_trace(trace, by_shape))
    return replace(kept, path=trace.path, warnings=trace.meta.warnings)


def _profile_trace(trace: Trace, by_shape: bool) -> TraceProfile:
    linkage = link(trace)
    whole = scope_profile(trace, headline.trace_scope(trace, use_steps=False), by_shape, linkage)
    stepped = None
    step_scope = headline.trace_scope(trace, use_steps=True)
    if step_scope.steps:
        stepped = scope_profile(trace, step_scope, by_shape, linkage)
    return TraceProfile(
        path=trace.path,
        devices=device_names(trace),
        whole=whole,
        stepped=stepped,
        by_shape=by_shape,
        op_gpu=linkage.stats.attributed_ns > 0,
        warnings=trace.meta.warnings,
    )
