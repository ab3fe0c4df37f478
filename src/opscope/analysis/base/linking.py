"""Linking GPU work to the CPU side: every kernel, memcpy and memset -> the runtime/driver call that launched it
-> the innermost CPU op enclosing that call on the same thread -> that op's ancestors.

This is the join every attribution figure (`ops`, `tree`, `steps`, `analyze`) is built on. GPU activity finds
its launch by correlation id (`args.correlation`, on both sides in every Kineto generation, CUDA and HIP), and
where that fails by flow events (`ac2g`, `async`, `async_gpu`: a start `s` bound to the launch call, a finish
`f` bound to the GPU event, same id). One graph launch (`cudaGraphLaunch`, `hipGraphLaunch`) carries the
correlation id of all the kernels of the graph; they are linked to it and marked `from_graph`. The launch is
then placed in the CPU call tree of its thread (`analysis.base.nesting`, no loop over events). Nothing is dropped:
GPU events that cannot be attributed stay in the table with `attributed = False`, and their share of GPU
time is reported. Definitions: docs/analysis-attribution.md.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

import numpy as np
import polars as pl

from opscope.analysis.base import select
from opscope.analysis.base.arrays import take_or
from opscope.analysis.base.codetag import code_tag
from opscope.analysis.base.nesting import (
    RowTree,
    ancestors,
    at_positions,
    filled,
    innermost_container,
    nearest_of_kind,
    positions,
    preorder,
)
from opscope.analysis.base.stages import stage
from opscope.model.schema import GPU_KINDS, Col, Kind
from opscope.model.trace import Trace
from opscope.tables import Tabular

T = TypeVar("T")

SCOPE_KINDS: tuple[str, ...] = (Kind.PYTHON, Kind.USER_ANNOTATION, Kind.CPU_OP)  # outer to inner on ties
OP_KINDS: tuple[str, ...] = (Kind.USER_ANNOTATION, Kind.CPU_OP)
LAUNCH_KINDS: tuple[str, ...] = (Kind.RUNTIME, Kind.DRIVER)
GRAPH_LAUNCH = r"Graph\w*Launch"  # cudaGraphLaunch, hipGraphLaunch, cuGraphLaunch
# Calls that enqueue GPU work: cudaLaunchKernel, cuLaunchKernel, cudaLaunchKernelExC, hipExtModuleLaunchKernel,
# cudaMemcpyAsync, hipMemsetAsync, cudaGraphLaunch, ... (used only to count launches that produced nothing).
LAUNCH_API = r"^(cuda|cu|hip|hsa)\w*(Launch|Memcpy|Memset)"

ROW = "row"  # row index of an event in the trace's event table: the identity used across all frames


@dataclass(frozen=True)
class LinkStats:
    """Counts of what linking found and what it could not do; times in ns, all GPU activity of the trace."""

    gpu_events: int
    gpu_time_ns: int
    linked_by_correlation: int
    linked_by_flow: int
    missing_launch: int  # GPU events whose launch call is not in the trace
    missing_launch_ns: int
    without_correlation: int  # GPU events with no correlation id
    launch_outside_ops: int  # GPU events whose launch is inside no CPU op, annotation or Python frame
    from_graph: int  # GPU events launched by a graph launch
    graph_launches: int
    launches_without_gpu: int  # launch calls (LAUNCH_API) whose correlation matches no GPU event
    duplicate_correlations: int  # correlation ids carried by more than one launch call
    dangling_flows: int  # launch flow ids missing an end, or with an end bound to no event of the right kind
    nonpositive_gpu: int  # GPU events with duration <= 0 (negative durations count as 0 time)
    negative_gpu: int
    nonpositive_cpu: int  # ops, annotations, Python frames and launch calls with duration <= 0
    attributed_ns: int
    unattributed_ns: int
    unattributed_share: float


@dataclass(frozen=True, eq=False)
class Linkage(Tabular):
    """The result of `link`. Text columns are Categorical, as in the trace's own event table (cast to
    pl.String for string operations); `row` is the event's index in `trace.lazy()` / `trace.events`.

    `gpu`: one row per GPU event (kernel/memcpy/memset with a duration): row, name, kind, device, stream, ts_ns,
    dur_ns (negative clipped to 0), correlation, link ("correlation" | "flow" | null), launch_row,
    launch_name, launch_ts_ns, launch_dur_ns, launch_pid, launch_tid, scope_row (innermost enclosing op,
    annotation or Python frame), op_row / op_name / op_kind (innermost op or annotation), from_graph,
    attributed (scope_row is not null). Which scopes enclose a launch is a walk up `scopes` (`under`,
    `stacks`): a list of them per GPU event held GPU events x depth rows (a recursive model's stack is
    thousands of frames deep).
    `scopes`: one row per CPU op, user annotation and Python frame: row, name, kind, pid, tid, ts_ns, dur_ns,
    input_dims, python_id, python_parent_id, parent_row (time nesting; Python parent id where nothing
    encloses a frame), op_parent_row (nearest enclosing op or annotation).
    """

    gpu: pl.DataFrame
    scopes: pl.DataFrame
    stats: LinkStats

    def _frame(self) -> pl.DataFrame:
        """The kernel-to-operator table: one row per GPU event with its launch call and innermost operator,
        and `stack` (`stacks`; `to_polars()` gives it with its text columns as pl.String)."""
        return self.gpu.with_columns(self.stacks())

    @functools.cached_property
    def tree(self) -> RowTree:
        """The scopes' nesting (`parent_row`) as positions, for walks up from a launch's scope."""
        return RowTree.of(self.scopes, ROW, "parent_row")

    @functools.cached_property
    def _launch_order(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(first, size) of the scope tree's preorder (`nesting.preorder`), and the GPU events' positions
        sorted by the preorder number of their launch's scope (those without a scope left out), with those
        numbers: what `under` searches."""
        first, size = preorder(self.tree.parent)
        at = self.tree.find(filled(self.gpu["scope_row"], -1))
        events = np.flatnonzero(at >= 0)
        numbers = first[at[events]]
        order = np.argsort(numbers, kind="stable")
        return first, size, np.stack([events[order], numbers[order]])

    def under(self, rows: pl.Series) -> pl.DataFrame:
        """(row, scope): each GPU event (its trace row) launched inside one of the scope rows `rows`, at any
        depth, with that scope (an event inside two of them nested twice). A scope encloses exactly the
        scopes numbered from its own number on, as many as its subtree holds (`nesting.preorder`, computed
        once per link table): two binary searches per row of `rows` over the events sorted by their scope's
        number, whatever the depth of the stacks."""
        empty = pl.DataFrame(schema={ROW: pl.Int64, "scope": pl.Int64})
        if len(self.tree.rows) == 0 or self.gpu.height == 0:
            return empty
        first, size, (events, numbers) = self._launch_order
        at = self.tree.find(rows.cast(pl.Int64).unique().to_numpy())
        at = at[at >= 0]
        lo = np.searchsorted(numbers, first[at], side="left")
        hi = np.searchsorted(numbers, first[at] + size[at], side="left")
        counts = hi - lo
        if counts.sum() == 0:
            return empty
        owner = np.repeat(at, counts)
        index = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
        return pl.DataFrame(
            {ROW: self.gpu[ROW].to_numpy()[events[index]], "scope": self.tree.rows[owner]},
            schema={ROW: pl.Int64, "scope": pl.Int64},
        )

    def stacks(self) -> pl.Series:
        """`stack`: for each GPU event, the rows of every scope enclosing its launch, outermost first (ends
        with scope_row; null without one). As long as the events times their depth: for a table, not for
        an analysis (`under`)."""
        starts = self.gpu.select(pl.col("scope_row").alias(ROW)).drop_nulls().unique()
        pairs = ancestors(self.scopes.select(ROW, "parent_row"), starts[ROW])
        stacks = (
            pairs.sort([ROW, "level"], descending=[False, True])
            .group_by(ROW, maintain_order=True)
            .agg(pl.col("ancestor").alias("stack"))
        )
        return (
            self.gpu.select("scope_row")
            .join(stacks.rename({ROW: "scope_row"}), on="scope_row", how="left", maintain_order="left")
            .get_column("stack")
        )

    def _table_title(self) -> str:
        return f"Linkage: {self.stats.gpu_events:,} GPU events, {1 - self.stats.unattributed_share:.1%} of GPU time attributed"


