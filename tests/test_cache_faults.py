"""A cache that can't be written or can't be trusted (issue 14): never an abort, never stale or damaged numbers.
Each test damages a real cache file or folder built from a real trace."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import opscope
from conftest import REPO, corpus_path
from opscope.ingest import cache as cache_mod
from opscope.ingest import loader

TRACE = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"  # 4,350 kernels


def kernels(cli, path: Path, *extra: str) -> tuple[int, str]:
    result = cli("summary", path, "--format", "json", "--top", "0", *extra)
    assert result.code == 0, result.err
    rows = json.loads(result.out)["rows"]
    return sum(r["calls"] for r in rows if r["kind"] == "kernel"), result.err


@pytest.fixture
def trace_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(loader, "_CACHE_BROKEN", set())
    path = tmp_path / "t.json.gz"
    shutil.copy(corpus_path(TRACE), path)
    return path


@pytest.mark.parametrize("offset", [0.1, 0.3, 0.5, 0.7, 0.9])
def test_damaged_cache_is_rebuilt_not_trusted(cli, trace_copy: Path, offset: float) -> None:
    assert kernels(cli, trace_copy)[0] == 4350
    target = cache_mod.cache_path(trace_copy)
    data = bytearray(target.read_bytes())
    at = int(len(data) * offset)
    data[at : at + 4] = bytes(b ^ 0xFF for b in data[at : at + 4])  # 4 bytes overwritten in place
    target.write_bytes(bytes(data))
    assert kernels(cli, trace_copy)[0] == 4350  # detected by the CRC, rebuilt
    assert cache_mod.read_cached(trace_copy) is not None  # and the rebuilt file is trusted again


def test_in_place_edit_with_mtime_restored_invalidates(trace_copy: Path, tmp_path: Path) -> None:
    opscope.load(trace_copy)
    stat = trace_copy.stat()
    other = corpus_path("hta/triton_example_triton_example.json.gz").read_bytes()
    trace_copy.write_bytes(other)
    os.utime(trace_copy, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # mtime as it was; size differs anyway
    shutil.copy(corpus_path(TRACE), tmp_path / "same-size")
    trace_copy.write_bytes((tmp_path / "same-size").read_bytes())  # same size, same mtime, new ctime
    os.utime(trace_copy, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert cache_mod.read_cached(trace_copy) is None  # the ctime moved: not served


@pytest.mark.parametrize("fault", ["file_in_the_way", "read_only", "full_disk", "full_disk_native"])
def test_unusable_cache_folder_warns_once_and_reads_without(
    cli, trace_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    folder = tmp_path / "cache"
    if fault == "file_in_the_way":
        folder.write_text("not a folder")
    elif fault == "read_only":
        folder.mkdir()

        real_open = os.open

        def refuse(path, *args, **kwargs):  # root ignores chmod, so the refusal is simulated where it happens
            if Path(path).parent == folder:
                raise PermissionError(13, "Permission denied", str(path))
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr(cache_mod.os, "open", refuse)
    elif fault == "full_disk_native":  # the native writer thread meets a full disk: /dev/full (ENOSPC)
        folder.mkdir()
        from opscope import _native

        def sink(path: str, schema):  # type: ignore[no-untyped-def]
            return _native.ParquetSink("/dev/full" if str(folder) in path else path, schema)

        monkeypatch.setattr(cache_mod, "_native_sink", lambda: sink)
    else:
        folder.mkdir()
        monkeypatch.setenv("OPSCOPE_CACHE_WRITER", "pyarrow")  # the fault is simulated in pyarrow's writer
        import pyarrow.parquet as pq

        real = pq.ParquetWriter.write_batch

        def full(self, *args, **kwargs):  # the disk under the cache folder is full
            if str(folder) in str(getattr(self, "where", "")):
                raise OSError(28, "No space left on device")
            return real(self, *args, **kwargs)

        monkeypatch.setattr(pq.ParquetWriter, "write_batch", full)
    calls, err = kernels(cli, trace_copy)
    assert calls == 4350
    assert err.count("cannot be used") == 1 and "reading without the cache" in err
    calls, err = kernels(cli, trace_copy)  # warned once per process
    assert calls == 4350 and "cannot be used" not in err
    assert not list(tmp_path.glob("cache/.tmp-*"))


def test_non_utf8_file_name(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    name = os.fsdecode(b"trace-\xff\xfe.json.gz")
    path = tmp_path / name
    shutil.copy(corpus_path(TRACE), path)
    assert kernels(cli, path)[0] == 4350
    assert kernels(cli, path)[0] == 4350  # served from the cache
    assert cache_mod.read_cached(path) is not None


def test_orphaned_temporary_files_are_removed(trace_copy: Path, tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    folder.mkdir()
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    orphan = folder / f".tmp-{dead}-abc.parquet"
    orphan.write_bytes(b"half a cache file")
    mine = folder / f".tmp-{os.getpid()}-live.parquet"
    mine.write_bytes(b"being written")
    opscope.load(trace_copy)
    assert not orphan.exists() and mine.exists()


def test_sigterm_during_a_cache_build_leaves_no_temporary_file(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    big = tmp_path / "big.json.gz"
    shutil.copy(corpus_path(TRACE), big)
    env = dict(os.environ, OPSCOPE_CACHE_DIR=str(cache), PYTHONPATH=str(REPO / "src"))
    # a reader that pauses mid-build, so the signal arrives while the temporary file exists
    code = (
        "import sys, time\nfrom opscope.ingest import kineto\nreal = kineto.read_batches\n"
        "def slow(path, name):\n    batches, finish = real(path, name)\n"
        "    def gen():\n        for b in batches:\n            yield b\n            time.sleep(0.5)\n"
        "    return gen(), finish\nkineto.read_batches = slow\n"
        "from opscope.cli.main import main\nsys.exit(main(['summary', sys.argv[1]]))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(big)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not list(cache.glob(".tmp-*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(cache.glob(".tmp-*")), "the cache build did not start"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and "terminated" in err
    assert not list(cache.glob(".tmp-*"))


def test_native_crc_equals_zlib(trace_copy: Path) -> None:
    import zlib

    from opscope import _native

    opscope.load(trace_copy)
    target = cache_mod.cache_path(trace_copy)
    assert _native.file_crc32(str(target)) == zlib.crc32(target.read_bytes()) == cache_mod.file_crc(target)


@pytest.mark.parametrize("size", [0, 1, 4095, (16 << 20) + 1, (40 << 20) + 3])
def test_native_crc_of_ranges_equals_zlib(tmp_path: Path, size: int) -> None:
    """Files over 16 MiB are hashed in ranges by several threads and the CRCs combined: the same value as
    zlib's over the whole file, whatever the size (odd sizes: ranges of unequal length)."""
    import random
    import zlib

    from opscope import _native

    data = random.Random(size).randbytes(size)
    path = tmp_path / "blob.bin"
    path.write_bytes(data)
    assert _native.file_crc32(str(path)) == zlib.crc32(data)


def test_a_signal_right_after_the_temporary_file_exists_leaves_nothing(tmp_path: Path, monkeypatch) -> None:
    """Under load (the full suite on two cores) SIGTERM once landed between creating the temporary file and
    recording its name, and the file stayed. The name is now recorded first: an interrupt raised the moment the
    file exists (here: as its descriptor is closed) still removes it."""
    folder = tmp_path / "cache"
    folder.mkdir()
    source = tmp_path / "t.json"
    source.write_text('{"traceEvents": []}')
    real_close = os.close

    def interrupted(fd: int) -> None:
        real_close(fd)
        raise KeyboardInterrupt  # what the SIGTERM handler raises in the main thread, at the worst moment

    monkeypatch.setattr(cache_mod.os, "close", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cache_mod.CacheWriter(source, folder / "t.parquet")
    monkeypatch.undo()
    assert not list(folder.glob(".tmp-*"))
