"""Corpus test: on every Kineto trace in ../shared/traces with GPU activity, each `summary` row's calls and
total equal an independent recomputation from the raw events (plain json, no opscope code)."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

import opscope
from conftest import TRACES

RAW_KINDS = {
    "kernel": "kernel",
    "Kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "Memcpy": "memcpy",
    "gpu_memset": "memset",
    "Memset": "memset",
    "mtia_ccp_events": "kernel",
}


def kineto_files() -> list[Path]:
    if not TRACES.is_dir():
        return []
    out = []
    for path in sorted(TRACES.rglob("*")):
        if path.name.endswith((".json", ".json.gz")) and path.is_file():
            opener = gzip.open if path.name.endswith(".gz") else open
            with opener(path, "rb") as handle:
                head = handle.read(65536)
            if b'"traceEvents"' in head or head.lstrip()[:1] == b"[":
                out.append(path)
    return out


def raw_events(path: Path) -> list[dict]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as handle:
        doc = json.loads(handle.read())
    return doc if isinstance(doc, list) else doc.get("traceEvents", [])


def recompute(path: Path) -> dict[tuple[str, str], tuple[int, int]]:
    """(name, kind) -> (calls, total ns), from raw events; durations as integer ns like opscope's contract."""
    acc: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for ev in raw_events(path):
        kind = RAW_KINDS.get(ev.get("cat"))
        if kind is None or ev.get("ph") != "X" or ev.get("dur") is None:
            continue
        row = acc[(ev.get("name") or "", kind)]
        row[0] += 1
        row[1] += round(ev["dur"] * 1000)
    return {k: (v[0], v[1]) for k, v in acc.items()}


FILES = kineto_files()


@pytest.mark.corpus
@pytest.mark.skipif(not FILES, reason=f"real-trace corpus not found at {TRACES} (set OPSCOPE_TRACES)")
@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(TRACES)))
def test_summary_rows_equal_raw_recomputation(path: Path) -> None:
    expected = recompute(path)
    trace = opscope.load(path)
    result = opscope.summary(trace, top=0)
    got = {(r.raw_name or r.name, r.kind): (r.calls, r.total_ns) for r in result.rows}  # as recorded
    assert set(got) == set(expected)
    for key, (calls, total) in expected.items():
        assert got[key][0] == calls, key
        # float microseconds -> ns may round differently by at most 1 ns per event
        assert abs(got[key][1] - total) <= calls, key
    assert result.gpu_calls == sum(c for c, _ in expected.values())
    assert result.rest is None
    if result.gpu_time_ns:
        assert abs(sum(r.share for r in result.rows) - 1.0) < 1e-9
