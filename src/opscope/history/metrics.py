"""A trace reduced to what a run stores: (scope, key, metric, value) rows and the run's facts.

Nothing is recomputed here that an analysis already defines: the kernel rows come from the selection of the
`opscope summary` table (`kernels.summary.select_gpu`), grouped by the normalised key of `history.keys`;
operators, categories, steps and the busy fraction come from `opscope analyze` (`analysis.overview.analyze`),
and the per-call spread of operators and categories, which those tables only total, from `history.spread`.
Times are stored in microseconds (`*_us`), shares and utilisation as fractions. Definitions: docs/history.md.

What `check` judges is normalised, so that a capture of more steps (or a longer one) of the same code is not a
regression (issue 28): kernels, operators and categories get `per_step_us`, their GPU time over the step
windows divided by the step count, as `opscope diff` compares per step (`analysis.compare.profile`), or, in a
trace without step markers, `per_s_us`, their GPU time per second of the whole-trace window.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass

import polars as pl

from opscope.analysis.base.codetag import analysis_tag
from opscope.analysis.base.linking import Linkage, link
from opscope.analysis.base.stored import kept_value
from opscope.analysis.compare import headline
from opscope.analysis.compare.profile import scope_profile
from opscope.analysis.findings import Advice
from opscope.analysis.kernels.summary import SummaryOptions, select_gpu
from opscope.analysis.memory.events import is_gpu
from opscope.analysis.memory.peaks import peak_memory
from opscope.analysis.overview import AnalyzeOptions
from opscope.analysis.rules.advise import advise
from opscope.analysis.timeline.activity import TimelineOptions, gpu_activity
from opscope.analysis.timeline.step_figures import step_figures
from opscope.history.keys import series_key
from opscope.history.spread import Spread, category_spread, op_spread
from opscope.model.schema import Col
from opscope.model.trace import Trace

SCOPES = ("kernel", "op", "category", "step", "global")
PER_STEP, PER_SECOND = "per_step_us", "per_s_us"  # the normalised figures `check` judges
P95 = 0.95  # linear interpolation between the closest ranks (numpy's default percentile)
NO_CALLS = Spread(0.0, 0.0, 0.0)


@dataclass(frozen=True)
class RunFacts:
    source_format: str
    host: str | None
    gpu_name: str | None
    gpu_count: int
    torch_version: str | None
    cuda_version: str | None
    hip_version: str | None = None  # stored as the automatic tag `hip_version` (the runs table has no column)

    def tags(self) -> dict[str, str]:
        """The facts stored as automatic tags."""
        return {"hip_version": self.hip_version} if self.hip_version else {}


@dataclass(frozen=True)
class RunMetrics:
    rows: tuple[tuple[str, str, str, float], ...]  # (scope, key, metric, value)
    names: dict[str, str]  # shortened key -> full name (names longer than keys.MAX_KEY_CHARS)
    facts: RunFacts


def _us(ns: float) -> float:
    return ns / 1e3


def _cuda(value: object) -> str | None:
    """Kineto writes the CUDA runtime version as an integer (12040 -> "12.4")."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return f"{value // 1000}.{value % 1000 // 10}"
    return str(value) if isinstance(value, str) and value else None


def _hip(value: object) -> str | None:
    """Kineto AMD traces write HIP_VERSION as an integer: major * 10^7 + minor * 10^5 + patch
    (60443483 -> "6.4.43483")."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return f"{value // 10_000_000}.{value // 100_000 % 100}.{value % 100_000}"
    return str(value) if isinstance(value, str) and value else None


def used_devices(trace: Trace) -> list[int]:
    """The distinct device ids of the trace's GPU events, ascending (events without a device left out)."""
    frame = trace.gpu_events().select(pl.col(Col.DEVICE).drop_nulls().unique()).collect()
    return sorted(int(d) for d in frame[Col.DEVICE].to_list())


def _gpus(trace: Trace, used: list[int]) -> tuple[str | None, int]:
    """(name, count) of the GPUs that ran work: the devices of the GPU events, named by the trace's device table
    (the first used device it describes, else its first entry); the device table alone when no GPU event has a
    device."""
    table = trace.meta.devices
    named = [d.name for i in used for d in table if d.id == i]
    first = table[0].name if table else None
    if used:
        return (named[0] if named else first), len(used)
    return first, len(table)


def _host(extra: dict[str, object]) -> str | None:
    """The host the trace records (never the machine reading it)."""
    for key in ("hostname", "nsys_hostname", "host", "hostnames"):
        value = extra.get(key)
        if value:
            return str(value)
    return None


def run_facts(trace: Trace) -> RunFacts:
    extra = trace.meta.extra
    torch = extra.get("pytorch_version") or extra.get("torch_version")
    gpu_name, gpu_count = _gpus(trace, used_devices(trace))
    return RunFacts(
        source_format=trace.meta.format,
        host=_host(extra),
        gpu_name=gpu_name,
        gpu_count=gpu_count,
        torch_version=str(torch) if torch else None,
        cuda_version=_cuda(extra.get("cuda_runtime_version") or extra.get("cuda_version")),
        hip_version=_hip(extra.get("hip_runtime_version")),
    )


def _kernel_rows(trace: Trace, names: dict[str, str]) -> tuple[list[tuple[str, str, str, float]], int, int]:
    selection = select_gpu(trace, SummaryOptions(top=0))
    frame = selection.frame.select(pl.col(Col.NAME).cast(pl.String).fill_null(""), pl.col(Col.DUR_NS))
    keys: dict[str, str] = {}
    for name in frame[Col.NAME].unique().to_list():
        key, full = series_key(name)
        keys[name] = key
        if full is not None:
            names[key] = full
    total = selection.gpu_time_ns
    grouped = (
        frame.with_columns(pl.col(Col.NAME).replace_strict(keys, return_dtype=pl.String).alias("key"))
        .group_by("key")
        .agg(
            pl.len().alias("calls"),
            pl.col(Col.DUR_NS).sum().alias("total"),
            pl.col(Col.DUR_NS).mean().alias("mean"),
            pl.col(Col.DUR_NS).median().alias("median"),
            pl.col(Col.DUR_NS).quantile(P95, interpolation="linear").alias("p95"),
        )
        .sort("key")
    )
    rows: list[tuple[str, str, str, float]] = []
    for r in grouped.iter_rows(named=True):
        k = r["key"]
        rows += [
            ("kernel", k, "calls", float(r["calls"])),
            ("kernel", k, "total_us", _us(r["total"])),
            ("kernel", k, "mean_us", _us(r["mean"])),
            ("kernel", k, "median_us", _us(r["median"])),
            ("kernel", k, "p95_us", _us(r["p95"])),
            ("kernel", k, "share", r["total"] / total if total > 0 else 0.0),
        ]
    return rows, total, selection.frame.height


def _quantile(values: list[float], q: float) -> float:
    return float(pl.Series(values, dtype=pl.Float64).quantile(q, interpolation="linear") or 0.0)


def extract(trace: Trace) -> RunMetrics:
    """Every stored figure of `trace` (see the module doc). Kept beside the trace cache (`Trace.persisted`,
    typed: `analysis/base/stored.py`) under a tag of the analysis and history sources: the same trace added to
    a second history, or again, is read back (issue 25)."""
    tag = analysis_tag("opscope.history")
    return kept_value(trace, "history.metrics", tag, RunMetrics, lambda: _extract(trace))


def _extract(trace: Trace) -> RunMetrics:
    names: dict[str, str] = {}
    rows, gpu_ns, gpu_calls = _kernel_rows(trace, names)
    linkage = link(trace)
    activity = gpu_activity(trace, TimelineOptions(), linkage)
    result = advise(trace, AnalyzeOptions(top=0), linkage, activity)
    per_op = op_spread(trace, linkage)
    for op in result.ops.rows:
        key, full = series_key(op.name, kernel=False)
        if full is not None:
            names[key] = full
        mean = op.gpu_total_ns / op.calls if op.calls else 0.0
        spread = per_op.get(op.name, NO_CALLS)
        rows += [
            ("op", key, "calls", float(op.calls)),
            ("op", key, "total_us", _us(op.gpu_total_ns)),
            ("op", key, "self_us", _us(op.gpu_self_ns)),
            ("op", key, "mean_us", _us(mean)),
            ("op", key, "median_us", _us(spread.median)),
            ("op", key, "p95_us", _us(spread.p95)),
            ("op", key, "cpu_total_us", _us(op.cpu_total_ns)),
            ("op", key, "cpu_self_us", _us(op.cpu_self_ns)),
            ("op", key, "share", op.gpu_share),
        ]
    per_category = category_spread(activity.clipped())
    for cat in result.categories.rows:
        spread = per_category.get(cat.category, NO_CALLS)
        rows += [
            ("category", cat.category, "calls", float(cat.calls)),
            ("category", cat.category, "total_us", _us(cat.total_ns)),
            ("category", cat.category, "mean_us", _us(cat.total_ns / cat.calls if cat.calls else 0.0)),
            ("category", cat.category, "median_us", _us(spread.median)),
            ("category", cat.category, "p95_us", _us(spread.p95)),
            ("category", cat.category, "busy_us", _us(cat.busy_ns)),
            ("category", cat.category, "share", cat.share),
        ]
    walls: list[float] = []
    busy: list[float] = []
    if result.steps.from_markers:
        for i, step in enumerate(result.steps.rows, start=1):
            wall = step.window.dur_ns
            step_busy = sum(d.busy_ns for d in step.devices)
            devices = max(len(step.devices), 1)
            walls.append(_us(wall))
            busy.append(_us(step_busy))
            rows += [
                ("step", str(i), "wall_us", _us(wall)),
                ("step", str(i), "busy_us", _us(step_busy)),
                ("step", str(i), "utilization", step_busy / (wall * devices) if wall > 0 else 0.0),
            ]
    timelines = result.timeline.devices
    glob = {
        "gpu_time_us": _us(gpu_ns),
        "gpu_calls": float(gpu_calls),
        "steps": float(len(walls)),
        "utilization": statistics.fmean(d.utilization for d in timelines) if timelines else 0.0,
    }
    if walls:
        host = step_figures(trace, tuple(step.window for step in result.steps.rows))
        glob |= {
            "host_outside_ops_per_step_us": _us(host.host_outside_ops_ns) / host.steps,
            "dataloader_wait_per_step_us": _us(host.dataloader_ns) / host.steps,
            "allocations_per_step": host.allocations / host.steps,
            "allocator_calls_per_step": host.allocator_calls / host.steps,
        }
        glob |= {
            "step_time_us": statistics.median(walls),
            "step_time_mean_us": statistics.fmean(walls),
            "step_time_p95_us": _quantile(walls, P95),
            "gpu_time_per_step_us": statistics.median(busy),
        }
    glob |= _peak_memory(trace)
    rows += finding_rows(result.advice)
    normalised, scope_globals = _normalised(trace, linkage, names)
    rows += normalised
    glob |= scope_globals
    rows += [("global", "run", metric, float(value)) for metric, value in glob.items()]
    return RunMetrics(rows=tuple(rows), names=names, facts=run_facts(trace))


def finding_rows(advice: Advice | None) -> list[tuple[str, str, str, float]]:
    """The run's advice as rows of scope `finding` (issue 53: a later run that fixes one is compared with this
    prediction): per rule that fired, its predicted saving and time at stake (us) and whether it was shown
    (`shown` 1) or withheld (0, its time explained by another finding); per rule not evaluated, `not_evaluated`
    1 (a rule that could not run is not a fix)."""
    if advice is None:
        return []
    rows: list[tuple[str, str, str, float]] = []
    for shown, found in ((1.0, advice.findings), (0.0, advice.withheld)):
        for f in found:
            rows += [
                ("finding", f.id, "predicted_saving_us", _us(f.predicted_saving_ns or 0)),
                ("finding", f.id, "time_at_stake_us", _us(f.time_at_stake_ns)),
                ("finding", f.id, "shown", shown),
            ]
    rows += [("finding", o.id, "not_evaluated", 1.0) for o in advice.not_evaluated]
    return rows


def _normalised(
    trace: Trace, linkage: Linkage, names: dict[str, str]
) -> tuple[list[tuple[str, str, str, float]], dict[str, float]]:
    """Per kernel, operator and category key: its GPU time over the step windows per step (`per_step_us`), or,
    without step markers, per second of the whole-trace window (`per_s_us`); and the run's matching globals
    (`scope_us`, the windows' length; `gpu_time_per_step_mean_us` or `gpu_time_per_s_us`)."""
    scope = headline.trace_scope(trace, use_steps=True)
    profile = scope_profile(trace, scope, by_shape=False, linkage=linkage)
    if profile.steps > 0:
        metric, divisor = PER_STEP, float(profile.steps)
    else:
        metric, divisor = PER_SECOND, profile.length_ns / 1e9
    if divisor <= 0:
        return [], {"scope_us": _us(profile.length_ns)}
    per_key: dict[tuple[str, str], float] = {}
    for kernel in profile.kernels:
        key, full = series_key(kernel.name)
        if full is not None:
            names[key] = full
        per_key[("kernel", key)] = per_key.get(("kernel", key), 0.0) + kernel.total_ns
    for op in profile.ops:
        key, full = series_key(op.name, kernel=False)
        if full is not None:
            names[key] = full
        per_key[("op", key)] = per_key.get(("op", key), 0.0) + op.gpu_ns
    for category, ns in profile.categories:
        if ns:
            per_key[("category", category)] = float(ns)
    rows = [(scope_name, key, metric, _us(ns) / divisor) for (scope_name, key), ns in sorted(per_key.items())]
    total = "gpu_time_per_step_mean_us" if metric == PER_STEP else "gpu_time_per_s_us"
    return rows, {"scope_us": _us(profile.length_ns), total: _us(profile.gpu_ns) / divisor}


def _peak_memory(trace: Trace) -> dict[str, float]:
    """The largest peak allocated / reserved bytes over the GPUs whose `[memory]` events carry the allocator's
    totals (`opscope memory`'s peaks, analysis/memory/peaks.py); nothing when the trace has none."""
    peaks = [p for p in peak_memory(trace) if is_gpu(p.device) and not p.relative]
    out: dict[str, float] = {}
    if peaks:
        out["peak_allocated_bytes"] = float(max(p.peak_allocated_bytes for p in peaks))
        reserved = [p.peak_reserved_bytes for p in peaks if p.peak_reserved_bytes is not None]
        if reserved:
            out["peak_reserved_bytes"] = float(max(reserved))
    return out


_SAFE_KEY = re.compile(r"^[\w.\-]+$")


def check_tag(key: str) -> bool:
    """Tag keys are identifiers (letters, digits, `_`, `.`, `-`): they name columns in exports and filters."""
    return bool(_SAFE_KEY.match(key))
