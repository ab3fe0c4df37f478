"""Rank-by-rank comparison of a multi-GPU job: one trace per rank, reduced in a worker to a small
`RankPartial`, then compared in the parent: per-rank time breakdown, the spread of the top kernels and operators
across ranks, the straggler, and the skew of collective start times.

`rank_partial` is the per-file half (runs in a worker process or on a Dask worker); `compare_ranks` the merging
half. Partials hold only integer sums, counts, minima, maxima and mergeable sketches, so the merged figures do
not depend on how the files were spread over workers. Definitions: docs/compare.md.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from opscope.analysis.base.durations import Durations, durations_by_name, merge_named
from opscope.analysis.base.linking import link
from opscope.analysis.compare import headline
from opscope.analysis.compare.mismatch import model_mismatch
from opscope.analysis.compare.profile import device_names
from opscope.analysis.kernels.categories import CATEGORY, with_category
from opscope.analysis.kernels.category_rules import COMMUNICATION
from opscope.errors import InputError
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace
from opscope.tables import Tabular, dataclass_rows

_RANK_PATTERNS = (
    re.compile(r"rank[-_ ]?(\d+)", re.I),
    re.compile(r"worker[-_ ]?(\d+)", re.I),
    re.compile(r"_(\d+)\."),
)


@dataclass(frozen=True)
class RankPartial:
    """One rank's trace, reduced. Times are totals over its scope (its steps, or the whole trace)."""

    path: str
    rank: int | None  # distributedInfo.rank
    world_size: int | None
    devices: tuple[str, ...]
    base_time_ns: int | None
    steps: int
    length_ns: int
    device_count: int
    busy_ns: int
    compute_ns: int
    comm_ns: int
    overlap_ns: int
    kernels: tuple[tuple[str, Durations], ...]
    ops: tuple[tuple[str, Durations], ...]
    collectives: tuple[
        tuple[str, int], ...
    ]  # (kernel name, start ns aligned with baseTimeNanoseconds), by start
    warnings: tuple[str, ...] = ()


def rank_partial(trace: Trace) -> RankPartial:
    """Reduce one rank's trace (see `RankPartial`)."""
    scope = headline.trace_scope(trace, use_steps=True)
    activity = headline.gpu_activity(trace, scope, link(trace))
    comm = pl.col(CATEGORY) == COMMUNICATION
    is_kernel = pl.col(Col.KIND) == Kind.KERNEL
    timed = with_category(
        trace.gpu_events()
        .select(
            pl.col(Col.NAME).cast(pl.String),
            pl.col(Col.KIND).cast(pl.String),
            Col.TS_NS,
            Col.DUR_NS,
            Col.DEVICE,
        )
        .collect()
    )
    sets = headline.busy_ns_of_sets(
        {
            "busy": timed,
            "compute": timed.filter(is_kernel & ~comm),
            "comm": timed.filter(is_kernel & comm),
            "kernels": timed.filter(is_kernel),
        },
        scope,
    )  # one interval merge for the four figures
    busy, compute, comm_ns, kernels_busy = sets["busy"], sets["compute"], sets["comm"], sets["kernels"]
    devices = headline.device_count(timed, scope)
    base = trace.meta.base_time_ns or 0
    collectives = with_category(activity).filter(is_kernel & comm).drop(CATEGORY).sort(Col.TS_NS, Col.NAME)
    ops = headline.cpu_ops(trace, scope)
    return RankPartial(
        path=trace.path,
        rank=trace.meta.rank,
        world_size=trace.meta.world_size,
        devices=device_names(trace),
        base_time_ns=trace.meta.base_time_ns,
        steps=scope.steps,
        length_ns=scope.length_ns,
        device_count=devices,
        busy_ns=busy,
        compute_ns=compute,
        comm_ns=comm_ns,
        overlap_ns=compute + comm_ns - kernels_busy,
        kernels=tuple(sorted(durations_by_name(activity, Col.NAME, Col.DUR_NS).items())),
        ops=tuple(sorted(durations_by_name(ops, Col.NAME, Col.DUR_NS).items())),
        collectives=tuple((n, int(t) + base) for n, t in collectives.select(Col.NAME, Col.TS_NS).iter_rows()),
        warnings=trace.meta.warnings,
    )


