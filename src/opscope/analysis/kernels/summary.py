"""Per-kernel time table: one row per (name, kind) of GPU activity, with calls, total, mean, min, max, median
and share of all GPU time. This is what `opscope summary` prints.

Definitions (also in docs/metrics.md):
- GPU activity = events of kind kernel, memcpy or memset that have a duration, on the selected devices and
  streams.
- share = row total / sum of the durations of all GPU activity in that device/stream selection (before the
  --kind and --filter options). It is a share of summed GPU time, not of wall time: kernels overlapping on
  two streams both count.
- steps (`--steps 3-5`): only the GPU activity of those ProfilerStep windows, by the rule of `ops`, `tree` and
  `steps` (`analysis.base.linking.selected_gpu`): an event belongs to the step in which its launch call
  started (its own start when the launch is missing); shares are then of the selected steps' GPU time.
- stddev = sample standard deviation of the durations (n - 1 in the denominator, as `nsys stats` reports
  it); 0 for a single call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from opscope.analysis.base import select
from opscope.analysis.base.names import untimed
from opscope.analysis.kernels.demangle import demangle_names
from opscope.analysis.kernels.unknown_device import unknown_device_categories
from opscope.model.schema import GPU_KINDS, Col, Kind
from opscope.model.trace import Trace, gpu_activity
from opscope.tables import Tabular, dataclass_rows


@dataclass(frozen=True)
class SummaryOptions:
    top: int = 30  # rows to show; 0 = all
    kinds: tuple[str, ...] = GPU_KINDS
    name_filter: str | None = None
    devices: tuple[int, ...] | None = None
    streams: tuple[int, ...] | None = None
    steps: str | None = None  # a --steps spec: "3", "3-5", "2,4"


@dataclass(frozen=True)
class KernelRow:
    name: str
    kind: str
    calls: int
    total_ns: int
    avg_ns: float
    min_ns: int
    max_ns: int
    median_ns: float
    share: float
    stddev_ns: float = 0.0
    raw_name: str | None = None  # the name as recorded, when `name` is its demangled form (else None)


@dataclass(frozen=True)
class RestLine:
    """Everything below the --top cut, so that nothing is silently folded away."""

    rows: int
    calls: int
    total_ns: int
    share: float


@dataclass(frozen=True)
class KernelSummary(Tabular):
    path: str
    devices: tuple[str, ...]
    events: int
    kernels: int
    gpu_time_ns: int
    gpu_calls: int
    selected_total_ns: int
    selected_calls: int
    selected_rows: int
    rows: tuple[KernelRow, ...]
    rest: RestLine | None
    options: SummaryOptions
    warnings: tuple[str, ...] = field(default=())
    traces: tuple[str, ...] = ()  # with several traces merged (`opscope summary A B ...`): their paths
    median_estimated: bool = False  # True when medians come from a merged quantile sketch (1% accuracy)
    gpu_ranges: int = 0  # gpu_user_annotation events (ranges drawn on the GPU; not work, not GPU time)

    def _table_rows(self) -> list[dict[str, Any]]:
        return dataclass_rows(self.rows)


def finish_summary(
    *,
    path: str,
    devices: tuple[str, ...],
    events: int,
    kernels: int,
    gpu_time_ns: int,
    gpu_calls: int,
    all_rows: list[KernelRow],
    options: SummaryOptions,
    warnings: tuple[str, ...],
    traces: tuple[str, ...] = (),
    median_estimated: bool = False,
    gpu_ranges: int = 0,
) -> KernelSummary:
    """Cut the sorted rows at --top and account for everything below the cut."""
    shown = all_rows if options.top <= 0 else all_rows[: options.top]
    hidden = all_rows[len(shown) :]
    return _assemble(
        path=path,
        devices=devices,
        events=events,
        kernels=kernels,
        gpu_time_ns=gpu_time_ns,
        gpu_calls=gpu_calls,
        shown=shown,
        hidden=Totals(len(hidden), sum(r.calls for r in hidden), sum(r.total_ns for r in hidden)),
        selected=Totals(len(all_rows), sum(r.calls for r in all_rows), sum(r.total_ns for r in all_rows)),
        options=options,
        warnings=warnings,
        traces=traces,
        median_estimated=median_estimated,
        gpu_ranges=gpu_ranges,
    )


@dataclass(frozen=True)
class Totals:
    """Rows, calls and GPU time of a set of table rows (all selected rows, or those below the --top cut)."""

    rows: int
    calls: int
    total_ns: int


def _assemble(
    *,
    path: str,
    devices: tuple[str, ...],
    events: int,
    kernels: int,
    gpu_time_ns: int,
    gpu_calls: int,
    shown: list[KernelRow],
    hidden: Totals,
    selected: Totals,
    options: SummaryOptions,
    warnings: tuple[str, ...],
    traces: tuple[str, ...] = (),
    median_estimated: bool = False,
    gpu_ranges: int = 0,
) -> KernelSummary:
    readable = demangle_names(r.name for r in shown)
    if readable:
        shown = [
            replace(r, name=readable[r.name], raw_name=r.name) if r.name in readable else r for r in shown
        ]
    rest = None
    if hidden.rows:
        rest = RestLine(
            rows=hidden.rows,
            calls=hidden.calls,
            total_ns=hidden.total_ns,
            share=hidden.total_ns / gpu_time_ns if gpu_time_ns > 0 else 0.0,
        )
    return KernelSummary(
        path=path,
        devices=devices,
        events=events,
        kernels=kernels,
        gpu_time_ns=gpu_time_ns,
        gpu_calls=gpu_calls,
        selected_total_ns=selected.total_ns,
        selected_calls=selected.calls,
        selected_rows=selected.rows,
        rows=tuple(shown),
        rest=rest,
        options=options,
        warnings=warnings,
        traces=traces,
        median_estimated=median_estimated,
        gpu_ranges=gpu_ranges,
    )


@dataclass(frozen=True)
class GpuSelection:
    """What the per-kernel table is computed from: the GPU activity on the selected devices and streams
    (`frame`, the share denominator), the rows --kind and --filter keep (`chosen`), and trace-wide counts."""

    frame: pl.DataFrame  # name, kind, dur_ns, device
    chosen: pl.LazyFrame
    events: int
    kernels: int
    devices: tuple[str, ...]
    gpu_ranges: int = 0
    without_duration: int = (
        0  # kernels, memcpys and memsets with no `dur`: no GPU time, left out of every figure
    )

    @property
    def gpu_time_ns(self) -> int:
        return int(self.frame[Col.DUR_NS].sum() or 0)


def select_gpu(trace: Trace, opts: SummaryOptions) -> GpuSelection:
    """The selection shared by the one-trace table and the per-trace partials of a merged table."""
    if opts.steps is not None:  # linking only when steps are chosen
        from opscope.analysis.base.linking import link, selected_gpu

        frame = selected_gpu(trace, link(trace), opts.devices, opts.streams, opts.steps).select(
            Col.NAME, Col.KIND, Col.DUR_NS, Col.DEVICE
        )
        counted = trace.lazy()
    else:
        # One scan for the GPU activity and the trace-wide counts below: reading the kind column of every event
        # is most of a cached summary's query time, and two queries read it twice (~30 ms of ~330 on 1 GB).
        wide = (
            trace.lazy()
            .filter(pl.col(Col.KIND).is_in([*GPU_KINDS, Kind.GPU_ANNOTATION]))
            .select(Col.NAME, Col.KIND, Col.DUR_NS, Col.DEVICE, *([Col.STREAM] if opts.streams else []))
            .collect()
        )
        counted = wide.lazy()
        gpu = counted.filter(gpu_activity())
        frame = (
            select.by_streams(select.by_devices(gpu, opts.devices), opts.streams)
            .select(Col.NAME, Col.KIND, Col.DUR_NS, Col.DEVICE)
            .collect()
        )
    chosen = select.by_name(select.by_kinds(frame.lazy(), opts.kinds), opts.name_filter)
    kernels, ranges, without_duration = (
        counted.select(
            (pl.col(Col.KIND) == Kind.KERNEL).sum().alias("kernels"),
            (pl.col(Col.KIND) == Kind.GPU_ANNOTATION).sum().alias("ranges"),
            (pl.col(Col.KIND).is_in(list(GPU_KINDS)) & pl.col(Col.DUR_NS).is_null()).sum().alias("no_dur"),
        )
        .collect()
        .row(0)
    )
    used = sorted(int(d) for d in frame[Col.DEVICE].drop_nulls().unique().to_list())
    return GpuSelection(
        frame=frame,
        chosen=chosen,
        events=trace.count(),
        kernels=int(kernels or 0),
        devices=trace.meta.used_device_names(used),
        gpu_ranges=int(ranges or 0),
        without_duration=int(without_duration or 0),
    )


def without_duration(trace: Trace) -> int:
    """How many kernels, memcpys and memsets of `trace` have no duration (`names.kind_names`: counted once per
    trace)."""
    return untimed(trace, list(GPU_KINDS))


def duration_warning(count: int) -> tuple[str, ...]:
    """The warning for GPU events the trace gives no duration (issue 32: they disappeared without one)."""
    if count <= 0:
        return ()
    noun = "event" if count == 1 else "events"
    return (
        f"{count:,} kernel / memcpy / memset {noun} without a duration (`dur`): left out of every figure",
    )


STATS = ("avg", "min", "max", "median", "stddev")  # per_kernel's columns beyond calls and total


def per_kernel(chosen: pl.LazyFrame, kinds: tuple[str, ...], top: int = 0) -> pl.DataFrame:
    """One row per (name, kind) of `chosen`, sorted by total time (then name, kind), with calls, total and
    the statistics of `STATS`; with `top` > 0 the statistics are filled for the first `top` rows only (null
    below: every row still has its calls and total, which the table's "N more" line sums). Grouped by the
    name within each kind rather than by (name, kind): polars groups one categorical key on its codes, while
    a two-column key is row-encoded and the median then gathers every row's index per group. On 3.95 M tiny
    kernels of 8 names that took ~245 MB more, the larger half of `summary`'s peak (issue 32). On a hand-made
    trace with a name per event (3.95 M groups) the statistics of every group took ~600 MB more and twice
    the time, for the 30 rows printed: so calls and totals first, the statistics of the rows shown after."""
    totals = _grouped(chosen, kinds, lambda d: (pl.len().alias("calls"), d.sum().alias("total")))
    # sorted after collecting: sorted in the same lazy plan, 400 k distinct names reserved ~2.4 GB of address
    # space (little of it touched, but all of it counts against `ulimit -v`)
    totals = totals.sort(["total", Col.NAME, Col.KIND], descending=[True, False, False])
    head = totals if top <= 0 else totals.head(top)
    shown = (
        chosen
        if top <= 0
        else chosen.filter(
            pl.any_horizontal(
                pl.lit(False),
                *[
                    (pl.col(Col.KIND) == kind) & _named(names)
                    for kind, names in head.group_by(Col.KIND).agg(Col.NAME).iter_rows()
                ],
            )
        )
    )
    stats = _grouped(
        shown,
        kinds,
        lambda d: (
            d.mean().alias("avg"),
            d.min().alias("min"),
            d.max().alias("max"),
            d.median().alias("median"),
            d.std(ddof=1).alias("stddev"),
        ),
    )
    head = head.join(stats, on=[Col.NAME, Col.KIND], how="left", maintain_order="left", nulls_equal=True)
    rest = totals.slice(head.height).with_columns(pl.lit(None, dtype=head.schema[c]).alias(c) for c in STATS)
    return pl.concat([head, rest])


def _named(names: list[str | None]) -> pl.Expr:
    """The events whose name is one of `names` (None: no name)."""
    named = pl.col(Col.NAME).is_in([n for n in names if n is not None])
    return named | pl.col(Col.NAME).is_null() if None in names else named


def _grouped(
    chosen: pl.LazyFrame, kinds: tuple[str, ...], aggregations: Callable[[pl.Expr], tuple[pl.Expr, ...]]
) -> pl.DataFrame:
    """`aggregations` of the duration per name within each kind (name as pl.String, kind beside it)."""
    d = pl.col(Col.DUR_NS)
    parts = [
        chosen.filter(pl.col(Col.KIND) == kind)
        .group_by(Col.NAME)
        .agg(*aggregations(d))
        .select(
            pl.col(Col.NAME).cast(pl.String),
            pl.lit(kind, dtype=pl.String).alias(Col.KIND),
            pl.all().exclude(Col.NAME),
        )
        for kind in dict.fromkeys(kinds)
    ]
    return pl.concat(parts).collect()


def kernel_summary(trace: Trace, options: SummaryOptions | None = None) -> KernelSummary:
    """The per-kernel table of `trace` (see the module doc for definitions)."""
    opts = options or SummaryOptions()
    selection = select_gpu(trace, opts)
    gpu_time = selection.gpu_time_ns
    grouped = per_kernel(selection.chosen, opts.kinds, opts.top)
    denominator = gpu_time if gpu_time > 0 else 1
    # KernelRow objects for the rows shown only: a trace of millions of distinct names (hand-made, hostile)
    # would otherwise build millions of Python objects to print 30 of them; the rest is summed in polars.
    cut = grouped if opts.top <= 0 else grouped.head(opts.top)
    below = grouped.slice(cut.height)
    shown = [
        KernelRow(
            name=r[Col.NAME] or "",
            kind=r[Col.KIND],
            calls=int(r["calls"]),
            total_ns=int(r["total"]),
            avg_ns=float(r["avg"]),
            min_ns=int(r["min"]),
            max_ns=int(r["max"]),
            median_ns=float(r["median"]),
            share=int(r["total"]) / denominator if gpu_time > 0 else 0.0,
            stddev_ns=float(r["stddev"] or 0.0),
        )
        for r in cut.iter_rows(named=True)
    ]
    return _assemble(
        path=trace.path,
        devices=selection.devices,
        events=selection.events,
        kernels=selection.kernels,
        gpu_time_ns=gpu_time,
        gpu_calls=selection.frame.height,
        shown=shown,
        hidden=_totals(below),
        selected=_totals(grouped),
        options=opts,
        warnings=(
            *trace.meta.warnings,
            *(u.warning for u in unknown_device_categories(trace)),
            *duration_warning(selection.without_duration),
        ),
        gpu_ranges=selection.gpu_ranges,
    )


def _totals(rows: pl.DataFrame) -> Totals:
    return Totals(rows.height, int(rows["calls"].sum() or 0), int(rows["total"].sum() or 0))
