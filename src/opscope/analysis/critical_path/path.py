"""The longest path through a window's dependency graph, its breakdown by kind, the ops and kernels on it, and
the what-if: rescale the nodes whose name matches a pattern and recompute.

The longest path is `lengths.Chains.path` (vectorised passes; the path rustworkx's `dag_longest_path` would
choose), rustworkx's walk where the passes cannot answer. A what-if
multiplies the weight of every *work* edge owned by a matching event (its CPU time, its GPU duration, the
wait of a blocking call) by the factor; the factor of a CPU op also applies to everything nested in it and to
the GPU work it launched. Overheads (launch delay, kernel-to-kernel gaps) keep their weight, and a blocking call
scaled to 0 loses its dependency on the GPU too. Same launch order, same dependencies: a model, not a promise.
Definitions: docs/critical-path.md.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
import rustworkx as rx

from opscope.analysis.base.arrays import take_or
from opscope.analysis.base.nesting import nearest_of_kind
from opscope.analysis.critical_path.graph import CODES, Graph
from opscope.analysis.critical_path.kinds import EDGE_KIND, EDGE_KINDS, SCALED_KINDS, SYNC_WAIT
from opscope.analysis.critical_path.lengths import Chains
from opscope.errors import UsageError
from opscope.model.schema import Col

TOP_KINDS = (*SCALED_KINDS,)  # edges that count as an event's own time on the path


@dataclass(frozen=True)
class WhatIf:
    """Rescale the events whose name matches `pattern` (a regular expression, searched) by `factor` >= 0."""

    pattern: str
    factor: float

    @classmethod
    def parse(cls, spec: str) -> WhatIf:
        """`'REGEX:FACTOR'` (the factor after the last colon), e.g. `'gemm|cutlass:0.5'`, `'aten::copy_:0'`."""
        pattern, sep, factor_text = spec.rpartition(":")
        try:
            factor = float(factor_text)
        except ValueError:
            factor = -1.0
        if not sep or not pattern or not (factor >= 0 and np.isfinite(factor)):
            raise UsageError(f"--what-if: expected 'REGEX:FACTOR' with a factor >= 0, got {spec!r}")
        try:
            re.compile(pattern)
            pl.Series([""]).str.contains(
                pattern
            )  # matching runs in polars (Rust regex syntax: no look-around)
        except (re.error, pl.exceptions.PolarsError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise UsageError(f"--what-if: bad regular expression {pattern!r}: {reason}") from None
        return cls(pattern, factor)


@dataclass(frozen=True)
class TopEntry:
    name: str
    kind: str  # the event kind (kernel, cpu_op, runtime, ...)
    on_path_ns: int
    total_ns: int  # the summed duration of the events of that name and kind in the graph


@dataclass(frozen=True)
class PathResult:
    """The critical path of one graph: `length_ns` (sum of its edge weights), `breakdown_ns` per edge kind,
    `edges` (indices into graph.edges, in path order), `top` (events on the path by name, most time first)."""

    length_ns: int
    breakdown_ns: dict[str, int]
    edges: np.ndarray
    top: tuple[TopEntry, ...]


def _payload(_source: int, _target: int, weight: int) -> int:
    return weight


def _dag(graph: Graph, weights: np.ndarray, keep: np.ndarray) -> tuple[rx.PyDiGraph, np.ndarray, np.ndarray]:
    """The kept edges as a rustworkx DAG whose edge payloads are their weights, and their (src, dst)."""
    src = graph.edges["src"].to_numpy()[keep]
    dst = graph.edges["dst"].to_numpy()[keep]
    dag = rx.PyDiGraph(check_cycle=False, multigraph=True)
    dag.add_nodes_from(range(graph.nodes))
    # each edge carries its weight as a Python int: the callback rustworkx makes per edge only returns it
    dag.add_edges_from(
        list(zip(src.tolist(), dst.tolist(), weights[keep].astype(np.int64).tolist(), strict=True))
    )
    return dag, src, dst


def _longest(
    graph: Graph, weights: np.ndarray, keep: np.ndarray, chains: Chains | None = None
) -> tuple[int, np.ndarray]:
    """(length, edge indices of the longest path) over the edges where `keep`: by `lengths.Chains`' vectorised
    passes, choosing the path rustworkx would; by rustworkx's walk where the passes cannot answer."""
    if graph.nodes == 0:
        return 0, np.empty(0, dtype=np.int64)
    found = (Chains.of(graph) if chains is None else chains).path(weights, keep)
    if found is not None:
        return found
    return _rustworkx_path(graph, weights, keep)


