"""Nsight Compute metrics joined to a trace's kernels, with per-kernel performance flags.

Launches are paired by kernel name and launch order: the k-th profiled launch of a kernel (by ncu's ID) is
the k-th launch of that kernel in the trace (by start time). Names match exactly, or once demangled (either
side may record the mangled symbol, `_Z...`), else by their base name (no "void ", namespace, template
arguments or parameters) when that is unique in the trace, since ncu and the tracing profiler may print a
kernel differently. The join counts what it paired and never fails on names it cannot pair: none paired is
a result (`matched_launches == 0`), not an error. The paired launches are grouped by the trace's launch configuration (the rows of
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
from dataclasses import dataclass, field

import polars as pl

from opscope.analysis.kernels.demangle import demangle_names
from opscope.analysis.kernels.launch_config import LAUNCH_KEY, kernel_launches
from opscope.model.ncu import NcuMetrics
from opscope.model.schema import Col
from opscope.model.trace import Trace

LaunchKey = tuple[object, ...]
# The metrics the join carries: name in `opscope.kernels/1` -> field of `NcuMetrics.launches`.
_METRICS = {
    "duration_ns": "duration_ns",
    "sm_throughput_pct": "sm_throughput_pct",
    "memory_throughput_pct": "memory_throughput_pct",
    "dram_throughput_pct": "dram_throughput_pct",
    "achieved_occupancy_pct": "achieved_occupancy_pct",
    "theoretical_occupancy_pct": "theoretical_occupancy_pct",
    "registers_per_thread": "registers_per_thread",
    "l1_hit_rate_pct": "l1_hit_pct",
    "l2_hit_rate_pct": "l2_hit_pct",
    "block_limit_registers": "block_limit_registers",
    "block_limit_shared_memory": "block_limit_shared_mem",
    "block_limit_warps": "block_limit_warps",
    "block_limit_sm": "block_limit_sm",
}
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
    by_name: dict[str, LaunchMetrics] = field(default_factory=dict)  # per trace kernel name (the report)


def base_name(name: str) -> str:
    """ "void ns::kernel<T>(float*)" -> "kernel"; anonymous namespaces (`<unnamed>::`, `(anonymous
    namespace)::`) are namespaces too."""
    text = re.sub(r"^\s*void\s+", "", name)
    text = text.replace("<unnamed>::", "").replace("(anonymous namespace)::", "")
    depth, cut = 0, len(text)
    for i, ch in enumerate(text):
        if ch in "<(" and depth == 0:
            cut = i
            break
    return text[:cut].split("::")[-1].strip()


_LAMBDA_EDG = re.compile(r"\[lambda\([^\[\]]*?\) \(instance (\d+)\)\]")  # ncu: [lambda(float) (instance 1)]
_LAMBDA_GCC = re.compile(r"\{lambda\([^{}]*?\)#(\d+)\}")  # CUPTI / c++filt: {lambda(float)#1}
_PARAMETERS = re.compile(r"\([^()]*\)")
_QUALIFIER = re.compile(r"[A-Za-z_]\w*::")
_INT_SUFFIX = re.compile(r"\b(\d+)(?:ull|ul|ll|u|l)\b", re.IGNORECASE)
_SPACE_OR_VOID = re.compile(r"\bvoid\b|\s+")


def canonical_name(name: str) -> str:
    """A demangled kernel name with the differences between demanglers taken out, to pair ncu's spelling of a
    kernel with the tracing profiler's. Seen on an H200 (tests/data/gpu): CUPTI writes
    `void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>
    >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)` where ncu writes `void
    at::vectorized_elementwise_kernel<4, at::CUDAFunctor_add<float>, std::array<char *, 3>>(int, T2, T3)`:
    namespaces dropped, parameters as template parameters, `32u` / `false` as `32` / `0`, lambdas as `[lambda(float)
    (instance 1)]` for `{lambda(float)#1}`, other spacing. Kept: the names and the template arguments. Dropped:
    parameter lists, namespace and class qualifiers, `void`, spaces, integer suffixes; booleans as 0 / 1."""
    text = _LAMBDA_GCC.sub(r"{lambda#\1}", _LAMBDA_EDG.sub(r"{lambda#\1}", name))
    text = text.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    text = _SPACE_OR_VOID.sub("", text)
    while True:  # innermost parameter lists first, until none is left
        shorter = _PARAMETERS.sub("", text)
        if shorter == text:
            break
        text = shorter
    text = _INT_SUFFIX.sub(r"\1", _QUALIFIER.sub("", text))
    return re.sub(r"\btrue\b", "1", re.sub(r"\bfalse\b", "0", text))


def _name_map(ncu_names: list[str], trace_names: list[str]) -> dict[str, str]:
    """ncu kernel name -> the trace's kernel name it is: the same text, or the same once demangled, else the
    same canonical name (`canonical_name`), else the same base name, each only when one trace kernel has it.
    Names with no such single partner are left out."""
    nice = demangle_names([*ncu_names, *trace_names])
    by_form: dict[str, set[str]] = {}
    by_canonical: dict[str, set[str]] = {}
    by_base: dict[str, set[str]] = {}
    for name in trace_names:
        for form in {name, nice.get(name, name)}:
            by_form.setdefault(form, set()).add(name)
        by_canonical.setdefault(canonical_name(nice.get(name, name)), set()).add(name)
        by_base.setdefault(base_name(nice.get(name, name)), set()).add(name)
    out = {}
    for name in ncu_names:
        hits = by_form.get(name, set()) | by_form.get(nice.get(name, name), set())
        if not hits:
            hits = by_canonical.get(canonical_name(nice.get(name, name)), set())
        if not hits:
            hits = by_base.get(base_name(nice.get(name, name)), set())
        if len(hits) == 1:
            out[name] = next(iter(hits))
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
    launches = metrics.launches.with_columns(pl.col("kernel_name").cast(pl.String))
    names = _name_map(
        launches["kernel_name"].drop_nulls().unique().sort().to_list(),
        kernels[Col.NAME].drop_nulls().unique().sort().to_list(),
    )
    # typed explicitly: with no name paired, `replace_strict` would otherwise make a column of nulls, which
    # cannot be joined to the trace's text names
    ncu = (
        launches.with_columns(
            pl.col("kernel_name").replace_strict(names, default=None, return_dtype=pl.String).alias(Col.NAME)
        )
        .sort("id")
        .with_columns(pl.int_range(pl.len()).over("kernel_name").alias("nth"))
    )
    unmatched = tuple(
        sorted(set(ncu.filter(pl.col(Col.NAME).is_null())["kernel_name"].drop_nulls().to_list()))
    )
    profiled = ncu.filter(pl.col(Col.NAME).is_not_null()).select(
        pl.col(Col.NAME),
        pl.col("nth").cast(kernels.schema["nth"]),
        *[pl.col(f).cast(pl.Float64).alias(f"ncu:{key}") for key, f in _METRICS.items()],
    )  # ncu names may clash with ours
    paired = kernels.join(profiled, on=[Col.NAME, "nth"], how="inner")
    return MetricsJoin(
        path=metrics.path,
        layout=metrics.layout,
        profiled_launches=launches.height,
        matched_launches=paired.height,
        by_launch=_summarise(paired, LAUNCH_KEY, opts),
        unmatched_kernels=unmatched,
        by_name={str(k[0]): v for k, v in _summarise(paired, [Col.NAME], opts).items()},
    )


def _summarise(paired: pl.DataFrame, key: list[str], opts: MetricsOptions) -> dict[LaunchKey, LaunchMetrics]:
    """The mean metrics and flags of the paired launches of each `key` group."""
    grouped = paired.group_by(key, maintain_order=True).agg(
        pl.len().alias("launches"), *[pl.col(f"ncu:{k}").mean() for k in _METRICS]
    )
    out: dict[LaunchKey, LaunchMetrics] = {}
    for row in grouped.iter_rows(named=True):
        values = {k: row.get(f"ncu:{k}") for k in _METRICS}
        bound, limiter, flags = _flags(values, opts)
        out[tuple(row[k] for k in key)] = LaunchMetrics(
            launches=int(row["launches"]), values=values, bound=bound, occupancy_limiter=limiter, flags=flags
        )
    return out
