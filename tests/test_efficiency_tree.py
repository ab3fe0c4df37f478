"""The efficiency table's questions about enclosing ops (`base.nesting.RowTree`, which `efficiency.table` asks: the nearest enclosing op with
a property, the outermost one) against a plain-Python walk up each op's enclosing ops, on real traces' op trees
and on a hand-made forest with nested "sized" ops."""

from __future__ import annotations

import random

import numpy as np
import polars as pl
import pytest

import opscope
from conftest import corpus_path
from opscope.analysis.base.linking import link
from opscope.analysis.base.nesting import RowTree
from opscope.analysis.efficiency.table import _scopes

BERT = "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"
DLRM = "param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json"


def _walk(parent: list[int], wanted: list[bool]) -> tuple[list[int], list[int]]:
    """Plain Python: (nearest strictly enclosing wanted, outermost enclosing-or-self wanted), -1 for none."""
    nearest, outermost = [], []
    for i in range(len(parent)):
        near, outer, at = -1, i if wanted[i] else -1, parent[i]
        while at >= 0:
            if wanted[at]:
                near = at if near < 0 else near
                outer = at
            at = parent[at]
        nearest.append(near)
        outermost.append(outer)
    return nearest, outermost


def _check(tree: RowTree, wanted: np.ndarray) -> None:
    nearest, outermost = _walk(tree.parent.tolist(), wanted.tolist())
    assert tree.nearest(wanted).tolist() == nearest
    assert tree.outermost(wanted).tolist() == outermost


@pytest.mark.parametrize("relative", [BERT, DLRM])
def test_real_op_trees(relative: str) -> None:
    trace = opscope.load(corpus_path(relative))
    scopes, tree = _scopes(trace, link(trace))
    assert len(tree.rows) == scopes.height and (tree.parent >= 0).any()
    names = tree.aligned(scopes.select("row", pl.col("name").cast(pl.String)), "name")
    for pattern in ("^aten::", "linear|addmm|mm$", "Backward", "^nn.Module"):
        _check(tree, np.array([bool(pl.Series([n or ""]).str.contains(pattern)[0]) for n in names]))


def test_hand_made_forest() -> None:
    """Hand-made fixture (random, not a recording): parents before children, rows not contiguous."""
    for seed in range(40):
        rng = random.Random(seed)
        n = rng.randrange(1, 300)
        rows = sorted(rng.sample(range(10 * n), n))
        up = [-1 if i == 0 or rng.random() < 0.1 else rows[rng.randrange(0, i)] for i in range(n)]
        scopes = pl.DataFrame({"row": rows, "op_parent_row": [u if u >= 0 else None for u in up]})
        tree = RowTree.of(scopes.sample(fraction=1.0, shuffle=True, seed=seed), up="op_parent_row")
        assert tree.rows.tolist() == rows
        _check(tree, np.array([rng.random() < 0.3 for _ in range(n)]))
