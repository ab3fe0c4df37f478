"""The what-if's length-only path (`critical_path.lengths`, what the advice's savings use): equal to the full
what-if's path length on real traces' step graphs, with the chains' passes and with rustworkx answering instead;
equal to a plain-Python longest path on hand-made random DAGs; each event's factor against a plain-Python walk up
its enclosing events; and the saving model's answers against the full what-if summed over the steps."""

from __future__ import annotations

import random
import re
from collections import deque

import numpy as np
import polars as pl
import pytest
import rustworkx as rx

import opscope
from conftest import corpus_path
from opscope.analysis.base.linking import link
from opscope.analysis.base.windows import select_windows
from opscope.analysis.critical_path.graph import Graph, build
from opscope.analysis.critical_path.lengths import Chains
from opscope.analysis.critical_path.path import (
    WhatIf,
    _rustworkx_path,
    critical_path,
    event_factors,
    scaled_weights,
    what_if,
    what_if_length,
)
from opscope.analysis.critical_path.stats import SavingModel

ALEXNET = "hta/critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz"
MULTI_STREAM = "hta/critical_path_cuda_event_sync_multi_stream_event_sync_trace.json.gz"
NCCL = "hta/nccl_parser_config_nccl_data.json.gz"
QWEN = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
AMD = "hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"
DLRM = "param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json"
RULES = (
    (),
    ("Synchronize:0",),
    (".*:0.5",),
    ("Synchronize|Memcpy|memcpy:0", "aten:::0.25"),
    ("gemm|conv|nccl|cutlass:0.3", "Launch:2.5"),
    ("aten:::0", ".*:1.7"),
)


def _graphs(name: str, limit: int = 3) -> list[Graph]:
    trace = opscope.load(corpus_path(name))
    linkage = link(trace)
    return [build(trace, linkage, w.start_ns, w.end_ns) for w in select_windows(trace, None)[:limit]]


@pytest.mark.parametrize("name", [ALEXNET, MULTI_STREAM, NCCL, QWEN, AMD, DLRM])
def test_length_equals_the_full_what_if(name: str) -> None:
    for graph in _graphs(name):
        chains = Chains.of(graph)
        assert graph.edges.height > 0
        for specs in RULES:
            rules = [WhatIf.parse(s) for s in specs]
            full = what_if(graph, rules, top=0).length_ns
            weights, keep = scaled_weights(graph, rules)
            assert chains.longest(weights, keep) == full, specs
            assert chains.longest(weights, keep, max_passes=0) == full, specs  # rustworkx's walk instead
            assert chains.longest(weights, keep, max_passes=2) == full, specs  # out of passes part way
            assert what_if_length(graph, rules) == full
        assert chains.longest(*scaled_weights(graph, [])) == critical_path(graph, top=0).length_ns


@pytest.mark.parametrize("name", [ALEXNET, MULTI_STREAM, NCCL, QWEN, AMD, DLRM])
def test_path_is_the_one_rustworkx_chooses(name: str) -> None:
    """The critical path itself (not only its length) by the chains' passes: the same edges, in the same order,
    as rustworkx's `dag_longest_path`, which chose it before (ties included: zero-weight edges abound)."""
    answered = 0
    for graph in _graphs(name):
        chains = Chains.of(graph)
        for specs in RULES:
            weights, keep = scaled_weights(graph, [WhatIf.parse(s) for s in specs])
            length, edges = _rustworkx_path(graph, weights, keep)
            found = chains.path(weights, keep)
            if found is None:  # the passes ran out: `_longest` asks rustworkx, as here
                continue
            answered += 1
            assert found[0] == length, specs
            assert found[1].tolist() == edges.tolist(), specs
    assert answered > 0


