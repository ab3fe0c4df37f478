"""AMD's SQLite outputs that opscope recognises but has no reader for yet (until their readers exist, detection
says so plainly, and the corpus tests skip such files by that answer instead of failing as if they were damaged
Nsight Systems exports): a hand-made rocpd database (labelled: its tables named as rocprofiler-sdk names them,
with the run's uuid suffix, and no rows). rpd files and rocprof-compute databases are read (tests/test_rpd.py,
tests/test_rocprof_compute.py)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from conftest import corpus_path
from opscope.errors import NotReadYet
from opscope.ingest.registry import detect


def test_a_rocpd_database_is_recognised(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    with sqlite3.connect(path) as db:
        uuid = "0000a1b2_c3d4_e5f6"
        db.execute(f"CREATE TABLE rocpd_kernel_dispatch_{uuid} (id INTEGER, start INTEGER, end INTEGER)")
        db.execute(f"CREATE TABLE rocpd_string_{uuid} (id INTEGER, string TEXT)")
    with pytest.raises(NotReadYet, match=re.escape("rocpd database (ROCm 7's default output): recognised")):
        detect(path, str(path))


def test_the_not_read_answer_is_one_line(tmp_path: Path, cli) -> None:
    path = tmp_path / "results.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE rocpd_kernel_dispatch_0000a1b2 (id INTEGER, start INTEGER, end INTEGER)")
    done = cli("summary", str(path))
    assert done.code == 2
    assert done.err.count("\n") == 1 and "recognised, but opscope does not read it yet" in done.err


@pytest.mark.corpus
def test_an_nsys_export_is_still_read() -> None:
    path = corpus_path("pipit/cloverleaf-nsys__perlmutter-cloverleaf-cuda.sqlite")
    assert detect(path, str(path)).name == "nsys"
