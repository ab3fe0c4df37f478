"""Bad and damaged input. Fixtures written here are hand-made edge cases (labelled), cut from real traces
where the point is damage to a real file."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

import opscope
from conftest import corpus_path
from opscope.ingest.pyscan import Scanner
from reference import complete_events

NS_TRACE = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"


def one_line_error(result, needle: str) -> None:
    assert result.code == 2, (result.code, result.out, result.err)
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1, result.err
    assert "Traceback" not in result.err
    assert needle in lines[0], lines[0]


def test_missing_path(cli, tmp_path: Path) -> None:
    one_line_error(cli("summary", tmp_path / "nope.json"), "no such file")


def test_empty_file(cli, tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_bytes(b"")
    one_line_error(cli("summary", path), "empty")


def test_not_json(cli, tmp_path: Path) -> None:
    path = tmp_path / "notes.json"
    path.write_text("hello, this is not JSON\n")
    one_line_error(cli("summary", path), "notes.json")


def test_json_but_not_a_trace(cli, tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model": "resnet", "layers": [1, 2, 3]}))
    one_line_error(cli("summary", path), "not a trace")


def test_folder_without_traces(cli, tmp_path: Path) -> None:
    (tmp_path / "readme.txt").write_text("x")
    one_line_error(cli("summary", tmp_path), "no trace files")


def test_no_argument_uses_profiler_log_dir(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = corpus_path("hta/triton_example_triton_example.json.gz")
    older = tmp_path / "old.pt.trace.json.gz"
    newer = tmp_path / "new.pt.trace.json.gz"
    older.write_bytes(corpus_path("hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz").read_bytes())
    newer.write_bytes(source.read_bytes())
    os.utime(older, (1_000_000, 1_000_000))
    monkeypatch.setenv("PROFILER_LOG_DIR", str(tmp_path))
    result = cli("summary", "--format", "json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["trace"]["path"].endswith("new.pt.trace.json.gz")
    folder = cli("summary", tmp_path, "--format", "json")
    assert json.loads(folder.out)["trace"]["path"].endswith("new.pt.trace.json.gz")


def test_no_argument_and_no_folder(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROFILER_LOG_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    one_line_error(cli("summary"), "trace_logs")


def _cut_real_trace(tmp_path: Path, fraction: float, gz: bool) -> tuple[Path, bytes]:
    raw = gzip.decompress(corpus_path(NS_TRACE).read_bytes())
    cut = raw[: int(len(raw) * fraction)]
    path = tmp_path / ("cut.json.gz" if gz else "cut.json")
    if gz:
        full = gzip.compress(raw)
        path.write_bytes(full[: int(len(full) * fraction)])
    else:
        path.write_bytes(cut)
    return path, raw


@pytest.mark.parametrize("gz", [False, True], ids=["json", "gzip"])
def test_truncated_trace_is_salvaged(cli, tmp_path: Path, gz: bool) -> None:
    path, raw = _cut_real_trace(tmp_path, 0.6, gz)
    result = cli("summary", path, "--format", "json", "--no-cache")
    assert result.code == 0, result.err
    assert "cut off mid-write" in result.err and "salvaged" in result.err
    data = json.loads(result.out)
    trace = opscope.load(path, cache=False)
    if not gz:
        assert trace.count() == complete_events(raw, int(len(raw) * 0.6))
    else:
        assert 0 < trace.count() < 68692
    assert data["trace"]["events"] == trace.count()
    assert trace.meta.truncated
    strict = cli("summary", path, "--strict", "--no-cache")
    one_line_error(strict, "cut off mid-write")


def test_cut_before_first_event(cli, tmp_path: Path) -> None:
    path = tmp_path / "head.json"
    path.write_bytes(b'{"schemaVersion": 1, "traceEvents": [ {"ph": "X", "na')
    one_line_error(cli("summary", path), "nothing to salvage")


def test_integers_beyond_64_bits_do_not_stop_analysis(cli, tmp_path: Path) -> None:
    real = corpus_path("hta/large_integer_trace_rank-70.Mar_25_20_48_12.2861.pt.trace.json.gz")
    result = cli("summary", real, "--format", "json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["rows"][0]["name"] == "ncclKernel_AllReduce"
    # hand-made: a correlation id beyond 2^64
    path = tmp_path / "huge.json"
    path.write_text(
        '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, '
        '"dur": 2, "args": {"correlation": 123456789012345678901234567890, "stream": 7}}]}'
    )
    result = cli("summary", path, "--format", "json")
    assert result.code == 0, result.err
    assert "beyond 64 bits" in result.err
    assert json.loads(result.out)["rows"][0]["calls"] == 1


def test_invalid_utf8_is_replaced_with_one_warning(cli, tmp_path: Path) -> None:
    # hand-made: two kernels, one name with a byte that is not UTF-8
    path = tmp_path / "bad_utf8.json"
    path.write_bytes(
        b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "gemm\xff_kernel", "pid": 0, "tid": 7, '
        b'"ts": 1, "dur": 5}, {"ph": "X", "cat": "kernel", "name": "ok", "pid": 0, "tid": 7, "ts": 9, '
        b'"dur": 3}]}'
    )
    result = cli("summary", path, "--format", "json")
    assert result.code == 0, result.err
    assert result.err.count("UTF-8") == 1
    names = {r["name"] for r in json.loads(result.out)["rows"]}
    assert names == {"gemm\ufffd_kernel", "ok"}


def test_values_of_unexpected_types_are_tolerated(tmp_path: Path) -> None:
    # hand-made: stream as text, dur as a string, grid of the wrong shape
    path = tmp_path / "types.json"
    path.write_text(
        json.dumps(
            {
                "traceEvents": [
                    {
                        "ph": "X",
                        "cat": "kernel",
                        "name": "k",
                        "pid": "0",
                        "tid": "stream 7",
                        "ts": 1.5,
                        "dur": "2",
                        "args": {"stream": "7", "grid": 5, "device": 0},
                    },
                    {
                        "ph": "X",
                        "cat": "kernel",
                        "name": "k",
                        "pid": 0,
                        "tid": 7,
                        "ts": 10,
                        "dur": 3,
                        "args": {"stream": 7},
                    },
                ]
            }
        )
    )
    trace = opscope.load(path)
    events = trace.events
    assert events["stream"].to_list() == [7, 7]
    assert events["dur_ns"].to_list() == [2000, 3000]
    assert events["ts_ns"].to_list() == [1500, 10000]


def test_splitter_batches_equal_single_decode_on_compact_and_nested_json() -> None:
    # hand-made: compact one-line JSON with nested arrays of objects and braces inside strings
    events = [
        {"ph": "X", "name": f"op}}, {{{i}", "args": {"list": [{"a": i}, {"b": "},{"}]}} for i in range(500)
    ]
    doc = json.dumps({"traceEvents": events, "tail": [{"x": 1}]}, separators=(",", ":")).encode()
    scanner = Scanner(batch_bytes=1000)
    batches = []
    for i in range(0, len(doc), 97):
        scanner.feed(doc[i : i + 97])
        batches += scanner.take_batches()
    scanner.finish()
    batches += scanner.take_batches()
    assert len(batches) > 10
    assert [json.loads(text) for b in batches for text, flags in b.elements if not flags] == events
    assert scanner.outline.closed and scanner.outline.document_closed
    assert [(k, json.loads(v)) for k, v in scanner.outline.members] == [(b"tail", [{"x": 1}])]


def test_bare_list_schema_2021() -> None:
    trace = opscope.load(corpus_path("kineto/plugin_samples_resnet50_num_workers_0_worker0.pt.trace.json.gz"))
    kinds = trace.events["kind"].cast(str).value_counts()
    counts = dict(zip(kinds["kind"], kinds["count"]))
    assert counts["kernel"] == 9538 and counts["cpu_op"] == 42438 and counts["runtime"] == 10800


def test_decode_threads_do_not_change_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    path = corpus_path("param/et_replay_tests_data_linear_kineto.json.gz")
    monkeypatch.setenv("OPSCOPE_WORKERS", "1")
    one = opscope.load(path, cache=False).events
    monkeypatch.setenv("OPSCOPE_WORKERS", "4")
    four = opscope.load(path, cache=False).events
    assert one.height == four.height == 86859
    assert one.cast({c: str for c in ("name", "cat", "kind")}).equals(
        four.cast({c: str for c in ("name", "cat", "kind")})
    )


@pytest.mark.parametrize("reader", ["native", "python"])
def test_nested_objects_laid_out_like_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str
) -> None:
    # hand-made: args holding lists of objects laid out like top-level events ("}, {" across lines), so that a
    # guessed cut would fall inside events; nothing may be lost or duplicated, whatever the batch size
    events = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": f"op{i}",
            "pid": 1,
            "tid": 1,
            "ts": i,
            "dur": 1,
            "args": {"External id": i, "nested": [{"a": i}, {"b": "},\n{"}]},
        }
        for i in range(3000)
    ]
    path = tmp_path / "nested.json"
    path.write_text(json.dumps({"traceEvents": events}, indent=1))
    monkeypatch.setenv("OPSCOPE_READER", reader)
    monkeypatch.setattr("opscope.ingest.pyreader.BATCH_BYTES", 3000)
    trace = opscope.load(path, cache=False)
    assert trace.events["external_id"].to_list() == list(range(3000))
    assert not trace.meta.warnings


def test_dictionary_codes_and_values_read_from_buffers_equal_pyarrows() -> None:
    """`columns.codes` and `columns.values_at` read Arrow buffers (validity bits included, sliced arrays at any
    offset) without pyarrow.compute; they give what `fill_null` / `take` give (hand-made arrays)."""
    import numpy as np
    import pyarrow as pa

    from opscope.ingest import columns as C

    rng = np.random.default_rng(0)
    for n in (0, 1, 7, 8, 9, 100, 1000):
        values = [None if rng.random() < 0.3 else int(rng.integers(0, 5)) for _ in range(n)]
        whole = pa.array(values, type=pa.int32())
        for offset in (0, 1, 3, 9):
            for length in (0, 1, 5, 50):
                if offset + length > n:
                    continue
                indices = whole.slice(offset, length)
                expected = indices.fill_null(-1).to_pylist()
                assert C.codes(indices).tolist() == expected, (n, offset, length)
                column = pa.DictionaryArray.from_arrays(indices, pa.array(list("abcde")))
                rows = np.arange(length)[::2]
                assert C.values_at(column, rows) == column.take(pa.array(rows)).to_pylist()
    plain = pa.array([5, None, 7], type=pa.int64())
    assert C.values_at(plain, np.array([2, 1])) == [7, None]
