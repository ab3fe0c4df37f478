"""`analysis.base.parallel.ordered_map`: the pieces' results in their order, one stage per piece in order, an
error raised where the caller reads it, and the pieces not yet started cancelled when the caller stops."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from opscope.analysis.base import parallel
from opscope.analysis.base.parallel import ordered_map
from opscope.analysis.base.stages import listening
from opscope.model.meta import TraceMeta
from opscope.model.trace import Trace


@pytest.mark.parametrize("workers", [1, 3])
def test_results_and_stages_in_order(monkeypatch: pytest.MonkeyPatch, workers: int) -> None:
    monkeypatch.setattr(parallel, "threads", lambda: workers)
    seen: list[str] = []

    def slow_square(x: int) -> int:
        time.sleep(0.001 * ((7 * x) % 5))  # finish out of order
        return x * x

    with listening(seen.append):
        out = list(ordered_map(slow_square, list(range(23)), "piece"))
    assert out == [x * x for x in range(23)]
    assert seen == [f"piece {i} of 23" for i in range(1, 24)]


def test_an_error_reaches_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "threads", lambda: 3)

    def fail_on_five(x: int) -> int:
        if x == 5:
            raise ValueError("five")
        return x

    with pytest.raises(ValueError, match="five"):
        list(ordered_map(fail_on_five, list(range(40)), "piece"))


def test_stopping_cancels_what_has_not_started(monkeypatch: pytest.MonkeyPatch) -> None:
    """The caller stops after the first result (as Ctrl-C would): the queued pieces never run."""
    monkeypatch.setattr(parallel, "threads", lambda: 2)
    started: list[int] = []
    lock = threading.Lock()

    def record(x: int) -> int:
        with lock:
            started.append(x)
        time.sleep(0.01)
        return x

    results = ordered_map(record, list(range(200)), "piece")
    assert next(results) == 0
    results.close()  # the generator's finally: shutdown with cancel_futures
    time.sleep(0.1)
    assert len(started) <= 2 * 2 + 2  # the submitted window ahead, never the 200


def test_threads_follow_the_polars_thread_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under an address-space limit the CLI sets POLARS_MAX_THREADS to one thread per GiB: the pieces follow."""
    monkeypatch.setenv("POLARS_MAX_THREADS", "1")
    assert parallel.threads() == 1
    monkeypatch.setenv("POLARS_MAX_THREADS", "64")
    assert 1 <= parallel.threads() <= parallel.MAX_THREADS
    monkeypatch.delenv("POLARS_MAX_THREADS")
    assert 1 <= parallel.threads() <= parallel.MAX_THREADS


@pytest.mark.parametrize("workers", [1, 2])
def test_beside_runs_while_the_caller_goes_on(monkeypatch: pytest.MonkeyPatch, workers: int) -> None:
    """`Beside`: the value comes back through `result`; with more than one thread the work runs on a daemon
    thread of its own, announcing no stages into the caller's listener; with one thread it runs at once, here."""
    monkeypatch.setattr(parallel, "threads", lambda: workers)
    seen: list[str] = []
    ran_on: list[threading.Thread] = []

    def work() -> int:
        ran_on.append(threading.current_thread())
        parallel.stage("inside")  # no listener on a thread of its own
        return 42

    with listening(seen.append):
        handle = parallel.Beside(work)
        assert handle.result() == 42
        assert handle.result() == 42  # asked again: the same value
    assert len(ran_on) == 1
    if workers == 1:
        assert ran_on[0] is threading.current_thread() and seen == ["inside"]
    else:
        assert ran_on[0] is not threading.current_thread() and ran_on[0].daemon and seen == []


