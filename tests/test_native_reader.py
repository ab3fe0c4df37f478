"""The native reader (opscope._native, Rust) against the Python reference reader: identical tables (every
column, every row) and identical reports and warnings on every Kineto trace of the corpus and on hand-made
edge cases; plus the defects of the old reader that neither may keep (each hand-made input is labelled)."""

from __future__ import annotations

import gzip
import json
import os
import zlib
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest

import opscope
from conftest import TRACES, corpus_path
from opscope import _native
from opscope.ingest import kineto
from opscope.model import schema
from reference import complete_events

CORPUS_JSON = sorted(p for p in TRACES.rglob("*.json*") if p.is_file()) if TRACES.is_dir() else []


def read(path: Path, reader: str, batch_bytes: int | None = None) -> tuple[pl.DataFrame, dict[str, Any]]:
    os.environ["OPSCOPE_READER"] = reader
    try:
        r = kineto.open_reader(path, batch_bytes)
        batches = list(r)
        report = r.finish()
    finally:
        os.environ.pop("OPSCOPE_READER", None)
    table = pa.Table.from_batches(batches, schema=schema.arrow_schema())
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    text = [c for c, t in schema.COLUMNS.items() if isinstance(t, pl.Categorical)]
    return frame.with_columns(pl.col(c).cast(pl.String) for c in text), report


def same(path: Path, batch_bytes: int | None = None) -> tuple[pl.DataFrame, dict[str, Any]]:
    native, native_report = read(path, "native", batch_bytes)
    python, python_report = read(path, "python", batch_bytes)
    assert native.columns == python.columns
    for col in native.columns:
        assert native[col].equals(python[col], check_names=True), (path.name, col)
    assert native_report == python_report, path.name
    name = path.name
    assert kineto.warnings_of(name, native_report) == kineto.warnings_of(name, python_report)
    return native, native_report


def test_native_schema_equals_the_python_schema() -> None:
    arrow = schema.arrow_schema()
    types = {
        "text": pa.dictionary(pa.int32(), pa.string()),
        "i64": pa.int64(),
        "i32": pa.int32(),
        "f32": pa.float32(),
        "f64": pa.float64(),
    }
    assert [(f.name, f.type) for f in arrow] == [(n, types[t]) for n, t in _native.columns()]
    kinds, categories = _native.kinds()
    assert tuple(kinds) == schema.KINDS
    assert dict(categories) == schema.CATEGORY_KINDS


def _is_kineto(path: Path) -> bool:
    head = (gzip.open(path) if path.suffix == ".gz" else open(path, "rb")).read(65536)  # noqa: SIM115
    return (b'"traceEvents"' in head or head.lstrip()[:1] == b"[") and b"rocprofiler-sdk-tool" not in head


@pytest.mark.corpus
@pytest.mark.parametrize("path", [p for p in CORPUS_JSON if _is_kineto(p)], ids=lambda p: p.name[:60])
def test_native_equals_python_on_every_corpus_trace(path: Path) -> None:
    frame, report = same(path)
    assert report["stats"]["events"] == frame.height > 0


# -- hand-made edge cases: both readers agree, and each defect of the old reader stays fixed ---------------

