"""The cache file written by the native module's `ParquetSink` (arrow-rs, on a thread of its own) is the same
table as pyarrow's `ParquetWriter` writes (`OPSCOPE_CACHE_WRITER=pyarrow`): every column, every row, every
dtype as polars reads it back, for every reader. Errors of the writer thread reach Python as `OSError`."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from polars.testing import assert_frame_equal

from conftest import corpus_path
from opscope import _native
from opscope.ingest.cache import cache_path
from opscope.ingest.loader import load
from opscope.model.schema import arrow_schema

TRACES = [
    "tracelens/mi300__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",  # Kineto, AMD
    "hta/nccl_parser_config_nccl_data.json.gz",  # Kineto, NVIDIA, NCCL
    "tracelens/mi300__jax08_gemm__tw003.xplane.pb",  # xplane
    "pipit/cloverleaf-nsys__perlmutter-cloverleaf-cuda.sqlite",  # nsys
    "tracelens/rocprof__908_results.json.gz",  # rocprof
]


def _cached_table(path: Path, folder: Path, monkeypatch: pytest.MonkeyPatch, writer: str) -> pl.DataFrame:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(folder))
    monkeypatch.setenv("OPSCOPE_CACHE_WRITER", writer)
    load(path)
    return pl.read_parquet(cache_path(path))


@pytest.mark.corpus
@pytest.mark.parametrize("name", TRACES)
def test_native_cache_equals_pyarrow_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    path = corpus_path(name)
    native = _cached_table(path, tmp_path / "native", monkeypatch, "")
    reference = _cached_table(path, tmp_path / "pyarrow", monkeypatch, "pyarrow")
    assert native.height > 0
    assert_frame_equal(native, reference)
    assert native.schema["name"] == pl.Categorical


def test_sink_writes_metadata_and_batches(tmp_path: Path) -> None:
    """hand-made: two batches (a dictionary column with different dictionaries) and key-value metadata."""
    schema = pa.schema([pa.field("name", pa.dictionary(pa.int32(), pa.string())), pa.field("ts", pa.int64())])
    first = pa.record_batch(
        [pa.array(["a", "b", "a"]).dictionary_encode(), pa.array([1, 2, None])], schema=schema
    )
    second = pa.record_batch([pa.array(["c", None]).dictionary_encode(), pa.array([4, 5])], schema=schema)
    target = tmp_path / "out.parquet"
    sink = _native.ParquetSink(str(target), schema)
    sink.write(first)
    sink.write(second)
    sink.finish([("opscope.key", "k"), ("opscope.meta", '{"x": 1}')])
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(target).metadata
    assert meta.num_row_groups == 2  # one row group per batch
    assert meta.metadata[b"opscope.meta"] == b'{"x": 1}' and meta.metadata[b"opscope.key"] == b"k"
    table = pl.read_parquet(target)
    assert table["name"].cast(pl.String).to_list() == ["a", "b", "a", "c", None]
    assert table["ts"].to_list() == [1, 2, None, 4, 5]


def test_sink_errors_are_os_errors(tmp_path: Path) -> None:
    schema = arrow_schema()
    sink = _native.ParquetSink(str(tmp_path), schema)  # a folder: the writer thread cannot create the file
    with pytest.raises(OSError):
        sink.finish([])
    with pytest.raises(OSError, match="closed"):
        sink.finish([])
    aborted = _native.ParquetSink(str(tmp_path / "never.parquet"), schema)
    aborted.abort()  # joins the thread; the caller removes the file
    with pytest.raises(OSError, match="closed"):
        aborted.write(pa.record_batch([pa.array([], type=f.type) for f in schema], schema=schema))