def test_a_beside_asked_for_while_another_runs_is_computed_by_the_caller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One `Beside` thread at a time: while the first one's work runs, a second `Beside` (the report's advice
    asking for `analyze`'s busy / idle pieces beside its trees) computes in the caller's thread; once the first
    is done, the next one gets a thread again."""
    monkeypatch.setattr(parallel, "threads", lambda: 3)
    release = threading.Event()
    ran_on: list[threading.Thread] = []

    def blocked() -> str:
        ran_on.append(threading.current_thread())
        release.wait(5)
        return "first"

    def quick() -> str:
        ran_on.append(threading.current_thread())
        return "second"

    first = parallel.Beside(blocked)
    second = parallel.Beside(quick)
    assert second.result() == "second" and ran_on[-1] is threading.current_thread()
    release.set()
    assert first.result() == "first" and ran_on[0] is not threading.current_thread()
    third = parallel.Beside(quick)
    assert third.result() == "second" and ran_on[-1] is not threading.current_thread()


def test_a_spare_only_beside_runs_on_a_free_thread_or_not_at_all(monkeypatch: pytest.MonkeyPatch) -> None:
    """`spare_only` (the efficiency table started early beside the rules): on a free thread it runs there;
    while another `Beside` holds the thread, or with one thread, nothing runs and `result` says so."""
    release = threading.Event()
    ran: list[str] = []
    monkeypatch.setattr(parallel, "threads", lambda: 3)
    busy = parallel.Beside(lambda: release.wait(5))
    skipped = parallel.Beside(lambda: ran.append("skipped"), spare_only=True)
    assert not skipped.started
    with pytest.raises(RuntimeError, match="not started"):
        skipped.result()
    release.set()
    busy.result()
    spare = parallel.Beside(lambda: ran.append(threading.current_thread().name), spare_only=True)
    assert spare.started
    spare.result()
    assert ran == ["opscope-beside"]
    monkeypatch.setattr(parallel, "threads", lambda: 1)
    assert not parallel.Beside(lambda: ran.append("one thread"), spare_only=True).started
    assert ran == ["opscope-beside"]


def test_beside_hands_its_error_to_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "threads", lambda: 2)

    def fail() -> int:
        raise ValueError("beside")

    handle = parallel.Beside(fail)
    with pytest.raises(ValueError, match="beside"):
        handle.result()


def test_a_derived_result_asked_for_by_two_threads_is_computed_once() -> None:
    """`Trace.derived` under threads (the report's critical path beside its advice both read the step
    windows): the second asker waits for the first one's result instead of computing it again; other keys are
    not held up. Hand-made empty trace: only the cache is under test."""
    trace = Trace.from_frame(TraceMeta(path="hand-made", format="test"), pl.DataFrame())
    calls: list[str] = []
    started, release = threading.Event(), threading.Event()

    def slow() -> int:
        calls.append("slow")
        started.set()
        release.wait(5)
        return 7

    results: list[int] = []
    first = threading.Thread(target=lambda: results.append(trace.derived("k", slow)))
    second = threading.Thread(target=lambda: results.append(trace.derived("k", slow)))
    first.start()
    assert started.wait(5)
    second.start()
    assert trace.derived("other", lambda: 3) == 3  # another key while "k" is being computed
    release.set()
    first.join(5)
    second.join(5)
    assert results == [7, 7] and calls == ["slow"]


def test_a_trace_pickles_without_its_locks() -> None:
    """The per-key locks of `Trace.derived` do not stop a Trace from being pickled (it could be before they
    came): the copy has its own locks and computes its own results. Hand-made frame."""
    trace = Trace.from_frame(TraceMeta(path="hand-made", format="test"), pl.DataFrame({"x": [1, 2]}))
    assert trace.derived("k", lambda: 5) == 5
    copy = pickle.loads(pickle.dumps(trace))
    assert copy.events.equals(trace.events) and copy.derived("k", lambda: 6) == 5  # results travel too
    assert copy.derived("other", lambda: 7) == 7


# ---- parallel.split_map: pieces shared with worker processes --------------------------------------------------


def _squares(payload: tuple[int, ...]) -> list[int]:
    """A batch in a worker process (module-level: the worker imports it by name)."""
    return [x * x for x in payload]


def _die(payload: tuple[int, ...]) -> list[int]:
    """Kills its worker process (as the kernel's OOM killer would)."""
    os.kill(os.getpid(), signal.SIGKILL)
    return list(payload)


def _fail(payload: tuple[int, ...]) -> list[int]:
    raise ValueError(f"a worker's error on {payload[0]}")


def _noisy(payload: tuple[int, ...]) -> list[int]:
    """Prints to the worker's stdout, through Python and straight to the descriptor, as a chatty library might."""
    print("a library's chatter " * 50, flush=True)
    os.write(1, b"\x80raw bytes on the descriptor\n")
    return [x * x for x in payload]


def _children() -> set[int]:
    """The pids of this process's live child processes (Linux: /proc)."""
    mine = str(os.getpid())
    out = set()
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line)
        except OSError:
            continue
        if fields.get("PPid", "").strip() == mine and not fields.get("State", "").startswith("Z"):
            out.add(int(status.parent.name))
    return out


def _ranges(lo: int, hi: int) -> tuple[int, ...]:
    return tuple(range(lo, hi))


@pytest.fixture
def left_behind() -> Callable[[], set[int]]:
    """The child processes started since the test began that are still alive (other tests of the session may
    keep servers of their own running)."""
    before = _children()
    return lambda: _children() - before


