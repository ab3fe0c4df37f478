"""The benchmark's tiling logic, at a tiny size (the benchmark itself is run by hand: bench/bench_ranks.py)."""

from __future__ import annotations

import importlib.util
import json

from conftest import REPO, corpus_path


def test_tiled_copies_get_their_own_ranks(tmp_path) -> None:
    corpus_path("param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json")
    spec = importlib.util.spec_from_file_location("bench_ranks", REPO / "bench" / "bench_ranks.py")
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    folder = bench.tile(tmp_path, 3)
    infos = [json.loads((folder / f"rank{r}.json").read_text())["distributedInfo"] for r in range(3)]
    assert folder.parent == tmp_path
    assert [(i["rank"], i["world_size"]) for i in infos] == [(0, 3), (1, 3), (2, 3)]
