"""torch's profiler library (C++) prints `USDT: ... profiler_start/stop` and, without a GPU driver,
`ERROR: ... gpuGetDeviceCount failed with code 35` straight to fd 2: opscope drops exactly those lines around its
profiler calls and lets every other line through. Checked at the file-descriptor level (capfd and a child
process), since the lines never pass through Python's sys.stderr."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from opscope.capture.quiet import filtered_stderr, harmless

USDT = b"USDT:2026-12-02 18:30:22 14192:14192 SyncActivityProfilerHandler.cpp:52] profiler_start\n"
NO_DRIVER = (
    b"ERROR:2026-12-02 18:30:22 14192:14192 DeviceProperties.cpp:50] gpuGetDeviceCount failed with code 35\n"
)
REAL_ERROR = b"ERROR:2026-12-02 18:30:22 14192:14192 CuptiActivityApi.cpp:10] CUPTI_ERROR_NOT_INITIALIZED\n"
OTHER_CODE = (
    b"ERROR:2026-12-02 18:30:22 14192:14192 DeviceProperties.cpp:50] gpuGetDeviceCount failed with code 3\n"
)


def test_only_the_known_lines_are_harmless():
    assert harmless(USDT) and harmless(NO_DRIVER)
    assert not harmless(REAL_ERROR) and not harmless(OTHER_CODE)
    assert not harmless(b"my script says profiler_start\n")


def test_filter_drops_the_known_lines_and_keeps_the_rest_in_order(capfd):
    with filtered_stderr():
        os.write(2, USDT + b"first real line\n" + NO_DRIVER)
        os.write(2, REAL_ERROR[:20])  # a line split across writes
        os.write(2, REAL_ERROR[20:] + OTHER_CODE + b"no line end")
    os.write(2, b"\nafter\n")
    err = capfd.readouterr().err.encode()
    assert err == b"first real line\n" + REAL_ERROR + OTHER_CODE + b"no line end\nafter\n"


def test_the_switch_turns_the_filter_off(capfd, monkeypatch):
    monkeypatch.setenv("OPSCOPE_KINETO_LOGS", "1")
    with filtered_stderr():
        os.write(2, USDT)
    assert capfd.readouterr().err.encode() == USDT


CHILD = """
    import os, sys, torch
    import opscope
    if sys.argv[1] == "plain":
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            torch.randn(4) + 1
    else:
        with opscope.profile(activities=("cpu",), log_dir=sys.argv[2]) as prof:
            torch.randn(4) + 1
            os.write(2, b"ERROR: a real problem inside the profiled code\\n")
            prof.step()
            torch.randn(4) + 1
    print("done")
"""


@pytest.mark.slow
def test_profiling_in_a_child_process_prints_no_profiler_noise(tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(CHILD))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("OPSCOPE_KINETO_LOGS", None)
    plain = subprocess.run([sys.executable, str(script), "plain"], capture_output=True, env=env, timeout=300)
    assert (
        b"profiler_start" in plain.stderr
    )  # the noise exists without opscope, so the next check means something
    quiet = subprocess.run(
        [sys.executable, str(script), "opscope", str(tmp_path / "logs")],
        capture_output=True,
        env=env,
        timeout=300,
    )
    assert quiet.returncode == 0 and quiet.stdout.endswith(b"done\n"), quiet.stderr
    assert b"USDT:" not in quiet.stderr and b"gpuGetDeviceCount failed with code 35" not in quiet.stderr
    assert b"ERROR: a real problem inside the profiled code\n" in quiet.stderr
