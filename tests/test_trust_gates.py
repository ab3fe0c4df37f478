"""Issue 18, gates that a typo cannot disarm, and per-step call counts that read as counts."""

from __future__ import annotations

import json
import re

import pytest

from conftest import corpus_path
from opscope.report.document import COUNT
from opscope.report.render import fmt

BASE = "hta/trace_compare_base_base.json.gz"
NEW = "hta/trace_compare_test_test.json.gz"
MI250 = "hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"


@pytest.mark.parametrize(
    ("option", "value", "what"),
    [
        ("--fail-kernel", "nosuchkernel:10", "matches no kernel"),
        ("--key-op", "nosuchop", "matches no operator"),
    ],
)
def test_a_pattern_that_matches_nothing_is_an_error(cli, option, value, what) -> None:
    result = cli("diff", corpus_path(BASE), corpus_path(NEW), option, value, "--no-cache")
    assert result.code == 2 and what in result.err and result.err.count("\n") == 1
    assert result.out == ""


def test_a_pattern_that_matches_still_gates(cli) -> None:
    data = json.loads(
        cli(
            "diff",
            corpus_path(BASE),
            corpus_path(NEW),
            "--fail-kernel",
            "Memcpy:1000",
            "--key-op",
            "aten::",
            "--format",
            "json",
            "--no-cache",
        ).out
    )
    assert data["gates"][0]["matched"] > 0 and data["passed"] is True


def test_count_format_has_at_most_one_decimal() -> None:
    assert fmt(4645 / 6, COUNT) == "774.2"  # the 774.167 of the issue
    assert fmt(12.0, COUNT) == "12" and fmt(1234.5, COUNT) == "1,234.5" and fmt(None, COUNT) == "—"


def test_per_step_call_columns_are_labelled_and_short(cli) -> None:
    # MI250 (2 steps in its step scope) vs the HTA excerpt (2 steps): kernels run 1, 3 or 5 times in 2 steps
    out = cli(
        "diff", corpus_path(MI250), corpus_path(BASE), "--format", "markdown", "--no-cache", "--top", "0"
    ).out
    lines = out.splitlines()
    header = next(line for line in lines if "Calls/step B" in line)
    cols = [c.strip() for c in header.strip("|").split("|")]
    b, n = cols.index("Calls/step B"), cols.index("Calls/step N")
    start = lines.index(header) + 2
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[start:end]]
    calls = [r[i] for r in rows for i in (b, n)]
    assert "0.5" in calls and "2.5" in calls
    assert all(re.fullmatch(r"[\d,]+(\.\d)?", c) for c in calls), calls
    whole = cli(
        "diff", corpus_path(MI250), corpus_path(BASE), "--format", "markdown", "--no-cache", "--no-per-step"
    ).out
    assert "Calls/step" not in whole and "| Calls B |" in whole
