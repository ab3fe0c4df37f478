"""bench/make_big_trace.py: a trace tiled N times is N copies of the source, each later in time and with its
own ids. Checked on the raw JSON (exact decimals) and through opscope.load. Plus the ratio and target
arithmetic of bench/bench_summary.py on hand-made timings; nothing here is timed."""

from __future__ import annotations

import gzip
import itertools
import json
import sys
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import opscope
from conftest import REPO, corpus_path

sys.path.insert(0, str(REPO / "bench"))
from make_big_trace import ID_KEYS, make_big_trace

COPIES = 3
SOURCES = [
    # nanosecond-resolution float timestamps, python_function events with Python ids, memory events
    "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz",
    # integer-microsecond timestamps, ac2g flows, cuda_sync events
    "hta/critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz",
]


def _text(path: Path | str) -> bytes:
    with gzip.open(path) as handle:
        return handle.read()


def _document(path: Path) -> dict[str, Any]:
    # Decimal keeps every digit of epoch-scale microsecond timestamps
    document: dict[str, Any] = json.loads(_text(path), parse_float=Decimal)
    return document


def _shared_prefix(a: bytes, b: bytes) -> int:
    low, high = 0, min(len(a), len(b))
    while low < high:  # bisect on the length of the common prefix
        middle = (low + high + 1) // 2
        low, high = (middle, high) if a[:middle] == b[:middle] else (low, middle - 1)
    return low


def _ids(event: dict[str, Any]) -> dict[str, Any]:
    found = {key: event[key] for key in ("id",) if key in event}
    found.update(
        {key: value for key, value in (event.get("args") or {}).items() if key in ID_KEYS and key != "id"}
    )
    return found


def _kernel_totals(trace: opscope.Trace) -> dict[tuple[str, str], tuple[int, int]]:
    return {(row.name, row.kind): (row.calls, row.total_ns) for row in opscope.summary(trace, top=0).rows}


@pytest.fixture(scope="module", params=SOURCES)
def tiled(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    source = corpus_path(request.param)
    out = tmp_path_factory.mktemp("tiled") / "tiled.pt.trace.json.gz"
    return source, make_big_trace(source, out, copies=COPIES, plain=True)


def test_document_is_the_source_repeated(tiled: tuple[Path, Any]) -> None:
    source, result = tiled
    original, big = _document(source), _document(Path(result.path))
    assert {k: v for k, v in big.items() if k != "traceEvents"} == {
        k: v for k, v in original.items() if k != "traceEvents"
    }
    events, copy = original["traceEvents"], big["traceEvents"]
    assert result.events_per_copy == len(events)
    assert len(copy) == COPIES * len(events)
    assert Path(result.plain_path).read_bytes() == _text(result.path)
    assert result.uncompressed_bytes == Path(result.plain_path).stat().st_size
    # the output is the source text, byte for byte, with the later copies inserted after its last event
    text, tiled_text = _text(source), _text(result.path)
    head = _shared_prefix(text, tiled_text)
    tail = _shared_prefix(text[::-1], tiled_text[::-1])
    assert head + tail >= len(text)


def test_each_copy_is_shifted_in_time_and_ids_only(tiled: tuple[Path, Any]) -> None:
    source, result = tiled
    events, big = _document(source)["traceEvents"], _document(Path(result.path))["traceEvents"]
    n = len(events)
    for k in range(COPIES):
        for original, copy in zip(events, big[k * n : (k + 1) * n], strict=True):
            expected = dict(original)
            if "ts" in original:
                expected["ts"] = original["ts"] + k * result.shift_us  # exact: Decimal, whole microseconds
            ids = {
                key: value + k * result.id_stride
                if isinstance(value, int) and (value > 0 or key == "Ev Idx")
                else value
                for key, value in _ids(original).items()
            }
            if "id" in ids:
                expected["id"] = ids.pop("id")
            if ids:
                expected["args"] = {**original["args"], **ids}
            assert copy == expected


def test_copies_follow_each_other_and_never_share_ids(tiled: tuple[Path, Any]) -> None:
    _, result = tiled
    big = _document(Path(result.path))["traceEvents"]
    n = result.events_per_copy
    copies = [
        [e for e in big[k * n : (k + 1) * n] if e.get("ph") != "M" and "ts" in e] for k in range(COPIES)
    ]
    for earlier, later in itertools.pairwise(copies):
        assert max(e["ts"] + e.get("dur", 0) for e in earlier) < min(e["ts"] for e in later)
    checked = 0
    for key in ("correlation", "External id", "Python id"):
        per_copy = [
            {
                e["args"][key]
                for e in copy
                if isinstance((e.get("args") or {}).get(key), int) and e["args"][key] > 0
            }
            for copy in copies
        ]
        checked += bool(per_copy[0])
        assert len(set().union(*per_copy)) == sum(len(ids) for ids in per_copy), (
            f"{key} collides across copies"
        )
    assert checked >= 2


def test_opscope_sees_every_event_and_kernel_times_copies(tiled: tuple[Path, Any]) -> None:
    source, result = tiled
    original = opscope.load(source, cache=False)
    big = opscope.load(result.path, cache=False)
    assert big.events.height == COPIES * original.events.height
    once, tiled_totals = _kernel_totals(original), _kernel_totals(big)
    assert once, "the source has GPU activity"
    assert tiled_totals.keys() == once.keys()
    for key, (calls, total_ns) in once.items():
        assert tiled_totals[key] == (COPIES * calls, COPIES * total_ns)
    # the same totals from the raw JSON, independently of opscope
    raw: Counter[str] = Counter()
    for event in _document(Path(result.path))["traceEvents"]:
        if event.get("cat") == "kernel":
            raw[event["name"]] += 1
    assert {name: calls for (name, kind), (calls, _) in tiled_totals.items() if kind == "kernel"} == dict(raw)


def test_bench_summary_ratios_and_verdicts() -> None:
    # hand-made timings: only the arithmetic of ratios and PASS/FAIL/SKIP is under test here
    from bench_summary import LABELS, Run, ratios, targets

    runs = {name: Run(name, label) for name, label in LABELS.items()}
    for name, wall, rss in (
        ("floor", 0.5, 30),
        ("naive", 40.0, 5600),
        ("cold", 2.0, 400),
        ("warm", 0.8, 200),
        ("help", 0.05, 20),
        ("polars", 0.2, 60),
    ):
        runs[name].walls_s, runs[name].peak_rss_mb = [wall, wall * 2], rss
    runs["hta"].skipped = "--skip-hta"
    values = ratios(runs)
    assert values == {
        "naive_over_cold": 20.0,
        "hta_over_cold": None,
        "cold_over_floor": 4.0,
        "cold_over_warm": 2.5,
        "naive_over_warm": 50.0,
        "polars_over_help": 4.0,
        "opscope_peak_rss_mb": 400,
    }
    verdicts = {v["target"]: v["verdict"] for v in targets(values)}
    assert verdicts == {
        "vs naive": "PASS",
        "vs HTA": "SKIP",
        "vs floor": "PASS",
        "RSS": "PASS",
        "warm": "FAIL",
        "start": "PASS",
    }