EDGE_DOCS: dict[str, bytes] = {
    # HAND-MADE, every one
    "types": json.dumps(
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
                    "args": {"stream": "7", "grid": 5, "device": 0, "block": [1, "2", None, 4]},
                },
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": 5,
                    "pid": 1.5,
                    "tid": [7],
                    "ts": "abc",
                    "dur": True,
                    "args": {
                        "stream": 7,
                        "registers per thread": 2**40,
                        "bytes": 7.5,
                        "shared memory": "0x10",
                    },
                },
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": "op",
                    "pid": 1,
                    "tid": 1,
                    "ts": 1e3,
                    "dur": 0.0015,
                    "args": {
                        "Input Dims": [[1, 2], []],
                        "External id": None,
                        "external id": 9,
                        "Sequence number": "12",
                    },
                },
                {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": ["x"]}},
                {
                    "ph": "X",
                    "cat": "python_function",
                    "name": "f",
                    "pid": 1,
                    "tid": 1,
                    "ts": 1,
                    "dur": 1,
                    "args": {"Python id": 3, "Python parent id": "4"},
                },
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": "dup",
                    "name2": 1,
                    "pid": 0,
                    "tid": 7,
                    "ts": 1,
                    "tz": 2,
                    "dur": 1,
                },
                {
                    "ph": "X",
                    "cat": "malformed",
                    "name": "wrong",
                    "pid": "null",
                    "ts": 3,
                },  # text equal to sentinel names
            ]
        }
    )
    .encode()
    .replace(b'"ts": 1, "tz": 2', b'"ts": 1, "ts": 2'),  # a duplicate key
    "scalars": b'{"traceEvents": [null, {"ph": "X", "name": "a", "ts": 1, "dur": 1}, 5, true, "s", [1], '
    b'{"ph": "X", "name": "b", "ts": 2, "dur": 1}, {"a": 1} {"b": 2}, {"c": 1}}, {"d": [1}, ]}',
    "times": b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1712192699123456.789, "dur": 1e400},'
    b'{"ph": "X", "name": "b", "ts": 12345678901234567890123, "dur": -1},'
    b'{"ph": "X", "name": "c", "ts": 0.0005, "dur": 0.0015},'
    b'{"ph": "X", "name": "d", "ts": -5.25, "dur": 9223372036854775.807}]}',
    "jax": json.dumps(
        {
            "traceEvents": [  # JAX trace.json args (issue 16), right and wrong types
                {
                    "ph": "X",
                    "name": "fusion",
                    "pid": 1,
                    "tid": 2,
                    "ts": 1,
                    "dur": 1,
                    "args": {
                        "hlo_op": "fusion.3",
                        "hlo_module": "jit_f",
                        "program_id": "7",
                        "name": "jit(f)/add",
                        "correlation_id": "12",
                    },
                },
                {
                    "ph": "X",
                    "name": "train",
                    "pid": 1,
                    "tid": 2,
                    "ts": 1,
                    "dur": 5,
                    "args": {"step_num": "3", "name": "x"},
                },
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": "k",
                    "pid": 1,
                    "tid": 2,
                    "ts": 1,
                    "dur": 1,
                    "args": {
                        "hlo_op": 5,
                        "hlo_module": None,
                        "program_id": [1],
                        "step_num": 1.5,
                        "correlation_id": 4,
                        "correlation": 9,
                    },
                },
            ]
        }
    ).encode(),
    "bom": b"\xef\xbb\xbf" + b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1}]}',
    "bare": b'[{"ph": "X", "name": "a", "ts": 1, "dur": 1}, {"ph": "X", "name": "b", "ts": 2}]',
    "trailing": b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1}], "x": 1} {"second": 2}',
    "cut_metadata": b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1}], "deviceProperties": [{"id": 0, "na',
    "bad_utf8": b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "gemm\xff_k", "ts": 1, "dur": 5}, '
    b'{"ph": "X", "cat": "kernel", "name": "ok", "ts": 9, "dur": 3}]}',
    "deep": (
        '{"traceEvents": [{"ph": "X", "name": "deep", "args": {"Input Dims": '
        + "[" * 1000
        + "]" * 1000
        + '}}, {"ph": "X", "name": "ok", "ts": 1, "dur": 1}], "meta": '
        + "[" * 1000
        + "]" * 1000
        + "}"
    ).encode(),
    "memory": json.dumps(
        {
            "traceEvents": [
                {
                    "ph": "i",
                    "cat": "cpu_instant_event",
                    "s": "t",
                    "name": "[memory]",
                    "pid": 1,
                    "tid": 1,
                    "ts": 5,
                    "args": {
                        "Total Reserved": "2048",
                        "Total Allocated": 1024,
                        "Bytes": -512,
                        "Device Id": 0,
                        "Device Type": 6,
                        "Addr": 139654046813696,
                        "finished": True,
                        "Ev Idx": 3,
                    },
                },
                {
                    "ph": "i",
                    "s": "t",
                    "name": "[memory]",
                    "pid": 1,
                    "tid": 1,
                    "ts": 6,
                    "args": {"Device Type": 0, "Device Id": -1, "Bytes": 4},
                },  # PyTorch 1.9: no cat, Addr, totals
                {
                    "ph": "i",
                    "name": "[memory]",
                    "ts": 7,
                    "args": {"Bytes": 1.5, "Device Id": 2**33, "Addr": [1]},
                },
                {"ph": "i", "name": "other", "ts": 8, "args": {"Bytes": 7, "Device Type": 1}},
                {
                    "ph": "X",
                    "cat": "python_function",
                    "name": "[memory]",
                    "ts": 9,
                    "dur": 1,
                    "args": {"Bytes": 7},
                },
            ]
        }
    ).encode(),
    "escapes": b'{"tr\\u0061ceEvents": 1, "traceEvents": [{"ph": "X", "name": "a\\"}], \\\\", "ts": 1, '
    b'"args": {"name": "}", "Input type": ["\\u00e9"]}}], "k\\"ey": "v"}',
}


