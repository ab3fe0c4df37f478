"""Every Kineto trace of the corpus through `ops`, `tree` and `steps`: exit 0, the schema, an unattributed share
in [0, 1], and the same total GPU time in all three (it is the sum of all GPU activity durations, as in
`summary`). Also `--device` restricting the GPU side."""

from __future__ import annotations

import json

import pytest

from conftest import corpus_path
from test_corpus_summary import kineto_files

FILES = kineto_files()


@pytest.mark.corpus
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_commands_on_every_kineto_trace(cli, path) -> None:
    outputs = {}
    for command in ("summary", "ops", "tree", "steps"):
        result = cli("-q", command, path, "--format", "json")
        assert result.code == 0, (command, result.err)
        assert "Traceback" not in result.err
        outputs[command] = json.loads(result.out)
        assert outputs[command]["schema"] == f"opscope.{command}/1"
    for command in ("ops", "tree", "steps"):
        assert 0.0 <= outputs[command]["unattributed_share"] <= 1.0
    total = outputs["summary"]["totals"]["gpu_time_us"]
    assert outputs["ops"]["totals"]["gpu_time_us"] == pytest.approx(total, abs=1e-3)
    assert outputs["tree"]["gpu_time_us"] == pytest.approx(total, abs=1e-3)
    assert outputs["steps"]["gpu_time_us"] == pytest.approx(total, abs=1e-3)
    # ops attributes to ops and annotations; the tree also to nn.Module frames: it attributes at least as much.
    assert outputs["tree"]["unattributed_share"] <= outputs["ops"]["unattributed_share"] + 1e-9


def test_device_selection(cli) -> None:
    path = corpus_path("tracelens/inference__vllm_decode_full__graph_execution.json.gz")  # GPU 2 only
    on = {
        c: json.loads(cli(c, path, "--format", "json", "--device", "2").out) for c in ("ops", "tree", "steps")
    }
    off = {
        c: json.loads(cli(c, path, "--format", "json", "--device", "0").out) for c in ("ops", "tree", "steps")
    }
    assert on["ops"]["totals"]["gpu_time_us"] > 0 and off["ops"]["totals"]["gpu_time_us"] == 0
    assert on["tree"]["gpu_time_us"] > 0 and off["tree"]["root"]["children"] == []
    assert on["steps"]["devices"] == [2] and off["steps"]["devices"] == []
    assert all(r["gpu_total_us"] == 0 for r in off["ops"]["rows"])
