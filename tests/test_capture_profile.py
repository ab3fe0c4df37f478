"""`opscope.profile` / `annotate` / `step` with real (CPU) torch: traces written where they should be, readable
by `opscope.load`, with the right ProfilerStep markers, and every schedule edge case reported."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import opscope
import reference as ref
from opscope.capture import CaptureSummary, Profile
from opscope.errors import MissingDependency, UsageError
from opscope.extras import install_command
from opscope.model.schema import Col, Kind

torch = pytest.importorskip("torch", reason="torch is an optional extra (pip install opscope[torch])")


def tiny_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def traces_in(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.pt.trace.json.gz"))


def names_of(trace, kind: str) -> list[str]:
    frame = trace.events.filter(pl.col(Col.KIND).cast(pl.String) == kind)
    return frame[Col.NAME].cast(pl.String).to_list()


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    """steps=3 over a 5-step loop, with shapes and a user range around each forward pass."""
    folder = tmp_path_factory.mktemp("traces")
    model, x = tiny_model(), torch.randn(8, 32)
    with opscope.profile(steps=3, record_shapes=True, log_dir=folder) as prof:
        for _ in range(5):
            with opscope.annotate("forward"):
                model(x)
            prof.step()
    return prof, folder


def test_one_gzipped_trace_in_the_log_dir(captured):
    prof, folder = captured
    files = traces_in(folder)
    assert files == [prof.trace_path] == prof.trace_paths
    assert [p.name for p in folder.iterdir()] == [files[0].name]  # no temporary or partial files left behind
    with gzip.open(files[0], "rt") as handle:
        assert "traceEvents" in json.load(handle)


def test_trace_has_the_first_three_steps_and_cpu_ops(captured):
    prof, _ = captured
    assert prof.steps == 5 and prof.step_source == "user" and prof.warnings == [] and prof.cycles == 1
    trace = opscope.load(prof.trace_path)
    steps = sorted(n for n in names_of(trace, Kind.USER_ANNOTATION) if n.startswith("ProfilerStep"))
    assert steps == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]
    assert names_of(trace, Kind.USER_ANNOTATION).count("forward") == 3
    ops = names_of(trace, Kind.CPU_OP)
    assert ops.count("aten::linear") == 6  # two Linear layers x three recorded steps
    assert trace.events.filter(pl.col(Col.INPUT_DIMS).is_not_null()).height > 0  # record_shapes
    assert trace.events.filter(pl.col(Col.KIND).cast(pl.String) == Kind.FLOW).height == 0  # no GPU: no flows


def test_summary_is_the_summary_table_plus_cpu_operators(captured):
    prof, _ = captured
    result = prof.summary(top=0)
    assert isinstance(result, CaptureSummary)
    assert result.kernels == opscope.summary(
        opscope.load(prof.trace_path), top=0
    )  # the `opscope summary` table
    assert not result.has_gpu_activity and result.device == "cpu" and result.steps == 3
    # operators and annotations, as `opscope ops` ranks CPU self time (issue 28)
    expected = ref.cpu_op_stats(ref.load(prof.trace_path), annotations=True)
    assert {r.name: (r.calls, r.total_ns, r.self_ns) for r in result.cpu_ops.rows} == {
        name: (s["calls"], s["total_ns"], s["self_ns"]) for name, s in expected.items()
    }
    text = str(result)
    assert "CPU time by operator" in text and "aten::addmm" in text
    assert "the rows are CPU operators" in text


def test_log_dir_defaults_to_profiler_log_dir_then_trace_logs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PROFILER_LOG_DIR", str(tmp_path / "from_env"))
    with opscope.profile() as prof:  # no schedule: the whole block
        tiny_model()(torch.randn(2, 32))
    assert traces_in(tmp_path / "from_env") == [prof.trace_path]
    monkeypatch.delenv("PROFILER_LOG_DIR")
    with opscope.profile() as prof:
        tiny_model()(torch.randn(2, 32))
    assert traces_in(tmp_path / "trace_logs") == [prof.trace_path]
    assert Path(opscope.load().path).absolute() == prof.trace_path  # what `opscope summary` reads by default


def test_decorator_profiles_each_call_and_module_step_marks_steps(tmp_path):
    model = tiny_model()

    @opscope.profile(steps=2, log_dir=tmp_path)
    def work(n):
        for _ in range(n):
            model(torch.randn(4, 32))
            opscope.step()
        return "done"

    assert work(4) == "done" and work(3) == "done"
    files = traces_in(tmp_path)
    assert len(files) == 2
    for path in files:
        assert [s for s, _, _ in ref.step_windows(ref.load(path))] == [0, 1]


def test_step_outside_a_profile_is_a_no_op_but_prof_step_is_an_error():
    opscope.step()  # scripts may call it unprofiled
    with pytest.raises(UsageError, match="outside the profiled block"):
        Profile().step()


def test_repeat_cycles_write_one_trace_each(tmp_path):
    model = tiny_model()
    with opscope.profile(wait=1, warmup=1, active=2, repeat=2, log_dir=tmp_path) as prof:
        for _ in range(9):
            model(torch.randn(4, 32))
            prof.step()
    assert prof.cycles == 2 and prof.warnings == []
    assert [[s for s, _, _ in ref.step_windows(ref.load(p))] for p in prof.trace_paths] == [[2, 3], [6, 7]]


def test_schedule_longer_than_the_run_warns_and_keeps_what_ran(tmp_path):
    model = tiny_model()
    with opscope.profile(steps=5, log_dir=tmp_path) as prof:
        for _ in range(2):
            model(torch.randn(4, 32))
            prof.step()
    assert len(prof.warnings) == 1 and "needs 5" in prof.warnings[0]
    assert [s for s, _, _ in ref.step_windows(ref.load(prof.trace_path))] == [
        0,
        1,
        2,
    ]  # 2 steps, then the tail until exit


def test_run_ending_before_recording_writes_nothing_and_says_so(tmp_path):
    with opscope.profile(steps=1, skip_first=3, log_dir=tmp_path) as prof:
        prof.step()
    assert prof.trace_paths == [] and traces_in(tmp_path) == []
    assert "no trace was written" in prof.warnings[-1] and "starts at step 3" in prof.warnings[-1]
    with pytest.raises(UsageError, match="no trace to summarise"):
        prof.summary()


def test_never_stepping_warns_that_the_block_was_one_step(tmp_path):
    with opscope.profile(steps=3, log_dir=tmp_path) as prof:
        tiny_model()(torch.randn(4, 32))
    assert any("step() was never called" in w for w in prof.warnings)
    assert [s for s, _, _ in ref.step_windows(ref.load(prof.trace_path))] == [0]


def test_error_inside_the_block_still_leaves_a_readable_trace(tmp_path):
    model = tiny_model()
    with pytest.raises(ZeroDivisionError), opscope.profile(steps=10, log_dir=tmp_path) as prof:
        for i in range(5):
            model(torch.randn(4, 32))
            if i == 2:
                raise ZeroDivisionError("boom")
            prof.step()
    assert prof.crash_note is not None and "was saved" in prof.crash_note
    assert [s for s, _, _ in ref.step_windows(ref.load(prof.trace_path))] == [0, 1, 2]
    assert "aten::linear" in names_of(opscope.load(prof.trace_path), Kind.CPU_OP)


def test_with_stack_and_profile_memory_traces_load(tmp_path):
    with opscope.profile(steps=1, with_stack=True, profile_memory=True, log_dir=tmp_path) as prof:
        tiny_model()(torch.randn(4, 32))
        prof.step()
    trace = opscope.load(prof.trace_path)
    assert trace.events.filter(pl.col(Col.KIND).cast(pl.String) == Kind.PYTHON).height > 0
    assert trace.events.filter(pl.col(Col.NAME).cast(pl.String) == "[memory]").height > 0


def test_nested_profiles_are_refused(tmp_path):
    with (
        opscope.profile(log_dir=tmp_path),
        pytest.raises(UsageError, match="already running"),
        opscope.profile(log_dir=tmp_path),
    ):
        pass


def test_nvtx_without_cuda_is_ignored_with_a_warning(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA; the NVTX path runs in bench/gpu_check.py")
    with opscope.profile(steps=1, nvtx=True, log_dir=tmp_path) as prof:
        with opscope.annotate("range"):
            tiny_model()(torch.randn(4, 32))
        prof.step()
    assert any("nvtx=True ignored" in w for w in prof.warnings)


def test_bad_options_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="steps must be a positive number"):
        opscope.profile(steps=0)
    with pytest.raises(UsageError, match="steps must be a positive number"):
        opscope.profile(steps=-1)
    with (
        pytest.raises(UsageError, match="activities"),
        opscope.profile(activities=("tpu",), log_dir=tmp_path),
    ):
        pass
    if not torch.cuda.is_available():
        with (
            pytest.raises(UsageError, match="no CUDA"),
            opscope.profile(activities=("cuda",), log_dir=tmp_path),
        ):
            pass
    with pytest.raises(UsageError, match="non-empty name"):
        opscope.annotate("")


def test_missing_torch_is_a_one_line_hint(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "torch", None)
    with (
        pytest.raises(MissingDependency, match=re.escape(install_command("torch"))),
        opscope.profile(log_dir=tmp_path),
    ):
        pass


def test_import_opscope_does_not_import_torch():
    code = "import sys; sys.modules['torch'] = None; import opscope; print(opscope.profile.__name__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "profile"


def test_only_capture_modules_mention_torch_imports():
    root = Path(opscope.__file__).parent
    offenders = [
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if "capture" not in p.parts and ("import torch" in p.read_text() or "from torch" in p.read_text())
    ]
    assert offenders == []
