"""A database format opscope recognises before it can read it says so plainly, in one line, instead of failing
as a damaged Nsight Systems export (the mechanism: `registry.SQLITE_NOT_READ`, empty now that AMD's rpd, rocpd
and rocprof-compute databases are read; tested with a made-up entry and a hand-made database)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from opscope.errors import NotReadYet
from opscope.ingest import registry
from opscope.ingest.registry import detect


@pytest.fixture
def future_format(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setattr(
        registry,
        "SQLITE_NOT_READ",
        (("a future profiler's database", "future_dispatch_", "export it as JSON"),),
    )
    path = tmp_path / "future.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE future_dispatch_0000a1b2 (id INTEGER, start INTEGER, end INTEGER)")
    return path


def test_a_recognised_database_is_named(future_format: Path) -> None:
    with pytest.raises(NotReadYet, match=re.escape("a future profiler's database: recognised, but opscope")):
        detect(future_format, str(future_format))


def test_the_not_read_answer_is_one_line(future_format: Path, cli) -> None:
    done = cli("summary", str(future_format))
    assert done.code == 2
    assert done.err.count("\n") == 1 and "recognised, but opscope does not read it yet" in done.err
    assert "export it as JSON" in done.err


@pytest.mark.corpus
def test_an_nsys_export_is_still_read() -> None:
    from conftest import corpus_path

    path = corpus_path("pipit/cloverleaf-nsys__perlmutter-cloverleaf-cuda.sqlite")
    assert detect(path, str(path)).name == "nsys"
