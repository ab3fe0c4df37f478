"""The one declared table of trace arguments -> columns (`opscope/model/args.py`, issue 24 item 6): the Rust
decoder, the Python reference reader and the schema are checked against it, so none of them can drift."""

from __future__ import annotations

import msgspec
import polars as pl

from opscope import _native
from opscope.ingest import pydecode
from opscope.model.args import ARG_COLUMNS, ARG_KEYS
from opscope.model.schema import COLUMNS

# Columns that come from the event object itself (or from flow / metadata events), not from its `args`.
EVENT_COLUMNS = {"ph", "cat", "kind", "name", "pid", "tid", "ts_ns", "dur_ns", "flow_id"}


def test_the_rust_decoder_reads_the_declared_keys_in_order() -> None:
    assert list(_native.arg_keys()) == list(ARG_KEYS)


def test_the_python_reader_decodes_the_declared_keys() -> None:
    info = msgspec.inspect.type_info(pydecode.RawArgs)
    assert isinstance(info, msgspec.inspect.StructType)
    assert [(f.name, f.encode_name) for f in info.fields] == [(a.attr, a.key) for a in ARG_COLUMNS]


def test_every_declared_column_is_in_the_schema_and_every_schema_column_has_a_source() -> None:
    declared = {c for a in ARG_COLUMNS for c in a.columns}
    assert declared <= set(COLUMNS), declared - set(COLUMNS)
    assert set(COLUMNS) == declared | EVENT_COLUMNS, set(COLUMNS) ^ (declared | EVENT_COLUMNS)
    assert len(set(ARG_KEYS)) == len(ARG_KEYS)  # a key is listed once
    assert len({a.attr for a in ARG_COLUMNS}) == len(ARG_COLUMNS)


def test_a_declared_key_reaches_its_column_through_both_readers(tmp_path, monkeypatch) -> None:
    # hand-made edge case: every declared argument of a kernel in one event, read by the native reader and by
    # the Python reference reader; both fill the declared columns with the same values
    import gzip
    import json

    import opscope

    args = {
        "External id": 7,
        "correlation": 9,
        "stream": 3,
        "device": 1,
        "grid": [2, 3, 4],
        "block": [32, 1, 1],
        "registers per thread": 40,
        "shared memory": 1024,
        "blocks per SM": 1.5,
        "warps per SM": 2.0,
        "est. achieved occupancy %": 25,
        "bytes": 4096,
        "memory bandwidth (GB/s)": 12.5,
    }
    event = {
        "ph": "X",
        "cat": "kernel",
        "name": "k",
        "pid": 1,
        "tid": 3,
        "ts": 10.0,
        "dur": 2.0,
        "args": args,
    }
    path = tmp_path / "declared.pt.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": [event]}).encode()))
    rows = []
    for reader in ("native", "python"):
        monkeypatch.setenv("OPSCOPE_READER", reader)
        trace = opscope.load(str(path), cache=False)
        rows.append(trace.events.filter(trace.events["name"].cast(pl.String) == "k").to_dicts()[0])
    native, python = rows
    assert native == python
    for arg in ARG_COLUMNS:
        if arg.key in args:
            assert all(native[c] is not None for c in arg.columns), arg
