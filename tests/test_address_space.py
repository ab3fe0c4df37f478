"""Under an address-space limit (`ulimit -v`, issue 32 item 6): commands that aborted with SIGABRT and a Rust
"memory allocation of N bytes failed" line now run at the documented minimum (1 GiB), a lower limit is refused
with one line, and an allocation that fails is the usual one line and exit 2. Each limited run is a fresh
process with RLIMIT_AS set in `preexec_fn` (the limit of this test process stays as it is)."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import corpus_path
from opscope.cli import address_space, supervise

V100 = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
MAIN = "import sys\nfrom opscope.cli.main import main\nsys.exit(main(sys.argv[1:]))\n"
# the summary replaced by an allocation the limit cannot hold: how a MemoryError reaches the CLI
GREEDY = (
    "import sys\nfrom opscope.analysis.kernels import summary\n"
    "summary.kernel_summary = lambda *args, **kwargs: bytearray(8 << 30)\n" + MAIN
)

# the summary replaced by an allocation that fails inside Rust (polars): Rust's allocation-error handler aborts
# the process (SIGABRT), as a trace that needs more than the limit does in the reader or an analysis; run
# through `entry`, the console script's function, which watches the command from a parent process
GREEDY_IN_RUST = (
    "import polars as pl\nfrom opscope.analysis.kernels import summary\n"
    "summary.kernel_summary = lambda *args, **kwargs: pl.repeat(0, 1 << 33, eager=True, dtype=pl.Int64)\n"
    "from opscope.cli.main import entry\nentry()\n"
)


def limited(code: str, argv: list[str], mib: int, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mib << 20, mib << 20))

    return subprocess.run(
        [sys.executable, "-c", code, *argv],
        preexec_fn=limit,
        env={**os.environ, "OPSCOPE_CACHE_DIR": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize("command", ["summary", "analyze"])
def test_commands_run_at_the_documented_minimum(tmp_path: Path, command: str) -> None:
    # they aborted (SIGABRT) at 2 GiB on 2 cores, at 3-4 GiB on more: 2.4 GB of address space reserved
    trace = str(corpus_path(V100))
    mib = address_space.MINIMUM_BYTES >> 20
    for run in ("cold", "warm"):
        done = limited(MAIN, [command, trace, "--format", "json", "-o", os.devnull], mib, tmp_path)
        assert done.returncode == 0, (run, done.returncode, done.stderr[-2000:])
        assert "memory allocation" not in done.stderr


def test_a_limit_below_the_minimum_is_one_line(tmp_path: Path) -> None:
    done = limited(MAIN, ["summary", str(corpus_path(V100))], 768, tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        "opscope: error: the address-space limit (ulimit -v) is 768 MiB; opscope needs at least 1024 MiB\n"
    )


def test_an_allocation_that_fails_is_one_line(tmp_path: Path) -> None:
    done = limited(GREEDY, ["summary", str(corpus_path(V100))], 1024, tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.endswith(
        "opscope: error: out of memory: an allocation failed under the address-space limit of 1024 MiB "
        "(ulimit -v); raise it or read a smaller trace\n"
    )
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_pools_and_arenas_are_capped_only_under_a_limit(tmp_path: Path) -> None:
    show = (
        "import os\nfrom opscope.cli import address_space\naddress_space.prepare()\n"
        "print([os.environ.get(n) for n in (*address_space.POOL_VARIABLES, 'OMP_NUM_THREADS', "
        "'ARROW_DEFAULT_MEMORY_POOL')])\n"
    )
    names = (*address_space.POOL_VARIABLES, "OMP_NUM_THREADS", "ARROW_DEFAULT_MEMORY_POOL")
    env = {k: v for k, v in os.environ.items() if k not in names}
    free = subprocess.run([sys.executable, "-c", show], env=env, capture_output=True, text=True, check=True)
    assert free.stdout.strip() == str([None] * len(names))
    threads = str(min(os.cpu_count() or 1, 3))
    capped = subprocess.run(
        [sys.executable, "-c", show],
        env=env,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30)),
        capture_output=True,
        text=True,
        check=True,
    )
    assert capped.stdout.strip() == str([threads] * (len(names) - 1) + ["system"])


class PanicException(BaseException):
    """Stands for pyo3's PanicException (a BaseException), which a failed Rust thread spawn raises."""


