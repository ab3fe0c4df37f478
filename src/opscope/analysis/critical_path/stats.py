"""The critical path of every step of a trace (or of the whole trace when it has no step markers), with the
predicted step time under what-if rules; `predict_saving` is the one-call form the advice rules use."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Generic, TypeVar

import numpy as np
import polars as pl

from opscope.analysis.base.codetag import analysis_tag
from opscope.analysis.base.linking import Linkage, is_trace_link, link
from opscope.analysis.base.parallel import process_workers, split_map
from opscope.analysis.base.stored import kept_value
from opscope.analysis.base.windows import StepWindow, select_windows
from opscope.analysis.critical_path.edges import TooWide
from opscope.analysis.critical_path.graph import (
    CUT_KEY,
    Graph,
    build_from,
    build_windows,
    cpu_table,
    gpu_table,
    span_rows,
    stream_waits,
    window_counts,
)
from opscope.analysis.critical_path.host_time import StepHostTime
from opscope.analysis.critical_path.lengths import Chains
from opscope.analysis.critical_path.path import (
    PathResult,
    Scaling,
    WhatIf,
    critical_path,
    critical_paths,
    inherited_factors,
    rule_factors,
    what_if,
    what_ifs,
)
from opscope.model.schema import Col
from opscope.model.trace import Trace
from opscope.tables import Tabular

R = TypeVar("R")


@dataclass(frozen=True)
class StepPath:
    """One step: its window, the critical path, and (with what-if rules) the path after rescaling.
    `span_ns`: from the first start to the last end of the events in the graph (what the path length equals
    up to clock rounding; it passes the window's end when GPU work launched in the step finishes after it)."""

    window: StepWindow
    span_ns: int
    path: PathResult
    predicted: PathResult | None
    segments: pl.DataFrame  # the path's edges: src_ts_ns, dst_ts_ns, kind, name, lane (for the timeline)

    @property
    def saving_ns(self) -> int | None:
        return None if self.predicted is None else self.path.length_ns - self.predicted.length_ns


@dataclass(frozen=True)
class CriticalPathStats(Tabular):
    path: str
    from_markers: bool
    what_ifs: tuple[WhatIf, ...]
    steps: tuple[StepPath, ...]
    windows_total: int = 0
    # the path's host time between operators per step, by Python frame (`host_frames.with_host_frames`); None
    # where not asked for (the advice's what-ifs do not need it)
    hosts: tuple[StepHostTime, ...] | None = None

    def _table_rows(self) -> list[dict[str, Any]]:
        """One row per step: its window, the path and its span, the breakdown by kind (ns), the what-if."""
        return [
            {
                "step": s.window.step,
                "name": s.window.name,
                "wall_ns": s.window.dur_ns,
                "span_ns": s.span_ns,
                "path_ns": s.path.length_ns,
                **{f"{kind}_ns": ns for kind, ns in s.path.breakdown_ns.items()},
                "predicted_ns": s.predicted.length_ns if s.predicted is not None else None,
            }
            for s in self.steps
        ]


def _segments(graph: Graph, path: PathResult) -> pl.DataFrame:
    return _all_segments(graph, [path])[0]


def _all_segments(graph: Graph, paths: list[PathResult]) -> list[pl.DataFrame]:
    """Each path's edges as segments (src_ts_ns, dst_ts_ns, kind, name, gpu, event_row), one frame for all the
    windows of a graph, cut per window (zero-copy slices)."""
    ts = graph.node_ts()
    path_edges = np.concatenate([p.edges for p in paths]).astype(np.int64) if paths else np.empty(0, np.int64)
    on = graph.edges[path_edges]
    src, dst = on["src"].to_numpy(), on["dst"].to_numpy()
    owner = on["owner"].to_numpy()
    # the owners' names gathered in polars (the names of every event as a numpy text array, then back into
    # polars, cost ~0.4 us a row per step); "" for an edge without an owner
    name = (
        graph.events["name"].fill_null("").gather(np.maximum(owner, 0)).scatter(np.flatnonzero(owner < 0), "")
    )
    is_gpu = graph.events["is_gpu"].to_numpy()
    lane_event = np.where(owner >= 0, owner, dst // 2)
    frame = pl.DataFrame(
        {
            "src_ts_ns": ts[src],
            "dst_ts_ns": ts[dst],
            "kind": on["kind"],
            "name": name,
            "gpu": is_gpu[lane_event] if len(lane_event) else np.zeros(0, dtype=bool),
            "event_row": graph.events["row"].to_numpy()[lane_event]
            if len(lane_event)
            else np.zeros(0, np.int64),
        }
    )
    cuts = np.r_[0, np.cumsum([len(p.edges) for p in paths])]
    return [frame.slice(int(lo), int(hi - lo)) for lo, hi in itertools.pairwise(cuts)]


def graph_window(window: StepWindow, node_ts: np.ndarray) -> StepWindow:
    """The whole-trace window narrowed to the span of the graph's events: the trace's own extent also counts
    events the graph leaves out (Python frames, instants, host planes of an xplane), which made `wall_us` of a
    JAX trace up to 230x its path."""
    return replace(window, start_ns=int(node_ts.min()), end_ns=int(node_ts.max()))


@dataclass(frozen=True)
class StepTables:
    """What each step's graph is cut from: the trace's `cpu_table`, `gpu_table` and `stream_waits`, whole, or
    the part of the first two that a batch of steps needs (`cut`: what a worker process gets)."""

    cpu: pl.DataFrame
    gpu: pl.DataFrame
    waits: pl.DataFrame

    def cut(self, start_ns: int, end_ns: int) -> StepTables:
        """The rows any window inside [start_ns, end_ns] takes (`graph.span_rows`)."""
        return StepTables(
            span_rows(self.cpu, Col.TS_NS, start_ns, end_ns),
            span_rows(self.gpu, CUT_KEY, start_ns, end_ns),
            self.waits,
        )

    def rows(self) -> int:
        return self.cpu.height + self.gpu.height


def step_path(
    tables: StepTables, window: StepWindow, rules: Sequence[WhatIf] = (), top: int = 20
) -> StepPath:
    graph = build_from(tables.cpu, tables.gpu, tables.waits, window.start_ns, window.end_ns)
    ts = graph.node_ts()
    span = int(ts.max() - ts.min()) if len(ts) else 0
    if window.step is None and len(ts):
        window = graph_window(window, ts)
    chains = Chains.of(graph)
    base = critical_path(graph, top, chains)
    predicted = what_if(graph, rules, top, chains) if rules else None
    return StepPath(
        window=window, span_ns=span, path=base, predicted=predicted, segments=_segments(graph, base)
    )


def step_paths(
    tables: StepTables, windows: tuple[StepWindow, ...], rules: Sequence[WhatIf] = (), top: int = 20
) -> list[StepPath]:
    """`step_path` of each of `windows` (steps, consecutive), laid out as one graph of them all
    (`graph.build_windows`): the same figures, a batch's fixed costs once instead of once a step (10,000
    short steps: ~7 ms each one by one). Where the batch cannot be laid out as one (times too far apart for
    one key per window and time, or a path the passes cannot find), its halves, then its steps one by one."""
    if len(windows) == 1 or any(w.step is None for w in windows):
        return [step_path(tables, w, rules, top) for w in windows]
    try:
        graph = build_windows(
            tables.cpu, tables.gpu, tables.waits, tuple((w.start_ns, w.end_ns) for w in windows)
        )
    except TooWide:
        half = len(windows) // 2
        return step_paths(tables, windows[:half], rules, top) + step_paths(tables, windows[half:], rules, top)
    chains = Chains.of(graph)
    base = critical_paths(graph, top, chains)
    predicted = what_ifs(graph, rules, top, chains) if rules else None
    if base is None or (rules and predicted is None):
        return [step_path(tables, w, rules, top) for w in windows]
    spans = _window_spans(graph)
    segments = _all_segments(graph, base)
    local = graph.local_edges()  # the paths' edges as indices into each window's own graph, as `step_path`'s
    return [
        StepPath(
            window=w,
            span_ns=int(spans[i]),
            path=replace(base[i], edges=local[base[i].edges]),
            predicted=None if predicted is None else replace(predicted[i], edges=local[predicted[i].edges]),
            segments=segments[i],
        )
        for i, w in enumerate(windows)
    ]


def _window_spans(graph: Graph) -> np.ndarray:
    """From the first start to the last end of each window's events (0 without events)."""
    ts, win = graph.node_ts(), graph.node_windows()
    lo = np.full(graph.windows, np.iinfo(np.int64).max, dtype=np.int64)
    hi = np.full(graph.windows, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(lo, win, ts)
    np.maximum.at(hi, win, ts)
    return np.where(hi >= lo, hi - lo, 0)


@dataclass(frozen=True)
class _Batch(Generic[R]):
    """Steps a worker process lays out (`parallel.split_map`): the per-group function (module-level, or a
    `functools.partial` of one: picklable), the tables' rows the steps need, the steps in groups (each group
    laid out as one graph: `_groups`)."""

    fn: Callable[[StepTables, tuple[StepWindow, ...]], list[R]]
    tables: StepTables
    groups: tuple[tuple[StepWindow, ...], ...]


def _run_batch(batch: _Batch[R]) -> list[list[R]]:
    """`batch.fn` of each group of `batch`, in order (in a worker process), over tables each in one chunk
    (`graph.span_rows` reads the start column without a copy)."""
    tables = StepTables(batch.tables.cpu.rechunk(), batch.tables.gpu.rechunk(), batch.tables.waits)
    return [batch.fn(tables, group) for group in batch.groups]


def critical_path_stats(
    trace: Trace,
    steps: str | None = None,
    rules: Sequence[WhatIf] = (),
    top: int = 20,
    linkage: Linkage | None = None,
    max_windows: int | None = None,
    keep: bool = False,
    processes: bool = True,
) -> CriticalPathStats:
    """The critical path of each chosen step (all steps, or one whole-trace window without markers); with
    `max_windows`, of the first ones only (`windows_total` says how many there were). With `keep`, over the
    trace's own link table and for at most `KEPT_WINDOWS` steps, the result is kept beside the trace cache
    (`Trace.persisted`, typed) under a key of the options, so that the same question asked again (the
    `critical-path` command run twice) is read back (issue 25); longer results (~0.5 MB per step) are not.
    `processes`: whether worker processes may share the steps (`_per_window`)."""
    windows = select_windows(trace, steps)
    linkage = link(trace) if linkage is None else linkage
    chosen = windows if max_windows is None else windows[:max_windows]
    tag = analysis_tag() if keep and 0 < len(chosen) <= KEPT_WINDOWS else None
    if tag is None or not is_trace_link(trace, linkage):
        return _stats(trace, windows, chosen, rules, top, linkage, processes)
    options = repr((steps, [(r.pattern, r.factor) for r in rules], top, max_windows))
    key = hashlib.sha256(f"{tag}|{options}".encode()).hexdigest()[:16]
    kept = kept_value(
        trace,
        "critical_path.stats",
        key,
        CriticalPathStats,
        lambda: _stats(trace, windows, chosen, rules, top, linkage, processes),
    )
    return replace(kept, path=trace.path)


KEPT_WINDOWS = 64  # the most steps whose critical paths are kept beside the cache (`critical_path_stats`)


def _stats(
    trace: Trace,
    windows: tuple[StepWindow, ...],
    chosen: tuple[StepWindow, ...],
    rules: Sequence[WhatIf],
    top: int,
    linkage: Linkage,
    processes: bool = True,
) -> CriticalPathStats:
    # the first windows only: the CPU events of their span (a quarter of the 1 GB benchmark trace's 2.5 M)
    span = (
        (min(w.start_ns for w in chosen), max(w.end_ns for w in chosen))
        if 0 < len(chosen) < len(windows)
        else None
    )
    tables = StepTables(cpu_table(trace, span), gpu_table(linkage), stream_waits(trace))
    paths = list(
        _per_window(
            tables,
            chosen,
            partial(step_paths, rules=tuple(rules), top=top),
            "critical path: window",
            processes,
        )
    )
    return CriticalPathStats(
        path=trace.path,
        from_markers=any(w.step is not None for w in windows),
        what_ifs=tuple(rules),
        steps=tuple(paths),
        windows_total=len(windows),
    )


# From this many CPU and GPU events in the chosen steps, worker processes share the steps (`_per_window`): below it
# starting one (~0.5 s of imports) costs about what it saves. x16 of the benchmark trace: 1.1 M.
PROCESS_MIN_ROWS = 400_000
BATCHES = 20  # the steps are sent to worker processes in batches of about 1/BATCHES of them


GROUP_ROWS = 20_000  # CPU and GPU events laid out as one graph at most (`_groups`): short steps together
GROUP_WINDOWS = 2_000  # and at most this many steps


def _groups(tables: StepTables, windows: tuple[StepWindow, ...]) -> list[tuple[int, int]]:
    """The windows in runs of consecutive ones laid out together (`step_paths`, `_window_steps`): as many as
    hold GROUP_ROWS events, at most GROUP_WINDOWS (a long step alone). Each window's events counted by two
    binary searches in the tables (`graph.span_rows`), all windows at once."""
    starts = np.array([w.start_ns for w in windows], dtype=np.int64)
    ends = np.array([w.end_ns for w in windows], dtype=np.int64)
    rows = (
        window_counts(tables.cpu, Col.TS_NS, starts, ends) + window_counts(tables.gpu, CUT_KEY, starts, ends)
    ).tolist()
    out: list[tuple[int, int]] = []
    lo, held = 0, 0
    for i, n in enumerate(rows):
        if i > lo and (held + n > GROUP_ROWS or i - lo >= GROUP_WINDOWS):
            out.append((lo, i))
            lo, held = i, 0
        held += n
    if windows:
        out.append((lo, len(windows)))
    return out


def _per_window(
    tables: StepTables,
    windows: tuple[StepWindow, ...],
    fn: Callable[[StepTables, tuple[StepWindow, ...]], list[R]],
    label: str,
    processes: bool = True,
) -> Iterator[R]:
    """`fn(tables, group)` of each group of consecutive windows (`_groups`), flattened: one result per window, in
    order; the groups on this process's threads (`parallel.ordered_map`), or, for many events, shared with
    worker processes that run them on batches of groups (`parallel.split_map`: a step's graph is mostly Python
    glue around numpy and polars, which holds the GIL; threads gain ~10% on two cores, a second process ~2x).
    `fn` is module-level or a `functools.partial` of one (it is pickled for the workers); each batch gets only
    the rows of its steps' span (`StepTables.cut`)."""
    if not windows:
        return iter(())
    whole = tables.cut(min(w.start_ns for w in windows), max(w.end_ns for w in windows))
    workers = 0
    if processes and whole.rows() >= PROCESS_MIN_ROWS:
        workers = process_workers(int(whole.cpu.estimated_size() + whole.gpu.estimated_size()))
    groups = [windows[lo:hi] for lo, hi in _groups(whole, windows)]

    def batch(lo: int, hi: int) -> _Batch[R]:
        part = [w for group in groups[lo:hi] for w in group]
        cut = tables.cut(min(w.start_ns for w in part), max(w.end_ns for w in part))
        return _Batch(fn, cut, tuple(groups[lo:hi]))

    results = split_map(
        lambda i: fn(tables, groups[i]),
        _run_batch,
        batch,
        len(groups),
        label,
        workers,
        max(1, len(groups) // BATCHES),
    )
    return (r for group in results for r in group)


def _window_steps(tables: StepTables, windows: tuple[StepWindow, ...]) -> list[tuple[_Step, pl.Series]]:
    """The what-if layout of a group of consecutive windows (`_groups`): one `_Step` for them all (one graph,
    `graph.build_windows`), or for each half where their times do not fit one graph."""
    try:
        graph = build_windows(
            tables.cpu, tables.gpu, tables.waits, tuple((w.start_ns, w.end_ns) for w in windows)
        )
    except TooWide:
        half = len(windows) // 2
        return _window_steps(tables, windows[:half]) + _window_steps(tables, windows[half:])
    return [_Step.of(graph, 0)]


@dataclass(frozen=True, eq=False)
class _Step:
    """One graph's steps (one step, or a group laid out together) as the what-if questions read them, laid
    out once: each event's name (an index into the model's names), enclosing event and launch call, the
    edges' scaling, the chains, each node's window, the observed length (summed over the windows)."""

    name: np.ndarray
    parent: np.ndarray
    launch: np.ndarray
    scaling: Scaling
    chains: Chains
    node_window: np.ndarray
    windows: int
    base_ns: int

    @classmethod
    def of(cls, graph: Graph, first_name: int) -> tuple[_Step, pl.Series]:
        """The step, and its distinct event names (numbered from `first_name` in the model's names)."""
        names = graph.events["name"].cast(pl.String).fill_null("").alias("name")
        distinct = names.unique(maintain_order=True)
        code = names.to_frame().join(
            distinct.to_frame().with_row_index("code"), on="name", how="left", maintain_order="left"
        )["code"]
        chains = Chains.of(graph)
        node_window = graph.node_windows()
        weights = graph.edges["weight_ns"].to_numpy()
        base = chains.longest_per(
            weights, np.ones(graph.edges.height, dtype=bool), node_window, graph.windows
        )
        step = cls(
            name=code.to_numpy().astype(np.int64) + first_name,
            parent=graph.events["parent"].to_numpy(),
            launch=graph.events["launch"].to_numpy(),
            scaling=Scaling.of(graph),
            chains=chains,
            node_window=node_window,
            windows=graph.windows,
            base_ns=int(base.sum()),
        )
        return step, distinct

    def length_ns(self, own: np.ndarray, matched: np.ndarray) -> int:
        """The path length with the names' factors `own` / `matched` (`path.rule_factors` of the names),
        summed over the windows."""
        factor = inherited_factors(own[self.name], matched[self.name], self.parent, self.launch)
        weights, keep = self.scaling.apply(factor)
        return int(self.chains.longest_per(weights, keep, self.node_window, self.windows).sum())


class SavingModel:
    """The critical-path graphs of a trace's steps, built once, for many what-if questions (the advice rules ask
    one per finding): `saving_us(selector, factor)` is `predict_saving` without rebuilding the graphs. Only the
    path lengths are computed (`lengths.Chains`); each question matches its rules once against each step's
    distinct event names; a question asked again is answered from memory."""

    def __init__(self, trace: Trace, steps: str | None = None, linkage: Linkage | None = None) -> None:
        linkage = link(trace) if linkage is None else linkage
        tables = StepTables(cpu_table(trace), gpu_table(linkage), stream_waits(trace))
        self._steps: list[_Step] = []
        names = [pl.Series("name", [], dtype=pl.String)]
        first = 0
        # a few graphs at a time: only their laid-out arrays are kept
        windows = select_windows(trace, steps)
        laid_out = _per_window(tables, windows, _window_steps, "what-if: window")
        for step, distinct in laid_out:  # each step's names numbered after the earlier steps' names
            self._steps.append(replace(step, name=step.name + first))
            names.append(distinct)
            first += len(distinct)
        self._names = pl.concat(names)
        self._asked: dict[tuple[tuple[str, float], ...], int] = {}  # the engine asks some questions twice

    def saving_ns(self, rules: Sequence[tuple[str, float]]) -> int:
        """Predicted saving in ns, summed over the steps, of applying every (selector, factor) rescaling at once
        (the rules' combined what-if)."""
        key = tuple((str(selector), float(factor)) for selector, factor in rules)
        if key not in self._asked:
            parsed = [WhatIf.parse(f"{selector}:{factor}") for selector, factor in rules]
            own, matched = rule_factors(self._names, parsed)
            self._asked[key] = sum(s.base_ns - s.length_ns(own, matched) for s in self._steps)
        return self._asked[key]

    def saving_us(self, selector: str, factor: float) -> float:
        """Predicted saving in µs, summed over the steps, of rescaling the events whose name matches the regular
        expression `selector` by `factor` (0 removes them)."""
        return self.saving_ns([(selector, factor)]) / 1000.0


def predict_saving(
    trace: Trace, selector: str, factor: float, steps: str | None = None, linkage: Linkage | None = None
) -> float:
    """Predicted saving in µs, summed over the chosen steps, of rescaling the events whose name matches the
    regular expression `selector` by `factor` (0 removes them), under the critical-path model."""
    return SavingModel(trace, steps, linkage).saving_us(selector, factor)
