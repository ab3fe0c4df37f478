"""`opscope run`: unmodified scripts profiled in-process, steps from opscope.step() or optimizer steps, failures
that still leave a trace, and every bad input as a one-line error."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

import opscope
import reference as ref
from opscope.extras import install_command

torch = pytest.importorskip("torch", reason="torch is an optional extra (pip install opscope[torch])")

STEPPING = """
    import sys
    import torch
    import opscope

    model = torch.nn.Linear(16, 16)
    for _ in range(int(sys.argv[1])):
        with opscope.annotate("iteration"):
            model(torch.randn(4, 16))
        opscope.step()
    print("argv", sys.argv[1:])
"""
TRAINING = """
    import torch

    model = torch.nn.Linear(16, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(5):
        loss = model(torch.randn(8, 16)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""
CRASHING = """
    import torch
    import opscope

    model = torch.nn.Linear(16, 4)
    for i in range(5):
        model(torch.randn(8, 16))
        opscope.step()
        if i == 2:
            raise ZeroDivisionError("boom at step 2")
"""


@pytest.fixture
def script(tmp_path):
    def write(body: str, name: str = "job.py"):
        path = tmp_path / name
        path.write_text(textwrap.dedent(body))
        return path

    return write


def test_steps_marked_by_the_script(cli, script, tmp_path):
    path = script(STEPPING)
    result = cli("run", "--profile-steps", "2", "--log-dir", tmp_path / "logs", "--", "python", path, "6")
    assert result.code == 0, result.err
    assert "argv ['6']" in result.out  # the script saw its own arguments
    assert "CPU time by operator" in result.out and "6 from opscope.step() calls" in result.out
    traces = list((tmp_path / "logs").glob("*.pt.trace.json.gz"))
    assert len(traces) == 1
    assert [s for s, _, _ in ref.step_windows(ref.load(traces[0]))] == [0, 1]
    assert f"opscope: wrote {traces[0]}" in result.err.splitlines()  # the trace it wrote, named (issue 30)


def test_json_output(cli, script, tmp_path):
    path = script(STEPPING)
    result = cli("run", "--profile-steps", "3", "--log-dir", tmp_path, "--format", "json", path, "4")
    assert result.code == 0, result.err
    data = json.loads(result.out[result.out.index("{") :])  # the script printed a line first
    assert data["schema"] == "opscope.run/1"
    assert data["exit_status"] == 0 and data["error"] is None
    assert data["steps_marked"] == 4 and data["step_source"] == "user"
    capture = data["capture"]
    assert capture["schema"] == "opscope.capture/1" and capture["steps"] == 3 and capture["device"] == "cpu"
    assert capture["summary"]["schema"] == "opscope.summary/1" and capture["summary"]["rows"] == []
    assert capture["cpu_ops"]["rows"] and data["trace"] == capture["trace"]


def test_optimizer_steps_mark_steps_when_the_script_does_not(cli, script, tmp_path):
    path = script(TRAINING)
    result = cli("run", "--profile-steps", "3", "--log-dir", tmp_path, "--format", "json", path)
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["step_source"] == "optimizer" and data["steps_marked"] == 5
    assert [s for s, _, _ in ref.step_windows(ref.load(data["trace"]))] == [0, 1, 2]


def test_explicit_steps_win_over_optimizer_steps(cli, script, tmp_path):
    path = script(
        TRAINING.replace("optimizer.step()", "optimizer.step()\n    import opscope; opscope.step()")
    )
    result = cli("run", "--log-dir", tmp_path, "--format", "json", path)
    assert result.code == 0, result.err
    data = json.loads(result.out)
    # The first optimizer step counts (no explicit mark yet); from the first opscope.step() on, only those count.
    assert data["step_source"] == "user" and data["steps_marked"] == 6


def test_module_form(cli, tmp_path, monkeypatch):
    (tmp_path / "job_module.py").write_text(textwrap.dedent(STEPPING))
    monkeypatch.chdir(tmp_path)
    result = cli("run", "--log-dir", tmp_path / "logs", "--", "python", "-m", "job_module", "2")
    assert result.code == 0, result.err
    assert "argv ['2']" in result.out
    assert [s for s, _, _ in ref.step_windows(ref.load(next((tmp_path / "logs").glob("*.gz"))))] == [0, 1, 2]


def test_crash_leaves_a_readable_trace_and_says_so(cli, script, tmp_path):
    path = script(CRASHING, "crash.py")
    result = cli("run", "--log-dir", tmp_path, "--", "python", path)
    assert result.code == 1
    assert "CPU time by operator" in result.out  # the summary of what ran
    last = result.err.strip().splitlines()[-1]
    assert last.startswith("opscope: error: ") and "failed at crash.py:10" in last
    assert "ZeroDivisionError: boom at step 2" in last and "the trace of what ran before it was saved" in last
    assert "runpy" not in result.err and 'crash.py", line 10' in result.err  # the script's own traceback
    trace = next(tmp_path.glob("*.pt.trace.json.gz"))
    assert str(trace) in last
    assert [s for s, _, _ in ref.step_windows(ref.load(trace))] == [0, 1, 2, 3]
    assert opscope.load(trace).count() > 0


def test_script_exit_status_is_passed_on(cli, script, tmp_path):
    ok = cli("run", "--log-dir", tmp_path, script("import sys\nsys.exit(0)\n", "ok.py"))
    assert ok.code == 0, ok.err
    failed = cli("run", "--log-dir", tmp_path, script("import sys\nsys.exit(3)\n", "three.py"))
    assert failed.code == 3
    assert failed.err.strip().splitlines()[-1].startswith("opscope: error: ")
    assert "exited with status 3" in failed.err


def test_schedule_longer_than_the_run_warns(cli, script, tmp_path):
    result = cli("run", "--profile-steps", "10", "--log-dir", tmp_path, script(STEPPING), "2")
    assert result.code == 0, result.err
    assert (
        "opscope: warning: the block ended after 2 step(s), but the schedule (active=10) needs 10"
        in result.err
    )


def test_never_marking_steps_warns(cli, script, tmp_path):
    result = cli(
        "run", "--profile-steps", "2", "--log-dir", tmp_path, script("import torch\ntorch.ones(3).sum()\n")
    )
    assert result.code == 0, result.err
    assert "step() was never called" in result.err and "opscope.step()" in result.err


def test_no_trace_when_recording_never_starts(cli, script, tmp_path):
    result = cli(
        "run", "--profile-steps", "1", "--skip-first", "5", "--log-dir", tmp_path, script(STEPPING), "2"
    )
    assert result.code == 2
    assert result.err.strip().splitlines()[-1].startswith("opscope: error: no trace was captured")


def test_old_steps_spelling_is_refused_with_the_new_name(cli, script):
    """Issue 28: `--steps` names step numbers in the analysing commands; `run` profiles with --profile-steps."""
    result = cli("run", "--steps", "3", script(STEPPING), "1")
    assert result.code == 2 and result.err.count("\n") == 1
    assert "--profile-steps" in result.err and "step numbers" in result.err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--profile-steps", "0"], "--profile-steps must be a positive number of steps, got 0"),
        (["--profile-steps", "-3"], "--profile-steps must be a positive number of steps, got -3"),
        (["--repeats", "0", "--overhead"], "--repeats at least 1"),
    ],
)
def test_bad_numbers_are_one_line_errors(cli, script, args, message):
    result = cli("run", *args, script(STEPPING), "1")
    assert result.code == 2
    assert result.err.count("\n") == 1 and message in result.err


