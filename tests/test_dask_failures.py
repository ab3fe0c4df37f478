"""A Dask cluster that fails mid-run (issue 14): `ranks --scheduler` with every worker killed, or with the
scheduler killed, ends within the connect timeout with one line on standard error and exit 2, never a hang,
a traceback or a partial result. A real scheduler and real workers run on 127.0.0.1; the test kills them."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO, TRACES, corpus_path
from handmade_traces import nap
from opscope.errors import ClusterError
from opscope.scale.executor import run_all

DLRM = "param/dlrm_kineto"
TIMEOUT_S = 3  # --connect-timeout: how long a run waits for a lost cluster to come back


@dataclass
class Cluster:
    address: str
    scheduler: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A scheduler and two single-threaded workers without nannies (so that a killed worker stays dead)."""
    pytest.importorskip("distributed")
    dask = Path(sys.executable).parent / "dask"
    if not dask.exists():
        pytest.skip("the dask command is not installed")
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), str(REPO / "tests")]))
    with contextlib.ExitStack() as stack:
        log = stack.enter_context(open(tmp_path / "cluster.log", "wb"))
        scheduler = subprocess.Popen(
            [str(dask), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        workers = [
            subprocess.Popen(
                [
                    str(dask),
                    "worker",
                    address,
                    "--nthreads",
                    "1",
                    "--no-nanny",
                    "--no-dashboard",
                    "--host",
                    "127.0.0.1",
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
            for _ in range(2)
        ]
        try:
            _wait_for_workers(address, 2)
            yield Cluster(address, scheduler, workers)
        finally:
            for proc in [*workers, scheduler]:
                if proc.poll() is None:
                    proc.kill()
                proc.wait(timeout=30)


def _wait_for_workers(address: str, count: int) -> None:
    from distributed import Client

    deadline = time.monotonic() + 60
    while True:
        try:
            with Client(address, timeout="5s", set_as_default=False) as client:
                client.wait_for_workers(count, timeout=60)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _kill_later(procs: list[subprocess.Popen[bytes]], after_s: float) -> threading.Thread:
    def kill() -> None:
        time.sleep(after_s)
        for proc in procs:
            proc.send_signal(signal.SIGKILL)

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread


def _done_tasks(dask_scheduler) -> int:  # type: ignore[no-untyped-def]
    return sum(task.state == "memory" for task in dask_scheduler.tasks.values())


def _kill_mid_run(cluster: Cluster, procs: list[subprocess.Popen[bytes]]) -> threading.Thread:
    """Kill `procs` once the scheduler holds the first finished task of a run: mid-run, whatever the load."""

    def watch_then_kill() -> None:
        from distributed import Client

        deadline = time.monotonic() + 90
        with Client(cluster.address, timeout="10s", set_as_default=False) as client:
            while time.monotonic() < deadline and client.run_on_scheduler(_done_tasks) < 1:
                time.sleep(0.05)
        for proc in procs:
            proc.send_signal(signal.SIGKILL)

    thread = threading.Thread(target=watch_then_kill, daemon=True)
    thread.start()
    return thread


def _many_traces(tmp_path: Path, copies: int = 64) -> Path:
    """A folder of `copies` links to the 8 real DLRM rank traces: with --no-cache, a run of several seconds."""
    corpus_path(f"{DLRM}/worker0_step_12.1694128201545.pt.trace.json")
    sources = sorted((TRACES / DLRM).iterdir())
    folder = tmp_path / "ranks"
    folder.mkdir()
    for i in range(copies):
        (folder / f"rank{i:03d}.json").symlink_to(sources[i % len(sources)])
    return folder


def _ranks(folder: Path, address: str) -> subprocess.CompletedProcess[str]:
    """`opscope ranks` in a process of its own, as a user runs it (what it leaves on stderr at exit counts)."""
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from opscope.cli.main import main; sys.exit(main(sys.argv[1:]))",
            "ranks",
            str(folder),
            "--no-cache",
            "--scheduler",
            address,
            "--connect-timeout",
            str(TIMEOUT_S),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(REPO / "src")),
    )


def _one_line(done: subprocess.CompletedProcess[str], message: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stdout == "", "a partial result was printed"
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"opscope: error: {message}"), done.stderr
    assert done.stderr.rstrip().endswith("; no result")


@pytest.mark.slow
def test_every_worker_killed_mid_run(cluster: Cluster, tmp_path: Path) -> None:
    folder = _many_traces(tmp_path)
    _kill_mid_run(cluster, cluster.workers)
    started = time.monotonic()
    done = _ranks(folder, cluster.address)
    _one_line(done, f"every Dask worker of {cluster.address} was lost after ")
    assert f"none came back within {TIMEOUT_S}s" in done.stderr
    assert re.search(r"after [1-9]\d* of 64 traces", done.stderr), (
        done.stderr
    )  # killed mid-run, and it says so
    assert time.monotonic() - started < 60


@pytest.mark.slow
def test_scheduler_killed_mid_run(cluster: Cluster, tmp_path: Path) -> None:
    folder = _many_traces(tmp_path)
    _kill_mid_run(cluster, [cluster.scheduler])
    done = _ranks(folder, cluster.address)
    _one_line(done, f"lost the connection to the Dask scheduler at {cluster.address} after ")


def test_run_all_reports_how_far_it_got(cluster: Cluster) -> None:
    _kill_later(cluster.workers, after_s=1.0)
    started = time.monotonic()
    with pytest.raises(ClusterError, match=r"every Dask worker .* was lost after [0-3] of 8 traces"):
        run_all(nap, [1.5] * 8, scheduler=cluster.address, timeout_s=2)
    assert time.monotonic() - started < 20


def _io_loops() -> int:
    return sum(thread.name == "IO loop" and thread.is_alive() for thread in threading.enumerate())


def test_a_refused_address_leaves_no_client_behind() -> None:
    """Issue 32 item 7: a client that could not connect kept its IO-loop thread (distributed's `close()`
    returns at once for a client whose start failed); nothing listens on the port here."""
    pytest.importorskip("distributed")
    before = _io_loops()
    address = f"tcp://127.0.0.1:{_free_port()}"
    started = time.monotonic()
    with pytest.raises(ClusterError, match="cannot reach the Dask scheduler"):
        run_all(nap, [0.0], scheduler=address, timeout_s=1)
    assert time.monotonic() - started < 20
    assert _io_loops() <= before


def test_a_client_that_connects_and_then_fails_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 32 item 7, with a stand-in for `distributed.Client`: connected, then a later step of its start
    fails (a preload, say); the half-built client is closed and its loop runner stopped before the error."""
    distributed = pytest.importorskip("distributed")
    closed: list[str] = []

    class Runner:
        def stop(self, timeout: float = 10) -> None:
            closed.append("loop runner stopped")

    class HalfClient:
        def __init__(self, address: str, timeout: str, set_as_default: bool) -> None:
            self._loop_runner = Runner()
            self.start(timeout=timeout)

        def start(self, **kwargs: object) -> None:
            self.status = "running"  # the connection was made
            raise RuntimeError("a preload failed")

        def close(self, timeout: float | None = None) -> None:
            closed.append(f"closed while {self.status}")

    monkeypatch.setattr(distributed, "Client", HalfClient)
    with pytest.raises(ClusterError, match=r"RuntimeError: a preload failed"):
        run_all(nap, [0.0], scheduler="tcp://127.0.0.1:1", timeout_s=1)
    assert closed == ["closed while running", "loop runner stopped"]