@dataclass(frozen=True)
class RanksOptions:
    top: int = 10  # kernels and operators compared across ranks
    threshold: float = 0.30  # flag a worst rank this far above the median


@dataclass(frozen=True)
class RankRow:
    """One rank; times per step when every rank has steps, else over its whole trace."""

    rank: int
    rank_source: str  # distributedInfo, file name, or order
    path: str
    devices: tuple[str, ...]
    steps: int
    step_ns: float  # mean step time, or the activity window
    busy_ns: float
    compute_ns: float
    comm_ns: float
    overlap_ns: float
    idle_ns: float
    utilization: float | None


@dataclass(frozen=True)
class Spread:
    """One kernel or operator across ranks: its time on each rank (per step), and all its calls merged."""

    name: str
    per_rank: tuple[float, ...]  # in rank order
    mean_ns: float
    min_ns: float
    max_ns: float
    median_ns: float
    worst_rank: int
    excess: float | None  # (max - median) / median; None when the median is 0
    flagged: bool
    calls: int  # over all ranks
    total_ns: int  # over all ranks, not divided by steps
    call_min_ns: int
    call_max_ns: int
    call_p50_ns: float | None  # from the merged sketch (1% relative accuracy)
    call_p99_ns: float | None


@dataclass(frozen=True)
class Straggler:
    """The rank the others wait for (rule in docs/compare.md) and the three signals it is decided from."""

    rank: int | None  # None: the signals do not agree on one rank
    reason: str
    shortest_wait_rank: int | None  # least time in communication kernels; None with fewer than 2 such ranks
    wait_deficit: float | None  # how far below the median communication time, as a fraction of the median
    latest_rank: int | None  # the rank that most often starts matched collectives last (None: tie or no data)
    latest_share: float | None  # share of matched collectives it started last
    slowest_compute_rank: int
    compute_excess: float | None  # over the median compute time


@dataclass(frozen=True)
class Skew:
    matched: int  # collective occurrences found on every rank
    unmatched: int  # kernel occurrences on some ranks only (left out)
    p50_ns: float | None
    max_ns: int | None
    worst: str | None  # "name #k" of the most skewed collective
    latest_rank_counts: tuple[tuple[int, int], ...]  # (rank, times it started last), most first
    aligned: bool  # every rank had baseTimeNanoseconds


@dataclass(frozen=True)
class RanksReport(Tabular):
    ranks: tuple[RankRow, ...]
    world_size: int
    missing: tuple[int, ...]
    complete: bool
    per_step: bool
    kernels: tuple[Spread, ...]
    ops: tuple[Spread, ...]
    straggler: Straggler | None
    skew: Skew | None
    options: RanksOptions
    warnings: tuple[str, ...] = ()

    def _table_rows(self) -> list[dict[str, Any]]:
        return dataclass_rows(self.ranks)

    def _table_title(self) -> str:
        return f"RanksReport: {len(self.ranks)} of world size {self.world_size}"


def rank_from_name(path: str) -> int | None:
    """rank-N / rankN / rank_N, worker N / workerN, then _N. in the file name."""
    name = Path(path).name
    for pattern in _RANK_PATTERNS:
        match = pattern.search(name)
        if match:
            return int(match.group(1))
    return None


def assign_ranks(partials: Sequence[RankPartial]) -> list[tuple[int, str, RankPartial]]:
    """(rank, source, partial) sorted by rank. Duplicate ranks are an error."""
    by_name = [rank_from_name(p.path) for p in partials]
    if all(p.rank is not None for p in partials):
        chosen = [(p.rank, "distributedInfo", p) for p in partials]
    elif all(r is not None for r in by_name):
        chosen = [(r, "file name", p) for r, p in zip(by_name, partials)]
    else:
        chosen = [(i, "order", p) for i, p in enumerate(sorted(partials, key=lambda p: p.path))]
    seen: dict[int, str] = {}
    for rank, source, partial in chosen:
        assert rank is not None
        if rank in seen:
            raise InputError(f"rank {rank} appears twice ({source}): {seen[rank]} and {partial.path}")
        seen[rank] = partial.path
    return sorted(((int(r), s, p) for r, s, p in chosen), key=lambda t: t[0])  # type: ignore[arg-type]


