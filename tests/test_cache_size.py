"""The cache folder's size bound and `opscope cache info / prune / clear` (ingest/cache_size.py): the least
recently used traces' files go first, never one in use, never a file the cache did not write. Real traces of the
corpus, copied into a temporary folder and read through a temporary cache."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

import opscope
from conftest import corpus_path
from opscope.ingest import cache as cache_mod
from opscope.ingest import cache_size, loader
from opscope.ingest.derived import derived_folder

SOURCES = (
    "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "hta/triton_example_triton_example.json.gz",
    "tracelens/h100__Falconsai_nsfw_image_detection__1016002.json.gz",
)
HOUR = cache_size.IN_USE_S


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(cache))
    monkeypatch.delenv(cache_size.ENV, raising=False)
    monkeypatch.setattr(loader, "_CACHE_BROKEN", set())
    monkeypatch.setattr(cache_size, "PRUNE_EVERY_S", 0)  # every new table prunes (one test keeps the pause)
    return cache


def copies(tmp_path: Path) -> list[Path]:
    """The corpus traces, copied (each cache entry is keyed by its trace's path)."""
    out = []
    for i, relative in enumerate(SOURCES):
        path = tmp_path / f"t{i}.json.gz"
        shutil.copy(corpus_path(relative), path)
        out.append(path)
    return out


def used(table: Path, seconds_ago: float) -> None:
    """Make the entry of `table` look last used `seconds_ago` (its .crc's time, as a cache hit sets it)."""
    when = time.time() - seconds_ago
    os.utime(cache_size.crc_path(table), (when, when))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10G", 10 * 10**9),
        ("500M", 500 * 10**6),
        ("2.5GB", int(2.5 * 10**9)),
        ("8GiB", 8 * 2**30),
        ("64ki", 64 * 1024),
        ("1000000", 1_000_000),
        ("0", 0),
        (" 3 t ", 3 * 10**12),
        ("none", None),
        ("Unlimited", None),
    ],
)
def test_sizes(text: str, expected: int | None) -> None:
    assert cache_size.parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "G", "-1G", "10X", "1e9", "i", "10 G B", "ten"])
def test_not_sizes(text: str) -> None:
    with pytest.raises(ValueError, match="not a size"):
        cache_size.parse_size(text)


def test_a_cache_hit_marks_its_entry_used(folder: Path, tmp_path: Path) -> None:
    (trace,) = copies(tmp_path)[:1]
    opscope.load(trace)
    table = cache_mod.cache_path(trace)
    used(table, 5 * HOUR)
    before = cache_size.entries(folder)[0].last_used
    opscope.load(trace)  # a hit
    (entry,) = cache_size.entries(folder)
    assert entry.table == table and entry.last_used > before + 4 * HOUR
    assert table.stat().st_mtime_ns < cache_size.crc_path(table).stat().st_mtime_ns  # the table is untouched


def test_writing_a_table_removes_the_least_recently_used_down_to_the_bound(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli
) -> None:
    first, second, third = copies(tmp_path)
    for trace in (first, second):
        assert cli("advise", trace, "--format", "json").code == 0  # a table and results beside it
    tables = [cache_mod.cache_path(t) for t in (first, second, third)]
    assert derived_folder(tables[0]).is_dir() and derived_folder(tables[1]).is_dir()
    used(tables[0], 3 * HOUR)  # the least recently used
    used(tables[1], 2 * HOUR)
    foreign = folder / "notes.txt"  # not the cache's: never removed
    foreign.write_text("mine")
    sizes = {e.table: e.bytes for e in cache_size.entries(folder)}
    # room for the second entry and the new one, not for the first as well
    monkeypatch.setenv(cache_size.ENV, str(sizes[tables[1]] + 4 * sizes[tables[1]]))
    opscope.load(third)  # a new table: the folder is pruned
    left = {e.table for e in cache_size.entries(folder)}
    assert left == {tables[1], tables[2]}
    for gone in (tables[0], cache_size.crc_path(tables[0]), derived_folder(tables[0])):
        assert not gone.exists()
    assert foreign.read_text() == "mine"
    # the same command on the removed trace reads it again, with the same figures
    assert cli("summary", first, "--format", "json").code == 0
    assert cache_mod.read_cached(first) is not None


