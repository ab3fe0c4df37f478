"""Which files `opscope mcp` reads (serve/roots.py): only files under its roots, of the kind the tool reads.
Outside paths, `..` climbing out, symbolic links leading out (the file itself, a folder on the way, a folder's
newest trace) and non-trace files are refused with one line; real traces under a root are served by their real
path. The roots are temporary folders; the corpus files are linked or copied into them, never written."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from conftest import corpus_path
from opscope.errors import InputError, UsageError
from opscope.extras import install_command
from opscope.serve.roots import NCU_CSV, TRACE, TRACE_OR_SNAPSHOT, Roots

SMALL = "hta/trace_compare_base_base.json.gz"
NCU = "ncu/apc_bert_flashattn_A100_nsight.csv"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "root"
    folder.mkdir()
    shutil.copy(corpus_path(SMALL), folder / "base.json.gz")
    return folder


def test_a_trace_under_the_root_is_served_by_its_real_path(root: Path) -> None:
    roots = Roots.of([root])
    real = (root / "base.json.gz").resolve()
    assert roots.file("base.json.gz") == real  # relative to the first root
    assert roots.file(str(root / "base.json.gz")) == real
    assert roots.file(str(root / "sub" / ".." / "base.json.gz")) == real
    (root / "inner").symlink_to(root / "base.json.gz")  # a link that stays inside: fine
    assert roots.file("inner") == real
    assert roots.file(".") == real  # a folder: its newest trace


def test_paths_outside_the_roots_are_refused(root: Path) -> None:
    roots = Roots.of([root])
    outside = corpus_path(SMALL)
    for given in (str(outside), "../" + outside.name, "/etc/passwd", f"{root}/../root-not/x.json"):
        with pytest.raises(InputError, match="outside the server's roots"):
            roots.file(given)
    with pytest.raises(InputError, match="outside the server's roots"):
        roots.file(str(outside.parent))  # a folder outside


def test_links_leading_out_are_refused(root: Path, tmp_path: Path) -> None:
    roots = Roots.of([root])
    (root / "link.json.gz").symlink_to(corpus_path(SMALL))
    (root / "folder").symlink_to(corpus_path(SMALL).parent)
    for given in ("link.json.gz", "folder/" + Path(SMALL).name, "folder"):
        with pytest.raises(InputError, match="symbolic link leading outside"):
            roots.file(given)
    runs = root / "runs"
    runs.mkdir()
    (runs / "newest.json.gz").symlink_to(corpus_path(SMALL))  # a folder inside whose newest trace leads out
    with pytest.raises(InputError, match="outside the server's roots"):
        roots.file("runs")


def test_files_that_are_not_what_the_tool_reads_are_refused(root: Path) -> None:
    roots = Roots.of([root])
    (root / "notes.md").write_text("# not a trace\n", encoding="utf-8")
    (root / "empty.json").write_bytes(b"")
    (root / "other.json").write_text('{"a": 1}', encoding="utf-8")
    with pytest.raises(InputError, match="not a trace"):
        roots.file("notes.md")
    with pytest.raises(InputError, match="empty"):
        roots.file("empty.json")
    with pytest.raises(InputError, match="not a trace format"):
        roots.file("other.json")
    with pytest.raises(InputError, match="no such file"):
        roots.file("missing.json")
    with pytest.raises(InputError, match="empty path"):
        roots.file("")
    shutil.copy(corpus_path(NCU), root / "ncu.csv")
    with pytest.raises(InputError, match="Nsight Compute CSV"):
        roots.file("ncu.csv", TRACE)  # metrics are not a trace
    assert roots.file("ncu.csv", NCU_CSV) == (root / "ncu.csv").resolve()
    with pytest.raises(InputError, match="not an Nsight Compute CSV"):
        roots.file("base.json.gz", NCU_CSV)
    (root / "snap.pickle").write_bytes(b"\x80\x04N.")  # hand-made: a pickle header (memory reads snapshots)
    assert roots.file("snap.pickle", TRACE_OR_SNAPSHOT).name == "snap.pickle"


def test_roots_must_be_folders(tmp_path: Path, root: Path) -> None:
    with pytest.raises(UsageError, match="not a folder"):
        Roots.of([tmp_path / "nope"])
    with pytest.raises(UsageError, match="not a folder"):
        Roots.of([root / "base.json.gz"])
    second = tmp_path / "second"
    second.mkdir()
    os.symlink(root / "base.json.gz", second / "via.json.gz")  # a link from one root into another: inside
    roots = Roots.of([second, root])
    assert roots.file("via.json.gz") == (root / "base.json.gz").resolve()


def test_the_command_says_what_is_missing_in_one_line(cli, monkeypatch, tmp_path: Path) -> None:
    result = cli("mcp", "--root", tmp_path / "nope")
    if result.code == 2 and install_command("mcp") in result.err:  # the SDK is an extra: checked first
        return
    assert result.code == 2 and result.err.strip().endswith("nope: not a folder")
    monkeypatch.setitem(sys.modules, "mcp", None)  # as if the extra were not installed
    result = cli("mcp", "--root", tmp_path)
    assert result.code == 2
    assert result.err == f"opscope: error: opscope mcp needs the MCP SDK: {install_command('mcp')}\n"
