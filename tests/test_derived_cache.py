"""The link table kept beside the trace cache (issue 25 item 3, ingest/derived.py): a second command reads it
back, equal to a fresh computation; a stale, damaged or unwritable store is never an error, only a recompute."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import polars as pl
import pytest

import opscope
from conftest import corpus_path
from opscope.analysis.base import linking
from opscope.ingest.derived import derived_folder, wait_for_saves

V100 = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"


@pytest.fixture
def cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "trace.pt.trace.json.gz"
    shutil.copyfile(corpus_path(V100), source)
    return source


def fresh_link(path: Path) -> linking.Linkage:
    return linking._link(opscope.load(path, cache=False))


def same(a: linking.Linkage, b: linking.Linkage) -> bool:
    return (
        a.stats == b.stats
        and a.gpu.equals(b.gpu)
        and a.scopes.equals(b.scopes)
        and a.gpu.schema == b.gpu.schema
    )


def test_a_second_command_reads_the_link_table_back(cached: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = linking.link(opscope.load(cached))
    wait_for_saves()  # the store is written on a thread of its own
    assert any(derived_folder(p).is_dir() for p in (Path(os.environ["OPSCOPE_CACHE_DIR"])).glob("*.parquet"))

    def no_linking(trace: object) -> linking.Linkage:
        raise AssertionError("linked again instead of reading the stored table")

    with monkeypatch.context() as m:
        m.setattr(linking, "_announced_link", no_linking)
        second = linking.link(opscope.load(cached))
    assert same(second, first) and same(second, fresh_link(cached))
    assert second.gpu.schema[linking.Col.NAME] == pl.Categorical or isinstance(
        second.gpu.schema[linking.Col.NAME], pl.Categorical
    )


def test_outputs_are_the_same_with_the_stored_table(cached: Path, cli) -> None:
    cold = cli("analyze", cached, "--format", "json")
    warm = cli("analyze", cached, "--format", "json")  # reads the stored link table
    uncached = cli("analyze", cached, "--format", "json", "--no-cache")
    assert cold.code == warm.code == uncached.code == 0
    assert json.loads(warm.out) == json.loads(cold.out) == json.loads(uncached.out)


def test_a_changed_trace_is_linked_again(cached: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    linking.link(opscope.load(cached))
    shutil.copyfile(corpus_path("hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"), cached)
    calls = []
    real = linking._announced_link

    def counting(trace: opscope.Trace) -> linking.Linkage:
        calls.append(1)
        return real(trace)

    monkeypatch.setattr(linking, "_announced_link", counting)
    relinked = linking.link(opscope.load(cached))
    assert calls == [1] and same(relinked, fresh_link(cached))


def test_a_damaged_store_is_recomputed_and_an_unwritable_one_is_no_error(cached: Path) -> None:
    linking.link(opscope.load(cached))
    wait_for_saves()
    cache = Path(os.environ["OPSCOPE_CACHE_DIR"])
    damaged = list(cache.glob("*.parquet.derived/*/*.parquet"))
    assert damaged  # the store was written, so there is something to damage
    for part in damaged:
        part.write_bytes(b"not parquet")
    assert same(linking.link(opscope.load(cached)), fresh_link(cached))
    for folder in cache.glob("*.parquet.derived"):
        shutil.rmtree(folder)
        folder.write_text("a file where the store's folder would go")  # unwritable, even for root
    assert same(linking.link(opscope.load(cached)), fresh_link(cached))


def test_the_code_tag_is_the_same_in_every_process() -> None:
    import subprocess
    import sys

    program = "from opscope.analysis.base.linking import _code_tag; print(_code_tag())"
    tags = {
        subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True).stdout
        for _ in range(2)
    }
    assert tags == {linking._code_tag() + "\n"}


def test_results_of_other_code_are_removed_when_one_is_saved(cached: Path) -> None:
    """A result stored by other code (another tag, the same name) is removed once this code's is written;
    other names, and names that only start alike, are kept."""
    linking.link(opscope.load(cached))
    wait_for_saves()
    (store,) = Path(os.environ["OPSCOPE_CACHE_DIR"]).glob("*.parquet.derived")
    (mine,) = store.iterdir()
    stale = [store / "link-0123456789abcdef", store / "link-fedcba9876543210"]
    kept = [store / "links-0123456789abcdef", store / "other-0123456789abcdef"]
    for folder in stale + kept:
        shutil.copytree(mine, folder)
    shutil.rmtree(mine)  # this code's result is gone: the next command links and saves again
    linking.link(opscope.load(cached))
    wait_for_saves()
    assert sorted(p.name for p in store.iterdir()) == sorted([mine.name, *(p.name for p in kept)])
