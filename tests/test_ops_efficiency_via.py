"""`ops --efficiency` on the ops that hold the GPU time (issue 12): `ops` lists the innermost ops
(aten::addmm, aten::_flash_attention_forward, aten::native_layer_norm) while the efficiency model sizes the
outer ones (aten::linear, SDPA, aten::layer_norm); such a row shows its nearest sized ancestor's figures,
marked `via` it."""

from __future__ import annotations

import json

import pytest
from tests.conftest import corpus_path

import opscope
from opscope.analysis.efficiency.table import EfficiencyOptions, efficiency
from opscope.report.efficiency_view import row_data

BERT_H100 = "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"


@pytest.mark.parametrize("by_shape", [True, False])
def test_hot_inner_ops_show_their_ancestors_figures(cli, by_shape: bool) -> None:  # type: ignore[no-untyped-def]
    path = corpus_path(BERT_H100)
    shape = ("--by-shape",) if by_shape else ()  # ops is per name by default
    res = cli("ops", str(path), *shape, "--efficiency", "--top", "0", "--format", "json")
    assert res.code == 0, res.err
    rows = sorted(json.loads(res.out)["rows"], key=lambda r: -r["gpu_total_us"])
    eff = efficiency(opscope.load(path), EfficiencyOptions(by_shape=by_shape, top=0))
    own = {(r.op, r.shape): r for r in eff.rows}
    hot = [r for r in rows if r["kind"] == "cpu_op" and r["gpu_self_us"] > 0][:3]
    names = {r["name"] for r in hot}
    assert {"aten::addmm", "aten::_flash_attention_forward", "aten::native_layer_norm"} & names
    expected_via = {
        "aten::addmm": "aten::linear",
        "aten::_flash_attention_forward": "aten::scaled_dot_product_attention",
        "aten::native_layer_norm": "aten::layer_norm",
    }
    for row in hot:
        assert row["efficiency"] is not None, row["name"]  # no longer blank
        via = row["efficiency_via"]
        assert via is not None and via["op"] == expected_via[row["name"]]
        ancestor = own[(via["op"], via["shape"])]
        assert row["efficiency"] == row_data(ancestor)  # the ancestor's figures, exactly
        assert row["gpu_total_us"] == pytest.approx(ancestor.gpu_time_us, abs=1e-3)  # the same kernels
    for row in rows:  # ops with no GPU time (views, allocations) inherit nothing
        if not row["gpu_total_us"]:
            assert row["efficiency"] is None


def test_via_column_in_the_table(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("ops", str(corpus_path(BERT_H100)), "--efficiency", "--top", "3", "--format", "markdown")
    assert res.code == 0, res.err
    line = next(x for x in res.out.splitlines() if "aten::addmm" in x)
    assert "aten::linear" in line
