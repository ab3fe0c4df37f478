"""The longest path of a window's graph by vectorised passes: its length alone for many what-if questions over
one graph (the advice asks one per finding), or the path itself (`Chains.path`, the critical path): the graph's
shape is laid out once, and each question is a few vectorised passes over it.

Layout: the edges are split into chains, vertex-disjoint paths (at most one chain edge into a node and one out
of it: an event's own start -> end first, else the edge that spans the least time, which follows the program
order of a thread and the order of a stream), and cross edges (launches, synchronisations, waits; every edge a
what-if can drop, a blocking call's wait, is one). A pass takes each node's best arrival over the cross edges
from the last pass's distances, then runs every chain at once with a prefix sum P of its weights and a running
maximum: dist[i] = P[i] + max over j <= i on the chain of (arrival[j] - P[j]). From zero the distances only grow,
and they stop changing one pass after the last cross edge the longest paths take; what the passes settle on
meets the longest-path equations (each node: the best of its incoming edges, 0 without any), which on a DAG have
one solution, so the length is exactly that of rustworkx's `dag_longest_path` (`path._longest`). Weights are
integers >= 0, as there. A pass visits only the chains' heads and tails and the cross edges' ends (the other
nodes neither feed a cross edge nor raise a running maximum; a tenth of the nodes of an inference step), and the
distances of every node come from the last pass in one sweep. A graph whose longest paths switch chains more than
`MAX_PASSES` times (a step of the MI300 OWLv2 inference trace takes ~150 passes of ~70 us, rustworkx ~55 ms), or
a cyclic one, is handed to rustworkx, which answers, or raises as before.
Definitions: docs/critical-path.md.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import rustworkx as rx

from opscope.analysis.base.arrays import take_or
from opscope.analysis.base.nesting import depths, lexsort
from opscope.analysis.critical_path.graph import Graph

MAX_PASSES = 512
_LIMIT = 2**62  # the running maximum adds a per-chain offset; the sums stay well inside int64


@dataclass(frozen=True, eq=False)
class Chains:
    """A graph's edges laid out for `longest`: `order` lists the nodes chain by chain (each from its head),
    `step` the chain edge into each of them (-1 at a head), `chain` the chain number of each; `cross` the other
    edges sorted by target. `order` is None when the chain edges close a cycle (rustworkx then raises).
    `marked`: the positions in `order` that the passes visit (the chains' heads and tails, the cross edges'
    ends; `_passes`), sorted; `cross_src`, `cross_dst`: each cross edge's ends as indices into `marked`."""

    nodes: int
    src: np.ndarray
    dst: np.ndarray
    order: np.ndarray | None
    step: np.ndarray
    chain: np.ndarray
    cross: np.ndarray
    marked: np.ndarray
    cross_src: np.ndarray
    cross_dst: np.ndarray

    @classmethod
    def of(cls, graph: Graph) -> Chains:
        n = graph.nodes
        src = graph.edges["src"].to_numpy().astype(np.int64)
        dst = graph.edges["dst"].to_numpy().astype(np.int64)
        ts = graph.node_ts()
        cand = np.flatnonzero(~graph.edges["sync"].to_numpy())
        # The edge an event spans from its start to its end first, then the shortest span, then edge order.
        cand = cand[lexsort(((ts[dst] - ts[src])[cand], (src // 2 != dst // 2)[cand]))]  # then by index
        cand = cand[_firsts(src[cand], n)]  # one chain edge out of a node
        cand = cand[_firsts(dst[cand], n)]  # and one in
        on_chain = np.zeros(len(src), dtype=bool)
        on_chain[cand] = True
        into = np.full(n, -1, dtype=np.int64)
        into[dst[cand]] = cand
        # List ranking by pointer jumping: each node's chain head (`jump` at the end) and depth below it.
        jump = np.arange(n, dtype=np.int64)
        jump[dst[cand]] = src[cand]
        depth = (into >= 0).astype(np.int64)
        order: np.ndarray | None = None
        for _ in range(2 * max(n, 1).bit_length() + 2):
            if (into[jump] < 0).all():  # every node points at its chain's head (never on a cycle)
                # Chain by chain (by head), each from its head: position = the chain's start + depth.
                sizes = np.bincount(jump, minlength=n)
                order = np.empty(n, dtype=np.int64)
                order[(np.cumsum(sizes) - sizes)[jump] + depth] = np.arange(n)
                break
            depth = depth + depth[jump]
            jump = jump[jump]
        step = into[order] if order is not None else np.empty(0, dtype=np.int64)
        chain = np.cumsum(step < 0) - 1
        cross = np.flatnonzero(~on_chain)
        cross = cross[np.argsort(dst[cross], kind="stable")]
        none = np.empty(0, dtype=np.int64)
        marked, cross_src, cross_dst = none, none, none
        if order is not None and n:
            at = np.empty(n, dtype=np.int64)
            at[order] = np.arange(n)
            heads = np.flatnonzero(step < 0)
            tails = np.r_[heads[1:] - 1, n - 1]
            marked = np.unique(np.concatenate([heads, tails, at[src[cross]], at[dst[cross]]]))
            cross_src = np.searchsorted(marked, at[src[cross]])
            cross_dst = np.searchsorted(marked, at[dst[cross]])
        return cls(
            nodes=n,
            src=src,
            dst=dst,
            order=order,
            step=step,
            chain=chain,
            cross=cross,
            marked=marked,
            cross_src=cross_src,
            cross_dst=cross_dst,
        )

    def longest(self, weights: np.ndarray, keep: np.ndarray, max_passes: int = MAX_PASSES) -> int:
        """The length of the longest path over the edges where `keep`, with integer `weights` >= 0 (one per
        edge). Dropped edges are cross edges (see the module doc)."""
        if self.nodes == 0:
            return 0
        found = self._passes(weights, keep, max_passes)
        if found is None:
            return _rustworkx(self, weights, keep)  # it raises on a cycle or a negative weight, as before
        # along a chain the distances never fall (weights >= 0): the longest ends at a chain's tail
        return int(found[0].max()) if len(found[0]) else 0

    def distances(
        self, weights: np.ndarray, keep: np.ndarray, max_passes: int = MAX_PASSES
    ) -> np.ndarray | None:
        """Each node's longest-path distance over the edges where `keep` (0 where nothing enters it), or None
        where the passes cannot answer: a cycle, a negative weight, a dropped chain edge, more than
        `max_passes` passes."""
        if len(weights) == 0:  # nodes without edges: every distance is 0
            return np.zeros(self.nodes, dtype=np.int64)
        found = self._passes(weights, keep, max_passes)
        if found is None:
            return None
        arrival, prefix = found[1], found[2]
        # every node from the running maximum over the marked positions before it on its chain (a chain's
        # head is marked, and an unmarked node adds nothing to the maximum: see `_passes`)
        assert self.order is not None
        y = arrival - prefix[self.marked]
        low, high = int(y.min()), int(y.max())
        span = high - low + 1
        if abs(low) + (int(self.chain[-1]) + 1) * span >= _LIMIT:
            return None
        offset = self.chain * span
        terms = np.full(self.nodes, np.iinfo(np.int64).min // 2, dtype=np.int64)
        terms[self.marked] = y + offset[self.marked]
        dist = np.empty(self.nodes, dtype=np.int64)
        dist[self.order] = np.maximum.accumulate(terms) - offset + prefix
        return dist

    def _passes(
        self, weights: np.ndarray, keep: np.ndarray, max_passes: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(distance at each marked position, the best arrival over the cross edges there, the prefix sums of
        the chain weights over `order`), or None where the passes cannot answer.

        The passes run over the marked positions only (`marked`: the chains' heads and tails and the ends of
        the cross edges, a tenth of the nodes of a step of an inference trace): an unmarked node is no cross
        edge's source, so its distance is needed by no pass, and no cross edge's target, so its term in the
        running maximum (arrival 0 less the prefix) is at most its chain head's (the prefix never falls along
        a chain)."""
        w = weights.astype(np.int64)
        if len(w) == 0:
            return np.zeros(len(self.marked), dtype=np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
        if self.order is None or (w < 0).any() or not keep[self.step[self.step >= 0]].all():
            return None
        prefix = np.cumsum(take_or(w, self.step, 0))
        kept = keep[self.cross]
        c_src, c_dst, c_w = self.cross_src[kept], self.cross_dst[kept], w[self.cross[kept]]
        firsts = np.flatnonzero(np.r_[True, c_dst[1:] != c_dst[:-1]]) if len(c_dst) else c_dst
        targets = c_dst[firsts]
        m_prefix = prefix[self.marked]
        m_chain = self.chain[self.marked]
        chains = int(self.chain[-1]) + 1
        dist = np.zeros(len(self.marked), dtype=np.int64)
        arrival = np.zeros(len(self.marked), dtype=np.int64)
        for _ in range(max_passes):
            arrival[:] = 0
            if len(c_dst):
                arrival[targets] = np.maximum.reduceat(dist[c_src] + c_w, firsts)
            y = arrival - m_prefix
            low, high = int(y.min()), int(y.max())
            span = high - low + 1
            if abs(low) + chains * span >= _LIMIT:
                return None
            # One running maximum over all chains: chain k's values are raised above every earlier chain's.
            offset = m_chain * span
            new = np.maximum.accumulate(y + offset) - offset + m_prefix
            if np.array_equal(new, dist):
                return dist, arrival, prefix
            dist = new
        return None

    def path(
        self, weights: np.ndarray, keep: np.ndarray, max_passes: int = MAX_PASSES
    ) -> tuple[int, np.ndarray] | None:
        """(length, edge indices in path order) of a longest path over the edges where `keep`, chosen as
        rustworkx's `dag_longest_path` chooses among equally long ones: each node's predecessor is the first
        kept edge (by index) that attains its distance, the path ends at the node with the greatest (distance,
        predecessor node), and between parallel edges of equal weight the first is taken; None where `distances` is
        None (the caller asks rustworkx)."""
        found = self.paths(weights, keep, np.zeros(self.nodes, dtype=np.int64), 1, max_passes)
        return None if found is None else found[0]

    def paths(
        self,
        weights: np.ndarray,
        keep: np.ndarray,
        node_window: np.ndarray,
        windows: int,
        max_passes: int = MAX_PASSES,
    ) -> list[tuple[int, np.ndarray]] | None:
        """`path` of each window of a graph that is the union of several windows' graphs (no edge between two
        of them; `node_window`: each node's window): the same choice within each window as its own graph
        gives, every window's path walked back at once."""
        dist = self.distances(weights, keep, max_passes)
        if dist is None:
            return None
        w = weights.astype(np.int64)
        none = np.empty(0, dtype=np.int64)
        if len(w) == 0:
            return [(0, none)] * windows
        kept = np.flatnonzero(keep)
        tight = kept[dist[self.src[kept]] + w[kept] == dist[self.dst[kept]]]
        into = np.full(self.nodes, len(w), dtype=np.int64)
        np.minimum.at(into, self.dst[tight], tight)  # the first attaining edge into each node
        has = into < len(w)
        # A node with no incoming edge is its own predecessor (rustworkx's tie-break on the path's end).
        parent = np.where(has, self.src[np.minimum(into, max(len(w) - 1, 0))], np.arange(self.nodes))
        # each window's end: its node with the greatest (distance, predecessor), the last of equals
        order = np.lexsort((parent, dist, node_window))
        last = order[np.r_[node_window[order][1:] != node_window[order][:-1], True]] if self.nodes else none
        ends = np.full(windows, -1, dtype=np.int64)
        ends[node_window[last]] = last
        ends = np.where((ends >= 0) & has[np.maximum(ends, 0)], ends, -1)
        # The predecessors from each end back to a node without one, all at once: each node's depth below its
        # root by pointer jumping, then the ends' ancestors by the binary digits of their distance in edges.
        depth = depths(np.where(has, parent, -1))
        if depth is None:  # the predecessors close a cycle (zero-weight edges around one): rustworkx raises
            return None
        counts = np.where(ends >= 0, depth[np.maximum(ends, 0)], 0)
        total = int(counts.sum())
        back = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        at = np.repeat(np.maximum(ends, 0), counts)
        table, level = parent, 0
        while (back >> level).any():
            hit = ((back >> level) & 1).astype(bool)
            at[hit] = table[at[hit]]
            table, level = table[table], level + 1
        edges = into[at]
        out = []
        for lo, hi in itertools.pairwise(np.r_[0, np.cumsum(counts)]):
            path = edges[lo:hi][::-1]
            out.append((int(w[path].sum()), path))
        return out

    def longest_per(
        self,
        weights: np.ndarray,
        keep: np.ndarray,
        node_window: np.ndarray,
        windows: int,
        max_passes: int = MAX_PASSES,
    ) -> np.ndarray:
        """`longest` of each window of a graph that is the union of several windows' graphs: the greatest
        distance among each window's marked nodes (a chain's tail is marked, and chains stay in their window);
        rustworkx's walk over each window's edges where the passes cannot answer."""
        out = np.zeros(windows, dtype=np.int64)
        if self.nodes == 0:
            return out
        found = self._passes(weights, keep, max_passes)
        if found is None:
            return _rustworkx_per_window(self, weights, keep, node_window, windows)
        if len(found[0]) and self.order is not None:
            np.maximum.at(out, node_window[self.order[self.marked]], found[0])
        return out


def _firsts(keys: np.ndarray, size: int) -> np.ndarray:
    """Where each key in `keys` (ints in [0, size)) occurs first."""
    first = np.full(size, len(keys), dtype=np.int64)
    rank = np.arange(len(keys), dtype=np.int64)
    np.minimum.at(first, keys, rank)
    return first[keys] == rank


def _payload(_source: int, _target: int, weight: int) -> int:
    return weight


def _rustworkx_per_window(
    chains: Chains, weights: np.ndarray, keep: np.ndarray, node_window: np.ndarray, windows: int
) -> np.ndarray:
    """`_rustworkx` of each window's edges: the edges grouped by window once, each window's walk over its own
    nodes (renumbered), so all of them cost what one walk over the whole graph does."""
    edges = np.flatnonzero(keep)
    edge_window = node_window[chains.src[edges]]
    by_window = edges[np.argsort(edge_window, kind="stable")]
    cuts = np.searchsorted(np.sort(edge_window), np.arange(windows + 1))
    w = weights.astype(np.int64)
    out = np.zeros(windows, dtype=np.int64)
    for k, (lo, hi) in enumerate(itertools.pairwise(cuts)):
        mine = by_window[lo:hi]
        if not len(mine):
            continue
        nodes, index = np.unique(np.r_[chains.src[mine], chains.dst[mine]], return_inverse=True)
        dag = rx.PyDiGraph(check_cycle=False, multigraph=True)
        dag.add_nodes_from(range(len(nodes)))
        pairs = index.reshape(2, -1)
        dag.add_edges_from(list(zip(pairs[0].tolist(), pairs[1].tolist(), w[mine].tolist(), strict=True)))
        out[k] = int(rx.dag_longest_path_length(dag, weight_fn=_payload))
    return out


def _rustworkx(chains: Chains, weights: np.ndarray, keep: np.ndarray) -> int:
    """The same length by rustworkx's walk over a topological order (as `path._longest` computes it)."""
    dag = rx.PyDiGraph(check_cycle=False, multigraph=True)
    dag.add_nodes_from(range(chains.nodes))
    w = weights.astype(np.int64)[keep].tolist()
    dag.add_edges_from(list(zip(chains.src[keep].tolist(), chains.dst[keep].tolist(), w, strict=True)))
    return int(rx.dag_longest_path_length(dag, weight_fn=_payload))