@pytest.mark.parametrize("name", sorted(EDGE_DOCS))
@pytest.mark.parametrize("batch_bytes", [None, 7])
def test_native_equals_python_on_edge_cases(tmp_path: Path, name: str, batch_bytes: int | None) -> None:
    path = tmp_path / f"{name}.json"
    path.write_bytes(EDGE_DOCS[name])
    same(path, batch_bytes)
    gz = tmp_path / f"{name}.json.gz"
    gz.write_bytes(gzip.compress(EDGE_DOCS[name]))
    same(gz, batch_bytes)


def test_edge_case_values(tmp_path: Path) -> None:
    path = tmp_path / "types.json"
    path.write_bytes(EDGE_DOCS["types"])
    frame, report = same(path)
    assert frame["stream"].to_list()[:2] == [7, 7]
    assert frame["dur_ns"].to_list()[:3] == [2000, None, 2]  # "2" us; True is the wrong type; 1.5 ns -> 2
    assert frame["ts_ns"].to_list()[:3] == [1500, None, 1_000_000]
    assert frame["external_id"].to_list()[2] == 9
    assert frame["input_dims"].to_list()[2] == "[[1, 2], []]"
    assert frame["sequence"].to_list()[2] == 12
    assert frame["block_x"].to_list()[0] == 1 and frame["block_y"].to_list()[0] == 2
    assert frame["shared_memory"].to_list()[1] == 16
    assert frame["ts_ns"].to_list()[5] == 2000  # duplicate key: the last one wins
    assert frame["name"].to_list()[6] == "wrong" and frame["cat"].to_list()[6] == "malformed"
    stats = report["stats"]
    assert stats["wrong_type"] >= 5 and stats["out_of_range"] == 1


def test_memory_event_values(tmp_path: Path) -> None:
    path = tmp_path / "memory.json"
    path.write_bytes(EDGE_DOCS["memory"])
    frame, report = same(path)
    assert frame["mem_addr"].to_list() == [139654046813696, None, None, None, None]
    assert frame["mem_bytes"].to_list() == [-512, 4, None, None, None]  # only "[memory]" events, not Python
    assert frame["mem_total_allocated"].to_list()[:2] == [1024, None]
    assert frame["mem_total_reserved"].to_list()[:2] == [2048, None]
    assert frame["mem_device_type"].to_list()[:4] == [6, 0, None, None]
    assert frame["mem_device_id"].to_list()[:3] == [0, -1, None]
    stats = report["stats"]
    assert stats["wrong_type"] == 2 and stats["out_of_range"] == 1  # 1.5 and [1]; 2**33 beyond i32


def test_jax_args(tmp_path: Path) -> None:
    path = tmp_path / "jax.json"
    path.write_bytes(EDGE_DOCS["jax"])
    frame, report = same(path)
    assert frame["hlo_op"].to_list() == ["fusion.3", None, None]
    assert frame["hlo_module"].to_list() == ["jit_f", None, None]
    assert frame["name_stack"].to_list() == ["jit(f)/add", None, None]  # args.name only beside an hlo_op
    assert frame["program_id"].to_list() == [7, None, None]
    assert frame["step_num"].to_list() == [None, 3, None]
    assert frame["correlation"].to_list() == [12, None, 9]  # `correlation` first, then `correlation_id`
    # hlo_op 5, program_id [1] and step_num 1.5 (not a whole number) are the wrong type
    assert report["stats"]["wrong_type"] == 3 and report["stats"]["out_of_range"] == 0


def test_scalars_do_not_swallow_the_next_event(tmp_path: Path) -> None:
    path = tmp_path / "scalars.json"
    path.write_bytes(EDGE_DOCS["scalars"])
    frame, report = same(path)
    assert frame["name"].to_list() == ["a", "b"]
    assert report["stats"]["not_objects"] == 5
    assert report["stats"]["malformed"] == 3


def test_times_exact_and_out_of_range(tmp_path: Path) -> None:
    path = tmp_path / "times.json"
    path.write_bytes(EDGE_DOCS["times"])
    frame, report = same(path)
    assert frame["ts_ns"].to_list() == [1_712_192_699_123_456_789, None, 0, -5250]
    assert frame["dur_ns"].to_list() == [None, None, 2, 9_223_372_036_854_775_807]
    assert report["stats"]["out_of_range"] == 2 and report["stats"]["negative_durations"] == 1
    trace = opscope.load(path, cache=False)
    assert any("beyond 64 bits" in w for w in trace.meta.warnings)
    with pytest.raises(opscope.OpscopeError):
        opscope.load(path, cache=False, strict=True)