def _frames(trace: Trace) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """GPU events, launch calls, CPU scopes and launch flows, each with only the columns linking needs, from
    one scan of the trace (text stays Categorical: cheap to filter and join)."""
    lazy = trace.lazy().with_row_index(ROW).with_columns(pl.col(ROW).cast(pl.Int64))
    kind, timed = pl.col(Col.KIND), pl.col(Col.DUR_NS).is_not_null()
    place = [ROW, Col.NAME, Col.KIND, Col.PID, Col.TID, Col.TS_NS, Col.DUR_NS]
    queries = [
        lazy.filter(kind.is_in(list(GPU_KINDS)) & timed).select(
            *place, Col.DEVICE, Col.STREAM, Col.CORRELATION
        ),
        lazy.filter(kind.is_in(list(LAUNCH_KINDS)) & timed).select(*place, Col.CORRELATION),
        lazy.filter(kind.is_in(list(SCOPE_KINDS)) & timed).select(
            *place, Col.INPUT_DIMS, Col.PY_ID, Col.PY_PARENT_ID
        ),
        lazy.filter(
            (kind == Kind.FLOW) & pl.col(Col.FLOW_ID).is_not_null() & pl.col(Col.PH).is_in(["s", "f"])
        ).select(Col.PH, Col.PID, Col.TID, Col.TS_NS, Col.FLOW_ID),
    ]
    gpu, launches, scopes, flows = pl.collect_all(queries)
    return gpu, launches, scopes, flows


