"""No writer writes over one of its inputs (issue 14): `-o` and `--html` naming the trace, through another name,
a symbolic link or a hard link, end with one line and exit 2 before any work, and the trace is unchanged."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from conftest import corpus_path

REAL = "hta/trace_compare_base_base.json.gz"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def traces(tmp_path: Path) -> tuple[Path, Path]:
    """Copies of a real trace, so that a failure destroys nothing of the corpus."""
    a = tmp_path / "a.json.gz"
    shutil.copyfile(corpus_path(REAL), a)
    b = tmp_path / "b.json.gz"
    shutil.copyfile(a, b)
    return a, b


def aliases(path: Path) -> list[Path]:
    """The same file under other names: `..`, a symbolic link, a hard link."""
    folder = path.parent
    (folder / "sub").mkdir(exist_ok=True)
    symlink = folder / f"link-{path.name}"
    symlink.symlink_to(path)
    hard = folder / f"hard-{path.name}"
    os.link(path, hard)
    return [folder / "sub" / ".." / path.name, symlink, hard]


def test_every_writer_refuses_its_inputs(cli, traces) -> None:
    a, b = traces
    before = digest(a), digest(b)
    for target in [a, *aliases(a)]:
        for command in (
            ("summary", a, "-o", target),
            ("summary", b, a, "-o", target),
            ("analyze", a, "-o", target),
            ("ops", a, "-o", target),
            ("tree", a, "-o", target),
            ("steps", a, "-o", target),
            ("kernels", a, "-o", target),
            ("report", a, "-o", target),
            ("diff", b, a, "-o", target),
            ("diff", a, b, "--html", target),
            ("ranks", b, a, "--html", target),
            ("ranks", a.parent, "-o", target),  # a folder: every trace in it is an input
            ("export", a, "--folded", "-o", target),
            ("export", a, "-o", target),
        ):
            result = cli(*command)
            assert result.code == 2, (command, result)
            assert result.err.count("\n") == 1 and "refusing to overwrite it" in result.err, (
                command,
                result.err,
            )
    assert (digest(a), digest(b)) == before


def test_a_folder_input_is_its_newest_trace(cli, traces, tmp_path) -> None:
    a, _ = traces
    folder = tmp_path / "logs"
    folder.mkdir()
    newest = folder / "run.json.gz"
    shutil.copyfile(a, newest)
    result = cli("report", folder, "-o", newest)
    assert result.code == 2 and "refusing" in result.err and digest(newest) == digest(a)


def test_other_outputs_still_written(cli, traces, tmp_path) -> None:
    a, b = traces
    assert cli("summary", a, "-o", tmp_path / "out.txt").code == 0
    assert (
        cli("diff", a, b, "--html", tmp_path / "d.html", "-o", tmp_path / "d.md", "--format", "markdown").code
        == 0
    )
    assert (tmp_path / "d.html").stat().st_size > 0 and (tmp_path / "d.md").stat().st_size > 0


def test_metrics_file_and_script_are_inputs(cli, tmp_path) -> None:
    ncu = Path(__file__).parent / "fixtures" / "ncu_raw_handmade.csv"
    copy = tmp_path / "ncu.csv"
    shutil.copyfile(ncu, copy)
    result = cli("kernels", corpus_path(REAL), "--metrics", copy, "-o", copy)
    assert result.code == 2 and "refusing" in result.err and copy.read_bytes() == ncu.read_bytes()
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    result = cli("run", "-o", script, "--", "python", script)
    assert result.code == 2 and "refusing" in result.err and script.read_text() == "print('hi')\n"