def _spread(name: str, values: list[float], ranks: list[int], merged: Durations, threshold: float) -> Spread:
    median = statistics.median(values)
    worst = max(range(len(values)), key=lambda i: (values[i], -ranks[i]))
    excess = (values[worst] - median) / median if median > 0 else None
    return Spread(
        name=name,
        per_rank=tuple(values),
        mean_ns=statistics.fmean(values),
        min_ns=min(values),
        max_ns=max(values),
        median_ns=median,
        worst_rank=ranks[worst],
        excess=excess,
        flagged=excess is not None and excess > threshold,
        calls=merged.count,
        total_ns=merged.total_ns,
        call_min_ns=merged.min_ns,
        call_max_ns=merged.max_ns,
        call_p50_ns=merged.sketch.quantile(0.5),
        call_p99_ns=merged.sketch.quantile(0.99),
    )


def _spreads(
    tables: list[dict[str, Durations]], divisors: list[int], ranks: list[int], options: RanksOptions
) -> tuple[Spread, ...]:
    merged = merge_named(tables)
    top = sorted(merged, key=lambda n: (-merged[n].total_ns, n))
    if options.top > 0:
        top = top[: options.top]
    return tuple(
        _spread(
            name,
            [t[name].total_ns / d if name in t else 0.0 for t, d in zip(tables, divisors)],
            ranks,
            merged[name],
            options.threshold,
        )
        for name in top
    )


def _fraction(value: float, median: float) -> float | None:
    return (value - median) / median if median > 0 else None


def _straggler(rows: list[RankRow], skew: Skew | None, threshold: float) -> Straggler | None:
    if len(rows) < 2:
        return None
    slow = max(rows, key=lambda r: (r.compute_ns, -r.rank))
    excess = _fraction(slow.compute_ns, statistics.median(r.compute_ns for r in rows))
    with_comm = [r for r in rows if r.comm_ns > 0]
    wait = min(with_comm, key=lambda r: (r.comm_ns, r.rank)) if len(with_comm) >= 2 else None
    deficit = (
        None
        if wait is None
        else -(_fraction(wait.comm_ns, statistics.median(r.comm_ns for r in rows)) or 0.0)
    )
    latest, latest_share = None, None
    if skew is not None and skew.latest_rank_counts and skew.matched:
        counts = skew.latest_rank_counts
        if len(counts) == 1 or counts[0][1] > counts[1][1]:
            latest, latest_share = counts[0][0], counts[0][1] / skew.matched
    compute = "n/a" if excess is None else f"{excess:+.1%}"
    if wait is None:
        rank = slow.rank if excess is not None and excess > threshold else None
        reason = (
            f"no communication kernels; rank {slow.rank} has the most compute ({compute} over the median)"
            + ("" if rank is not None else f", within the {threshold:.0%} threshold: no straggler")
        )
    elif wait.rank == (latest if latest is not None else slow.rank):
        rank = wait.rank
        evidence = (
            f"starts {latest_share:.0%} of the collectives last" if latest is not None else "computes longest"
        )
        cause = (
            "its GPU compute is the longest"
            if slow.rank == rank
            else f"not its GPU compute (rank {slow.rank} computes longest): look at its host side"
        )
        reason = (
            f"rank {rank} spends the least time in collectives ({deficit:.0%} below the median) and "
            f"{evidence}: the other ranks wait for it; cause: {cause}"
        )
    else:
        rank = None
        other = (
            f"rank {latest} most often starts collectives last"
            if latest is not None
            else (f"rank {slow.rank} computes longest")
        )
        reason = f"no clear straggler: rank {wait.rank} spends the least time in collectives but {other}"
    return Straggler(
        rank, reason, None if wait is None else wait.rank, deficit, latest, latest_share, slow.rank, excess
    )