def test_bom_and_after_the_array(cli, tmp_path: Path) -> None:
    bom = tmp_path / "bom.json"
    bom.write_bytes(EDGE_DOCS["bom"])
    assert opscope.load(bom, cache=False).count() == 1
    for name, needle in (
        ("trailing", "after the end of the JSON document"),
        ("cut_metadata", "ends inside the metadata"),
    ):
        path = tmp_path / f"{name}.json"
        path.write_bytes(EDGE_DOCS[name])
        result = cli("summary", path, "--no-cache")
        assert result.code == 0 and needle in result.err
        assert cli("summary", path, "--no-cache", "--strict").code == 2


def test_deep_nesting_costs_one_event(cli, tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_bytes(EDGE_DOCS["deep"])
    frame, report = same(path)
    assert frame["name"].to_list() == ["ok"]
    assert report["stats"]["too_deep"] == 1 and report["skipped_deep_meta_values"] == 1
    result = cli("summary", path, "--no-cache")
    assert result.code == 0 and "nested deeper than 64 levels" in result.err


def test_no_hang_without_event_boundaries(tmp_path: Path) -> None:
    # HAND-MADE: one event with a 9 MB name, and 16 MB of spaces gzipped to a few KB
    big = tmp_path / "big_name.json"
    big.write_bytes(b'{"traceEvents": [{"ph": "X", "name": "' + b"n" * (9 << 20) + b'", "ts": 1, "dur": 1}]}')
    frame, _ = same(big)
    assert len(frame["name"][0]) == 9 << 20
    spaces = tmp_path / "spaces.json.gz"
    spaces.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * (16 << 20) + b'{"ph": "X", "ts": 1}]}'))
    frame, _ = same(spaces)
    assert frame.height == 1


def test_big_header_is_skipped_in_bounded_memory(tmp_path: Path) -> None:
    # HAND-MADE: a 20 MB string before the events array (above the 16 MiB limit for metadata values)
    path = tmp_path / "header.json"
    path.write_bytes(b'{"junk": "' + b"x" * (20 << 20) + b'", "traceEvents": [{"ph": "X", "ts": 1}]}')
    frame, report = same(path)
    assert frame.height == 1 and report["skipped_meta_values"] == 1


def test_gzip_damage_keeps_the_data(tmp_path: Path) -> None:
    raw = gzip.decompress(corpus_path("hta/triton_example_triton_example.json.gz").read_bytes())
    packed = gzip.compress(raw)
    cases = {
        "bad_crc": packed[:-8] + bytes([packed[-8] ^ 0xFF]) + packed[-7:],
        "junk": packed + b"junk!",
        "two_members": packed[: len(packed)] + gzip.compress(b" "),
    }
    for name, data in cases.items():
        path = tmp_path / f"{name}.json.gz"
        path.write_bytes(data)
        frame, report = same(path)
        assert frame.height == 71, name
    assert report["gzip_problem"] is None  # two members: the second one is whitespace after the document


@pytest.mark.parametrize("fraction", [0.003, 0.05, 0.31, 0.6, 0.97, 0.9999])
def test_salvage_at_cut_points_equals_an_incremental_decoder(tmp_path: Path, fraction: float) -> None:
    raw = gzip.decompress(corpus_path("hta/nccl_parser_config_nccl_data.json.gz").read_bytes())
    packed = gzip.compress(raw, 6)
    cut = packed[: int(len(packed) * fraction)]
    path = tmp_path / "cut.json.gz"
    path.write_bytes(cut)
    decoded = zlib.decompressobj(31).decompress(cut)  # the independent incremental decoder
    frame, report = same(path)
    assert report["gzip_problem"] == "truncated"
    assert report["bytes_total"] == len(decoded)
    assert frame.height == complete_events(raw, len(decoded))
    plain = tmp_path / "cut.json"
    plain.write_bytes(raw[: int(len(raw) * fraction)])
    frame, report = same(plain)
    assert frame.height == complete_events(raw, int(len(raw) * fraction))


def test_small_gzip_cut_at_the_end_is_salvaged(cli, tmp_path: Path) -> None:
    packed = corpus_path("hta/triton_example_triton_example.json.gz").read_bytes()
    path = tmp_path / "cut.json.gz"
    path.write_bytes(packed[:-20])
    result = cli("summary", path, "--no-cache", "--format", "json")
    assert result.code == 0 and "cut off mid-write" in result.err
    assert json.loads(result.out)["trace"]["events"] > 0


def test_native_reader_is_the_default_and_python_is_selectable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert kineto.reader_name() == "native"
    monkeypatch.setenv("OPSCOPE_READER", "python")
    assert kineto.reader_name() == "python"
    monkeypatch.setenv("OPSCOPE_READER", "fortran")
    with pytest.raises(opscope.OpscopeError):
        kineto.reader_name()
