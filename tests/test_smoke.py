from __future__ import annotations

import json

from conftest import corpus_path


def test_summary_json_on_real_trace(cli):
    path = corpus_path("hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    result = cli("summary", path, "--format", "json", "--top", "0")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["schema"] == "opscope.summary/1"
    assert data["trace"]["kernels"] == 4350
