"""Per-operator table: one row per op name (aten ops, user annotations / record_function), or per (name, Input
Dims) with `by_shape`, with CPU total and self time and the GPU time of the kernels each op launched. This is
what `opscope ops` prints; it reads the `Linkage` of `analysis.base.linking`.

Definitions (docs/analysis-attribution.md):
- op instance: an event of kind cpu_op or user_annotation. calls = instances. Every ProfilerStep#N is one
  row, "ProfilerStep#*".
- cpu_total = sum of instance durations; cpu_self = sum of (duration - durations of its direct child ops on the
  same thread, Python frames skipped), each instance clipped at 0.
- gpu_self = GPU time of the GPU events (kernels, memcpys, memsets) whose launch call's innermost enclosing op
  is an instance of this name; gpu_total = GPU time of the GPU events with at least one instance of this name
  among the ops enclosing their launch (each GPU event counted once per name, even when the name recurs).
- by_shape: rows per (name, Input Dims), the dims JSON text with whitespace removed.
- kernels / self_kernels: those GPU events, counted; kernels_per_call = kernels / calls.
- unattributed_share = share of the selected GPU time whose launch has no enclosing op.
- devices / streams: the GPU events on those devices / streams, and on the CPU side only the op instances that
  launched them (directly or through a child op): calls, CPU total and CPU self count those instances, so an
  op that launched nothing there is not listed.
- order (`sort`): "self" (default) by GPU self time, then CPU self time, then name, so that wrappers which only
  enclose other ops (ProfilerStep#*, autograd engine frames, `*Backward0` nodes) do not top the table at 100%;
  "total" by GPU total, then CPU total, then name.
- cpu_rows: the `CPU_ROWS` rows with the most CPU self time (CPU-side causes: a DataLoader, Python overhead),
  whatever their GPU time.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl

from opscope.analysis.base import select
from opscope.analysis.base.codetag import analysis_tag
from opscope.analysis.base.linking import (
    OP_KINDS,
    ROW,
    Linkage,
    LinkStats,
    is_trace_link,
    link,
    once_per_link,
    selected_gpu,
)
from opscope.analysis.base.nesting import RowTree, ancestors, chains, has_equal_ancestor, subtree_sums
from opscope.analysis.base.stored import rows_frame, rows_of
from opscope.analysis.base.windows import fold_steps
from opscope.model.schema import Col
from opscope.model.trace import Trace
from opscope.tables import Tabular, dataclass_rows

SELF, TOTAL = "self", "total"
SORTS = (SELF, TOTAL)
CPU_ROWS = 10


@dataclass(frozen=True)
class OpOptions:
    by_shape: bool = False
    top: int = 30  # rows to show; 0 = all
    devices: tuple[int, ...] | None = None
    streams: tuple[int, ...] | None = None
    steps: str | None = None  # a --steps spec: "3", "3-5", "2,4"
    sort: str = "self"  # "self": GPU self, CPU self; "total": GPU total, CPU total (wrappers first)


@dataclass(frozen=True)
class OpRow:
    name: str
    kind: str  # cpu_op or user_annotation
    input_dims: str | None  # only with by_shape
    calls: int
    cpu_total_ns: int
    cpu_self_ns: int
    gpu_total_ns: int
    gpu_self_ns: int
    kernels: int
    self_kernels: int
    kernels_per_call: float
    gpu_share: float  # gpu_total / selected GPU time


@dataclass(frozen=True)
class OpStats(Tabular):
    path: str
    rows: tuple[OpRow, ...]
    total_rows: int
    gpu_time_ns: int  # all selected GPU activity
    attributed_ns: int  # of which launched inside some op
    unattributed_share: float
    link: LinkStats
    options: OpOptions
    warnings: tuple[str, ...] = field(default=())
    cpu_rows: tuple[OpRow, ...] = ()  # the rows with the most CPU self time, most first

    def _table_rows(self) -> list[dict[str, Any]]:
        return dataclass_rows(self.rows)


def op_stats(trace: Trace, options: OpOptions | None = None, linkage: Linkage | None = None) -> OpStats:
    """The per-op table of `trace` (definitions in the module doc). Pass `linkage` to reuse a `link(trace)`.
    The whole table is computed once per trace, link table and options other than `top` (`analyze`, `ops`
    and the CPU operator view of one command share it); `top` only cuts its rows."""
    opts = options or OpOptions()
    linked = linkage or link(trace)
    whole = once_per_link(
        trace,
        linked,
        f"op_stats:{replace(opts, top=0)!r}",
        lambda: _whole(trace, replace(opts, top=0), linked),
    )
    return replace(whole, rows=whole.rows if opts.top <= 0 else whole.rows[: opts.top], options=opts)


def _whole(trace: Trace, opts: OpOptions, linked: Linkage) -> OpStats:
    """The whole table (`top` 0). That of the whole trace (no device, stream or step selection) over the
    trace's own link table is kept beside the trace cache (`Trace.persisted`): `analyze`, `advise`, `report`,
    `ops`, `diff` and `history add` all read it, so only the first command on a trace computes it (issue 25)."""
    tag = analysis_tag()
    if (
        tag is None
        or opts.devices
        or opts.streams
        or opts.steps is not None
        or not is_trace_link(trace, linked)
    ):
        return _op_stats(trace, opts, linked)
    return trace.persisted(  # a key the store cannot name (a sort spelled otherwise) is computed, not kept
        f"op_stats-{'shape' if opts.by_shape else 'name'}-{opts.sort}-{tag}",
        lambda: _op_stats(trace, opts, linked),
        _encode,
        lambda frames: _decode(frames, trace, opts, linked),
    )


def _encode(stats: OpStats) -> dict[str, pl.DataFrame]:
    figures = {
        "total_rows": stats.total_rows,
        "gpu_time_ns": stats.gpu_time_ns,
        "attributed_ns": stats.attributed_ns,
        "unattributed_share": stats.unattributed_share,
    }
    return {
        "rows": rows_frame(OpRow, stats.rows),
        "cpu_rows": rows_frame(OpRow, stats.cpu_rows),
        "figures": pl.DataFrame([figures]),
    }


def _decode(frames: dict[str, pl.DataFrame], trace: Trace, opts: OpOptions, linked: Linkage) -> OpStats:
    (figures,) = frames["figures"].to_dicts()
    return OpStats(
        path=trace.path,
        rows=rows_of(OpRow, frames["rows"]),
        total_rows=int(figures["total_rows"]),
        gpu_time_ns=int(figures["gpu_time_ns"]),
        attributed_ns=int(figures["attributed_ns"]),
        unattributed_share=float(figures["unattributed_share"]),
        link=linked.stats,
        options=opts,
        warnings=trace.meta.warnings,
        cpu_rows=rows_of(OpRow, frames["cpu_rows"]),
    )


def _op_stats(trace: Trace, opts: OpOptions, linked: Linkage) -> OpStats:
    scopes = fold_steps(linked.scopes.filter(pl.col(Col.KIND).is_in(list(OP_KINDS))))
    if opts.by_shape:
        scopes = scopes.with_columns(pl.col(Col.INPUT_DIMS).cast(pl.String).str.replace_all(r"\s+", ""))
    ops = scopes
    if opts.steps is not None:
        ops = select.by_steps(ops, trace, opts.steps, clip=False).drop("step")
    gpu = selected_gpu(trace, linked, opts.devices, opts.streams, opts.steps)
    keys = [Col.NAME, Col.INPUT_DIMS] if opts.by_shape else [Col.NAME]
    if opts.devices or opts.streams:
        # The CPU side follows the GPU selection: only the op instances that launched selected GPU work,
        # directly or through a child op (the launching op and all ops enclosing it).
        starts = gpu["op_row"].drop_nulls().unique()
        launching = ancestors(scopes.select(ROW, "op_parent_row"), starts, up="op_parent_row")["ancestor"]
        ops = ops.filter(pl.col(ROW).is_in(launching.implode()))

    child = scopes.filter(pl.col("op_parent_row").is_not_null())
    child_ns = child.group_by("op_parent_row").agg(
        pl.col(Col.DUR_NS).clip(lower_bound=0).sum().alias("_child")
    )
    cpu = (
        ops.join(child_ns.rename({"op_parent_row": ROW}), on=ROW, how="left")
        .with_columns(pl.col(Col.DUR_NS).clip(lower_bound=0).alias("_dur"))
        .with_columns((pl.col("_dur") - pl.col("_child").fill_null(0)).clip(lower_bound=0).alias("_self"))
        .group_by(keys)
        .agg(
            pl.len().alias("calls"),
            pl.col(Col.KIND).first().alias("kind"),
            pl.col("_dur").sum().alias("cpu_total"),
            pl.col("_self").sum().alias("cpu_self"),
        )
    )
    launched = _launched(gpu)
    found = None
    if opts.steps is not None and not (opts.devices or opts.streams):
        found = _gpu_by_difference(trace, opts, linked, scopes, gpu, keys, cpu.schema)
    total_gpu, self_gpu = found if found is not None else _gpu_part(scopes, launched, keys)
    table = (
        cpu.join(total_gpu, on=keys, how="full", coalesce=True, nulls_equal=True)
        .join(self_gpu, on=keys, how="left", nulls_equal=True)
        .with_columns(
            pl.col(
                "calls", "cpu_total", "cpu_self", "gpu_total", "kernels", "gpu_self", "self_kernels"
            ).fill_null(0),
            pl.col(Col.NAME).cast(pl.String),
            pl.col("kind").cast(pl.String),
        )
    )
    order = ["gpu_self", "cpu_self"] if opts.sort == SELF else ["gpu_total", "cpu_total"]
    # the keys last (name, then shape with by_shape): rows equal on every figure come out in one order
    table = table.sort([*order, *keys], descending=[True, True, *[False] * len(keys)], nulls_last=True)
    by_cpu = table.filter(pl.col("cpu_self") > 0).sort(
        ["cpu_self", *keys], descending=[True, *[False] * len(keys)], nulls_last=True
    )
    gpu_time = int(gpu[Col.DUR_NS].sum() or 0)
    attributed = int(launched[Col.DUR_NS].sum() or 0)

    def row(r: dict[str, Any]) -> OpRow:
        return OpRow(
            name=str(r[Col.NAME] or ""),
            kind=r["kind"] or "",
            input_dims=r.get(Col.INPUT_DIMS),
            calls=int(r["calls"]),
            cpu_total_ns=int(r["cpu_total"]),
            cpu_self_ns=int(r["cpu_self"]),
            gpu_total_ns=int(r["gpu_total"]),
            gpu_self_ns=int(r["gpu_self"]),
            kernels=int(r["kernels"]),
            self_kernels=int(r["self_kernels"]),
            kernels_per_call=int(r["kernels"]) / int(r["calls"]) if r["calls"] else 0.0,
            gpu_share=int(r["gpu_total"]) / gpu_time if gpu_time else 0.0,
        )

    rows = [row(r) for r in (table if opts.top <= 0 else table.head(opts.top)).iter_rows(named=True)]
    return OpStats(
        path=trace.path,
        rows=tuple(rows),
        total_rows=table.height,
        gpu_time_ns=gpu_time,
        attributed_ns=attributed,
        unattributed_share=(gpu_time - attributed) / gpu_time if gpu_time else 0.0,
        link=linked.stats,
        options=opts,
        warnings=trace.meta.warnings,
        cpu_rows=tuple(row(r) for r in by_cpu.head(CPU_ROWS).iter_rows(named=True)),
    )


def _launched(gpu: pl.DataFrame) -> pl.DataFrame:
    """gpu_row, op_row, dur_ns of the GPU events of `gpu` whose launch has an enclosing op."""
    return gpu.filter(pl.col("op_row").is_not_null()).select(
        pl.col(ROW).alias("gpu_row"), "op_row", Col.DUR_NS
    )


def _gpu_part(
    scopes: pl.DataFrame, launched: pl.DataFrame, keys: list[str]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(total, self) GPU figures per key of the GPU events `launched` (gpu_row, op_row, dur_ns): gpu_total and
    kernels over every op enclosing each event's launch (each event once per key), gpu_self and self_kernels
    over its innermost op. Keys without such events are absent.

    Sums up the op tree instead of pairing every event with every op enclosing it (issue 25: events x depth
    rows, 0.9 s on the 1 GB benchmark trace): only the ops on a launch's chain of enclosing ops take part; each
    gets its own events (self) and everything below it (subtree sums); a key's total is the sum over its
    outermost ops, those with no enclosing op of the same key, since every event below a key's op lies below
    exactly one of them."""
    tree = RowTree.of(scopes, ROW, "op_parent_row")
    at = tree.find(launched["op_row"].to_numpy())
    if not (at >= 0).all():
        return _gpu_part_pairs(scopes, launched, keys)
    nodes, parent = chains(tree.parent, at)
    own = np.searchsorted(nodes, at)  # each event's innermost op, as an index into `nodes`
    dur = launched[Col.DUR_NS].fill_null(0).to_numpy()
    own_ns = np.zeros(len(nodes), dtype=np.int64)
    np.add.at(own_ns, own, dur)
    own_n = np.bincount(own, minlength=len(nodes)).astype(np.int64)
    sub_ns, sub_n = subtree_sums(parent, own_ns), subtree_sums(parent, own_n)
    if sub_ns is None or sub_n is None:
        return _gpu_part_pairs(scopes, launched, keys)
    # each distinct key of the ops on the chains gets an integer id (the text keys are never carried per event)
    rows = pl.Series(ROW, tree.rows[nodes])
    on_chains = scopes.filter(pl.col(ROW).is_in(rows.implode())).sort(ROW).select(keys)
    key_ids = (
        on_chains.unique(maintain_order=True)
        .with_row_index("_key")
        .with_columns(pl.col("_key").cast(pl.Int64))
    )
    code = on_chains.join(key_ids, on=keys, how="left", nulls_equal=True, maintain_order="left")[
        "_key"
    ].to_numpy()
    n_keys = key_ids.height
    outermost = ~has_equal_ancestor(parent, code)
    figures = {
        "gpu_total": _per_key(code[outermost], sub_ns[outermost], n_keys),
        "kernels": _per_key(code[outermost], sub_n[outermost], n_keys),
        "gpu_self": _per_key(code, own_ns, n_keys),
        "self_kernels": _per_key(code, own_n, n_keys),
    }
    table = key_ids.with_columns(pl.Series(k, v, dtype=pl.Int64) for k, v in figures.items())
    total_gpu = table.filter(pl.col("kernels") > 0).select(*keys, "gpu_total", "kernels")
    self_gpu = table.filter(pl.col("self_kernels") > 0).select(*keys, "gpu_self", "self_kernels")
    return total_gpu, self_gpu


