"""Ctrl-C in the middle of an analysis (issue 25, item 5): a real SIGINT, delivered to a real `opscope` process
while a chosen stage runs (the report's thread beside the advice and the threads that keep results beside the
cache included), ends it with one line and exit code 130: no traceback, no hang, no half-written file left in
the cache, nothing written to -o; and whatever the interrupted run kept is read back correctly by the next one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import corpus_path

V100 = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"

# The child interrupts itself when the analysis announces the chosen stage (standard error is not a terminal,
# so the CLI installs no stage listener of its own and this one stays): the signal arrives in the middle of the
# command, as a user's Ctrl-C would.
CHILD = """
import os, signal, sys
from opscope.analysis.base.stages import listening
from opscope.cli.main import main

target = sys.argv[1]
sent = []

def listener(name):
    if name.startswith(target) and not sent:
        sent.append(name)
        os.kill(os.getpid(), signal.SIGINT)

with listening(listener):
    code = main(sys.argv[2:])
print(f"@@ sent {bool(sent)}", file=sys.stderr)
sys.exit(code)
"""


def run_child(stage: str, argv: list[str], cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPSCOPE_CACHE_DIR": str(cache), "OPSCOPE_PARALLEL": "threads"}
    return subprocess.run(
        [sys.executable, "-c", CHILD, stage, *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def json_of(cli, argv: list[str]) -> dict:
    result = cli(*argv)
    assert result.code == 0, result.err
    return json.loads(result.out)


@pytest.mark.parametrize(
    ("stage", "command"),
    [
        ("linking kernels", ["analyze"]),
        ("operators and steps", ["advise"]),
        ("advice rules: host_bound", ["advise"]),
        ("advice rules: low_efficiency", ["analyze"]),
        ("op trees and the critical path", ["report"]),  # waiting for the thread beside the advice
        ("critical path: window 2 of", ["critical-path"]),
        ("trace 2 of 2: advice rules: host_bound", ["diff"]),  # the traces' tasks, on threads
        ("trace 1 of 2: linking kernels", ["history", "add"]),
    ],
)
def test_ctrl_c_mid_analysis_stops_cleanly(
    stage: str, command: list[str], tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = corpus_path(V100)
    cache = tmp_path / "cache"
    page = tmp_path / "page.html"
    argv = [*command, str(trace)]
    if command == ["report"]:
        argv += ["-o", str(page)]
    elif command == ["diff"]:
        # a copy: its own cache entry, so that neither trace reads back the checks the other one kept (the
        # stage would then not be announced)
        copy = tmp_path / "copy.json.gz"
        copy.write_bytes(trace.read_bytes())
        argv += [str(copy), "--format", "json"]
    elif command == ["history", "add"]:
        other = tmp_path / "other.json.gz"  # a second trace: history add keeps one run per distinct trace
        other.write_bytes(corpus_path("hta/triton_example_triton_example.json.gz").read_bytes())
        argv += [str(other), "--db", str(tmp_path / "history.sqlite"), "--format", "json"]
    else:
        argv += ["--format", "json"]
    assert run_child("none", ["summary", str(trace)], cache).returncode == 0  # the trace cache, warm

    done = run_child(stage, argv, cache)
    assert "@@ sent True" in done.stderr, f"stage {stage!r} was never announced: {done.stderr[-2000:]}"
    assert done.returncode == 130, done.stderr[-2000:]
    lines = [x for x in done.stderr.splitlines() if not x.startswith("@@ ")]
    assert lines[-1:] == ["opscope: interrupted"], done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert done.stdout == ""  # no half of a result
    assert not page.exists()
    assert not list(cache.rglob(".tmp-*")), "a half-written file stayed in the cache"

    # the next run reads back whatever the interrupted one kept: the same result as in a fresh cache
    if command[0] in ("report", "history"):  # a page; runs with their own ids and times
        return
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(cache))
    after = json_of(cli, argv)
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "fresh"))
    assert after == json_of(cli, argv)