@pytest.mark.parametrize(
    ("failure", "code", "line"),
    [
        (MemoryError(), 2, "opscope: error: out of memory: an allocation failed"),
        (OSError("Cannot allocate memory (os error 12)"), 2, "opscope: error: out of memory: an allocation"),
        (
            PanicException("failed to spawn thread: Os { code: 11 }"),
            2,
            "opscope: error: out of memory: a thread",
        ),
        (PanicException("index out of bounds"), 3, "opscope: internal error: PanicException: index out of"),
        (OSError("something else"), 3, "opscope: internal error: OSError: something else"),
    ],
)
def test_failures_python_sees_are_one_line(
    cli, monkeypatch, failure: BaseException, code: int, line: str
) -> None:
    from opscope.cli import summary

    def fail(args: object) -> int:
        raise failure

    monkeypatch.setattr(summary, "run", fail)
    monkeypatch.setattr(address_space, "address_limit", lambda: None)  # no limit: no limit in the text
    result = cli("summary", "whatever.json")
    assert result.code == code
    assert result.err.startswith(line) and result.err.count("\n") == 1, result.err


def test_an_allocation_that_aborts_in_rust_ends_with_one_line(tmp_path: Path) -> None:
    """The abort cannot be caught in the process that fails: the console script runs the command in a child
    under the limit and turns its SIGABRT into the usual last line and exit 2 (cli/supervise.py)."""
    done = limited(GREEDY_IN_RUST, ["summary", str(corpus_path(V100))], 1024, tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    # the supervisor's line (it writes it for a SIGABRT only: the child did abort), and only that line: Rust's
    # own "memory allocation of N bytes failed" is dropped by the child's native-noise filter (issue 57)
    assert done.stderr == (
        "opscope: error: out of memory: an allocation failed in the native code under the address-space limit "
        "of 1024 MiB (ulimit -v); raise the limit or read a smaller trace\n"
    )
    assert "Traceback" not in done.stderr


def test_the_child_runs_the_same_command_and_its_exit_code_passes_through(tmp_path: Path) -> None:
    trace = str(corpus_path(V100))
    entry = "from opscope.cli.main import entry\nentry()\n"
    done = limited(entry, ["summary", trace, "--format", "json"], 1024, tmp_path)
    assert done.returncode == 0 and '"schema": "opscope.summary/1"' in done.stdout, done.stderr[-2000:]
    missing = limited(entry, ["summary", str(tmp_path / "absent.json")], 1024, tmp_path)
    assert missing.returncode == 2 and missing.stderr.startswith("opscope: error:")
    assert missing.stderr.count("\n") == 1  # one line: the child's, nothing added by the parent


def test_supervision_only_under_a_limit(monkeypatch) -> None:
    monkeypatch.delenv(supervise.CHILD_VARIABLE, raising=False)
    monkeypatch.setattr(supervise, "address_limit", lambda: None)
    assert not supervise.wanted()  # no limit: the command runs in this process, as always
    monkeypatch.setattr(supervise, "address_limit", lambda: 2 << 30)
    assert supervise.wanted()
    monkeypatch.setenv(supervise.CHILD_VARIABLE, "1")
    assert not supervise.wanted()  # the child itself runs the command
    codes = (0, 1, 2, -signal.SIGKILL, -signal.SIGTERM)
    assert [supervise.exit_code(c) for c in codes] == [0, 1, 2, 137, 143]


def test_sigterm_reaches_the_child() -> None:
    """A parent stopped with SIGTERM (a CI timeout, `kill`) stops its child too, and exits as the child did."""
    child = "import time\nprint('ready', flush=True)\ntime.sleep(120)\n"
    parent = (
        "import sys\nfrom opscope.cli import supervise\n"
        f"sys.exit(supervise.run([sys.executable, '-c', {child!r}]))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143