def _skew(ordered: list[tuple[int, str, RankPartial]]) -> Skew | None:
    if len(ordered) < 2 or not any(p.collectives for _, _, p in ordered):
        return None
    per_rank: list[dict[str, list[int]]] = []
    for _, _, partial in ordered:
        table: dict[str, list[int]] = {}
        for name, start in partial.collectives:
            table.setdefault(name, []).append(start)
        per_rank.append(table)
    names = sorted(set().union(*per_rank))
    skews: list[tuple[int, str]] = []
    late: dict[int, int] = {}
    unmatched = 0
    for name in names:
        counts = [len(t.get(name, [])) for t in per_rank]
        common = min(counts)
        unmatched += sum(counts) - common * len(counts)
        for k in range(common):
            starts = [t[name][k] for t in per_rank]
            last = max(range(len(starts)), key=lambda i: (starts[i], -i))
            late[ordered[last][0]] = late.get(ordered[last][0], 0) + 1
            skews.append((max(starts) - min(starts), f"{name} #{k}"))
    values = sorted(s for s, _ in skews)
    worst = max(skews, key=lambda s: s[0]) if skews else None
    return Skew(
        matched=len(skews),
        unmatched=unmatched,
        p50_ns=statistics.median(values) if values else None,
        max_ns=worst[0] if worst else None,
        worst=worst[1] if worst else None,
        latest_rank_counts=tuple(sorted(late.items(), key=lambda kv: (-kv[1], kv[0]))),
        aligned=all(p.base_time_ns is not None for _, _, p in ordered),
    )


def _row(rank: int, source: str, p: RankPartial, divisor: int) -> RankRow:
    capacity = p.length_ns * max(p.device_count, 1)
    return RankRow(
        rank=rank,
        rank_source=source,
        path=p.path,
        devices=p.devices,
        steps=p.steps,
        step_ns=p.length_ns / divisor,
        busy_ns=p.busy_ns / divisor,
        compute_ns=p.compute_ns / divisor,
        comm_ns=p.comm_ns / divisor,
        overlap_ns=p.overlap_ns / divisor,
        idle_ns=(capacity - p.busy_ns) / divisor,
        utilization=p.busy_ns / capacity if capacity else None,
    )


DEVICE_MISMATCH = "the ranks ran on different devices"


def _warnings(ordered: list[tuple[int, str, RankPartial]], missing: list[int], per_step: bool) -> list[str]:
    out = [f"{p.path}: {w}" for _, _, p in ordered for w in p.warnings]
    sizes = sorted({p.world_size for _, _, p in ordered if p.world_size is not None})
    if len(sizes) > 1:
        out.append(f"the traces disagree on the world size: {', '.join(map(str, sizes))}")
    if missing:
        out.append(
            f"incomplete job: {len(missing):,} of {len(missing) + len(ordered):,} ranks missing "
            "(listed under 'ranks'); cross-rank figures cover only the ranks given"
        )
    devices = model_mismatch(*(p.devices for _, _, p in ordered))
    if devices is not None:
        out.append(f"{DEVICE_MISMATCH}: {', '.join(devices)}")
    ops = [{n for n, _ in p.ops} for _, _, p in ordered if p.ops]
    if len(ops) > 1 and len(set.intersection(*ops)) < 0.5 * len(set.union(*ops)):
        out.append("the ranks share less than half of their operator names: traces of different programs?")
    if not per_step and any(p.steps for _, _, p in ordered):
        out.append("only some ranks have ProfilerStep markers: comparing whole traces, not per step")
    return out


def compare_ranks(partials: Sequence[RankPartial], options: RanksOptions | None = None) -> RanksReport:
    """Compare the ranks of one job (see the module doc)."""
    opts = options or RanksOptions()
    if not partials:
        raise InputError("no traces to compare")
    ordered = assign_ranks(partials)
    ranks = [r for r, _, _ in ordered]
    per_step = all(p.steps > 0 for _, _, p in ordered)
    divisors = [p.steps if per_step else 1 for _, _, p in ordered]
    rows = [_row(r, s, p, d) for (r, s, p), d in zip(ordered, divisors)]
    world = max([p.world_size or 0 for _, _, p in ordered] + [max(ranks) + 1])
    missing = sorted(set(range(world)) - set(ranks))
    skew = _skew(ordered)
    return RanksReport(
        ranks=tuple(rows),
        world_size=world,
        missing=tuple(missing),
        complete=not missing,
        per_step=per_step,
        kernels=_spreads([dict(p.kernels) for _, _, p in ordered], divisors, ranks, opts),
        ops=_spreads([dict(p.ops) for _, _, p in ordered], divisors, ranks, opts),
        straggler=_straggler(rows, skew, opts.threshold),
        skew=skew,
        options=opts,
        warnings=tuple(_warnings(ordered, missing, per_step)),
    )
