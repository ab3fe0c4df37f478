"""`diff` across hardware: the same model recorded on an MI300X and an H100 (the corpus' TraceLens pairs), matched
operator by operator and input shapes. Coverage of each side's GPU time, each matched row's time against the
per-trace `ops --by-shape` table, the vendor-specific operators matched under one name, the verdict, and when
the comparison runs."""

from __future__ import annotations

import json

import pytest

from browser import chromium, open_report, wait_for  # noqa: F401  (fixtures)
from conftest import corpus_path
from opscope.analysis.compare.hardware import ALIASES

PAIRS = (
    "Qwen_Qwen1.5-0.5B-Chat__1016005",
    "Falconsai_nsfw_image_detection__1016002",
    "gaunernst_bert-small-uncased__1016001",
)


def _paths(model: str) -> tuple[str, str]:
    return (
        str(corpus_path(f"tracelens/mi300__{model}.json.gz")),
        str(corpus_path(f"tracelens/h100__{model}.json.gz")),
    )


def _json(cli, *args: str) -> dict:
    done = cli(*args, "--format", "json")
    assert done.code == 0, done.err
    return json.loads(done.out)


@pytest.mark.corpus
@pytest.mark.parametrize("model", PAIRS)
def test_matched_rows_cover_each_side_and_equal_the_ops_table(cli, model: str) -> None:
    base, new = _paths(model)
    hardware = _json(cli, "diff", base, new, "--top", "0")["hardware"]
    assert hardware["coverage_base"] >= 0.95 and hardware["coverage_new"] >= 0.95, hardware
    assert hardware["rows_total"] == len(hardware["rows"])
    for side, path in (("base", base), ("new", new)):
        ops = _json(cli, "ops", path, "--by-shape", "--top", "0")
        self_us = {(r["name"], r["input_dims"]): r["gpu_self_us"] for r in ops["rows"]}
        rows = [
            r
            for r in hardware["rows"]
            if r["match"] == "op and shapes" and r["op"] not in {a for a, _ in ALIASES.values()}
        ]
        assert rows
        for row in rows:
            assert row[side]["gpu_time_us"] == pytest.approx(self_us[(row["op"], row["shape"])], abs=1e-3), (
                row
            )
        # nothing is dropped: every row of a side adds up to its GPU time
        total = sum(r[side]["gpu_time_us"] for r in hardware["rows"] if r[side])
        assert total == pytest.approx(hardware[f"{side}_gpu_time_us"], abs=0.01)


@pytest.mark.corpus
def test_vendor_operators_meet_under_one_name(cli) -> None:
    """cuDNN's and MIOpen's convolutions (MIOpen's call also lists the bias) are one row."""
    hardware = _json(cli, "diff", *_paths("Falconsai_nsfw_image_detection__1016002"), "--top", "0")[
        "hardware"
    ]
    (conv,) = [r for r in hardware["rows"] if r["op"] == "convolution"]
    assert conv["match"] == "op and shapes" and conv["shape"] == "[[4,3,224,224],[768,3,16,16]]"
    assert "MIOpen" in conv["base"]["library"] and "CUTLASS" in conv["new"]["library"]


@pytest.mark.corpus
def test_the_verdict_names_what_carries_the_difference(cli) -> None:
    hardware = _json(cli, "diff", *_paths("gaunernst_bert-small-uncased__1016001"), "--top", "0")["hardware"]
    biggest = max((r for r in hardware["rows"] if r["match"]), key=lambda r: abs(r["delta_us"]))
    assert biggest["op"] == "attention_forward" and biggest["delta_us"] < 0  # the H100 wins most on attention
    verdict = " ".join(hardware["verdict"])
    assert "NEW wins most on: attention_forward" in verdict and "NEW loses most on: aten::addmm" in verdict
    assert any("built for sm80 on an sm90 GPU" in n for n in hardware["library_notes"])
    text = cli("diff", *_paths("gaunernst_bert-small-uncased__1016001"), "--width", "120").out
    assert "Operators across hardware" in text and "matched: 100.0% of BASE's GPU time" in text
    markdown = cli("diff", *_paths("gaunernst_bert-small-uncased__1016001"), "--format", "markdown").out
    assert "| `attention_forward` | `[[1,141,8,64],[1,141,8,64],[1,141,8,64]]` | op and shapes |" in markdown


