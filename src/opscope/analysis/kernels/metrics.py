"""Nsight Compute metrics joined to a trace's kernels, with per-kernel performance flags.

Launches are paired by kernel name and launch order: the k-th profiled launch of a kernel (by ncu's ID) is
the k-th launch of that kernel in the trace (by start time). Names match exactly, else by their base name
(no "void ", namespace, template arguments or parameters), since ncu and the tracing profiler may print a
kernel differently. The paired launches are grouped by the trace's launch configuration (the rows of
`launch_config`), and each group gets the mean of its ncu metrics and these flags (thresholds in
`MetricsOptions`, definitions in docs/readers.md):

- `low_sm_throughput`: SM throughput below 70% of peak;
- `memory_bound` / `compute_bound` / `latency_bound`: the larger of DRAM (else memory) throughput and SM
  throughput, or `latency_bound` when both are below 60%;
- `low_achieved_occupancy`: achieved occupancy below 50%, with its limiter from ncu's block limits
  (registers, shared memory, warps = block size, blocks per SM);
- `poor_l1_hit_rate` (below 30%) and `poor_l2_hit_rate` (below 50%).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

from opscope.analysis.kernels.launch_config import LAUNCH_KEY, kernel_launches
from opscope.model.ncu import NcuMetrics
from opscope.model.schema import Col
from opscope.model.trace import Trace

LaunchKey = tuple[object, ...]
_METRICS = (
    "duration_ns",
    "sm_throughput_pct",
    "memory_throughput_pct",
    "dram_throughput_pct",
    "achieved_occupancy_pct",
    "theoretical_occupancy_pct",
    "registers_per_thread",
    "l1_hit_rate_pct",
    "l2_hit_rate_pct",
    "block_limit_registers",
    "block_limit_shared_memory",
    "block_limit_warps",
    "block_limit_sm",
)
_LIMITS = {
    "block_limit_registers": "registers",
    "block_limit_shared_memory": "shared_memory",
    "block_limit_warps": "warps",
    "block_limit_sm": "blocks",
}


@dataclass(frozen=True)
class MetricsOptions:
    low_sm_throughput_pct: float = 70.0
    latency_bound_pct: float = 60.0  # SM and memory throughput both below this: latency-bound
    low_occupancy_pct: float = 50.0
    poor_l1_hit_pct: float = 30.0
    poor_l2_hit_pct: float = 50.0


@dataclass(frozen=True)
class LaunchMetrics:
    """Mean ncu metrics of the profiled launches of one trace launch configuration, and its flags."""

    launches: int
    values: dict[str, float | None]
    bound: str | None  # "memory", "compute", "latency"
    occupancy_limiter: str | None
    flags: tuple[str, ...]


@dataclass(frozen=True)
class MetricsJoin:
    path: str
    layout: str
    profiled_launches: int
    matched_launches: int
    by_launch: dict[LaunchKey, LaunchMetrics]
    unmatched_kernels: tuple[str, ...]  # ncu kernel names with no kernel of that name in the trace


def base_name(name: str) -> str:
    """ "void ns::kernel<T>(float*)" -> "kernel"."""
    text = re.sub(r"^\s*void\s+", "", name)
    depth, cut = 0, len(text)
    for i, ch in enumerate(text):
        if ch in "<(" and depth == 0:
            cut = i
            break
    return text[:cut].split("::")[-1].strip()


def _name_map(ncu_names: list[str], trace_names: list[str]) -> dict[str, str]:
    exact = set(trace_names)
    by_base: dict[str, list[str]] = {}
    for name in trace_names:
        by_base.setdefault(base_name(name), []).append(name)
    out = {}
    for name in ncu_names:
        if name in exact:
            out[name] = name
        elif len(by_base.get(base_name(name), [])) == 1:
            out[name] = by_base[base_name(name)][0]
    return out


def _flags(
    values: dict[str, float | None], opts: MetricsOptions
) -> tuple[str | None, str | None, tuple[str, ...]]:
    flags: list[str] = []
    sm = values.get("sm_throughput_pct")
    memory = values.get("dram_throughput_pct")
    if memory is None:
        memory = values.get("memory_throughput_pct")
    if sm is not None and sm < opts.low_sm_throughput_pct:
        flags.append("low_sm_throughput")
    bound = None
    if sm is not None and memory is not None:
        if max(sm, memory) < opts.latency_bound_pct:
            bound = "latency"
        else:
            bound = "memory" if memory > sm else "compute"
        flags.append(f"{bound}_bound")
    limiter = None
    achieved = values.get("achieved_occupancy_pct")
    if achieved is not None and achieved < opts.low_occupancy_pct:
        flags.append("low_achieved_occupancy")
        limits = {v: values.get(k) for k, v in _LIMITS.items() if values.get(k) is not None}
        if limits:
            limiter = min(limits, key=lambda k: (limits[k], list(_LIMITS.values()).index(k)))
    l1, l2 = values.get("l1_hit_rate_pct"), values.get("l2_hit_rate_pct")
    if l1 is not None and l1 < opts.poor_l1_hit_pct:
        flags.append("poor_l1_hit_rate")
    if l2 is not None and l2 < opts.poor_l2_hit_pct:
        flags.append("poor_l2_hit_rate")
    return bound, limiter, tuple(flags)


def join_metrics(trace: Trace, metrics: NcuMetrics, options: MetricsOptions | None = None) -> MetricsJoin:
    """Pair ncu launches with trace launches (name, then launch order) and summarise per launch config."""
    opts = options or MetricsOptions()
    kernels = (
        kernel_launches(trace)
        .select([*LAUNCH_KEY, Col.TS_NS])
        .sort([Col.NAME, Col.TS_NS])
        .with_columns(pl.int_range(pl.len()).over(Col.NAME).alias("nth"))
        .collect()
    )
    launches = metrics.launches
    names = _name_map(
        launches["kernel_name"].drop_nulls().unique().to_list(),
        kernels[Col.NAME].drop_nulls().unique().to_list(),
    )
    ncu = (
        launches.with_columns(pl.col("kernel_name").replace_strict(names, default=None).alias(Col.NAME))
        .sort("id")
        .with_columns(pl.int_range(pl.len()).over("kernel_name").alias("nth"))
    )
    unmatched = tuple(
        sorted(set(ncu.filter(pl.col(Col.NAME).is_null())["kernel_name"].drop_nulls().to_list()))
    )
    profiled = ncu.filter(pl.col(Col.NAME).is_not_null()).select(
        [Col.NAME, "nth", *[pl.col(f).alias(f"ncu:{f}") for f in _METRICS]]
    )  # ncu names may clash with ours
    paired = kernels.join(profiled, on=[Col.NAME, "nth"], how="inner")
    grouped = paired.group_by(LAUNCH_KEY, maintain_order=True).agg(
        pl.len().alias("launches"), *[pl.col(f"ncu:{f}").mean() for f in _METRICS]
    )
    by_launch: dict[LaunchKey, LaunchMetrics] = {}
    for row in grouped.iter_rows(named=True):
        values = {f: row.get(f"ncu:{f}") for f in _METRICS}
        bound, limiter, flags = _flags(values, opts)
        by_launch[tuple(row[k] for k in LAUNCH_KEY)] = LaunchMetrics(
            launches=int(row["launches"]), values=values, bound=bound, occupancy_limiter=limiter, flags=flags
        )
    return MetricsJoin(
        path=metrics.path,
        layout=metrics.layout,
        profiled_launches=launches.height,
        matched_launches=paired.height,
        by_launch=by_launch,
        unmatched_kernels=unmatched,
    )
