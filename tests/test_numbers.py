"""Numbers for people (issue 28): durations in ms with separators (us only under 1 ms), counts with the noun in
the right number, mean counts with at most one decimal, on real traces' terminal output."""

from __future__ import annotations

import re

from conftest import corpus_path
from opscope.report.numbers import duration, plural

MI250 = "hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"  # launch delays up to 6.5 ms, 3 syncs


def test_plural_and_duration() -> None:
    assert [
        plural(1, "call"),
        plural(2, "call"),
        plural(1_234, "byte"),
        plural(1, "copy"),
        plural(3, "copy"),
    ] == [
        "1 call",
        "2 calls",
        "1,234 bytes",
        "1 copy",
        "3 copies",
    ]
    assert duration(70_372_959) == "70.373 ms" and duration(615_120_000_000) == "615,120.000 ms"
    assert duration(12_787) == "12.787 us" and duration(None) == "—"


def test_analyze_facts_read_as_numbers_for_people(cli) -> None:  # type: ignore[no-untyped-def]
    out = cli("analyze", corpus_path(MI250), "--width", "200", "--no-color").out
    delay = next(line for line in out.splitlines() if "launch delay:" in line)
    assert "max 6.549 ms" in delay and "us over 14 kernels" not in delay
    assert re.search(r"p50 [\d.]+ us", delay)  # under 1 ms: microseconds
    assert "synchronisations: 3 calls" in out and "2 copies, 0 bytes" in out
    assert not re.search(r"\b1 (calls|bytes|kernels|copies)\b", out)


def test_mean_counts_have_at_most_one_decimal(cli) -> None:  # type: ignore[no-untyped-def]
    out = cli("ops", corpus_path(MI250), "--width", "200", "--no-color").out
    header = next(line for line in out.splitlines() if "Kernels/call (mean)" in line)
    start = header.index("Kernels/call (mean)")
    cells = [
        line[start : start + len("Kernels/call (mean)")].strip()
        for line in out.splitlines()[out.splitlines().index(header) + 2 :]
        if line.strip() and not line.startswith(" ─")
    ]
    values = [c for c in cells if re.fullmatch(r"[\d,]+(\.\d)?", c)]
    assert values and all(not re.search(r"\.\d\d", c) for c in values)


def test_ranks_times_are_milliseconds(cli) -> None:  # type: ignore[no-untyped-def]
    out = cli("ranks", corpus_path(MI250), "--width", "200", "--no-color").out
    assert "Step ms" in out and "GPU busy ms" in out and "Step/window us" not in out


def test_shapes_wrap_between_tensors_never_inside(cli) -> None:  # type: ignore[no-untyped-def]
    """`ops --by-shape` at 100 columns: the Input dims column wraps between tensors ("[1,141,8,64],"), never
    inside a tensor or a number (it was cut to "[[1,141,8,64" / "]," / ...)."""
    path = corpus_path("tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz")
    out = cli("ops", path, "--by-shape", "--width", "100", "--no-color").out
    assert out.count("[1,141,8,64]") >= 3  # the flash-attention q, k, v: each whole on its line
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if "Input dims" in line)
    start = lines[first].index("Input dims")
    for line in lines[first + 2 :]:
        if not line.strip():
            break  # the end of the first table
        cell = line[start:].split("  ")[0].strip()
        assert not cell.startswith(("]", ",")), line