def _rustworkx_path(graph: Graph, weights: np.ndarray, keep: np.ndarray) -> tuple[int, np.ndarray]:
    """`_longest` by rustworkx's `dag_longest_path` (it raises on a cycle)."""
    dag, src, dst = _dag(graph, weights, keep)
    idx = np.flatnonzero(keep)
    w = weights
    nodes = list(rx.dag_longest_path(dag, weight_fn=_payload))
    if len(nodes) < 2:
        return 0, np.empty(0, dtype=np.int64)
    # The heaviest kept edge between each consecutive pair (multigraph: parallel edges can exist).
    frame = pl.DataFrame({"src": src, "dst": dst, "e": idx, "w": w[idx]})
    steps = pl.DataFrame(
        {"src": nodes[:-1], "dst": nodes[1:], "i": range(len(nodes) - 1)},
        schema={"src": pl.Int64, "dst": pl.Int64, "i": pl.Int64},
    )
    chosen = (
        steps.join(frame, on=["src", "dst"], how="left")
        .sort(["i", "w"], descending=[False, True])
        .unique("i", keep="first", maintain_order=True)
    )
    path = chosen["e"].to_numpy().astype(np.int64)
    return int(w[path].sum()), path


def critical_path(graph: Graph, top: int = 20, chains: Chains | None = None) -> PathResult:
    """The longest path of `graph` with the observed weights (`chains`: `Chains.of(graph)` when the caller
    has it)."""
    weights = graph.edges["weight_ns"].to_numpy()
    length, path = _longest(graph, weights, np.ones(graph.edges.height, dtype=bool), chains)
    return _results(graph, weights, [(length, path)], top)[0]


def critical_paths(graph: Graph, top: int = 20, chains: Chains | None = None) -> list[PathResult] | None:
    """`critical_path` of each window of a graph of several (`graph.build_windows`), from one layout and one
    set of passes; None where the passes cannot answer (the caller lays the windows out one by one)."""
    weights = graph.edges["weight_ns"].to_numpy()
    keep = np.ones(graph.edges.height, dtype=bool)
    return _batch(graph, weights, keep, top, chains)


def what_ifs(
    graph: Graph, rules: Sequence[WhatIf], top: int = 20, chains: Chains | None = None
) -> list[PathResult] | None:
    """`what_if` of each window of a graph of several (`critical_paths`)."""
    weights, keep = scaled_weights(graph, rules)
    return _batch(graph, weights, keep, top, chains)


def _batch(
    graph: Graph, weights: np.ndarray, keep: np.ndarray, top: int, chains: Chains | None
) -> list[PathResult] | None:
    if graph.nodes == 0:
        return _results(graph, weights, [(0, np.empty(0, dtype=np.int64))] * graph.windows, top)
    found = (Chains.of(graph) if chains is None else chains).paths(
        weights, keep, graph.node_windows(), graph.windows
    )
    return None if found is None else _results(graph, weights, found, top)


