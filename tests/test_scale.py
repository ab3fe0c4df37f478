"""Fan-out: local worker processes and a real Dask cluster (scheduler + two workers started as subprocesses on
127.0.0.1) give the same results as one process; failures end the run with one line, never a partial result."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO, TRACES, corpus_path
from handmade_traces import die, square
from opscope.errors import ClusterError
from opscope.scale import executor
from opscope.scale.executor import default_jobs, run_all

DLRM0 = "param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json"
PAIR = (
    "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz",
    "tracelens/mi300__gaunernst_bert-small-uncased__1016001.json.gz",
)


def test_local_pool_keeps_input_order() -> None:
    assert run_all(square, list(range(7)), jobs=2) == [x * x for x in range(7)]
    assert run_all(square, [3], jobs=4) == [9]


def test_local_worker_death_is_a_clear_error() -> None:
    with pytest.raises(ClusterError, match="worker process died"):
        run_all(die, [os.getpid()] * 20, jobs=2, mode="processes")


def test_default_jobs_bounded_by_input_cores_and_memory(monkeypatch) -> None:
    big = 64 << 20
    assert default_jobs([100]) == 1
    monkeypatch.setenv("OPSCOPE_PARALLEL", "processes")
    assert default_jobs([1 << 20] * 3) == 1  # small input: not worth starting processes
    monkeypatch.setenv("OPSCOPE_PARALLEL", "threads")
    monkeypatch.setattr(executor, "cores", lambda: 2)
    assert default_jobs([1 << 20] * 3) == 2  # threads start for free
    monkeypatch.setattr(executor, "cores", lambda: 8)
    monkeypatch.setattr(executor, "available_memory", lambda: None)
    assert default_jobs([big] * 3) == 3
    assert default_jobs([big] * 20) == 8
    per_worker = executor.WORKER_BASE_BYTES + executor.WORKER_BYTES_PER_INPUT_BYTE * big
    monkeypatch.setattr(executor, "available_memory", lambda: 2 * per_worker + 1)
    assert default_jobs([big] * 20) == 2
    monkeypatch.setattr(executor, "available_memory", lambda: 1)
    assert default_jobs([big] * 20) == 1


def test_parallel_mode_by_count_and_size(monkeypatch) -> None:
    """Unset, many traces with enough input run in processes (they pay for starting them), others in threads;
    $OPSCOPE_PARALLEL always wins."""
    monkeypatch.delenv("OPSCOPE_PARALLEL", raising=False)
    many = executor.PROCESS_TASKS_PER_WORKER * 2
    assert executor.parallel_mode(many, 2, 64 << 20) == "processes"
    assert executor.parallel_mode(many - 1, 2, 64 << 20) == "threads"
    assert executor.parallel_mode(many, 2, 1 << 20) == "threads"  # tiny traces: not worth the start-up
    assert executor.parallel_mode(many, 1, 64 << 20) == "threads"
    assert executor.parallel_mode() == "threads"
    monkeypatch.setenv("OPSCOPE_PARALLEL", "threads")
    assert executor.parallel_mode(many, 2, 64 << 20) == "threads"
    monkeypatch.setenv("OPSCOPE_PARALLEL", "processes")
    assert executor.parallel_mode(2, 2, 0) == "processes"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


@pytest.fixture(scope="module")
def dask_scheduler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real scheduler and two single-threaded workers on 127.0.0.1; always torn down."""
    pytest.importorskip("distributed")
    dask = Path(sys.executable).parent / "dask"
    if not dask.exists():
        pytest.skip("the dask command is not installed")
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(REPO / "src"), str(REPO / "tests")]),
        DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="0",
    )
    logs = tmp_path_factory.mktemp("dask")
    procs: list[subprocess.Popen[bytes]] = []
    with contextlib.ExitStack() as files:
        try:
            procs.append(
                subprocess.Popen(
                    [str(dask), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=files.enter_context(open(logs / "scheduler.log", "wb")),
                )
            )
            for i in range(2):
                procs.append(
                    subprocess.Popen(
                        [
                            str(dask),
                            "worker",
                            address,
                            "--nworkers",
                            "1",
                            "--nthreads",
                            "1",
                            "--no-dashboard",
                            "--host",
                            "127.0.0.1",
                        ],
                        env=env,
                        stdout=subprocess.DEVNULL,
                        stderr=files.enter_context(open(logs / f"worker{i}.log", "wb")),
                    )
                )
            _wait_for_workers(address, 2)
            yield address
        finally:
            for proc in reversed(procs):
                _stop(proc)


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


def _json(cli, *args: object) -> dict:
    result = cli("-q", *args, "--format", "json")
    assert result.code == 0, result.err
    return json.loads(result.out)


def test_ranks_on_dask_equal_local_mode(cli, dask_scheduler: str) -> None:
    corpus_path(DLRM0)
    folder = TRACES / "param" / "dlrm_kineto"
    local = _json(cli, "ranks", folder, "--top", "0", "--jobs", "2")
    serial = _json(cli, "ranks", folder, "--top", "0", "--jobs", "1")
    remote = _json(cli, "ranks", folder, "--top", "0", "--scheduler", dask_scheduler)
    assert remote == local == serial


def test_diff_on_dask_equals_local_mode(cli, dask_scheduler: str) -> None:
    a, b = corpus_path(PAIR[0]), corpus_path(PAIR[1])
    local = _json(cli, "diff", a, b, "--top", "0", "--jobs", "2")
    remote = _json(cli, "diff", a, b, "--top", "0", "--scheduler", dask_scheduler)
    assert remote == local


def test_unreachable_scheduler_is_one_line(cli) -> None:
    pytest.importorskip("distributed")
    result = cli(
        "ranks",
        corpus_path(DLRM0),
        "--scheduler",
        f"tcp://127.0.0.1:{_free_port()}",
        "--connect-timeout",
        "1",
    )
    assert result.code == 2
    assert (
        result.err.startswith("opscope: error: cannot reach the Dask scheduler")
        and result.err.count("\n") == 1
    )
    assert "within 1s" in result.err
    result = cli("ranks", corpus_path(DLRM0), "--scheduler", "nonsense://x")
    assert result.code == 2 and "unknown address scheme" in result.err and result.err.count("\n") == 1


def test_dask_worker_dying_is_a_clear_error(dask_scheduler: str) -> None:
    # runs last in this module: it costs the cluster its workers (their nannies restart them)
    with pytest.raises(ClusterError, match="died"):
        run_all(die, [os.getpid()] * 2, scheduler=dask_scheduler, timeout_s=30)
