"""`opscope summary` options, output formats, the Python API and the cache, on real traces."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from pathlib import Path

import polars as pl
import pytest

import opscope
from conftest import corpus_path
from opscope.ingest import cache as cache_mod

V100 = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
NCCL = "hta/nccl_parser_config_nccl_data.json.gz"


def summary_json(cli, *args) -> dict:
    result = cli("summary", *args, "--format", "json")
    assert result.code == 0, result.err
    return json.loads(result.out)


def test_json_schema_and_fields(cli) -> None:
    data = summary_json(cli, corpus_path(V100), "--top", "5")
    assert data["schema"] == "opscope.summary/1"
    assert set(data["trace"]) >= {"path", "devices", "events", "kernels"}
    assert data["trace"]["devices"] == ["Tesla V100-SXM2-32GB"]
    assert data["trace"]["events"] == 68692 and data["trace"]["kernels"] == 4350
    assert set(data["totals"]) >= {"gpu_time_us", "calls"}
    assert len(data["rows"]) == 5
    for row in data["rows"]:
        assert set(row) >= {
            "name",
            "kind",
            "calls",
            "total_us",
            "avg_us",
            "min_us",
            "max_us",
            "median_us",
            "share",
        }
        assert row["kind"] in ("kernel", "memcpy", "memset")
        assert row["min_us"] <= row["median_us"] <= row["max_us"]
    totals = [r["total_us"] for r in data["rows"]]
    assert totals == sorted(totals, reverse=True)
    assert data["rest"]["rows"] == data["selected"]["rows"] - 5
    shown = sum(r["total_us"] for r in data["rows"]) + data["rest"]["total_us"]
    assert shown == pytest.approx(data["totals"]["gpu_time_us"], rel=1e-9)


def test_top_zero_lists_every_row(cli) -> None:
    data = summary_json(cli, corpus_path(V100), "--top", "0")
    assert data["rest"] is None
    assert len(data["rows"]) == data["selected"]["rows"]
    assert sum(r["calls"] for r in data["rows"]) == data["totals"]["calls"]


def test_kind_filter_device_stream(cli) -> None:
    path = corpus_path(NCCL)
    everything = summary_json(cli, path, "--top", "0")
    memcpy = summary_json(cli, path, "--top", "0", "--kind", "memcpy")
    assert {r["kind"] for r in memcpy["rows"]} == {"memcpy"}
    assert memcpy["totals"] == everything["totals"]  # share keeps the same denominator
    nccl = summary_json(cli, path, "--top", "0", "--filter", "^nccl")
    assert nccl["rows"] and all(r["name"].startswith("nccl") for r in nccl["rows"])
    events = opscope.load(path).events
    gpu = events.filter(pl.col("kind").cast(str).is_in(["kernel", "memcpy", "memset"]))
    stream = int(gpu["stream"].drop_nulls().mode()[0])
    one = summary_json(cli, path, "--top", "0", "--stream", str(stream))
    assert one["totals"]["calls"] == gpu.filter(pl.col("stream") == stream).height
    # the trace-wide counts (read in the same scan as the GPU activity) do not depend on the selection
    kernels = events.filter(pl.col("kind").cast(str) == "kernel").height  # with or without a duration
    for data in (everything, one):
        assert data["trace"]["events"] == events.height and data["trace"]["kernels"] == kernels
    none = summary_json(cli, path, "--top", "0", "--device", "7")
    assert none["totals"]["calls"] == 0 and none["rows"] == []


def test_bad_regex_is_a_usage_error(cli) -> None:
    result = cli("summary", corpus_path(V100), "--filter", "(")
    assert result.code == 2 and "not a valid regular expression" in result.err


def test_table_has_rest_line_and_short_names(cli) -> None:
    result = cli("summary", corpus_path(V100), "--top", "3", "--width", "100")
    assert result.code == 0
    assert "more rows:" in result.out
    # within 100 columns, but a word longer than a line (the trace path) keeps a line of its own, whole
    assert all(len(line) <= 100 or len(line.split()) == 1 for line in result.out.splitlines())
    assert "…" in result.out
    wide = cli("summary", corpus_path(V100), "--top", "3", "--wide", "--width", "100")
    assert "CatArrayBatchedCopy" in wide.out or "at::native::" in wide.out


def test_csv_and_markdown(cli) -> None:
    out = cli("summary", corpus_path(V100), "--top", "4", "--format", "csv").out
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 4 and float(rows[0]["total_us"]) > 0 and "(" in rows[0]["name"]
    md = cli("summary", corpus_path(V100), "--top", "4", "--format", "markdown").out
    assert md.count("\n|") >= 6 and "more rows" in md


def test_output_file(cli, tmp_path: Path) -> None:
    target = tmp_path / "s.json"
    result = cli("summary", corpus_path(V100), "--format", "json", "-o", target)
    assert result.code == 0 and result.out == ""
    assert json.loads(target.read_text())["schema"] == "opscope.summary/1"


def test_api_matches_cli(cli) -> None:
    path = corpus_path(V100)
    trace = opscope.load(path)
    assert isinstance(trace.events, pl.DataFrame)
    result = opscope.summary(trace, top=0)
    data = summary_json(cli, path, "--top", "0")
    assert [(r.name, r.calls) for r in result.rows] == [(r["name"], r["calls"]) for r in data["rows"]]
    pandas = pytest.importorskip("pandas")
    assert isinstance(trace.to_pandas(), pandas.DataFrame)


def test_metadata_is_read() -> None:
    nccl = opscope.load(corpus_path(NCCL))
    assert (nccl.meta.rank, nccl.meta.world_size, nccl.meta.backend) == (0, 2, "nccl")
    assert nccl.meta.base_time_ns and nccl.meta.devices[0].sm_count
    amd = opscope.load(corpus_path("hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"))
    assert amd.meta.profiler_flags.get("record_shapes") in (1, True)
    kinds = set(amd.events["kind"].cast(str).unique())
    assert {"kernel", "cpu_op", "runtime", "flow"} <= kinds


def test_columns_from_args() -> None:
    events = opscope.load(corpus_path(V100)).events
    kernel = events.filter((pl.col("kind").cast(str) == "kernel") & (pl.col("correlation") == 135071)).row(
        0, named=True
    )
    assert (kernel["grid_x"], kernel["grid_y"], kernel["grid_z"]) == (4, 106, 1)
    assert (kernel["block_x"], kernel["registers_per_thread"], kernel["shared_memory"]) == (128, 30, 0)
    assert kernel["external_id"] == 112 and kernel["stream"] == 7 and kernel["device"] == 0
    assert kernel["est_occupancy_pct"] == 33 and kernel["dur_ns"] == 4928
    assert kernel["ts_ns"] == 1712195495505582988  # epoch-scale µs with ns digits, read exactly
    memcpy = events.filter(pl.col("kind").cast(str) == "memcpy").row(0, named=True)
    assert memcpy["bytes"] and memcpy["bytes"] > 0
    unknown = opscope.load(
        corpus_path("hta/cupti_profiler_benchmark_result_924719_1679055439_trace.json.gz")
    ).events
    assert "cuda_profiler_range" in set(unknown["cat"].cast(str).drop_nulls())


def test_cache_reused_rebuilt_when_stale_or_corrupt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.json.gz"
    shutil.copy(corpus_path("hta/triton_example_triton_example.json.gz"), path)
    first = opscope.load(path)
    target = cache_mod.cache_path(path)
    assert target.exists() and first.count() == 71

    def no_parse(*args, **kwargs):
        raise AssertionError("parsed although the cache is valid")

    with monkeypatch.context() as patch:
        patch.setattr("opscope.ingest.loader.detect", no_parse)
        assert opscope.load(path).count() == 71  # served from the cache
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    calls = []
    real_read = cache_mod.read_cached
    monkeypatch.setattr("opscope.ingest.loader.read_cached", lambda p: calls.append(p) or real_read(p))
    assert opscope.load(path).count() == 71  # stale key: rebuilt
    target.write_bytes(b"garbage, not parquet")
    assert opscope.load(path).count() == 71  # corrupt: rebuilt, not trusted
    assert cache_mod.read_cached(path) is not None


def test_no_cache_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    trace = opscope.load(corpus_path("hta/triton_example_triton_example.json.gz"), cache=False)
    assert trace.count() == 71
    cache = tmp_path / "cache"
    # no cache file; the table's scratch folder lives in the cache folder (swept there after a SIGKILL,
    # issue 32) and goes with the trace
    assert not list(cache.glob("*.parquet")) and not list(cache.glob("*.crc"))
    del trace
    import gc

    gc.collect()
    assert not list(cache.glob(".scratch-*"))


@pytest.mark.parametrize(
    "relative",
    [
        V100,
        "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz",
        "param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json",
    ],
)
def test_start_times_are_exact_nanoseconds(relative: str) -> None:
    import gzip
    from decimal import Decimal

    path = corpus_path(relative)
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as handle:
        doc = json.loads(handle.read(), parse_float=Decimal)
    expected = sorted(int(Decimal(e["ts"]) * 1000) for e in doc["traceEvents"] if "ts" in e)
    got = sorted(opscope.load(path).events["ts_ns"].drop_nulls().to_list())
    assert got == expected


def test_rows_shown_with_top_equal_those_of_top_zero(cli, tmp_path: Path) -> None:
    """`--top N` computes the statistics of the N rows it shows only (a name per event costs ~600 MB less,
    issue 32); those rows and the "more" totals equal `--top 0`'s. Hand-made: 40 names, 1-40 events each, one
    duplicate name under two kinds, one event without a name."""
    events = []
    for i in range(40):
        events += [
            {
                "ph": "X",
                "cat": "kernel",
                "name": f"k{i:02d}",
                "pid": 0,
                "tid": 7,
                "ts": 10 * i + j,
                "dur": 1 + j % 3,
                "args": {"device": 0},
            }
            for j in range(1 + i)
        ]
    events.append(
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": "k39",
            "pid": 0,
            "tid": 7,
            "ts": 1,
            "dur": 5,
            "args": {"device": 0},
        }
    )
    events.append(
        {"ph": "X", "cat": "kernel", "pid": 0, "tid": 7, "ts": 2, "dur": 9000, "args": {"device": 0}}
    )
    path = tmp_path / "names.json"  # hand-made (see the docstring)
    path.write_text(json.dumps({"traceEvents": events}))
    every = json.loads(cli("summary", path, "--top", "0", "--format", "json", "--no-cache").out)
    for top in (1, 5, 41):
        some = json.loads(cli("summary", path, "--top", str(top), "--format", "json", "--no-cache").out)
        assert some["rows"] == every["rows"][:top]
        assert some["totals"] == every["totals"] and some["selected"] == every["selected"]
        hidden = every["rows"][top:]
        rest = some["rest"] or {"rows": 0, "calls": 0, "total_us": 0}
        assert (rest["rows"], rest["calls"]) == (len(hidden), sum(r["calls"] for r in hidden))
        assert rest["total_us"] == pytest.approx(sum(r["total_us"] for r in hidden), abs=1e-3)