def _results(
    graph: Graph, weights: np.ndarray, paths: list[tuple[int, np.ndarray]], top: int
) -> list[PathResult]:
    """The path result of each window (`paths`: each window's length and edges in path order): its breakdown
    by kind and its top events, all windows at once."""
    path_edges = np.concatenate([p for _, p in paths]).astype(np.int64) if paths else np.empty(0, np.int64)
    edge_window = np.repeat(np.arange(len(paths)), [len(p) for _, p in paths])
    w = weights[path_edges].astype(np.int64)
    kind = graph.edges["kind"].gather(path_edges).cast(EDGE_KIND).to_physical().to_numpy()
    by_kind = np.zeros((len(paths), len(EDGE_KINDS)), dtype=np.int64)
    np.add.at(by_kind, (edge_window, kind), w)
    owner = graph.edges["owner"].to_numpy()[path_edges]
    tops = _tops(graph, owner, w, kind, top, len(paths))
    return [
        PathResult(
            length_ns=length,
            breakdown_ns={k: int(by_kind[i, j]) for j, k in enumerate(EDGE_KINDS)},
            edges=path,
            top=tops[i],
        )
        for i, (length, path) in enumerate(paths)
    ]


# by that index: whether the kind counts as its owner's own time on the path
_OWN_TIME = np.array([k in TOP_KINDS for k in EDGE_KINDS])


def _tops(
    graph: Graph, owner: np.ndarray, w: np.ndarray, kind: np.ndarray, limit: int, windows: int
) -> list[tuple[TopEntry, ...]]:
    """Each window's events on its path by (name, event kind), most time on the path first (then by name,
    nulls first, then kind): the time of the path's own-time edges (`TOP_KINDS`) they own, and the summed
    duration of every event of that name and kind in the window (none for an unnamed event). `owner`, `w`,
    `kind`: the paths' edges' owning event, weight and kind (index in EDGE_KINDS). Summed in numpy over
    integer codes of the windows, names and kinds: a grouped query over a step's text took ~2 ms a step."""
    out: list[tuple[TopEntry, ...]] = [() for _ in range(windows)]
    own = _OWN_TIME[kind] & (owner >= 0)
    on_path = np.zeros(graph.events.height, dtype=np.int64)
    np.add.at(on_path, owner[own], w[own])
    if not on_path.any():
        return out
    if all(c in graph.events.columns for c in CODES.values()):  # the trace's category codes (`graph.CODES`)
        name_code = graph.events[CODES[Col.NAME]].to_numpy()
        kind_code = graph.events[CODES[Col.KIND]].to_numpy()
    else:
        codes = graph.events.select(
            pl.col(c).cast(pl.Categorical).to_physical().cast(pl.Int64).fill_null(-1) for c in CODES
        )
        name_code, kind_code = codes.to_series(0).to_numpy(), codes.to_series(1).to_numpy()
    window = graph.event_windows()
    kinds_n = int(kind_code.max()) + 2
    names_n = int(name_code.max()) + 2
    groups, first, group = np.unique(
        (window * names_n + name_code + 1) * kinds_n + kind_code + 1, return_index=True, return_inverse=True
    )
    on = np.zeros(len(groups), dtype=np.int64)
    np.add.at(on, group, on_path)
    total = np.zeros(len(groups), dtype=np.int64)
    np.add.at(total, group, (graph.events["end_ns"] - graph.events["ts_ns"]).fill_null(0).to_numpy())
    hit = np.flatnonzero(on > 0)
    names = graph.events["name"].gather(first[hit]).to_list()
    kinds = graph.events["kind"].gather(first[hit]).to_list()
    rows = sorted(
        zip(window[first[hit]].tolist(), names, kinds, on[hit].tolist(), total[hit].tolist(), strict=True),
        key=lambda r: (r[0], -r[3], r[1] is not None, r[1] or "", r[2] is not None, r[2] or ""),
    )
    per_window: list[list[TopEntry]] = [[] for _ in range(windows)]
    for win, n, k, on_ns, total_ns in rows:
        if limit <= 0 or len(per_window[win]) < limit:  # 0 = every event on the path (issue 28)
            per_window[win].append(
                TopEntry(str(n), str(k), on_ns, total_ns if n is not None and k is not None else 0)
            )
    return [tuple(entries) for entries in per_window]


