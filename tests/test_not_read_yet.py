"""AMD's SQLite outputs that opscope recognises but has no reader for yet (until their readers exist, detection
says so plainly, and the corpus tests skip such files by that answer instead of failing as if they were damaged
Nsight Systems exports). The corpus rocprof-compute database, and a hand-made rocpd database (labelled: its
tables named as rocprofiler-sdk names them, with the run's uuid suffix, and no rows). rpd files are read
(tests/test_rpd.py)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from conftest import corpus_path
from opscope.errors import NotReadYet
from opscope.ingest.registry import detect


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("relative", "what"),
    [
        (
            "rocprof_compute/mi350_monte_carlo_pi.rocprof_compute.db",
            "a rocprof-compute (omniperf) analysis database",
        ),
    ],
)
def test_the_corpus_databases_are_recognised_not_read(relative: str, what: str, cli) -> None:
    path = corpus_path(relative)
    with pytest.raises(NotReadYet, match=re.escape(f"{what}: recognised, but opscope does not read it yet")):
        detect(path, str(path))
    done = cli("summary", str(path))
    assert done.code == 2
    assert done.err.count("\n") == 1 and "recognised, but opscope does not read it yet" in done.err


def test_a_rocpd_database_is_recognised(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    with sqlite3.connect(path) as db:
        uuid = "0000a1b2_c3d4_e5f6"
        db.execute(f"CREATE TABLE rocpd_kernel_dispatch_{uuid} (id INTEGER, start INTEGER, end INTEGER)")
        db.execute(f"CREATE TABLE rocpd_string_{uuid} (id INTEGER, string TEXT)")
    with pytest.raises(NotReadYet, match=re.escape("rocpd database (ROCm 7's default output): recognised")):
        detect(path, str(path))


@pytest.mark.corpus
def test_an_nsys_export_is_still_read() -> None:
    path = corpus_path("pipit/cloverleaf-nsys__perlmutter-cloverleaf-cuda.sqlite")
    assert detect(path, str(path)).name == "nsys"
