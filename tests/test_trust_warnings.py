"""Issue 18, warnings people can trust: a device warning only for a real model mismatch (not a trace without
deviceProperties, not device 0 vs device 1 of one job), missing ranks as ranges shown once, and the mismatch that
changes the meaning of a comparison first in every format."""

from __future__ import annotations

import json

from conftest import corpus_path
from handmade_traces import document, kernel, launch, step, write
from opscope.analysis.compare.mismatch import model_mismatch
from opscope.report.ranks_view import ranges

NO_DEVICE_PROPERTIES = "hta/trace_compare_base_base.json.gz"  # device named only by its index
A100 = "hta/critical_path_simple_add_benchmark_result_493459_1694039959_trace.json.gz"
A100_PCIE = "particle_transformer/run1_chrome_traces__single_epoch_forward_pass_batch_size_2.json"
V100 = "param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json"
RANK_34_OF_300 = "hta/cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"


def test_ranges_and_model_rules() -> None:
    assert ranges([5, 0, 2, 3, 4, 9, 10]) == "0, 2-5, 9-10"
    assert ranges([]) == ""
    assert model_mismatch(["device 0"], ["NVIDIA A100"]) is None
    assert model_mismatch(["device 0"], ["device 1"]) is None
    assert model_mismatch(["NVIDIA A100"], ["NVIDIA A100"]) is None
    assert model_mismatch(["NVIDIA A100"], ["Tesla V100"]) == ["NVIDIA A100", "Tesla V100"]


def test_diff_does_not_warn_when_one_trace_lacks_device_properties(cli) -> None:
    result = cli(
        "diff", corpus_path(NO_DEVICE_PROPERTIES), corpus_path(A100), "--format", "json", "--no-cache"
    )
    data = json.loads(result.out)
    assert result.code == 0
    assert data["mismatches"] == [] and not any("different devices" in w for w in data["warnings"])
    assert "different devices" not in result.err


def test_a100_v100_pair_warns_first_in_every_format(cli, tmp_path) -> None:
    a, b = corpus_path(A100_PCIE), corpus_path(V100)
    data = json.loads(cli("diff", a, b, "--format", "json", "--no-cache").out)
    assert len(data["mismatches"]) == 1 and "A100-PCIE-40GB" in data["mismatches"][0]
    assert "V100-SXM2-32GB" in data["mismatches"][0] and data["mismatches"][0] in data["warnings"]
    table = cli("diff", a, b, "--no-cache", "--width", "200").out.splitlines()
    assert table[0].startswith("opscope diff") and table[1].startswith("WARNING: different devices")
    assert (
        sum("different devices" in line for line in table) == 1
    )  # not repeated among the notes at the bottom
    markdown = cli("diff", a, b, "--no-cache", "--format", "markdown").out.splitlines()
    assert markdown[2].startswith("> **Warning:** different devices")
    assert cli("diff", a, b, "--no-cache", "--html", tmp_path / "d.html").code == 0
    html = (tmp_path / "d.html").read_text()
    # the alerts box opens <main>, before the first panel; the page script fills it from "mismatches"
    assert html.index('id="alerts"') < html.index('id="headline"')
    assert "OPS.alerts(D.mismatches)" in html


def test_a_two_rank_job_on_device_0_and_1_has_no_device_warning(tmp_path, cli) -> None:
    # hand-made: rank r runs its kernels on device r, and the traces have no deviceProperties
    for r in (0, 1):
        doc = document(
            [step(1, 1000, 1000), launch(1001, 1), kernel("gemm_kernel", 1005, 100, 1, device=r)],
            rank=r,
            world_size=2,
        )
        doc.pop("deviceProperties")
        write(tmp_path / f"rank{r}.json", doc)
    result = cli("ranks", tmp_path, "--format", "json", "--no-cache")
    data = json.loads(result.out)
    assert result.code == 0 and data["mismatches"] == []
    assert (
        not any("different devices" in w for w in data["warnings"]) and "different devices" not in result.err
    )


def test_missing_ranks_are_ranges_listed_once(cli) -> None:
    result = cli("ranks", corpus_path(RANK_34_OF_300), "--no-cache")
    assert result.code == 0
    assert result.out.count("0-33, 35-299") == 1 and "0-33, 35-299" not in result.err
    assert "299 of 300 ranks missing" in result.err and ", 36, " not in result.out + result.err
    data = json.loads(cli("ranks", corpus_path(RANK_34_OF_300), "--no-cache", "--format", "json").out)
    assert data["missing_ranges"] == "0-33, 35-299" and len(data["missing_ranks"]) == 299


def test_ranks_on_different_models_warn_first(tmp_path, cli) -> None:
    # hand-made: rank 1 recorded on another GPU model than rank 0
    for r, model in ((0, "NVIDIA A100-SXM4-80GB"), (1, "Tesla V100-SXM2-32GB")):
        doc = document(
            [step(1, 1000, 1000), launch(1001, 1), kernel("gemm_kernel", 1005, 100, 1)],
            rank=r,
            world_size=2,
            device=model,
        )
        write(tmp_path / f"rank{r}.json", doc)
    data = json.loads(cli("ranks", tmp_path, "--format", "json", "--no-cache").out)
    assert len(data["mismatches"]) == 1 and "A100-SXM4-80GB" in data["mismatches"][0]
    table = cli("ranks", tmp_path, "--no-cache", "--width", "200").out.splitlines()
    assert table[1].startswith("WARNING: the ranks ran on different devices")
    assert sum("different devices" in line for line in table) == 1
    assert cli("ranks", tmp_path, "--no-cache", "--html", tmp_path / "r.html").code == 0
    assert "OPS.alerts(D.mismatches)" in (tmp_path / "r.html").read_text()
