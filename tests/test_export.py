"""`opscope export`: trimmed traces equal a direct filter of the original (plain json), reload in opscope, and
keep only whole flows; folded stacks add up to the GPU time of `summary`."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

import opscope
from conftest import corpus_path
from rawfixtures import hostile_trace
from reference import GPU_CATS, load_doc, ns, window
from reference import load as raw_events

V100 = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
NCCL = "hta/nccl_parser_config_nccl_data.json.gz"
GPU_PLACED = {*GPU_CATS, "gpu_user_annotation"}


def expected_events(
    events: list[dict[str, Any]], windows: list[tuple[int, int]] | None, streams: set[int] | None = None
) -> list[dict[str, Any]]:
    """The export rules (docs/reports.md) applied to the raw events, independently of opscope's code."""

    def placed_out(e: dict[str, Any]) -> bool:
        if streams is None or e.get("cat") not in GPU_PLACED:
            return False
        return int(e.get("args", {}).get("stream", e.get("tid"))) not in streams

    def in_window(e: dict[str, Any]) -> bool:
        if windows is None or "ts" not in e:
            return True
        ts, dur = ns(e["ts"]), ns(e["dur"]) if "dur" in e else None
        return any((ts < hi and ts + dur > lo) if dur else lo <= ts < hi for lo, hi in windows)

    places: dict[tuple[str, str], bool] = defaultdict(bool)
    for e in events:
        if e.get("cat") in GPU_PLACED:
            places[(str(e["pid"]), str(e["tid"]))] |= not placed_out(e)
    dropped = {p for p, kept in places.items() if not kept} if streams is not None else set()
    out, flows = [], defaultdict(list)
    for e in events:
        if e.get("ph") == "M":
            out.append(e)
        elif e.get("ph") in ("s", "t", "f"):
            ok = (str(e["pid"]), str(e["tid"])) not in dropped and in_window(e)
            flows[(e.get("cat"), e.get("name"), e.get("id"))].append((e, ok))
        elif not placed_out(e) and in_window(e):
            out.append(e)
    for members in flows.values():
        if all(ok for _, ok in members):
            out.extend(e for e, _ in members)
    return out


def key(e: dict[str, Any]) -> tuple:
    return (
        e.get("ph"),
        e.get("cat"),
        e.get("name"),
        str(e.get("pid")),
        str(e.get("tid")),
        str(e.get("ts")),
        str(e.get("id")),
    )


def check_trimmed(out: Path, source: Path, expected: list[dict[str, Any]]) -> dict[str, Any]:
    doc = load_doc(out)
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    assert Counter(map(key, doc["traceEvents"])) == Counter(map(key, expected))
    original = load_doc(source)
    for name in ("deviceProperties", "distributedInfo", "schemaVersion"):
        if isinstance(original, dict) and name in original:
            assert doc[name] == original[name]
    # opscope reads the trimmed file back with exactly the expected events per kind.
    reloaded = opscope.load(out, cache=False)
    assert reloaded.count() == len(expected)
    kernels = sum(1 for e in expected if e.get("cat") in ("kernel", "Kernel") and e.get("ph") == "X")
    assert opscope.summary(reloaded, top=0, kinds=("kernel",)).selected_calls == kernels
    return doc


def test_export_steps(cli, tmp_path) -> None:
    source = corpus_path(V100)
    events = raw_events(source)
    out = tmp_path / "small.json.gz"
    result = cli("export", source, "--steps", "102-103", "-o", out)
    assert result.code == 0, result.err
    steps = {
        e["name"]: e
        for e in events
        if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") == "user_annotation"
    }
    lo = ns(steps["ProfilerStep#102"]["ts"])
    hi = ns(steps["ProfilerStep#103"]["ts"]) + ns(steps["ProfilerStep#103"]["dur"])
    expected = expected_events(events, [(lo, hi)])
    assert 0 < len(expected) < len(events)
    with gzip.open(out, "rb") as handle:
        json.loads(handle.read())  # plain valid JSON (what Perfetto and chrome://tracing read)
    check_trimmed(out, source, expected)


def test_export_window_relative_to_trace_start(cli, tmp_path) -> None:
    source = corpus_path(V100)
    events = raw_events(source)
    out = tmp_path / "window.json"
    assert cli("export", source, "--window", "1000:2500.5", "-o", out).code == 0
    start, _ = window(events)
    expected = expected_events(events, [(start + 1_000_000, start + 2_500_500)])
    check_trimmed(out, source, expected)


