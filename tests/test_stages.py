"""Progress per stage (issue 25 item 5): analyses announce their stages (analysis/base/stages.py, no IO), and
the CLI draws them as one status line on a terminal once a command has run for a while (cli/progress.py)."""

from __future__ import annotations

import io
import sys

import pytest

import opscope
from conftest import corpus_path
from opscope.analysis.base.stages import listening, stage
from opscope.analysis.critical_path.stats import critical_path_stats
from opscope.analysis.rules.advise import advise
from opscope.cli import progress

V100 = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"


@pytest.mark.parametrize("threads", [1, 3])
def test_stages_reach_the_listener_and_nothing_else(monkeypatch: pytest.MonkeyPatch, threads: int) -> None:
    """Stages announced on the command's thread reach its listener; with a spare thread, the efficiency
    table runs there beside the other rules (`advise`) and its stages reach nobody (the line stays on the
    rules, then on `low_efficiency` while it waits for the table)."""
    from opscope.analysis.base import parallel

    monkeypatch.setattr(parallel, "threads", lambda: threads)
    stage("no listener: nothing happens")
    seen: list[str] = []
    trace = opscope.load(corpus_path(V100), cache=False)  # no stored link table: linking runs and says so
    with listening(seen.append):
        advise(trace)
        critical_path_stats(trace)
    assert seen[0] == "linking kernels to their launches and ops"
    assert "advice rules: host_bound" in seen and "advice rules: low_efficiency" in seen
    assert ("efficiency: sizing ops" in seen) == (threads == 1)
    windows = [s for s in seen if s.startswith("critical path: window")]
    assert windows and windows[-1] == f"critical path: window {len(windows)} of {len(windows)}"
    stage("after the block: nothing happens")
    assert "after the block: nothing happens" not in seen


def test_the_stage_line_waits_then_draws_one_line_and_erases_it() -> None:
    stream = io.StringIO()
    line = progress.StageLine(stream, "opscope analyze", delay_s=3600)
    line("linking")
    assert stream.getvalue() == ""  # a quick command stays silent
    line = progress.StageLine(stream, "opscope analyze", delay_s=0)
    line("rules: \x1b[31mred")  # names from a trace are shown, never interpreted
    line("critical path: window 2 of 9")
    text = stream.getvalue()
    assert text.count("\r\x1b[2K") == 2 and "opscope analyze: critical path: window 2 of 9 (" in text
    assert "\x1b[31m" not in text and "\\x1b[31mred" in text
    line.close()
    assert stream.getvalue().endswith("\r\x1b[2K")


def test_the_cli_shows_stages_on_a_terminal_only(cli, monkeypatch) -> None:
    path = corpus_path(V100)
    quiet = cli("analyze", path, "--format", "json")
    assert quiet.code == 0 and "\x1b[2K" not in quiet.err  # not a terminal: no line
    monkeypatch.setattr(progress, "STAGE_DELAY_S", 0.0)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    shown = cli("analyze", path, "--format", "json")
    assert shown.code == 0, shown.err
    # the first run kept the rules' checks beside the cache: this one reads them back ("advice rules")
    assert "opscope analyze: advice rules" in shown.err and shown.err.rstrip(" ").endswith("\r\x1b[2K")
    assert shown.out == quiet.out  # the line goes to standard error only


def test_the_traces_of_diff_show_their_stages(cli, monkeypatch) -> None:
    """`diff` analyses its two traces on threads of their own (`scale.executor`): their stages reach the line
    too, each with its trace."""
    path = corpus_path(V100)
    monkeypatch.setattr(progress, "STAGE_DELAY_S", 0.0)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    shown = cli("diff", path, path, "--format", "json", "--no-cache")  # nothing kept: every stage runs
    assert shown.code == 0, shown.err
    for trace in (1, 2):
        assert f"opscope diff: trace {trace} of 2: linking kernels to their launches and ops" in shown.err
        assert f"opscope diff: trace {trace} of 2: advice rules: host_bound" in shown.err
    assert shown.err.rstrip(" ").endswith("\r\x1b[2K")


def test_history_add_says_which_trace_each_stage_is_of(cli, monkeypatch, tmp_path) -> None:
    first = corpus_path(V100)
    second = corpus_path("hta/triton_example_triton_example.json.gz")
    monkeypatch.setattr(progress, "STAGE_DELAY_S", 0.0)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    db = tmp_path / "history.sqlite"
    shown = cli("history", "add", first, second, "--db", db, "--no-git", "--no-cache", "--format", "json")
    assert shown.code == 0, shown.err
    for trace in (1, 2):
        assert f"opscope history: trace {trace} of 2: linking kernels to their launches and ops" in shown.err
    one = cli("history", "add", first, "--db", tmp_path / "one.sqlite", "--no-git", "--no-cache")
    assert one.code == 0 and "opscope history: linking kernels" in one.err  # one trace: no "trace 1 of 1"
