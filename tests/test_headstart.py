"""The native reader's head start (`ingest/headstart.py`): started by the CLI before the imports, handed to the
Kineto reader only for the same unchanged file, never started where it could not be used, never left behind;
and a command's answer is the same with and without it."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import corpus_path
from opscope.cli.main import main
from opscope.ingest import headstart, kineto

TRACE = "kineto/tb_plugin_samples_resnet50_profiler_api_num_workers_4_worker0.pt.trace.json.gz"


@pytest.fixture(autouse=True)
def _clean() -> None:
    headstart.cancel()
    yield
    headstart.cancel()


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "trace.json.gz"
    shutil.copyfile(corpus_path(TRACE), target)
    return target


def test_the_reader_started_ahead_is_taken_for_the_same_file(tmp_path: Path) -> None:
    trace = _copy(tmp_path)
    headstart.begin(str(trace))
    started = headstart._started
    assert started is not None
    assert kineto.open_reader(trace) is started[1]
    assert headstart._started is None  # taken once
    assert kineto.open_reader(trace) is not started[1]


def test_a_changed_file_is_read_afresh(tmp_path: Path) -> None:
    trace = _copy(tmp_path)
    headstart.begin(str(trace))
    os.utime(trace, ns=(1, 1))
    assert headstart.take(trace) is None


def test_another_file_is_not_given_the_reader(tmp_path: Path) -> None:
    trace = _copy(tmp_path)
    other = tmp_path / "other.json.gz"
    shutil.copyfile(trace, other)
    headstart.begin(str(trace))
    assert headstart.take(other) is None


@pytest.mark.parametrize("setting", [("OPSCOPE_READER", "python"), ("OPSCOPE_HEADSTART", "0")])
def test_nothing_starts_when_switched_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: tuple[str, str]
) -> None:
    monkeypatch.setenv(*setting)
    headstart.begin(str(_copy(tmp_path)))
    assert headstart._started is None


def test_nothing_starts_for_other_formats_folders_or_missing_files(tmp_path: Path) -> None:
    # hand-made: a rocprofv3 JSON head, which the rocprof reader takes before the Kineto one
    rocprof = tmp_path / "results.json"
    rocprof.write_text(json.dumps({"rocprofiler-sdk-tool": [{"metadata": {}}]}))
    sqlite = tmp_path / "x.sqlite"
    sqlite.write_bytes(b"SQLite format 3\x00" + bytes(100))
    for path in (rocprof, sqlite, tmp_path, tmp_path / "missing.json"):
        headstart.begin(str(path))
        assert headstart._started is None, path


def test_nothing_starts_for_a_cached_trace(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    trace = _copy(tmp_path)
    assert cli("summary", trace, "--format", "json").code == 0  # writes the cache
    headstart.begin(str(trace))
    assert headstart._started is None
    headstart.begin(str(trace), cache=False)  # --no-cache parses again: worth a head start
    assert headstart._started is not None


def test_the_cli_answer_is_the_same_with_and_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _copy(tmp_path)
    outputs = []
    for setting in ("1", "0"):
        monkeypatch.setenv("OPSCOPE_HEADSTART", setting)
        assert main(["summary", str(trace), "--no-cache", "--format", "json", "--top", "0"]) == 0
        outputs.append(json.loads(capsys.readouterr().out))
        assert headstart._started is None  # taken, or dropped when the command ends
    assert outputs[0] == outputs[1]
    assert outputs[0]["trace"]["events"] > 0


def test_a_reader_nobody_takes_is_dropped_when_the_command_ends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _copy(tmp_path)
    # an argument error after the start: the command never reads the trace
    assert main(["summary", str(trace), "--top", "-1"]) != 0
    assert headstart._started is None


def test_head_bytes_decompresses_only_the_head_and_equals_the_stream(tmp_path: Path) -> None:
    """Format detection's head: the first 64 KiB of the decompressed stream, across gzip members, up to damage
    (hand-made gzip files: members, a cut, junk after a member, empty), and of a real trace."""
    import gzip

    from opscope.ingest.source import ChunkReader, head_bytes

    data = os.urandom(10) + b"x" * 300_000
    cases = {
        "members.gz": gzip.compress(data[:5]) + gzip.compress(data[5:100]) + gzip.compress(data[100:]),
        "one.gz": gzip.compress(data),
        "plain": data,
        "cut.gz": gzip.compress(data)[:50],
        "junk.gz": gzip.compress(data[:100]) + b"junkjunk",
        "empty": b"",
    }
    for name, content in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        stream = b"".join(ChunkReader(path, chunk_bytes=1 << 16, report_progress=False))
        assert head_bytes(path) == stream[: 1 << 16], name
    real = corpus_path(TRACE)
    assert head_bytes(real) == next(iter(ChunkReader(real, report_progress=False)))[: 1 << 16]


def test_a_dropped_reader_stops_its_threads(tmp_path: Path) -> None:
    """A head-start reader nobody takes holds threads blocked on full channels (a trace larger than what it may
    read ahead); dropping it must end them all, not leave them waiting for the process to exit. Hand-made trace:
    ~150 MB of one repeated kernel event (gzip), more than the reader's ~120 MB of read-ahead."""
    import gc
    import gzip
    import time

    def threads() -> int:
        return len(os.listdir("/proc/self/task"))

    def settled() -> int:  # readers dropped by earlier tests end their threads in the background
        count, since = threads(), time.monotonic()
        while time.monotonic() - since < 0.5:
            time.sleep(0.05)
            if threads() != count:
                count, since = threads(), time.monotonic()
        return count

    event = b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":2,"args":{"stream":7}},\n'
    trace = tmp_path / "big.json.gz"
    with gzip.open(trace, "wb", compresslevel=1) as out:
        out.write(b'{"traceEvents":[\n')
        block = event * 10_000
        for _ in range(160):
            out.write(block)
        out.write(event.rstrip(b",\n") + b"]}")
    gc.collect()
    before = settled()
    headstart.begin(str(trace))
    assert headstart._started is not None
    time.sleep(0.5)  # let it fill its channels and block
    assert threads() > before
    headstart.cancel()
    gc.collect()
    deadline = time.monotonic() + 10
    while threads() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threads() <= before