def event_columns(
    trace: Trace, rows: pl.Series, kinds: Sequence[str], columns: Sequence[str]
) -> list[pl.Series]:
    """`columns` of the events at the trace rows `rows` (null where a row is not an event of `kinds`), in the
    order of `rows`: the events of `kinds` read in row order, each row found by a binary search (a left join
    of two tables of 1.5 M op rows on the 1 GB benchmark trace was the cost). Text columns stay categorical:
    the caller makes text of the rows it asked for only. The events of `kinds` are read once per trace, kinds
    and columns (`Trace.derived`: the efficiency table and the rules' op table ask for the same)."""
    found = trace.derived(
        f"event_columns:{tuple(kinds)!r}:{tuple(columns)!r}",
        lambda: (
            trace.lazy()
            .with_row_index(ROW)
            .filter(pl.col(Col.KIND).is_in(list(kinds)))
            .select(pl.col(ROW).cast(pl.Int64), *columns)
            .collect()
        ),
    )
    at = positions(found[ROW].to_numpy(), rows.to_numpy())
    return [at_positions(found[c], at) for c in columns]


def thread_key(
    pid: str | pl.Expr = Col.PID, tid: str | pl.Expr = Col.TID, missing: int | None = None
) -> pl.Expr:
    """One integer per (process, thread) from their categorical codes (no string work): a null code counts as
    `missing`, or makes the key null when `missing` is None."""
    codes = [(pl.col(c) if isinstance(c, str) else c).to_physical().cast(pl.Int64) for c in (pid, tid)]
    if missing is not None:
        codes = [c.fill_null(missing) for c in codes]
    return codes[0] * (1 << 32) + codes[1]


def _thread_codes(frame: pl.DataFrame) -> np.ndarray:
    """One integer per (pid, tid) pair, from the categorical codes (no string work)."""
    return frame.select(thread_key(missing=2**31 - 1)).to_series().to_numpy()


