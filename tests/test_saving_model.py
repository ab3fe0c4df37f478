"""`SavingModel` answers the advice's what-if questions with the path length alone, on graphs laid out once per
step (`lengths.Chains`) (issue 25: 96 steps x 5 questions took 15 s): its lengths must be exactly those of the full
`what_if` (the path found, its tables built), with every edge kept and with sync waits dropped (factor 0)."""

from __future__ import annotations

import pytest

import opscope
from conftest import corpus_path
from opscope.analysis.base.linking import link
from opscope.analysis.base.windows import select_windows
from opscope.analysis.critical_path.graph import build
from opscope.analysis.critical_path.lengths import Chains
from opscope.analysis.critical_path.path import (
    WhatIf,
    critical_path,
    scaled_weights,
    what_if,
    what_if_length,
)
from opscope.analysis.critical_path.stats import SavingModel

RESNET = "kineto/tb_plugin_samples_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz"
QUESTIONS = (
    [],
    [WhatIf.parse("enumerate\\(DataLoader\\).*:0")],  # the dataloader removed
    [WhatIf.parse("cudaMemcpyAsync|Memcpy:0.5")],
    [WhatIf.parse("cudaDeviceSynchronize|cudaStreamSynchronize|aten::item|aten::_local_scalar_dense:0")],
    [WhatIf.parse("aten::conv.*:0.7"), WhatIf.parse("aten::batch_norm:0")],
)


@pytest.fixture(scope="module")
def graphs():
    trace = opscope.load(corpus_path(RESNET))
    linkage = link(trace)
    return trace, [build(trace, linkage, w.start_ns, w.end_ns) for w in select_windows(trace, None)]


def test_path_length_equals_the_full_what_if(graphs):
    _, built = graphs
    dropped = 0
    for graph in built:
        chains = Chains.of(graph)
        assert chains.longest(*scaled_weights(graph, [])) == critical_path(graph, top=0).length_ns
        for rules in QUESTIONS:
            weights, keep = scaled_weights(graph, rules)
            dropped += int((~keep).sum())
            expected = what_if(graph, rules, top=0).length_ns
            assert chains.longest(weights, keep) == expected
            assert chains.longest(weights, keep, max_passes=0) == expected  # rustworkx's walk instead
            assert what_if_length(graph, rules) == expected
    assert dropped > 0  # the sync question dropped edges


def test_the_model_sums_the_same_savings_and_remembers_questions(graphs):
    trace, built = graphs
    model = SavingModel(trace)
    rules = [("cudaMemcpyAsync|Memcpy", 0.5), ("enumerate\\(DataLoader\\).*", 0.0)]
    parsed = [WhatIf.parse(f"{s}:{f}") for s, f in rules]
    expected = sum(critical_path(g, top=0).length_ns - what_if(g, parsed, top=0).length_ns for g in built)
    assert model.saving_ns(rules) == expected
    assert model.saving_ns(rules) == expected and len(model._asked) == 1  # asked twice, computed once
    assert model.saving_us(*rules[0]) * 1000 == pytest.approx(model.saving_ns(rules[:1]))
