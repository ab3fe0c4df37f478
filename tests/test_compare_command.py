"""`opscope compare T1 T2 T3...`: one column per trace, matched operator by operator and shapes, then by kernel
category; checked on the corpus' BERT-small recordings (MI300X, H100, and the MI300X one again)."""

from __future__ import annotations

import json

import pytest

from conftest import corpus_path

MI300 = "tracelens/mi300__gaunernst_bert-small-uncased__1016001.json.gz"
H100 = "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"


@pytest.mark.corpus
def test_three_traces_side_by_side(cli) -> None:
    a, b = str(corpus_path(MI300)), str(corpus_path(H100))
    done = cli("compare", a, b, a, "--top", "0", "--format", "json")
    assert done.code == 0, done.err
    out = json.loads(done.out)
    assert out["schema"] == "opscope.compare/1" and [t["label"] for t in out["traces"]] == ["A", "B", "C"]
    diff = json.loads(cli("diff", a, b, "--top", "0", "--format", "json").out)["hardware"]
    exact = {(r["op"], r["shape"]): r for r in diff["rows"] if r["match"] == "op and shapes"}
    rows = [r for r in out["rows"] if r["match"] == "op and shapes"]
    assert rows
    for row in rows:
        first, second, third = row["sides"]
        assert first == third  # the same trace twice
        pair = exact[(row["op"], row["shape"])]
        assert (first["gpu_time_us"], second["gpu_time_us"]) == (
            pair["base"]["gpu_time_us"],
            pair["new"]["gpu_time_us"],
        )
        assert row["fastest"] == ("A" if first["gpu_time_us"] <= second["gpu_time_us"] else "B")
    for i, trace in enumerate(out["traces"]):  # nothing dropped: each column adds up to its trace's GPU time
        total = sum(r["sides"][i]["gpu_time_us"] for r in out["rows"] if r["sides"][i])
        assert total == pytest.approx(trace["gpu_time_us"], abs=0.01)
        assert 0.85 < trace["coverage"] <= 1.0


def test_compare_needs_two_traces(cli) -> None:
    done = cli("compare", "x.json")
    assert done.code == 2 and "two or more traces" in done.err