def _python_longest(nodes: int, edges: list[tuple[int, int, int]]) -> int:
    """Plain-Python longest path: Kahn's topological order, each node the best of its incoming edges, else 0."""
    incoming: list[list[tuple[int, int]]] = [[] for _ in range(nodes)]
    outgoing: list[list[int]] = [[] for _ in range(nodes)]
    indegree = [0] * nodes
    for s, d, w in edges:
        incoming[d].append((s, w))
        outgoing[s].append(d)
        indegree[d] += 1
    ready = deque(v for v in range(nodes) if indegree[v] == 0)
    dist = [0] * nodes
    while ready:
        v = ready.popleft()
        dist[v] = max((dist[s] + w for s, w in incoming[v]), default=0)
        for d in outgoing[v]:
            indegree[d] -= 1
            if indegree[d] == 0:
                ready.append(d)
    return max(dist, default=0)


def _random_graph(rng: random.Random, events: int, edges: int) -> Graph:
    """Hand-made fixture (random, not a recording): a DAG over 2 * `events` nodes in a shuffled order, with
    parallel edges, zero weights, and a third of the edges flagged as blocking-call waits."""
    nodes = 2 * events
    rank = list(range(nodes))
    rng.shuffle(rank)
    pairs = []
    for _ in range(edges):
        a, b = rng.sample(range(nodes), 2)
        src, dst = (a, b) if rank[a] < rank[b] else (b, a)
        pairs.append((src, dst))
    pairs += pairs[: edges // 10]  # parallel edges
    ts = [rng.randrange(0, 10_000) for _ in range(events)]
    return Graph(
        start_ns=0,
        end_ns=20_000,
        events=pl.DataFrame(
            {"ts_ns": ts, "end_ns": [t + rng.randrange(0, 5_000) for t in ts]},
            schema={"ts_ns": pl.Int64, "end_ns": pl.Int64},
        ),
        edges=pl.DataFrame(
            {
                "src": [s for s, _ in pairs],
                "dst": [d for _, d in pairs],
                "weight_ns": [rng.choice([0, rng.randrange(0, 1_000_000)]) for _ in pairs],
                "sync": [rng.random() < 0.3 for _ in pairs],
            },
            schema={"src": pl.Int64, "dst": pl.Int64, "weight_ns": pl.Int64, "sync": pl.Boolean},
        ),
    )


@pytest.mark.parametrize("seed", range(12))
def test_length_equals_a_plain_python_longest_path(seed: int) -> None:
    rng = random.Random(seed)
    graph = _random_graph(rng, events=rng.randrange(1, 300), edges=rng.randrange(0, 1_500))
    chains = Chains.of(graph)
    src, dst = graph.edges["src"].to_list(), graph.edges["dst"].to_list()
    weights = graph.edges["weight_ns"].to_numpy()
    sync = graph.edges["sync"].to_numpy()
    for keep in (
        np.ones(len(src), dtype=bool),
        ~sync | (np.arange(len(src)) % 2 == 0),  # some waits dropped, as a what-if drops them
        np.array([rng.random() < 0.7 for _ in src], dtype=bool),  # any edges dropped: rustworkx answers
    ):
        kept = [(s, d, int(w)) for s, d, w, k in zip(src, dst, weights, keep, strict=True) if k]
        expected = _python_longest(graph.nodes, kept)
        assert chains.longest(weights, keep) == expected
        assert chains.longest(weights, keep, max_passes=1) == expected
        found = chains.path(weights, keep)
        if found is not None:  # a path: joined edge to edge, kept, its weights summing to the longest length
            length, edges = found
            assert length == expected == int(weights[edges].sum())
            assert keep[edges].all()
            assert (
                graph.edges["dst"].to_numpy()[edges[:-1]] == graph.edges["src"].to_numpy()[edges[1:]]
            ).all()
            assert length == _rustworkx_path(graph, weights, keep)[0]


@pytest.mark.parametrize("sync", [[False] * 4, [False, False, False, True]])
def test_a_cycle_raises_as_rustworkx_does(sync: list[bool]) -> None:
    """Hand-made fixture: two events whose edges close a loop (of chain edges only, or through a wait, a cross
    edge); the full what-if raises DAGHasCycle, and so does the length."""
    graph = Graph(
        start_ns=0,
        end_ns=10,
        events=pl.DataFrame({"ts_ns": [0, 5], "end_ns": [4, 9]}),
        edges=pl.DataFrame(
            {"src": [0, 1, 2, 3], "dst": [1, 2, 3, 0], "weight_ns": [1, 1, 1, 1], "sync": sync}
        ),
    )
    weights, keep = graph.edges["weight_ns"].to_numpy(), np.ones(4, dtype=bool)
    with pytest.raises(rx.DAGHasCycle):
        Chains.of(graph).longest(weights, keep)


def test_nodes_without_edges() -> None:
    """Hand-made fixture: events and no edge (a graph the builder never makes, but a length of 0, not an
    IndexError, if it did)."""
    graph = Graph(
        start_ns=0,
        end_ns=10,
        events=pl.DataFrame({"ts_ns": [0, 5], "end_ns": [4, 9]}),
        edges=pl.DataFrame(
            schema={"src": pl.Int64, "dst": pl.Int64, "weight_ns": pl.Int64, "sync": pl.Boolean}
        ),
    )
    none, kept = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
    assert Chains.of(graph).longest(none, kept) == 0
    length, path = Chains.of(graph).path(none, kept)  # type: ignore[misc]
    assert length == 0 and len(path) == 0


def test_a_zero_weight_cycle_through_a_wait_raises() -> None:
    """Hand-made fixture: a loop of zero-weight edges closed by a wait (a cross edge). The passes settle at once
    (nothing grows), but the predecessors close the loop: the path is left to rustworkx, which raises."""
    graph = Graph(
        start_ns=0,
        end_ns=10,
        events=pl.DataFrame({"ts_ns": [0, 5], "end_ns": [4, 9]}),
        edges=pl.DataFrame(
            {
                "src": [0, 1, 2, 3],
                "dst": [1, 2, 3, 0],
                "weight_ns": [0, 0, 0, 0],
                "sync": [False] * 3 + [True],
            }
        ),
    )
    weights, keep = graph.edges["weight_ns"].to_numpy(), np.ones(4, dtype=bool)
    assert Chains.of(graph).path(weights, keep) is None
    with pytest.raises(rx.DAGHasCycle):
        critical_path(graph)


def test_event_factors_against_a_walk_up_the_parents() -> None:
    graph = _graphs(ALEXNET, limit=1)[0]
    names = graph.events["name"].fill_null("").to_list()
    parent = graph.events["parent"].to_list()
    launch = graph.events["launch"].to_list()
    for specs in RULES[1:]:
        rules = [WhatIf.parse(s) for s in specs]
        own, matched = [], []
        for name in names:
            f, hit = 1.0, False
            for rule in rules:
                if re.search(rule.pattern, name):
                    f, hit = f * rule.factor, True
            own.append(f)
            matched.append(hit)
        expected = []
        for e in range(len(names)):
            up = e
            while up >= 0 and not matched[up]:
                up = parent[up]
            expected.append(own[up] if up >= 0 else 1.0)
        for e in range(len(names)):
            if launch[e] >= 0 and not matched[e]:
                expected[e] = expected[launch[e]]
        assert event_factors(graph, rules).tolist() == expected, specs


@pytest.mark.parametrize("name", [ALEXNET, AMD])
def test_saving_model_equals_the_full_what_if(name: str) -> None:
    trace = opscope.load(corpus_path(name))
    linkage = link(trace)
    graphs = [build(trace, linkage, w.start_ns, w.end_ns) for w in select_windows(trace, None)]
    model = SavingModel(trace, None, linkage)
    for specs in RULES:
        pairs = [(s.rpartition(":")[0], float(s.rpartition(":")[2])) for s in specs]
        rules = [WhatIf.parse(s) for s in specs]
        expected = sum(critical_path(g, top=0).length_ns - what_if(g, rules, top=0).length_ns for g in graphs)
        assert model.saving_ns(pairs) == expected
        assert model.saving_ns(pairs) == expected  # asked again: from memory
    assert model.saving_us("Synchronize", 0.0) == model.saving_ns([("Synchronize", 0.0)]) / 1000.0