@pytest.mark.corpus
def test_it_runs_when_the_gpus_differ_or_when_asked(cli) -> None:
    base, new = _paths("gaunernst_bert-small-uncased__1016001")
    assert "hardware" in _json(cli, "diff", base, new)  # different GPUs
    assert "hardware" not in _json(cli, "diff", base, new, "--match", "kernels")
    assert "hardware" not in _json(cli, "diff", new, new)  # one GPU
    assert "hardware" in _json(cli, "diff", new, new, "--match", "ops")


@pytest.mark.corpus
@pytest.mark.browser
def test_the_diff_page_shows_the_operators_across_hardware(cli, tmp_path, open_report) -> None:  # noqa: F811
    base, new = _paths("gaunernst_bert-small-uncased__1016001")
    out = tmp_path / "diff.html"
    assert cli("diff", base, new, "--html", out).code == 0
    opened = open_report(out)
    page = opened.page
    wait_for(page, "window.opscopeReady !== undefined")
    assert opened.problems() == []
    assert page.locator("#hardware").is_visible()
    assert page.locator("#hardware-rows tbody tr").count() == 16
    first = page.locator("#hardware-rows tbody tr").first.locator("td")
    assert first.nth(0).inner_text() == "attention_forward" and "FlashAttention" in first.nth(8).inner_text()
    assert page.locator("#hardware-chart canvas").count() == 1  # % of each GPU's own peak, as bars
    opened.screenshot("diff-hardware.png", "#hardware")
    same = tmp_path / "same.html"
    assert cli("diff", new, new, "--html", same).code == 0
    page = open_report(same).page
    wait_for(page, "window.opscopeReady !== undefined")
    assert page.locator("#hardware").is_hidden() and page.locator('#nav a[href="#hardware"]').is_hidden()


@pytest.mark.corpus
def test_a_pytorch_trace_against_a_jax_xplane(cli) -> None:
    """Across frameworks aten and HLO operators share no names: the work meets at the kernel categories both
    run, and what has no partner (PyTorch's attention kernels, which XLA fused into GEMMs and elementwise
    kernels) is listed on its side, not dropped."""
    torch_trace = str(corpus_path("tracelens/mi300__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"))
    jax_trace = str(corpus_path("tracelens/mi300__jax08_attention__tw003.xplane.pb"))
    hardware = _json(cli, "diff", torch_trace, jax_trace, "--match", "ops", "--top", "0")["hardware"]
    by_kernels = {r["op"]: r for r in hardware["rows"] if r["match"] == "ops by kernel category"}
    assert {"(other work): gemm", "(other work): elementwise"} <= set(by_kernels)
    assert hardware["coverage_new"] == 1.0 and 0.8 < hardware["coverage_base"] < 1.0
    unmatched = {r["op"] for r in hardware["rows"] if r["match"] is None}
    assert "attention_forward" in unmatched
    for side in ("base", "new"):
        total = sum(r[side]["gpu_time_us"] for r in hardware["rows"] if r[side])
        assert total == pytest.approx(hardware[f"{side}_gpu_time_us"], abs=0.01)


@pytest.mark.corpus
def test_projections_at_the_other_gpus_efficiency(cli) -> None:
    """Where both sides are sized and bound alike: the slower side's time at the faster side's percent of its own
    peak = its time x its percent / the other's (recomputed from the rows)."""
    hardware = _json(cli, "diff", *_paths("gaunernst_bert-small-uncased__1016001"), "--top", "0")["hardware"]
    assert hardware["projections"]
    gelu = next(r for r in hardware["rows"] if r["op"] == "aten::gelu" and r["shape"] == "[[1,141,2048],[]]")
    slow, fast = gelu["base"], gelu["new"]  # the H100 is faster on it
    projected_ms = slow["gpu_time_us"] * slow["pct_of_peak"] / fast["pct_of_peak"] / 1e3
    line = next(p for p in hardware["projections"] if "aten::gelu [[1,141,2048],[]]" in p)
    assert line.startswith(hardware["base_device"]) and f"it would take {projected_ms:,.3f} ms" in line
