"""`opscope diff`'s findings (report/findings_diff.py, docs/advice.md): a rule not evaluated on one side, or
one whose events the two GPUs' vendors name differently, is "not comparable", never fixed or new."""

from __future__ import annotations

import json

import pytest

from browser import chromium, open_report, wait_for  # noqa: F401  (fixtures)
from conftest import corpus_path
from opscope.analysis.findings import NOT_EVALUATED, Advice, Finding, RuleOutcome
from opscope.report.findings_diff import findings_changes, vendor

RESNET_NO_PROPS = (
    "kineto/plugin_samples_resnet50_num_workers_0_worker0.pt.trace.json.gz"  # no deviceProperties
)
RESNET_V100 = "kineto/tb_plugin_samples_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz"


@pytest.mark.corpus
def test_rule_not_evaluated_on_one_side_is_not_comparable(cli) -> None:
    """sglang decode: a CUDA-graph capture (BASE, where the idle rules cannot run: not steady state) against a
    decode run (NEW, where they fire): its low-utilisation finding is not "new" but not comparable, with the
    reason."""
    base = corpus_path("tracelens/inference__sglang_decode__capture_traces__bs_32_rank0.json.gz")
    new = corpus_path("tracelens/inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz")
    data = json.loads(cli("diff", base, new, "--format", "json").out)["findings"]
    assert "low_utilization_windows" not in {f["id"] for f in data["new"] + data["fixed"]}
    (item,) = [f for f in data["not_comparable"] if f["id"] == "low_utilization_windows"]
    assert item["reason"].startswith("not evaluated on BASE: the window is not steady state")
    table = cli("diff", base, new, "--width", "250").out
    assert "findings not comparable: low_utilization_windows (not evaluated on BASE" in table


@pytest.mark.corpus
@pytest.mark.browser
def test_diff_page_lists_what_is_not_comparable(cli, tmp_path, open_report) -> None:  # noqa: F811
    """The diff page's findings section says what the CLI says: the not-comparable rule with its reason."""
    base = corpus_path("tracelens/inference__sglang_decode__capture_traces__bs_32_rank0.json.gz")
    new = corpus_path("tracelens/inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz")
    page_path = tmp_path / "diff.html"
    assert cli("diff", base, new, "--html", page_path).code == 0
    opened = open_report(page_path)
    wait_for(opened.page, "window.opscopeReady !== undefined")
    assert opened.problems() == []
    rows = opened.page.locator("#findings-not-comparable tbody tr")
    text = [rows.nth(i).inner_text() for i in range(rows.count())]
    assert any("low_utilization_windows" in t and "not evaluated on BASE" in t for t in text), text


def _finding(rule: str) -> Finding:  # hand-made: the fields diff reads
    return Finding(rule, "warn", rule, 1000, 0.1, "m", 1.0, 0.0, (), "a", "own", 500)


def test_vendor_naming_is_not_comparable() -> None:
    """Hand-made advice: a pageable-copy finding on the NVIDIA side only, a gpu_gaps finding on the AMD side
    only. Copies are named differently by the vendors (not comparable); idle gaps are not (new)."""
    base = Advice(findings=(_finding("pageable_memcpy"),), rules_checked=("pageable_memcpy", "gpu_gaps"))
    new = Advice(findings=(_finding("gpu_gaps"),), rules_checked=("pageable_memcpy", "gpu_gaps"))
    changes = findings_changes(base, new, ("nvidia", "amd"))
    assert [f["id"] for f in changes["new"]] == ["gpu_gaps"] and changes["fixed"] == []
    assert [f["id"] for f in changes["not_comparable"]] == ["pageable_memcpy"]
    same = findings_changes(base, new, ("nvidia", "nvidia"))
    assert [f["id"] for f in same["fixed"]] == ["pageable_memcpy"] and same["not_comparable"] == []
    skipped = Advice(
        findings=(),
        rules_checked=("gpu_gaps",),
        outcomes=(RuleOutcome("gpu_gaps", NOT_EVALUATED, reason="the window is not steady state"),),
    )
    assert findings_changes(skipped, new)["not_comparable"] == [
        {"id": "gpu_gaps", "reason": "not evaluated on BASE: the window is not steady state"}
    ]


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["NVIDIA H100 80GB HBM3"], "nvidia"),
        (["Tesla V100-SXM2-16GB"], "nvidia"),
        (["AMD Instinct MI300X VF"], "amd"),
        (["AMD Radeon Graphics"], "amd"),
        (["Hand-made GPU"], None),
        (["NVIDIA A100", "AMD Instinct MI250X"], None),
        ([], None),
    ],
)
def test_vendor_from_device_names(names: list[str], expected: str | None) -> None:
    assert vendor(names) == expected
