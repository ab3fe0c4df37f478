"""The rows of an Nsight Compute export read on its own: its launches grouped by kernel name (or one per
launch) with the mean, min and max of every field and the mean of every metric, and its rule results as plain
records. `ncu_report` composes these with `ncu_findings`; both read these types.

Kernel rows are grouped by the name as exported (`raw_name`); `name` is that name demangled when the export
has mangled symbols (`--print-kernel-base mangled`). Rows are ordered by total duration when the export has a
duration metric, else in profile order (the first launch of each kernel first).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

import polars as pl

from opscope.analysis.kernels.demangle import demangle_names
from opscope.errors import UsageError
from opscope.model.ncu import (
    FIELDS,
    ID,
    KERNEL,
    MESSAGE,
    METRIC,
    RULE,
    RULE_TYPE,
    SECTION,
    SPEEDUP,
    SPEEDUP_TYPE,
    VALUE,
)

SHARED_MEM = "shared_mem_per_block_bytes"  # static + dynamic shared memory per block (the kernel's request)
STATS: Final[tuple[str, ...]] = (*FIELDS, SHARED_MEM)
NAME = "name"
# ncu's block limits, in the order that names the limiter on a tie (what a kernel author changes first)
_LIMITS = (
    ("block_limit_registers", "registers"),
    ("block_limit_shared_mem", "shared memory"),
    ("block_limit_warps", "block size"),
    ("block_limit_sm", "blocks per SM"),
)


@dataclass(frozen=True)
class Stat:
    mean: float | None
    min: float | None
    max: float | None


@dataclass(frozen=True)
class NcuRow:
    name: str  # demangled when the export has the mangled symbol
    raw_name: str  # as exported
    launch: int | None  # ncu's ID (--by launch); None for a kernel row
    launches: int
    first_launch: int
    stats: dict[str, Stat]  # every field of `STATS`: mean, min and max over the row's launches
    metrics: dict[str, float]  # every numeric metric of the export: metric id -> mean over the launches
    limiter: str | None = None  # what caps theoretical occupancy (`occupancy_limiter`)

    def mean(self, name: str) -> float | None:
        return self.stats[name].mean

    @property
    def total_ns(self) -> float | None:
        mean = self.stats["duration_ns"].mean
        return None if mean is None else mean * self.launches


@dataclass(frozen=True)
class NcuRule:
    kernel: str  # as exported
    launch: int
    section: str
    rule: str
    type: str
    message: str  # verbatim
    speedup_type: str | None
    speedup_pct: float | None


def with_names(launches: pl.DataFrame) -> pl.DataFrame:
    """The launches with `name` (demangled where the exported name is a mangled symbol) and the shared
    memory a block asks for (static + dynamic; null when neither is in the export)."""
    exported = launches[KERNEL].drop_nulls().unique().to_list()
    nice = demangle_names(exported)
    parts = [pl.col("static_shared_mem_bytes"), pl.col("dynamic_shared_mem_bytes")]
    return launches.with_columns(
        pl.col(KERNEL).fill_null(""),
        pl.col(KERNEL)
        .replace_strict(nice, default=pl.col(KERNEL), return_dtype=pl.String)
        .fill_null("")
        .alias(NAME),
        pl.when(pl.any_horizontal(p.is_not_null() for p in parts))
        .then(pl.sum_horizontal(parts))
        .otherwise(None)
        .alias(SHARED_MEM),
    )


def filtered(launches: pl.DataFrame, pattern: str | None) -> pl.DataFrame:
    if not pattern:
        return launches
    try:
        re.compile(pattern)
        return launches.filter(pl.col(KERNEL).str.contains(pattern) | pl.col(NAME).str.contains(pattern))
    except (re.error, pl.exceptions.PolarsError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"--filter: not a valid regular expression: {pattern!r} ({first})") from None


def group_rows(
    launches: pl.DataFrame,
    values: pl.DataFrame,
    by_launch: bool,
    has_duration: bool,
    keep: int | None = None,
    with_metrics: bool = True,
) -> tuple[list[NcuRow], int]:
    """The first `keep` rows (None: all) grouped by exported name (or one per launch), in report order, with
    (`with_metrics`) the mean of every metric of the export; and how many rows there are in all. Only the
    kept rows are built: a full-set export has thousands of launches times hundreds of metrics."""
    key = [ID] if by_launch else [KERNEL]
    grouped = launches.group_by(key, maintain_order=True).agg(
        pl.col(NAME).first(),
        pl.col(KERNEL).first().alias("_raw"),
        pl.len().alias("_launches"),
        pl.col(ID).min().alias("_first"),
        *[pl.col(s).mean().alias(f"{s}:mean") for s in STATS],
        *[pl.col(s).min().alias(f"{s}:min") for s in STATS],
        *[pl.col(s).max().alias(f"{s}:max") for s in STATS],
        (pl.col("duration_ns").sum() if has_duration else pl.lit(0.0)).alias("_total"),
    )
    total = grouped.height
    grouped = grouped.sort(["_total", "_first"], descending=[True, False])
    if keep is not None:
        grouped = grouped.head(keep)
    by_group: dict[str, dict[str, float]] = {}
    if with_metrics and grouped.height:
        group = pl.col(ID if by_launch else KERNEL).cast(pl.String).alias("_group")
        kept = launches.join(grouped.select(key), on=key, how="semi").select(ID, group)
        means = (
            values.join(kept, on=ID, how="inner")
            .group_by("_group", METRIC, maintain_order=True)
            .agg(pl.col(VALUE).mean())
        )
        for name, metric, value in means.iter_rows():
            by_group.setdefault(name, {})[metric] = value
    rows = []
    for r in grouped.iter_rows(named=True):
        stats = {s: Stat(r[f"{s}:mean"], r[f"{s}:min"], r[f"{s}:max"]) for s in STATS}
        rows.append(
            NcuRow(
                name=r[NAME],
                raw_name=r["_raw"],
                launch=r[ID] if by_launch else None,
                launches=int(r["_launches"]),
                first_launch=int(r["_first"]),
                stats=stats,
                metrics=dict(sorted(by_group.get(str(r[ID] if by_launch else r[KERNEL]), {}).items())),
                limiter=occupancy_limiter(stats),
            )
        )
    return rows, total


def rule_records(frame: pl.DataFrame) -> tuple[NcuRule, ...]:
    return tuple(
        NcuRule(
            kernel=r[KERNEL],
            launch=int(r[ID]),
            section=r[SECTION],
            rule=r[RULE],
            type=r[RULE_TYPE],
            message=r[MESSAGE],
            speedup_type=r[SPEEDUP_TYPE] or None,
            speedup_pct=r[SPEEDUP],
        )
        for r in frame.sort(ID, maintain_order=True).iter_rows(named=True)
    )


def occupancy_limiter(stats: dict[str, Stat]) -> str | None:
    """The resource that caps theoretical occupancy: the smallest of ncu's block limits ("none" at 100%)."""
    theoretical = stats["theoretical_occupancy_pct"].mean
    if theoretical is not None and theoretical >= 100.0:
        return "none"
    limits = [(v, i, name) for i, (f, name) in enumerate(_LIMITS) if (v := stats[f].mean) is not None]
    return min(limits)[2] if limits else None
