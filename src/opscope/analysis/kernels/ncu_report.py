"""An Nsight Compute export read on its own (`opscope ncu FILE`): one row per kernel name (or per launch) with
the mean, min and max of its launches' metrics, ncu's rule results, and the findings of `ncu_findings` (the
seed's reading of the metrics). Pure: `NcuMetrics` in, a frozen `NcuReport` out; no trace is needed. The rows
are built in `ncu_rows`. Definitions: docs/readers.md ("Nsight Compute on its own").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import polars as pl

from opscope.analysis.findings import Advice
from opscope.analysis.kernels.ncu_findings import FindingOptions, kernel_findings
from opscope.analysis.kernels.ncu_rows import NcuRow, NcuRule, filtered, group_rows, rule_records, with_names
from opscope.errors import UsageError
from opscope.model.ncu import ID, NcuMetrics

BY: Final = ("kernel", "launch")
ROCPROF_COMPUTE: Final = "rocprof-compute"  # NcuMetrics.layout of a rocprof-compute database


@dataclass(frozen=True)
class NcuOptions:
    by: str = "kernel"  # "kernel": one row per kernel name; "launch": one row per profiled launch
    top: int = 30  # rows kept (0 = all); the findings and rules cover every kernel that passes the filter
    name_filter: str | None = None  # regular expression over the exported or demangled name
    findings: FindingOptions = field(default_factory=FindingOptions)


@dataclass(frozen=True)
class NcuReport:
    path: str
    layout: str
    device: str | None
    by: str
    rows: tuple[NcuRow, ...]  # the first `top`, in report order
    hidden_rows: int
    launches: int  # profiled launches that pass the filter
    kernels: int  # distinct kernel names among them
    total_duration_ns: float | None  # summed over those launches; None without a duration metric
    rules: tuple[NcuRule, ...]
    advice: Advice
    warnings: tuple[str, ...]
    # metric -> (its base unit, definition) for the metrics of the rows shown, where the export defines them
    definitions: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def has_duration(self) -> bool:
        return self.total_duration_ns is not None


def ncu_report(metrics: NcuMetrics, options: NcuOptions | None = None) -> NcuReport:
    """Summarise an Nsight Compute export by kernel (or by launch), with findings and ncu's rule results."""
    opts = options or NcuOptions()
    if opts.by not in BY:
        raise UsageError(f"--by must be one of {', '.join(BY)}, got {opts.by!r}")
    if opts.top < 0:
        raise UsageError("--top must be 0 (all rows) or a positive number")
    launches = with_names(metrics.launches)
    launches = filtered(launches, opts.name_filter)
    kept_ids = launches[ID]
    values = metrics.values.filter(pl.col(ID).is_in(kept_ids.implode()))
    has_duration = launches["duration_ns"].drop_nulls().len() > 0
    duration_ns = float(launches["duration_ns"].sum()) if has_duration else None
    keep = None if opts.top == 0 else opts.top
    # every kernel for the findings (no metrics dicts), then the rows shown (theirs only)
    per_kernel, kernels = group_rows(launches, values, False, has_duration, with_metrics=False)
    shown, rows = group_rows(launches, values, opts.by == "launch", has_duration, keep)
    rules = rule_records(metrics.rules.filter(pl.col(ID).is_in(kept_ids.implode())))
    findings = kernel_findings(per_kernel, rules, duration_ns, opts.findings)
    warnings = (*metrics.warnings, *_missing(launches, has_duration, metrics.layout))
    return NcuReport(
        path=metrics.path,
        layout=metrics.layout,
        device=metrics.device,
        by=opts.by,
        rows=tuple(shown),
        hidden_rows=rows - len(shown),
        launches=launches.height,
        kernels=kernels,
        total_duration_ns=duration_ns,
        rules=rules,
        advice=Advice(findings=findings.findings, rules_checked=findings.rules_checked, warnings=warnings),
        warnings=warnings,
        definitions=_shown_definitions(shown, metrics.definitions),
    )


def _shown_definitions(
    rows: list[NcuRow], definitions: dict[str, tuple[str, str]]
) -> dict[str, tuple[str, str]]:
    """The definitions of the metrics the shown rows carry ("Section: Name (Peak)" is defined as its metric)."""
    if not definitions:
        return {}
    out = {}
    for row in rows:
        for metric in row.metrics:
            base = metric if metric in definitions else metric.rsplit(" (", 1)[0]
            if base in definitions:
                out[base] = definitions[base]
    return dict(sorted(out.items()))


# field -> (what is missing, the ncu option that collects it, what is lost without it)
_NEEDED = (
    ("sm_throughput_pct", "SM and memory throughput", "--section SpeedOfLight", "no throughput findings"),
    ("achieved_occupancy_pct", "achieved occupancy", "--section Occupancy", "no occupancy findings"),
)


def _missing(launches: pl.DataFrame, has_duration: bool, layout: str = "details") -> list[str]:
    """What the export lacks that the report would use, said once each."""
    if launches.height == 0:
        return ["no profiled launch matches --filter"]
    if layout == ROCPROF_COMPUTE:
        return [
            "no SM / memory throughput figures: rocprof-compute has no single counterpart of Nsight Compute's "
            "(the percent of the busiest unit); its Speed-of-Light metrics (VALU / MFMA utilisation, cache and "
            "HBM bandwidths, each with its percent of peak) are in --format json, with their definitions"
        ]
    out = []
    if not has_duration:
        out.append(
            "no duration metric in this export (gpu__time_duration.sum, the Duration of the Speed Of Light "
            "section): durations are empty and findings are ranked by their distance from the threshold, not "
            "by time (`Kernel Time` is a wall-clock date, not a duration)"
        )
    for column, what, option, lost in _NEEDED:
        if launches[column].drop_nulls().len() == 0:
            out.append(f"no {what} in this export ({option} collects it): {lost}")
    return out