@pytest.mark.parametrize(
    "command, message",
    [
        ([], "nothing to run"),
        (["--", "ls", "-l"], "ls: no such script"),
        (["missing.py"], "missing.py: no such script"),
        (["python", "-c", "print(1)"], "python option -c is not supported"),
    ],
)
def test_bad_commands_are_one_line_errors(cli, command, message):
    result = cli("run", *command)
    assert result.code == 2
    assert result.err.count("\n") == 1 and message in result.err


def test_missing_torch_is_a_one_line_hint(cli, script, monkeypatch):
    path = script(STEPPING)
    monkeypatch.setitem(sys.modules, "torch", None)
    result = cli("run", path, "1")
    assert result.code == 2
    assert result.err == f"opscope: error: torch is not installed: {install_command('torch')}\n"


def test_overhead_then_summary(cli, script, tmp_path):
    result = cli(
        "run",
        "--overhead",
        "--repeats",
        "2",
        "--log-dir",
        tmp_path,
        "--format",
        "json",
        script(STEPPING),
        "3",
    )
    assert result.code == 0, result.err
    data = json.loads(result.out[result.out.index("{") :])
    overhead = data["overhead"]
    assert overhead["schema"] == "opscope.overhead/1" and overhead["repeats"] == 2
    assert len(overhead["samples"]["traced_s"]) == 2 and data["capture"]["steps"] == 4
    text = cli("run", "--overhead", "--repeats", "2", "--log-dir", tmp_path, script(STEPPING), "3")
    assert "tracing intrusion:" in text.out and "untraced vs traced runs" in text.out
    assert "CPU time by operator" in text.out


def test_overhead_runs_count_optimizer_steps_like_the_profiled_run(cli, script, tmp_path):
    """Issue 18: `run --overhead --steps 2` printed "step() was never called" next to "step marks: 5 from
    torch.optim optimizer steps": the traced overhead runs did not see the optimizer hook."""
    result = cli(
        "run",
        "--overhead",
        "--repeats",
        "1",
        "--profile-steps",
        "2",
        "--log-dir",
        tmp_path,
        "--format",
        "json",
        script(TRAINING),
    )
    assert result.code == 0, result.err
    data = json.loads(result.out[result.out.index("{") :])
    assert data["step_source"] == "optimizer" and data["steps_marked"] == 5
    assert data["overhead"]["warnings"] == [] and "never called" not in result.out + result.err