@pytest.mark.parametrize("workers", [1, 2])
def test_split_map_shares_pieces_with_workers_in_order(workers: int, left_behind) -> None:
    """This process takes pieces from the front, the workers batches from the back: every result in order, one
    stage per piece in order, the workers' peaks recorded, and no worker process left behind."""
    before = len(parallel.worker_peaks_kb())
    seen: list[str] = []
    here: list[int] = []

    def local(i: int) -> int:
        here.append(i)
        time.sleep(0.02)  # slow enough that the workers (~0.3 s to start) take some batches
        return i * i

    with listening(seen.append):
        out = list(parallel.split_map(local, _squares, _ranges, 120, "piece", workers, 4))
    assert out == [i * i for i in range(120)]
    assert seen == [f"piece {i} of 120" for i in range(1, 121)]
    assert 0 < len(here) < 120 and here[: len(here) // 2] == list(range(len(here) // 2))
    peaks = parallel.worker_peaks_kb()[before:]
    assert 1 <= len(peaks) <= workers and all(p > 0 for p in peaks)
    assert not left_behind()


def test_what_a_worker_prints_does_not_reach_its_answers(left_behind) -> None:
    """A worker's answers travel on a descriptor of their own: what its calls print (to sys.stdout or to fd 1)
    goes where its stderr goes, and every result still comes back from the worker."""
    before = len(parallel.worker_peaks_kb())
    out = list(parallel.split_map(lambda i: time.sleep(0.02) or -1, _noisy, _ranges, 60, "piece", 1, 4))
    assert len(parallel.worker_peaks_kb()) == before + 1
    assert out[-4:] == [x * x for x in range(56, 60)]  # the last batch: always a worker's
    assert not left_behind()


def test_split_map_computes_here_what_a_dead_worker_held(left_behind) -> None:
    """A worker killed while it holds a batch costs no result: the batch is computed here, and no batch is sent
    after it."""
    here: list[int] = []

    def local(i: int) -> int:
        here.append(i)
        time.sleep(0.01)
        return -i

    assert list(parallel.split_map(local, _die, _ranges, 40, "piece", 1, 2)) == [-i for i in range(40)]
    assert sorted(here) == list(range(40))
    assert not left_behind()


def test_split_map_raises_a_workers_error(left_behind) -> None:
    """An error raised inside a worker's call reaches the caller, as the same error raised here would."""
    with pytest.raises(ValueError, match="a worker's error on 38"):
        list(parallel.split_map(lambda i: time.sleep(0.01) or i, _fail, _ranges, 40, "piece", 1, 2))
    assert not left_behind()


def test_split_map_stopped_early_stops_its_workers(left_behind) -> None:
    """The caller stops after a few results (Ctrl-C): the workers are killed, none is left running."""
    results = parallel.split_map(lambda i: time.sleep(0.05) or i, _squares, _ranges, 400, "piece", 2, 4)
    assert [next(results) for _ in range(3)] == [0, 1, 2]
    time.sleep(0.5)  # the workers have started
    results.close()
    assert not left_behind()


def test_a_script_without_a_main_guard_runs_once(tmp_path: Path) -> None:
    """Workers are fresh interpreters that import only what their calls need: a user's script that calls the
    API at its top level (no `if __name__ == "__main__":`) is not run again in each worker, as multiprocessing's
    spawn and forkserver would (and then fail: a worker may not start workers)."""
    ran = tmp_path / "ran.txt"
    script = tmp_path / "user_script.py"
    script.write_text(
        "from opscope.analysis.base.parallel import split_map\n"
        f"open({str(ran)!r}, 'a').write('ran\\n')\n"
        "import time\n"
        "def slow(i):\n"
        "    time.sleep(0.01)\n"
        "    return i\n"
        "print(sum(split_map(slow, list, lambda lo, hi: tuple(range(lo, hi)), 200, 'piece', 1, 10)))\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(sum(range(200)))]
    assert ran.read_text() == "ran\n"


def test_process_workers_follow_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """None under `OPSCOPE_PARALLEL=threads`, one thread asked for, an address-space limit or too little
    memory; else one less than the CPUs, at most MAX_PROCESSES."""
    monkeypatch.setattr(parallel, "cores", lambda: 8)
    monkeypatch.setattr(parallel, "threads", lambda: 4)
    monkeypatch.setattr(parallel, "available_memory", lambda: None)
    monkeypatch.delenv("OPSCOPE_PARALLEL", raising=False)
    assert parallel.process_workers() == min(parallel.MAX_PROCESSES, 3)
    monkeypatch.setattr(parallel, "available_memory", lambda: parallel.PROCESS_BASE_BYTES + 1)
    assert parallel.process_workers() == 1
    monkeypatch.setattr(parallel, "available_memory", lambda: 1)
    assert parallel.process_workers() == 0
    monkeypatch.setattr(parallel, "available_memory", lambda: None)
    monkeypatch.setattr(parallel, "threads", lambda: 1)  # POLARS_MAX_THREADS=1
    assert parallel.process_workers() == 0
    monkeypatch.setattr(parallel, "threads", lambda: 4)
    monkeypatch.setenv("OPSCOPE_PARALLEL", "threads")
    assert parallel.process_workers() == 0
    monkeypatch.delenv("OPSCOPE_PARALLEL")
    monkeypatch.setattr(parallel, "address_limit", lambda: 8 << 30)
    assert parallel.process_workers() == 0
    monkeypatch.undo()
    import resource

    monkeypatch.setattr(resource, "getrlimit", lambda _: (8 << 30, resource.RLIM_INFINITY))
    assert parallel.address_limit() == 8 << 30