def rule_factors(names: pl.Series, rules: Sequence[WhatIf]) -> tuple[np.ndarray, np.ndarray]:
    """(factor, matched) of each name: the product of the factors of the rules it matches, in rule order, and
    whether it matches any."""
    own = np.ones(len(names))
    matched = np.zeros(len(names), dtype=bool)
    for rule in rules:
        hit = names.str.contains(rule.pattern).to_numpy()
        own = np.where(hit, own * rule.factor, own)
        matched |= hit
    return own, matched


def inherited_factors(
    own: np.ndarray, matched: np.ndarray, parent: np.ndarray, launch: np.ndarray
) -> np.ndarray:
    """Each event's factor from its own (`rule_factors` of its name), its enclosing events' (`parent`: the
    enclosing CPU event, -1) and its launch call's (`launch`, -1): see `event_factors`."""
    if len(own) == 0 or not matched.any():
        return own
    nearest = np.where(matched, np.arange(len(own)), nearest_of_kind(parent, matched))
    factor = take_or(own, nearest, 1.0)
    gpu = (launch >= 0) & ~matched
    factor[gpu] = factor[launch[gpu]]
    return factor


def event_factors(graph: Graph, rules: Sequence[WhatIf]) -> np.ndarray:
    """The factor of every event: its own (the product of the rules its name matches), else that of the nearest
    enclosing CPU event that matches; GPU work takes its launch call's factor when it matches no rule itself."""
    own, matched = rule_factors(graph.events["name"].fill_null(""), rules)
    return inherited_factors(
        own, matched, graph.events["parent"].to_numpy(), graph.events["launch"].to_numpy()
    )


@dataclass(frozen=True, eq=False)
class Scaling:
    """What rescaling reads of a graph's edges, read once: observed weights, owning events, which edges are
    work (`SCALED_KINDS`), which are the waits of blocking calls."""

    weights: np.ndarray
    owner: np.ndarray
    scalable: np.ndarray
    sync_wait: np.ndarray

    @classmethod
    def of(cls, graph: Graph) -> Scaling:
        edges = graph.edges
        return cls(
            weights=edges["weight_ns"].to_numpy().astype(np.float64),
            owner=edges["owner"].to_numpy(),
            scalable=edges["kind"].is_in(list(SCALED_KINDS)).to_numpy(),
            sync_wait=edges["sync"].to_numpy() & (edges["kind"] == SYNC_WAIT).to_numpy(),
        )

    def apply(self, factor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(weights, keep) of the edges with the events' factors (see the module doc)."""
        f = take_or(factor, self.owner, 1.0)
        weights = np.where(self.scalable, self.weights * f, self.weights)
        keep = ~(self.sync_wait & (f == 0))
        return np.rint(weights).astype(np.int64), keep


def scaled_weights(graph: Graph, rules: Sequence[WhatIf]) -> tuple[np.ndarray, np.ndarray]:
    """(weights, keep) of the graph's edges under the what-if rules (see the module doc)."""
    if not rules:
        return graph.edges["weight_ns"].to_numpy().astype(np.int64), np.ones(graph.edges.height, dtype=bool)
    return Scaling.of(graph).apply(event_factors(graph, rules))


def what_if_length(graph: Graph, rules: Sequence[WhatIf]) -> int:
    """`what_if(graph, rules).length_ns` alone: no path, no tables (`lengths.Chains`)."""
    return Chains.of(graph).longest(*scaled_weights(graph, rules))


def what_if(graph: Graph, rules: Sequence[WhatIf], top: int = 20, chains: Chains | None = None) -> PathResult:
    """The critical path after rescaling the matching events (the model of the module doc)."""
    weights, keep = scaled_weights(graph, rules)
    length, path = _longest(graph, weights, keep, chains)
    return _results(graph, weights, [(length, path)], top)[0]