def test_export_stream_keeps_only_whole_flows(cli, tmp_path) -> None:
    source = corpus_path(NCCL)
    events = raw_events(source)
    out = tmp_path / "stream.json.gz"
    assert cli("export", source, "--stream", "40", "-o", out).code == 0
    expected = expected_events(events, None, streams={40})
    doc = check_trimmed(out, source, expected)
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    assert kernels and all(e["args"]["stream"] == 40 for e in kernels)
    flows = [e for e in doc["traceEvents"] if e.get("cat") == "ac2g"]
    assert Counter(e["ph"] for e in flows)["f"] > 0
    assert not [e for e in flows if (e["pid"], e["tid"]) == (0, 7)]  # no arrow into the dropped stream


def test_export_errors(cli, tmp_path) -> None:
    source = corpus_path(V100)
    for args, message in [
        ((), "needs --folded"),
        (("--steps", "99", "-o", tmp_path / "x.json"), "no step 99"),
        (("--window", "5:1", "-o", tmp_path / "x.json"), "START < END"),
        (("--steps", "x", "-o", tmp_path / "x.json"), "--steps"),
        (("--steps", "101", "--window", "1:2", "-o", tmp_path / "x.json"), "cannot be combined"),
        (("--folded", "--window", "1:2"), "--window applies to trimmed traces"),
        (("-o", source), "overwrite"),
    ]:
        result = cli("export", source, *args)
        assert result.code == 2 and message in result.err and result.err.count("\n") == 1, (args, result.err)


def test_folded_stacks_add_up(cli, tmp_path) -> None:
    source = corpus_path(V100)
    result = cli("export", source, "--folded")
    assert result.code == 0
    summary = json.loads(cli("summary", source, "--top", "0", "--format", "json").out)
    line = re.compile(r"^(.+) (\d+)$")
    per_kernel: dict[str, int] = defaultdict(int)
    total = 0
    for text in result.out.splitlines():
        match = line.match(text)
        assert match, text
        frames = match.group(1).split(";")
        weight = int(match.group(2))
        per_kernel[frames[-1]] += weight
        total += weight
        assert not any(re.fullmatch(r"ProfilerStep#\d+", f) for f in frames)  # steps fold into ProfilerStep#*
    raw_total = sum(
        ns(e["dur"]) for e in raw_events(source) if e.get("ph") == "X" and e.get("cat") in GPU_CATS
    )
    assert total == raw_total
    for row in summary["rows"]:
        assert per_kernel[row["name"].replace(";", ":")] / 1e3 == pytest.approx(row["total_us"], abs=1e-3)
    us = cli("export", source, "--folded", "--unit", "us", "--steps", "102").out
    assert us and all(line.match(t) for t in us.splitlines())


def test_folded_names_keep_one_line_each(cli, tmp_path) -> None:
    path = hostile_trace(tmp_path / "t.json")  # hand-made: names with markup and quotes
    out = cli("export", path, "--folded", "--no-cache").out.splitlines()
    assert out[0].startswith("ProfilerStep#*;</script><script>alert(2)</script>;<img src=x onerror=alert(1)>")
    assert out[0].endswith(" 600000")


def test_trim_streams_without_event_boundaries(cli, tmp_path) -> None:
    # HAND-MADE: 16 MB of spaces inside the events array (a 16 KB gzip) and metadata on both sides: the export
    # streams it (the old splitter looped forever on a stretch without event boundaries) and keeps the metadata
    import gzip as gz

    source = tmp_path / "spaces.json.gz"
    source.write_bytes(
        gz.compress(
            b'{"schemaVersion": 1, "traceEvents": ['
            + b" " * (16 << 20)
            + b'{"ph": "X", "name": "k", "ts": 1, "dur": 1}], "deviceProperties": [{"id": 0}]}'
        )
    )
    target = tmp_path / "out.json"
    result = cli("export", source, "-o", target, "--no-cache")
    assert result.code == 0, result.err
    doc = json.loads(target.read_text())
    assert [e["name"] for e in doc["traceEvents"]] == ["k"]
    assert doc["schemaVersion"] == 1 and doc["deviceProperties"] == [{"id": 0}]


def test_parquet_export_is_the_event_table(cli, tmp_path: Path) -> None:
    """`export --parquet` (export/parquet.py): one row per event, the schema's columns, the same values as the
    event table; an existing file is replaced whole, and the command refuses options it would ignore."""
    import polars as pl

    from opscope.model.schema import COLUMNS

    path = corpus_path(V100)
    out = tmp_path / "events.parquet"
    result = cli("export", path, "--parquet", "-o", out)
    assert result.code == 0, result.err
    written = pl.read_parquet(out)
    events = opscope.load(path).events
    assert written.columns == list(COLUMNS)
    assert written.height == events.height
    assert written.select(pl.col("dur_ns").sum()).item() == events.select(pl.col("dur_ns").sum()).item()
    assert written["name"].cast(pl.String).to_list() == events["name"].cast(pl.String).to_list()
    assert not list(tmp_path.glob(".*partial"))
    assert cli("export", path, "--parquet").code == 2  # needs -o
    assert cli("export", path, "--parquet", "--folded", "-o", out).code == 2