def _per_key(code: np.ndarray, values: np.ndarray, n_keys: int) -> np.ndarray:
    out = np.zeros(n_keys, dtype=np.int64)
    np.add.at(out, code, values)
    return out


def _gpu_part_pairs(
    scopes: pl.DataFrame, launched: pl.DataFrame, keys: list[str]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`_gpu_part` by pairing every GPU event with every op enclosing its launch (events x depth rows), for op
    trees that are not trees (a parent cycle in a malformed trace) or launches whose op is not among `scopes`."""
    tree = scopes.select(ROW, "op_parent_row")
    pairs = ancestors(tree, launched["op_row"].unique(), up="op_parent_row")
    # Each distinct key (name, and shape with by_shape) gets an integer id first: the joins below pair every GPU
    # event with every op enclosing it (events x depth rows), and carrying the text keys through them held
    # hundreds of MB of strings on a multi-GB trace. Only the ops on a launch's chain of enclosing ops need one
    # (for the few GPU events outside the steps, `_gpu_by_difference`, a few hundred ops, not the trace's).
    on_chains = scopes.join(pairs.select(pl.col("ancestor").alias(ROW)).unique(), on=ROW, how="semi")
    key_ids = (
        on_chains.select(keys).unique().with_row_index("_key").with_columns(pl.col("_key").cast(pl.Int64))
    )
    op_keys = (
        on_chains.select(pl.col(ROW).alias("ancestor"), *keys)
        .join(key_ids, on=keys, how="left", nulls_equal=True)
        .select("ancestor", "_key")
    )
    self_gpu = (
        launched.join(op_keys.rename({"ancestor": "op_row"}), on="op_row", how="left")
        .group_by("_key")
        .agg(pl.col(Col.DUR_NS).sum().alias("gpu_self"), pl.len().alias("self_kernels"))
        .join(key_ids, on="_key", how="left")
        .drop("_key")
    )
    total_gpu = (
        launched.join(pairs.rename({ROW: "op_row"}), on="op_row", how="inner")
        .join(op_keys, on="ancestor", how="left")
        .unique(["gpu_row", "_key"])
        .group_by("_key")
        .agg(pl.col(Col.DUR_NS).sum().alias("gpu_total"), pl.len().alias("kernels"))
        .join(key_ids, on="_key", how="left")
        .drop("_key")
    )
    return total_gpu, self_gpu


def _gpu_by_difference(
    trace: Trace,
    opts: OpOptions,
    linked: Linkage,
    scopes: pl.DataFrame,
    gpu: pl.DataFrame,
    keys: list[str],
    key_schema: pl.Schema,
) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """`_gpu_part` of the GPU events of the chosen steps, as the whole trace's figures (`op_stats` without
    steps, which `analyze` has already computed) less those of the events outside the steps: every figure is
    a sum over GPU events (each event once per key), so the part outside, a few events before the first step
    and after the last, is all that is paired with its enclosing ops (issue 25: `history add` computed the
    whole table a second time for its step scope). None where the whole table's text keys cannot be matched
    back (a nameless op reads as ""): the caller computes the part directly."""
    whole = op_stats(trace, replace(opts, steps=None, top=0), linked)
    names = [r.name for r in whole.rows]
    if "" in names:
        return None
    figures = ("gpu_total", "kernels", "gpu_self", "self_kernels")
    frame = pl.DataFrame(
        {
            Col.NAME: names,
            Col.INPUT_DIMS: [r.input_dims for r in whole.rows],
            "gpu_total": [r.gpu_total_ns for r in whole.rows],
            "kernels": [r.kernels for r in whole.rows],
            "gpu_self": [r.gpu_self_ns for r in whole.rows],
            "self_kernels": [r.self_kernels for r in whole.rows],
        },
        schema={Col.NAME: pl.String, Col.INPUT_DIMS: pl.String, **dict.fromkeys(figures, pl.Int64)},
    ).select(*keys, *figures)
    if frame.select(keys).is_duplicated().any():
        return None
    outside = linked.gpu.join(gpu.select(ROW), on=ROW, how="anti")
    total_out, self_out = _gpu_part(scopes, _launched(outside), keys)
    text_keys = [pl.col(k).cast(pl.String) for k in keys]
    out = (
        total_out.with_columns(text_keys)
        .join(self_out.with_columns(text_keys), on=keys, how="full", coalesce=True, nulls_equal=True)
        .with_columns(pl.col(*figures).fill_null(0))
    )
    inside = (
        frame.join(out, on=keys, how="left", nulls_equal=True, suffix="_out")
        .with_columns((pl.col(f) - pl.col(f"{f}_out").fill_null(0)).alias(f) for f in figures)
        .select(*keys, *figures)
        .with_columns(pl.col(k).cast(key_schema[k]) for k in keys)
    )
    total = inside.filter(pl.col("kernels") > 0).select(*keys, pl.col("gpu_total", "kernels"))
    own = inside.filter(pl.col("self_kernels") > 0).select(*keys, pl.col("gpu_self", "self_kernels"))
    return total, own
