"""Parse progress: `load(progress=...)` reports bytes of the file on disk up to its size (plain and gzip), the
bar draws on a terminal, and nothing is drawn when standard error is not a terminal."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

from rich.console import Console

import opscope
from conftest import corpus_path
from opscope.cli.progress import ParseProgress

GZ = "kineto/plugin_samples_resnet50_num_workers_0_worker0.pt.trace.json.gz"
PLAIN = "param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json"


def reported(path: Path, cache: bool = False) -> list[tuple[int, int]]:
    calls: list[tuple[int, int]] = []
    opscope.load(path, cache=cache, progress=lambda done, total: calls.append((done, total)))
    return calls


def test_progress_reports_file_bytes_up_to_the_size() -> None:
    for name in (GZ, PLAIN):
        path = corpus_path(name)
        calls = reported(path)
        size = path.stat().st_size
        assert calls and all(total == size for _, total in calls)
        done = [d for d, _ in calls]
        assert done == sorted(done) and done[-1] == size and 0 < done[0] <= size


def test_no_progress_on_a_cache_hit(tmp_path) -> None:
    path = shutil.copy(corpus_path(PLAIN), tmp_path / "t.json")
    opscope.load(path)
    assert reported(Path(path), cache=True) == []


def test_bar_draws_bytes_on_a_terminal() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=100, no_color=True, color_system=None)
    bar = ParseProgress(console, "reading t.json.gz", delay_s=0)
    bar(5_000_000, 20_000_000)
    bar(20_000_000, 20_000_000)
    bar.close()
    text = buffer.getvalue()
    assert "reading t.json.gz" in text and "20.0 MB" in text and "\x1b[3" not in text  # no colour codes


def test_bar_waits_for_the_delay() -> None:
    buffer = io.StringIO()
    bar = ParseProgress(Console(file=buffer, force_terminal=True), "x", delay_s=3600)
    bar(1, 2)
    bar.close()
    assert buffer.getvalue() == ""


def test_cli_stderr_is_quiet_when_not_a_terminal(cli) -> None:
    result = cli("summary", corpus_path(GZ), "--no-cache", "--top", "1")
    assert result.code == 0 and result.err == ""
