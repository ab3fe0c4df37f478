"""`opscope summary A B ...`: one table over several traces, merged from per-trace partials (real DLRM ranks)."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict

import pytest

import opscope
from conftest import corpus_path

RANKS = [
    f"param/dlrm_kineto/worker{i}_step_12.{stamp}.pt.trace.json"
    for i, stamp in enumerate(["1694128201545", "1694128201556", "1694128201554", "1694128201557"])
]


def raw_durations(paths) -> dict[tuple[str, str], list[int]]:
    """Independent recomputation: every GPU event of every file, durations in integer ns."""
    kinds = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
    out: dict[tuple[str, str], list[int]] = defaultdict(list)
    for path in paths:
        for ev in json.loads(path.read_text())["traceEvents"]:
            kind = kinds.get(ev.get("cat"))
            if kind and ev.get("ph") == "X" and ev.get("dur") is not None:
                out[(ev["name"], kind)].append(round(ev["dur"] * 1000))
    return out


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_many_traces_merge_exactly(cli, jobs: str) -> None:
    paths = [corpus_path(p) for p in RANKS]
    result = cli("summary", *paths, "--top", "0", "--format", "json", "--jobs", jobs)
    assert result.code == 0, result.err
    data = json.loads(result.out)
    expected = raw_durations(paths)
    got = {(r["name"], r["kind"]): r for r in data["rows"]}
    assert set(got) == set(expected)
    for key, durations in expected.items():
        row = got[key]
        assert row["calls"] == len(durations)
        assert row["total_us"] == pytest.approx(sum(durations) / 1e3, abs=1e-3)
        assert row["min_us"] == pytest.approx(min(durations) / 1e3) and row["max_us"] == pytest.approx(
            max(durations) / 1e3
        )
        if len(durations) > 1:
            assert row["stddev_us"] == pytest.approx(
                statistics.stdev(durations) / 1e3, rel=1e-6, abs=6e-4
            )  # JSON keeps 3 decimals
        median = statistics.median(durations) / 1e3
        low, high = (
            sorted(durations)[(len(durations) - 1) // 2] / 1e3,
            sorted(durations)[len(durations) // 2] / 1e3,
        )
        assert low * 0.99 - 1e-9 <= row["median_us"] <= high * 1.01 + 1e-9, (key, row["median_us"], median)
    assert data["traces"] == [str(p) for p in paths] and data["median_estimated"] is True
    assert data["totals"]["calls"] == sum(len(d) for d in expected.values())


def test_one_path_keeps_the_exact_single_trace_table(cli) -> None:
    path = corpus_path(RANKS[0])
    data = json.loads(cli("summary", path, "--top", "0", "--format", "json").out)
    assert data["traces"] == [] and data["median_estimated"] is False
    single = opscope.summary(opscope.load(path), top=0)
    assert [r["median_us"] for r in data["rows"]] == [round(r.median_ns / 1e3, 3) for r in single.rows]


def test_a_bad_file_among_many_is_one_line(cli, tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    result = cli("summary", corpus_path(RANKS[0]), bad, "--jobs", "1")
    assert result.code == 2 and "Traceback" not in result.err and "bad.json" in result.err
