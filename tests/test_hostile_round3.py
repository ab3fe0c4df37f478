"""Hostile input, round 3 (issue 32): the small defects, each with the reproduction from the issue. Inputs
are real corpus traces; the options are the hostile part."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import opscope
from conftest import corpus_path
from opscope.errors import InputError

MI250 = "hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"


def test_load_of_a_non_path_is_an_input_error() -> None:
    for wrong in (5, 3.5, ["a.json"], b"a.json", object()):
        with pytest.raises(InputError, match="must be a string or a path"):
            opscope.load(wrong)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "options",
    [
        ("-j", "-3"),
        ("-j", "0"),
        ("--connect-timeout", "0"),
        ("--connect-timeout", "nan"),
        ("--scheduler", "garbage"),
    ],
)
def test_parallel_options_are_checked_with_one_trace_too(cli, options: tuple[str, ...]) -> None:
    started = time.monotonic()
    result = cli("summary", corpus_path(MI250), *options)
    assert result.code == 2, result.err
    assert result.err.count("\n") == 1 and "opscope: error:" in result.err
    assert time.monotonic() - started < 10  # no waiting for a scheduler that cannot exist


def test_a_scheduler_address_is_checked_before_connecting(cli) -> None:
    result = cli("diff", corpus_path(MI250), corpus_path(MI250), "--scheduler", "not an address")
    assert result.code == 2 and "--scheduler" in result.err and "Traceback" not in result.err


@pytest.mark.parametrize("window", ["1e308:1e309", "nan:5", "0:inf", "-1e16:0"])
def test_export_window_bounds_are_checked_before_arithmetic(cli, tmp_path: Path, window: str) -> None:
    out = tmp_path / "cut.json"
    result = cli("export", corpus_path(MI250), "--window", window, "-o", out)
    assert result.code == 2, result.err
    assert "--window" in result.err and not out.exists()


@pytest.mark.parametrize("relative", ["pipit/cloverleaf-nsys__perlmutter-cloverleaf-cuda.sqlite"])
def test_export_of_a_format_it_cannot_copy_is_refused(cli, tmp_path: Path, relative: str) -> None:
    # it wrote {"traceEvents": []} with exit 0
    out = tmp_path / "cut.json"
    result = cli("export", corpus_path(relative), "-o", out)
    assert result.code == 2 and "Chrome-trace JSON" in result.err and not out.exists()
    parquet = tmp_path / "events.parquet"
    assert (
        cli("export", corpus_path(relative), "--parquet", "-o", parquet).code == 0
    )  # the table still goes out
    assert parquet.stat().st_size > 0


def test_export_of_a_kineto_trace_still_works(cli, tmp_path: Path) -> None:
    out = tmp_path / "cut.json"
    assert cli("export", corpus_path(MI250), "-o", out).code == 0
    assert json.loads(out.read_text())["traceEvents"]


@pytest.mark.parametrize("reader", ["native", "python"])
def test_a_kernel_without_a_duration_is_counted_in_a_warning(
    cli, tmp_path: Path, monkeypatch, reader: str
) -> None:
    # hand-made: a kernel with no `dur` disappeared from every figure without a word
    events = [
        {"ph": "X", "cat": "kernel", "name": "no_dur", "pid": 0, "tid": 7, "ts": 10.0, "args": {"device": 0}},
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": 0,
            "tid": 7,
            "ts": 20.0,
            "dur": 2.0,
            "args": {"device": 0},
        },
    ]
    path = tmp_path / "nodur.json"
    path.write_text(json.dumps({"traceEvents": events}))
    monkeypatch.setenv("OPSCOPE_READER", reader)
    for command in ("summary", "analyze"):
        result = cli(command, path, "--format", "json", "--no-cache")
        assert result.code == 0, result.err
        warnings = json.loads(result.out)["warnings"]
        assert any("1 kernel / memcpy / memset event without a duration" in w for w in warnings), warnings


def _disk_full(monkeypatch) -> None:
    from opscope.ingest import cache as cache_module

    def full(self, batches) -> None:  # type: ignore[no-untyped-def]
        for _ in batches:
            raise cache_module.CacheWriteError(28, "No space left on device", str(self.tmp))

    monkeypatch.setattr(cache_module.CacheWriter, "write_all", full)


def test_a_full_disk_still_reads_the_trace_in_memory(cli, monkeypatch, tmp_path: Path) -> None:
    # issue 32 item 4 (simulated ENOSPC on the cache and on the scratch spool): every command failed, and the
    # error said the *input* could not be read
    monkeypatch.setenv(
        "OPSCOPE_CACHE_DIR", str(tmp_path / "empty-cache")
    )  # nothing cached: the cache is written
    path = corpus_path(MI250)
    expected = cli("summary", path, "--format", "json", "--no-cache")
    _disk_full(monkeypatch)
    for options in ((), ("--no-cache",)):
        result = cli("summary", path, "--format", "json", *options)
        assert result.code == 0, result.err
        assert json.loads(result.out)["rows"] == json.loads(expected.out)["rows"]
        assert "holding it in memory" in result.err


def test_a_full_disk_and_a_trace_too_large_for_memory_is_a_write_error(cli, monkeypatch) -> None:
    from opscope.ingest import loader

    _disk_full(monkeypatch)
    monkeypatch.setattr(loader, "MEMORY_TABLE_BYTES", 1)
    result = cli("summary", corpus_path(MI250), "--no-cache")
    assert result.code == 2
    assert "cannot write the scratch table" in result.err and "cannot read" not in result.err


def test_scratch_tables_live_in_the_cache_folder_and_are_swept(tmp_path: Path, monkeypatch) -> None:
    # issue 32 item 7: --no-cache scratch folders leaked in $TMPDIR after SIGKILL
    import gc
    import subprocess
    import sys

    cache = tmp_path / "cache"
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(cache))
    cache.mkdir()
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    orphan = cache / f".scratch-{dead.stdout.strip()}-left"  # a process that no longer runs
    (orphan / "x").mkdir(parents=True)
    trace = opscope.load(corpus_path(MI250), cache=False)
    scratch = [p for p in cache.glob(".scratch-*") if p != orphan]
    assert len(scratch) == 1 and not orphan.exists()
    assert trace.count() > 0
    del trace
    gc.collect()
    assert not scratch[0].exists()


def test_no_resource_warning_for_an_uncached_trace(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    program = "import opscope, sys; t = opscope.load(sys.argv[1], cache=False); print(t.count())"
    done = subprocess.run(
        [sys.executable, "-W", "error::ResourceWarning", "-c", program, str(corpus_path(MI250))],
        capture_output=True,
        text=True,
        env={**os.environ, "OPSCOPE_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert done.returncode == 0 and "ResourceWarning" not in done.stderr, done.stderr
    assert not list((tmp_path / "cache").glob(".scratch-*"))  # removed at exit


def test_export_keeps_events_with_invalid_utf8_and_says_so(cli, tmp_path: Path) -> None:
    # hand-made: export dropped them (summary keeps them with U+FFFD and a warning)
    source = tmp_path / "bad.json"
    source.write_bytes(
        b'{"traceEvents": [{"ph":"X","cat":"kernel","name":"bad\xff\xfename","pid":0,"tid":7,"ts":10.0,"dur":2,'
        b'"args":{"device":0}}, {"ph":"X","cat":"kernel","name":"ok","pid":0,"tid":7,"ts":20.0,"dur":2,'
        b'"args":{"device":0}}]}'
    )
    out = tmp_path / "out.json"
    result = cli("export", source, "-o", out)
    assert result.code == 0, result.err
    names = [e["name"] for e in json.loads(out.read_text(encoding="utf-8"))["traceEvents"]]
    assert names == ["bad\ufffd\ufffdname", "ok"]
    assert "1 event with invalid UTF-8 kept" in result.err


def _kineto_with_ids(path: Path, big: int) -> Path:
    kernel_args = {
        "device": big,
        "stream": big,
        "correlation": big,
        "External id": big,
        "grid": [big, 1, 1],
        "block": [1, 1, 1],
        "registers per thread": big,
    }
    events = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": big,
            "tid": big,
            "ts": 10.0,
            "dur": 2.0,
            "args": kernel_args,
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 9.0,
            "dur": 0.5,
            "args": {"correlation": big, "External id": big},
        },
    ]
    path.write_text(json.dumps({"traceEvents": events, "deviceProperties": [{"id": big, "name": "G"}]}))
    return path


def _rocprof_csv_with_ids(path: Path, big: int) -> Path:
    path.write_text(
        "Index,KernelName,gpu-id,queue-id,queue-index,pid,tid,grd,wgr,lds,scr,arch_vgpr,accum_vgpr,sgpr,"
        "wave_size,sig,obj,DispatchNs,BeginNs,EndNs,CompleteNs\n"
        f"0,k.kd,{big},{big},0,1,1,{big},1,0,0,{big},0,16,64,0,0,1,100,200,300\n"
    )
    return path


def _rocprof_json_with_ids(path: Path, big: int) -> Path:
    tool = {
        "agents": [{"id": {"handle": big}, "type": 2, "name": "gfx950", "logical_node_type_id": big}],
        "kernel_symbols": [{"kernel_id": big, "formatted_kernel_name": "k", "arch_vgpr_count": big}],
        "buffer_records": {
            "kernel_dispatch": [
                {
                    "start_timestamp": 100,
                    "end_timestamp": 200,
                    "dispatch_info": {
                        "agent_id": {"handle": big},
                        "kernel_id": big,
                        "grid_size": {"x": big, "y": 1, "z": 1},
                        "workgroup_size": {"x": 1, "y": 1, "z": 1},
                    },
                    "correlation_id": {"internal": big},
                    "stream_id": {"handle": big},
                }
            ]
        },
    }
    path.write_text(json.dumps({"rocprofiler-sdk-tool": [tool]}))
    return path


def _jax_with_ids(path: Path, big: int) -> Path:
    events = [
        {"ph": "M", "name": "process_name", "pid": 5, "args": {"name": f"/device:GPU:{big}"}},
        {"ph": "M", "name": "thread_name", "pid": 5, "tid": 7, "args": {"name": f"Stream #{big}(Compute)"}},
        {"ph": "X", "name": "k", "pid": 5, "tid": 7, "ts": 10.0, "dur": 2.0, "args": {"correlation_id": big}},
    ]
    path.write_text(json.dumps({"traceEvents": events}))
    return path


@pytest.mark.parametrize("big", [2**31, 2**53, 10**12])
@pytest.mark.parametrize(
    ("reader", "make"),
    [
        ("native", _kineto_with_ids),
        ("python", _kineto_with_ids),
        ("native", _rocprof_csv_with_ids),
        ("native", _rocprof_json_with_ids),
        ("native", _jax_with_ids),
        ("python", _jax_with_ids),
    ],
    ids=["kineto-native", "kineto-python", "rocprof-csv", "rocprofv3-json", "jax-native", "jax-python"],
)
def test_ids_of_every_reader_at_2_31_2_53_and_10_12(
    cli, tmp_path: Path, monkeypatch, reader: str, make, big: int
) -> None:
    """Issue 32 item 3 (hand-made; the Nsight SQLite reader has its own test in test_sqlite_untrusted.py):
    device, stream, correlation, kernel and agent ids, grid and registers at 2^31, 2^53 and 10^12 index
    nothing dense; what does not fit a 32-bit column is left empty with a warning. The rocprof readers and
    JAX's trace.json (device and stream numbers in process / thread names) rejected the whole file
    (`Integer value ... not in range`)."""
    suffix = {"_rocprof_csv_with_ids": "results.csv"}.get(make.__name__, "trace.json")
    path = make(tmp_path / suffix, big)
    monkeypatch.setenv("OPSCOPE_READER", reader)
    started = time.monotonic()
    result = cli("summary", path, "--format", "json", "--no-cache")
    assert result.code == 0, result.err
    assert time.monotonic() - started < 30
    data = json.loads(result.out)
    assert [(r["name"], r["calls"]) for r in data["rows"]] == [("k", 1)]
    assert any("beyond" in w for w in data["warnings"]), data["warnings"]  # the device id, in each