def nest(scopes: pl.DataFrame, queries: pl.DataFrame | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Parents in the CPU call tree, by time on the same pid/tid. `scopes` (ROW, kind, pid, tid, ts_ns, dur_ns)
    get parent_row (innermost enclosing scope of any kind) and op_parent_row (innermost enclosing op or
    annotation); each event of `queries` (ROW, pid, tid, ts_ns, dur_ns) gets scope_row and op_row alike."""
    cols = [ROW, Col.PID, Col.TID, Col.TS_NS, Col.DUR_NS]
    queries = queries if queries is not None else scopes.select(cols).clear()
    both = pl.concat([scopes.select(cols), queries.select(cols)])
    n_scopes = scopes.height
    start = both[Col.TS_NS].fill_null(0).to_numpy()
    end = start + np.maximum(both[Col.DUR_NS].fill_null(0).to_numpy(), 0)
    rank = pl.lit(len(SCOPE_KINDS), dtype=pl.Int64)
    for i, k in reversed(list(enumerate(SCOPE_KINDS))):
        rank = pl.when(pl.col(Col.KIND) == k).then(pl.lit(i, dtype=pl.Int64)).otherwise(rank)
    scope_rank = scopes.select(rank).to_series().to_numpy()
    tiebreak = np.concatenate([scope_rank, np.full(queries.height, len(SCOPE_KINDS), dtype=np.int64)])
    is_scope = np.arange(both.height) < n_scopes
    is_op = np.zeros(both.height, dtype=bool)
    is_op[:n_scopes] = scopes.select(pl.col(Col.KIND).is_in(list(OP_KINDS))).to_series().to_numpy()
    any_parent = innermost_container(_thread_codes(both), start, end, is_scope, tiebreak)
    op_parent = nearest_of_kind(any_parent, is_op)  # the innermost op is the nearest op among the ancestors
    rows = both[ROW].to_numpy()
    raw = {
        name: take_or(rows, idx, -1)
        for name, idx in (("parent_row", any_parent), ("op_parent_row", op_parent))
    }
    parents = pl.DataFrame(raw).select(pl.when(pl.col(c) >= 0).then(pl.col(c)).alias(c) for c in raw)
    out_scopes = scopes.with_columns(parents.slice(0, n_scopes))
    out_queries = queries.with_columns(
        parents.slice(n_scopes).rename({"parent_row": "scope_row", "op_parent_row": "op_row"})
    )
    return out_scopes, out_queries


def _bind(points: pl.DataFrame, slices: pl.DataFrame, name: str) -> pl.DataFrame:
    """Flow ends -> the slice on the same pid/tid that encloses their timestamp: columns flow_id, `name`."""
    left = (
        points.select(Col.FLOW_ID, Col.PID, Col.TID, Col.TS_NS)
        .drop_nulls([Col.PID, Col.TID, Col.TS_NS])
        .sort(Col.TS_NS)
    )
    right = slices.select(
        pl.col(ROW).alias(name),
        Col.PID,
        Col.TID,
        pl.col(Col.TS_NS).alias("_start"),
        (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS).clip(lower_bound=0)).alias("_end"),
    )
    right = right.drop_nulls([Col.PID, Col.TID, "_start"]).sort("_start")
    bound = left.join_asof(
        right,
        left_on=Col.TS_NS,
        right_on="_start",
        by=[Col.PID, Col.TID],
        strategy="backward",
        check_sortedness=False,
    )
    bound = bound.filter(pl.col(name).is_not_null() & (pl.col(Col.TS_NS) <= pl.col("_end")))
    return bound.select(Col.FLOW_ID, name).unique(Col.FLOW_ID, keep="first", maintain_order=True)


def _flow_links(flows: pl.DataFrame, gpu: pl.DataFrame, launches: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """(gpu row -> launch row) pairs through launch flows, and the number of dangling flow ids."""
    finish = _bind(flows.filter(pl.col(Col.PH) == "f"), gpu, "gpu_row")
    start = _bind(flows.filter(pl.col(Col.PH) == "s"), launches, "flow_launch_row")
    ids = flows.select(Col.FLOW_ID).unique()
    ok = finish.join(start, on=Col.FLOW_ID, how="inner")
    dangling = ids.height - ok.height
    pairs = ok.select("gpu_row", "flow_launch_row").unique("gpu_row", keep="first", maintain_order=True)
    return pairs, dangling


def _by_correlation(gpu: pl.DataFrame, launches: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Each GPU event's launch call: the one with the same correlation id. Where several calls carry the id
    (a wrapped counter, two processes' traces merged), the latest one starting at or before the GPU event,
    else the earliest one after it: two as-of joins by the id (each GPU event meets one call), where a join
    on the id alone paired every event with every call that carries it (k events x k calls per id)."""
    keyed = launches.filter(pl.col(Col.CORRELATION).is_not_null())
    duplicates = int(keyed.group_by(Col.CORRELATION).len().filter(pl.col("len") > 1).height)
    right = keyed.select(Col.CORRELATION, pl.col(ROW).alias("launch_row"), pl.col(Col.TS_NS).alias("_lts"))
    events = gpu.select(ROW, Col.CORRELATION, Col.TS_NS)
    if not duplicates:
        return events.join(right, on=Col.CORRELATION, how="left").select(ROW, "launch_row"), 0
    left = events.filter(pl.col(Col.CORRELATION).is_not_null() & pl.col(Col.TS_NS).is_not_null()).sort(
        Col.TS_NS
    )
    calls = right.filter(pl.col("_lts").is_not_null()).sort("_lts", maintain_order=True)  # ties: row order

    def nearest(strategy: Literal["backward", "forward"], name: str) -> pl.DataFrame:
        return left.join_asof(
            calls.rename({"launch_row": name}),
            left_on=Col.TS_NS,
            right_on="_lts",
            by=Col.CORRELATION,
            strategy=strategy,
            check_sortedness=False,
        ).select(ROW, name)

    chosen = (
        nearest("backward", "_before")
        .join(nearest("forward", "_after"), on=ROW, how="left")
        .select(ROW, pl.coalesce("_before", "_after").alias("launch_row"))
    )
    # GPU events without a start still meet a call with their id (the earliest, as before)
    untimed = events.filter(pl.col(Col.CORRELATION).is_not_null() & pl.col(Col.TS_NS).is_null()).join(
        right.sort("_lts", nulls_last=True).unique(Col.CORRELATION, keep="first"),
        on=Col.CORRELATION,
        how="left",
    )
    linked = pl.concat([chosen, untimed.select(ROW, "launch_row")])
    return events.select(ROW).join(linked, on=ROW, how="left", maintain_order="left"), duplicates


def link(trace: Trace) -> Linkage:
    """Link every GPU event of `trace` to its launch call and CPU call stack (see the module doc).
    Computed once per trace and kept beside the trace cache (`Trace.persisted`): a second command on the same
    trace reads it back instead of linking again."""
    return trace.persisted(f"link-{_code_tag()}", lambda: _announced_link(trace), _encode, _decode)


def is_trace_link(trace: Trace, linked: Linkage) -> bool:
    """Whether `linked` is `link(trace)` (already computed): results kept beside the trace cache are computed
    over that table only, never over one a caller built otherwise."""
    key = f"link-{_code_tag()}"
    return trace.has_derived(key) and trace.derived(key, lambda: None) is linked


def _code_tag() -> str:
    """The tag of the code that computes the link table (this module and the nesting and selection it uses):
    a result kept by other code is never read back as this code's (`codetag.code_tag`)."""
    from opscope.analysis.base import nesting, select

    return code_tag(sys.modules[__name__], nesting, select)


def _encode(linkage: Linkage) -> dict[str, pl.DataFrame]:
    return {
        "gpu": linkage.gpu,
        "scopes": linkage.scopes,
        "stats": pl.DataFrame([dataclasses.asdict(linkage.stats)]),
    }


def _decode(frames: dict[str, pl.DataFrame]) -> Linkage:
    (stats,) = frames["stats"].to_dicts()
    return Linkage(gpu=frames["gpu"], scopes=frames["scopes"], stats=LinkStats(**stats))


def once_per_link(trace: Trace, linked: Linkage, key: str, compute: Callable[[], T]) -> T:
    """`compute()` once per trace, link table and `key` (an analysis and its options): for the results that
    several views of one command share (op_stats, efficiency). The link table is held with the result, so its
    `id` in the key cannot be reused by another table while the result is kept."""
    return trace.derived(f"{key}:{id(linked)}", lambda: (linked, compute()))[1]


def _announced_link(trace: Trace) -> Linkage:
    stage("linking kernels to their launches and ops")
    return _link(trace)


def _link(trace: Trace) -> Linkage:
    """Link every GPU event of `trace` to its launch call and CPU call stack (see the module doc)."""
    gpu, launches, scopes, flows = _frames(trace)
    dur = pl.col(Col.DUR_NS)
    negative, nonpositive = gpu.select((dur < 0).sum().alias("neg"), (dur <= 0).sum().alias("nonpos")).row(0)
    nonpositive_cpu = int(launches.select((dur <= 0).sum()).item()) + int(
        scopes.select((dur <= 0).sum()).item()
    )
    gpu = gpu.with_columns(dur.clip(lower_bound=0))

    by_corr, duplicates = _by_correlation(gpu, launches)
    flow_pairs, dangling = _flow_links(flows, gpu, launches)
    linked = (
        by_corr.join(flow_pairs.rename({"gpu_row": ROW}), on=ROW, how="left")
        .with_columns(
            pl.when(pl.col("launch_row").is_not_null())
            .then(pl.lit("correlation"))
            .when(pl.col("flow_launch_row").is_not_null())
            .then(pl.lit("flow"))
            .alias("link"),
            pl.coalesce("launch_row", "flow_launch_row").alias("launch_row"),
        )
        .drop("flow_launch_row")
    )
    used = launches.join(linked.select("launch_row").unique().rename({"launch_row": ROW}), on=ROW, how="semi")
    scopes, placed = nest(scopes, used)
    scopes = _python_parents(scopes)
    launch_cols = placed.select(
        pl.col(ROW).alias("launch_row"),
        pl.col(Col.NAME).alias("launch_name"),
        pl.col(Col.TS_NS).alias("launch_ts_ns"),
        pl.col(Col.DUR_NS).alias("launch_dur_ns"),
        pl.col(Col.PID).alias("launch_pid"),
        pl.col(Col.TID).alias("launch_tid"),
        "scope_row",
        "op_row",
    )
    ops = scopes.select(
        pl.col(ROW).alias("op_row"), pl.col(Col.NAME).alias("op_name"), pl.col(Col.KIND).alias("op_kind")
    )
    out = (
        gpu.select(ROW, Col.NAME, Col.KIND, Col.DEVICE, Col.STREAM, Col.TS_NS, Col.DUR_NS, Col.CORRELATION)
        .join(linked, on=ROW, how="left")
        .join(launch_cols, on="launch_row", how="left")
        .join(ops, on="op_row", how="left")
        .with_columns(
            pl.col("launch_name")
            .cast(pl.String)
            .str.contains(GRAPH_LAUNCH)
            .fill_null(False)
            .alias("from_graph"),
            pl.col("scope_row").is_not_null().alias("attributed"),
        )
    )
    stats = _stats(out, launches, duplicates, dangling, nonpositive, negative, nonpositive_cpu)
    return Linkage(gpu=out, scopes=scopes, stats=stats)


def _python_parents(scopes: pl.DataFrame) -> pl.DataFrame:
    """A Python frame with no enclosing event on its thread takes its parent from `Python parent id` when that
    names an earlier frame. (Where both exist they agree on every with_stack trace of the corpus.) Only the
    frames nothing encloses ask (the tops of the stacks), and only the frames they name are looked up: a join
    of every scope row copied them all."""
    python = scopes.filter(pl.col(Col.KIND) == Kind.PYTHON)
    orphans = python.filter(pl.col("parent_row").is_null() & pl.col(Col.PY_PARENT_ID).is_not_null()).select(
        ROW, Col.PY_PARENT_ID, Col.TS_NS
    )
    if orphans.height == 0:
        return scopes
    frames = (
        python.filter(pl.col(Col.PY_ID).is_in(orphans[Col.PY_PARENT_ID].unique().implode()))
        .select(
            pl.col(Col.PY_ID).alias(Col.PY_PARENT_ID),
            pl.col(ROW).alias("_py_parent"),
            pl.col(Col.TS_NS).alias("_py_ts"),
        )
        .drop_nulls()
        .unique(Col.PY_PARENT_ID, keep="first", maintain_order=True)
    )
    found = orphans.join(frames, on=Col.PY_PARENT_ID, how="inner").filter(
        (pl.col("_py_ts") <= pl.col(Col.TS_NS)) & (pl.col("_py_parent") != pl.col(ROW))
    )
    if found.height == 0:
        return scopes
    parent = pl.col(ROW).replace_strict(
        found[ROW],
        found["_py_parent"],
        default=pl.col("parent_row"),
        return_dtype=scopes.schema["parent_row"],
    )
    return scopes.with_columns(parent.alias("parent_row"))


def selected_gpu(
    trace: Trace,
    linkage: Linkage,
    devices: Sequence[int] | None = None,
    streams: Sequence[int] | None = None,
    steps: str | None = None,
) -> pl.DataFrame:
    """`linkage.gpu` restricted to devices, streams and a `--steps` spec. With steps, a GPU event belongs to
    the steps in which its launch call started (its own start when the launch is missing)."""
    gpu = linkage.gpu
    if devices:
        gpu = gpu.filter(pl.col(Col.DEVICE).is_in(list(devices)))
    if streams:
        gpu = gpu.filter(pl.col(Col.STREAM).is_in(list(streams)))
    if steps is not None:
        at = gpu.with_columns(pl.coalesce("launch_ts_ns", Col.TS_NS).alias("_at"), pl.lit(0).alias("_zero"))
        gpu = select.by_steps(at, trace, steps, clip=False, start="_at", dur="_zero").drop(
            "_at", "_zero", "step"
        )
    return gpu


def unattributed_share(gpu: pl.DataFrame) -> float:
    """Share of the GPU time of `gpu` (a subset of `Linkage.gpu`) whose launch is in no CPU scope."""
    total = int(gpu[Col.DUR_NS].sum() or 0)
    if total == 0:
        return 0.0
    missing = int(gpu.filter(~pl.col("attributed"))[Col.DUR_NS].sum() or 0)
    return missing / total


def _stats(
    gpu: pl.DataFrame,
    launches: pl.DataFrame,
    duplicates: int,
    dangling: int,
    nonpositive: int,
    negative: int,
    nonpositive_cpu: int,
) -> LinkStats:
    total = int(gpu[Col.DUR_NS].sum() or 0)
    missing = gpu.filter(pl.col("launch_row").is_null())
    attributed = int(gpu.filter(pl.col("attributed"))[Col.DUR_NS].sum() or 0)
    gpu_corr = gpu.select(Col.CORRELATION).drop_nulls().unique()
    api = launches.filter(pl.col(Col.NAME).cast(pl.String).str.contains(LAUNCH_API))
    idle = api.join(gpu_corr, on=Col.CORRELATION, how="anti")
    graph = gpu.filter(pl.col("from_graph"))
    return LinkStats(
        gpu_events=gpu.height,
        gpu_time_ns=total,
        linked_by_correlation=int((gpu["link"] == "correlation").sum()),
        linked_by_flow=int((gpu["link"] == "flow").sum()),
        missing_launch=missing.height,
        missing_launch_ns=int(missing[Col.DUR_NS].sum() or 0),
        without_correlation=int(gpu[Col.CORRELATION].null_count()),
        launch_outside_ops=int((gpu["launch_row"].is_not_null() & ~gpu["attributed"]).sum()),
        from_graph=graph.height,
        graph_launches=int(graph["launch_row"].n_unique()),
        launches_without_gpu=idle.height,
        duplicate_correlations=duplicates,
        dangling_flows=dangling,
        nonpositive_gpu=nonpositive,
        negative_gpu=negative,
        nonpositive_cpu=nonpositive_cpu,
        attributed_ns=attributed,
        unattributed_ns=total - attributed,
        unattributed_share=(total - attributed) / total if total else 0.0,
    )
