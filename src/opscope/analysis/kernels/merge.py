"""The per-kernel table over many traces: each trace is reduced to a small partial (per kernel: calls, total,
min, max, sum of squared deviations and a quantile sketch), partials merge exactly, and the merged table has
the shape of a one-trace `KernelSummary`.

Counts, totals, minima and maxima are integers and merge exactly in any order; the standard deviation merges
exactly too (Chan et al.'s pairwise update of the sum of squared deviations); the median comes from the
mergeable sketch of `opscope.analysis.base.sketch` (1% relative accuracy) and is flagged as an estimate. Events with a
negative duration are left out of the merged rows (the one-trace table keeps them as they are).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from opscope.analysis.base.durations import Durations, durations_by_name, quantile_ns
from opscope.analysis.kernels.summary import (
    KernelRow,
    KernelSummary,
    SummaryOptions,
    finish_summary,
    select_gpu,
)
from opscope.model.schema import Col
from opscope.model.trace import Trace

_SEP = "\x1f"  # joins name and kind into one key; never appears in kernel names


@dataclass(frozen=True)
class RowPartial:
    durations: Durations
    m2: float  # sum of squared deviations from the mean, in ns^2

    def merge(self, other: RowPartial) -> RowPartial:
        a, b = self.durations, other.durations
        delta = b.mean_ns - a.mean_ns
        n = a.count + b.count
        m2 = self.m2 + other.m2 + delta * delta * a.count * b.count / n if n else 0.0
        return RowPartial(durations=a.merge(b), m2=m2)


@dataclass(frozen=True)
class SummaryPartial:
    """One trace, reduced: what the merged table needs and nothing else."""

    path: str
    devices: tuple[str, ...]
    events: int
    kernels: int
    gpu_time_ns: int
    gpu_calls: int
    rows: dict[str, RowPartial]  # key: name + _SEP + kind
    warnings: tuple[str, ...]


def summary_partial(trace: Trace, options: SummaryOptions) -> SummaryPartial:
    selection = select_gpu(trace, options)
    keyed = (
        selection.chosen.select(
            pl.concat_str(
                pl.col(Col.NAME).cast(pl.String).fill_null(""), pl.lit(_SEP), pl.col(Col.KIND).cast(pl.String)
            ).alias("key"),
            pl.col(Col.DUR_NS),
        )
        .filter(pl.col(Col.DUR_NS) >= 0)
        .collect()
    )
    stats = durations_by_name(keyed, "key", Col.DUR_NS)
    m2 = dict(
        keyed.group_by("key")
        .agg(((pl.col(Col.DUR_NS) - pl.col(Col.DUR_NS).mean()) ** 2).sum().alias("m2"))
        .iter_rows()
    )
    return SummaryPartial(
        path=trace.path,
        devices=selection.devices,
        events=selection.events,
        kernels=selection.kernels,
        gpu_time_ns=selection.gpu_time_ns,
        gpu_calls=selection.frame.height,
        rows={key: RowPartial(durations=value, m2=float(m2.get(key) or 0.0)) for key, value in stats.items()},
        warnings=trace.meta.warnings,
    )


def merge_summaries(parts: Sequence[SummaryPartial], options: SummaryOptions) -> KernelSummary:
    """The per-kernel table of all `parts` together; `median_ns` is the sketch's estimate."""
    merged: dict[str, RowPartial] = {}
    for part in parts:
        for key, row in part.rows.items():
            merged[key] = merged[key].merge(row) if key in merged else row
    gpu_time = sum(p.gpu_time_ns for p in parts)
    rows = []
    for key, row in merged.items():
        name, kind = key.rsplit(_SEP, 1)
        d = row.durations
        rows.append(
            KernelRow(
                name=name,
                kind=kind,
                calls=d.count,
                total_ns=d.total_ns,
                avg_ns=d.mean_ns,
                min_ns=d.min_ns,
                max_ns=d.max_ns,
                median_ns=quantile_ns(d, 0.5),
                share=d.total_ns / gpu_time if gpu_time > 0 else 0.0,
                stddev_ns=(row.m2 / (d.count - 1)) ** 0.5 if d.count > 1 else 0.0,
            )
        )
    rows.sort(key=lambda r: (-r.total_ns, r.name, r.kind))
    devices = tuple(dict.fromkeys(name for p in parts for name in p.devices))
    warnings = tuple(w for p in parts for w in p.warnings)
    return finish_summary(
        path=f"{len(parts)} traces: " + ", ".join(p.path for p in parts),
        devices=devices,
        events=sum(p.events for p in parts),
        kernels=sum(p.kernels for p in parts),
        gpu_time_ns=gpu_time,
        gpu_calls=sum(p.gpu_calls for p in parts),
        all_rows=rows,
        options=options,
        warnings=warnings,
        traces=tuple(p.path for p in parts),
        median_estimated=True,
    )