def test_entries_in_use_are_kept_whatever_the_bound(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    traces = copies(tmp_path)
    for trace in traces[:2]:
        opscope.load(trace)
    tables = [cache_mod.cache_path(t) for t in traces]
    used(tables[0], HOUR / 2)  # used half an hour ago: another command may still read it
    used(tables[1], 2 * HOUR)
    monkeypatch.setenv(cache_size.ENV, "0")
    opscope.load(traces[2])
    assert {e.table for e in cache_size.entries(folder)} == {tables[0], tables[2]}


@pytest.mark.parametrize("setting", ["none", "not-a-size"])
def test_no_bound_or_a_bad_setting_removes_nothing(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str
) -> None:
    traces = copies(tmp_path)
    opscope.load(traces[0])
    used(cache_mod.cache_path(traces[0]), 10 * HOUR)
    monkeypatch.setenv(cache_size.ENV, setting)
    opscope.load(traces[1])  # reading a trace never fails for the cache's sake
    assert len(cache_size.entries(folder)) == 2


def test_results_left_without_their_table_are_an_entry(folder: Path, tmp_path: Path, cli) -> None:
    (trace,) = copies(tmp_path)[:1]
    assert cli("analyze", trace, "--format", "json").code == 0
    table = cache_mod.cache_path(trace)
    table.unlink()
    cache_size.crc_path(table).unlink()
    (entry,) = cache_size.entries(folder)
    assert entry.table == table and entry.table_bytes == 0 and entry.derived_bytes > 0
    assert cache_size.prune(folder, 0, now=time.time() + 2 * HOUR) == [entry]
    assert not derived_folder(table).exists()


def test_cache_command_info_prune_clear(folder: Path, tmp_path: Path, cli) -> None:
    traces = copies(tmp_path)
    for trace in traces:
        assert cli("summary", trace, "--format", "json").code == 0
    tables = [cache_mod.cache_path(t) for t in traces]
    used(tables[0], 3 * HOUR)
    used(tables[1], 2 * HOUR)
    foreign = folder / "keep.parquet"  # a name the cache never writes
    foreign.write_bytes(b"not ours")

    info = cli("cache", "info", "--format", "json")
    assert info.code == 0, info.err
    data = json.loads(info.out)
    assert data["schema"] == "opscope.cache.info/1" and data["folder"] == str(folder)
    assert data["max_bytes"] == 10 * 10**9
    assert [e["trace"] for e in data["entries"]] == [
        str(t.resolve()) for t in (traces[2], traces[1], traces[0])
    ]
    on_disk = {t.name: t.stat().st_size + cache_size.crc_path(t).stat().st_size for t in tables}
    assert {e["table"]: e["table_bytes"] for e in data["entries"]} == on_disk
    assert data["bytes"] == sum(e["bytes"] for e in data["entries"])
    # each entry: its table and the results kept beside it (the validity checks `summary` ran, issue 52)
    whole = {e["table"]: e["bytes"] for e in data["entries"]}
    assert all(whole[name] >= size for name, size in on_disk.items())
    assert str(traces[0].resolve()) in cli("cache", "info", "--wide").out

    pruned = cli("cache", "prune", "--max", "0", "--format", "json")
    assert pruned.code == 0, pruned.err
    data = json.loads(pruned.out)
    assert data["schema"] == "opscope.cache.prune/1" and data["max_bytes"] == 0
    assert [e["table"] for e in data["removed"]] == [tables[0].name, tables[1].name]  # oldest first
    assert [e["trace"] for e in data["removed"]] == [str(t.resolve()) for t in traces[:2]]  # read before
    assert data["bytes_freed"] == whole[tables[0].name] + whole[tables[1].name]
    assert data["bytes_left"] == whole[tables[2].name]  # used just now: kept

    cleared = cli("cache", "clear", "--format", "json")
    assert cleared.code == 0, cleared.err
    data = json.loads(cleared.out)
    assert data["schema"] == "opscope.cache.clear/1" and data["bytes_left"] == 0
    assert [e["table"] for e in data["removed"]] == [tables[2].name]
    assert cache_size.entries(folder) == [] and foreign.read_bytes() == b"not ours"


def test_cache_command_refuses_bad_sizes_and_writing_over_the_cache(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli
) -> None:
    (trace,) = copies(tmp_path)[:1]
    assert cli("summary", trace).code == 0
    table = cache_mod.cache_path(trace)
    result = cli("cache", "prune", "--max", "ten")
    assert result.code == 2 and result.err.startswith("opscope: error: --max 'ten' is not a size")
    result = cli("cache", "info", "-o", table)
    assert result.code == 2 and "refusing to overwrite it" in result.err
    assert cache_mod.read_cached(trace) is not None  # the table is intact
    monkeypatch.setenv(cache_size.ENV, "lots")
    result = cli("cache", "info")
    assert result.code == 2 and result.err.startswith(
        f"opscope: error: {cache_size.ENV}: 'lots' is not a size"
    )
    assert len(result.err.splitlines()) == 1


def test_cache_command_on_an_empty_or_missing_folder(folder: Path, cli) -> None:
    for sub in ("info", "prune", "clear"):
        result = cli("cache", sub, "--format", "json")
        assert result.code == 0, result.err
        assert not folder.exists()  # looking does not create it
    assert json.loads(cli("cache", "info", "--format", "json").out)["entries"] == []


def test_hostile_trace_names_are_shown_inert(folder: Path, tmp_path: Path, cli) -> None:
    hostile = tmp_path / "t\x1b[31mred\nline`|.json.gz"
    shutil.copy(corpus_path(SOURCES[1]), hostile)
    assert cli("summary", hostile, "--format", "json").code == 0
    for fmt in ("table", "markdown", "csv"):
        out = cli("cache", "info", "--format", fmt, "--wide").out
        assert "\x1b" not in out and "red\nline" not in out, fmt
    assert json.loads(cli("cache", "info", "--format", "json").out)["entries"][0]["trace"] == str(
        hostile.resolve()
    )


def test_a_folder_is_pruned_at_most_once_a_minute(folder: Path, tmp_path: Path, monkeypatch) -> None:
    """Measuring the folder reads every entry: done once per PRUNE_EVERY_S, so that a thousand new traces
    read it a few times, not a thousand (quadratic)."""
    monkeypatch.setattr(cache_size, "PRUNE_EVERY_S", 60)
    traces = copies(tmp_path)
    opscope.load(traces[0])  # the first table: the folder is measured, the marker set
    table = cache_mod.cache_path(traces[0])
    used(table, 2 * HOUR)
    measured: list[Path] = []
    monkeypatch.setattr(cache_size, "prune", lambda f, *a, **k: measured.append(f) or [])
    monkeypatch.setenv(cache_size.ENV, "0")
    opscope.load(traces[1])  # within the minute: not measured
    assert measured == []
    when = time.time() - 61
    os.utime(folder / cache_size.PRUNED, (when, when))
    opscope.load(traces[2])  # a minute later: measured again
    assert measured == [folder]
