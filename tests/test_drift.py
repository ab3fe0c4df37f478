"""Long runs sampled in windows (`opscope run --every`, `opscope.profile(every=M)`) and `opscope drift`
(docs/drift.md).

Real runs: the scripts of tests/drift_scripts train a tiny model on the CPU for 1,500 steps under
`opscope run --profile-steps 10 --every 100` (15 windows), each slowing down in one planted way from step 400 (the
window of steps 401-410 is window 4); `drift` must name the figure, the onset window and the rate, and stay quiet
on the steady script. The pure parts (the schedule, the change rule) are checked on hand-made series, labelled
as such."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from browser import chromium, open_report  # noqa: F401  (fixtures)
from history_support import db  # noqa: F401  (fixture: SQLite and PostgreSQL)
from opscope.analysis.compare.drift import MIN_WINDOWS, WindowFigures, WindowInfo, drift
from opscope.capture.sampling import Sampler, Sampling, read_manifest
from opscope.capture.schedule import NONE, RECORD, RECORD_AND_SAVE, WARMUP
from opscope.errors import UsageError
from opscope.history.api import History

SCRIPTS = Path(__file__).resolve().parent / "drift_scripts"
ONSET_WINDOWS = {4, 5}  # the drift starts at step 400: window 4 records steps 401-410


# -- the schedule (pure) ------------------------------------------------------------------------------------------


def test_sampler_records_a_window_every_m_steps() -> None:
    sampler = Sampler(Sampling(steps=3, every=10, skip_first=2))
    actions = [sampler.action(s) for s in range(25)]
    assert actions[:2] == [NONE, NONE]
    assert actions[2:6] == [WARMUP, RECORD, RECORD, RECORD_AND_SAVE]
    assert actions[6:12] == [NONE] * 6
    assert actions[12:16] == [WARMUP, RECORD, RECORD, RECORD_AND_SAVE]
    assert sampler.recorded_steps() == (23, 25)  # the window begun at step 22


def test_sampler_every_seconds_uses_the_clock() -> None:
    now = [0.0]
    sampler = Sampler(Sampling(steps=2, every_seconds=5.0), clock=lambda: now[0])
    seen = []
    for step in range(12):
        seen.append(sampler.action(step))
        now[0] += 1.0  # one second per step
    assert seen[:3] == [WARMUP, RECORD, RECORD_AND_SAVE]
    assert seen[3:5] == [NONE, NONE]
    assert seen[5] == WARMUP  # five seconds after the first window started


@pytest.mark.parametrize(
    "kwargs",
    [
        {"steps": 5, "every": 5},  # no room for the warm-up step
        {"steps": 5},
        {"steps": 5, "every": 10, "every_seconds": 3.0},
        {"steps": 0, "every": 10},
        {"steps": 5, "every": 10, "keep": 0},
        {"steps": 5, "every": 10, "run_id": "a/b"},
    ],
)
def test_bad_sampling_plans_are_usage_errors(kwargs: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        Sampling(**kwargs)  # type: ignore[arg-type]


# -- the change rule (hand-made series) ---------------------------------------------------------------------------


def _windows(step_time_ms: list[float], mm_ms: list[float] | None = None) -> list[WindowFigures]:
    """Hand-made windows of 10 steps every 100 steps with the given step times (and aten::mm's share)."""
    out = []
    for i, value in enumerate(step_time_ms):
        info = WindowInfo(i, 100 * i + 1, 100 * i + 10, None, None, None, None)
        ops = {"aten::mm": (mm_ms or [0.0] * len(step_time_ms))[i] * 1e3, "aten::add": 10.0}
        out.append(WindowFigures(info, {"step_time_us": value * 1e3, "steps": 10}, ops, {}, {}))
    return out


def test_a_flat_series_does_not_move() -> None:
    noisy = [1.0, 1.02, 0.99, 1.01, 0.98, 1.03, 1.0, 0.99, 1.01, 1.02, 0.99, 1.0]
    assert drift(_windows(noisy)).changes == ()
    assert drift(_windows(noisy)).status == "ok"


def test_a_trend_has_its_onset_and_rate() -> None:
    # flat at 1 ms to window 5, then +0.1 ms a window (100 steps): +1 ms per 1,000 steps
    values = [1.0] * 6 + [1.0 + 0.1 * k for k in range(1, 9)]
    mm = [0.5] * 6 + [0.5 + 0.1 * k for k in range(1, 9)]
    result = drift(_windows(values, mm))
    change, mm_change = result.changes
    # aten::mm is watched on its own (half the step); aten::add (1% of it) is not
    assert mm_change.figure.id == "op:aten::mm" and mm_change.onset_window in (5, 6)
    assert mm_change.rate == pytest.approx(1.0, rel=0.05)
    assert [s.figure.id for s in result.series] == ["step_time", "op:aten::mm"]
    assert change.figure.id == "step_time" and change.direction == "up" and change.worse
    assert change.model == "trend" and change.onset_window in (5, 6)
    assert change.rate == pytest.approx(1.0, rel=0.05) and change.unit == "ms per 1,000 steps"
    assert change.carried_by[0].name == "aten::mm"  # aten::add did not change: not a carrier
    assert [c.name for c in change.carried_by] == ["aten::mm"]


def test_a_step_change_is_a_step() -> None:
    values = [1.0, 1.01, 0.99, 1.0, 1.0, 1.01, 2.0, 2.01, 1.99, 2.0, 2.0, 2.01]
    (change,) = drift(_windows(values)).changes
    assert change.model == "step" and change.onset_window == 6
    assert change.rate == pytest.approx(1.0, rel=0.05) and change.unit == "ms, at once"


def test_too_few_windows_and_short_windows() -> None:
    assert drift(_windows([1.0] * (MIN_WINDOWS - 1))).status == "insufficient_data"
    windows = _windows([1.0] * 9 + [5.0])
    last = windows[-1].info
    windows[-1] = WindowFigures(
        WindowInfo(last.index, last.first_step, (last.first_step or 0) + 2, None, None, None, None),
        windows[-1].values,
        {},
        {},
        {},
    )  # the run ended 3 steps into the last window
    result = drift(windows)
    assert result.left_out == (0, 9)  # the warm-up window and the cut one
    assert result.changes == ()


# -- real runs ----------------------------------------------------------------------------------------------------


def _sample(tmp_path: Path, script: str, *extra: str) -> Path:
    """`opscope run --every` on a drift script in a process of its own (the process's memory is a figure);
    returns the run folder."""
    pytest.importorskip("torch")
    logs = tmp_path / "logs"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "opscope",
            "run",
            "--profile-steps",
            "10",
            "--every",
            "100",
            "--history",
            str(tmp_path / "history.sqlite"),
            "--log-dir",
            str(logs),
            "--format",
            "json",
            "-o",
            str(tmp_path / "run.json"),
            *extra,
            "--",
            "python",
            str(SCRIPTS / script),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "OPSCOPE_CACHE_DIR": str(tmp_path / "cache")},
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (folder,) = [p for p in logs.iterdir() if (p / "sampling.json").is_file()]
    return folder


def _drift(cli, folder: Path) -> dict:  # type: ignore[no-untyped-def]
    got = cli("drift", folder, "--format", "json")
    assert got.code == 0, got.err
    data = json.loads(got.out)
    assert data["schema"] == "opscope.drift/1"
    return data


def _change(data: dict, figure: str) -> dict:  # type: ignore[type-arg]
    found = [c for c in data["changes"] if c["figure"] == figure]
    assert found, f"{figure} did not move: {[c['figure'] for c in data['changes']]}"
    return found[0]


@pytest.mark.slow
def test_steady_script_does_not_drift(tmp_path, cli) -> None:
    folder = _sample(tmp_path, "steady.py")
    data = _drift(cli, folder)
    assert data["status"] == "ok" and data["changes"] == [], data["changes"]
    manifest = read_manifest(folder)
    # 15 windows of 10 steps, and one begun at the last step (the first optimizer step counted as a step too):
    # cut short, it is not judged, nor is the warm-up window
    assert len(manifest.windows) == 16 and manifest.finished
    assert data["windows_left_out"] == [0, 15] and len(data["windows"]) == 14
    # the overhead is measured: traced steps against the untraced ones before them, and the writing
    assert all(w.untraced_step_s is not None and w.untraced_step_s > 0 for w in manifest.windows[1:])
    assert all(w.overhead is not None for w in manifest.windows[1:])
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["sampling"]["cost"]["traced_step_overhead_median"] is not None
    assert run["sampling"]["folder"] == str(folder)
    # every window is in the history, under its sampling run and index
    with History(str(tmp_path / "history.sqlite")) as history:
        runs = history.runs(tags={"sampling_run": manifest.run_id})
    assert [r.window.index for r in runs if r.window] == list(range(16))
    assert [r.window.first_step for r in runs if r.window][:2] == [1, 101]
    assert all(r.tags["window"] == str(r.window.index) for r in runs if r.window)


@pytest.mark.slow
def test_growing_tensor_drifts_in_step_time_carried_by_the_matmul(tmp_path, cli) -> None:
    data = _drift(cli, _sample(tmp_path, "growing_tensor.py"))
    change = _change(data, "step_time")
    assert change["direction"] == "up" and change["onset_window"] in ONSET_WINDOWS
    assert change["onset_step"] in (401, 501)
    assert change["rate"] > 0 and change["unit"] == "ms per 1,000 steps"
    assert change["carried_by"][0]["name"] in ("aten::mm", "aten::addmm"), change["carried_by"]


@pytest.mark.slow
def test_leaking_list_drifts_in_memory_with_bounded_disk(tmp_path, cli) -> None:
    folder = _sample(tmp_path, "leaking_list.py", "--keep", "3")
    # disk stays bounded: three traces on disk, the other windows in the history only
    manifest = read_manifest(folder)
    assert len(list(folder.glob("*.pt.trace.json.gz"))) == 3
    assert sum(w.trace is None for w in manifest.windows) == len(manifest.windows) - 3
    assert all(w.history_run is not None for w in manifest.windows)
    data = _drift(cli, folder)
    change = _change(data, "process_memory")
    assert change["onset_window"] in ONSET_WINDOWS
    # 256 KiB a step: 262 MB per 1,000 steps
    assert change["rate"] == pytest.approx(262.144, rel=0.25) and change["unit"] == "MB per 1,000 steps"
    assert "leak" in change["note"]
    # the same from the history alone (the sampling run's id)
    again = cli("drift", manifest.run_id, "--db", tmp_path / "history.sqlite", "--format", "json")
    assert again.code == 0, again.err
    assert _change(json.loads(again.out), "process_memory")["onset_window"] == change["onset_window"]


@pytest.mark.slow
def test_allocator_churn_drifts_in_allocations(tmp_path, cli) -> None:
    data = _drift(cli, _sample(tmp_path, "allocator_churn.py", "--profile-memory"))
    change = _change(data, "allocations")
    assert change["direction"] == "up" and change["onset_window"] in {4, 5, 6}
    assert change["rate"] == pytest.approx(40.0, rel=0.25)  # one more buffer every 25 steps
    assert change["carried_by"][0]["name"] in ("aten::empty", "aten::fill_")


@pytest.mark.slow
def test_recompiles_drift_in_compilations(tmp_path, cli) -> None:
    data = _drift(cli, _sample(tmp_path, "recompiles.py"))
    change = _change(data, "compiles")
    assert change["onset_window"] in ONSET_WINDOWS
    assert change["now"] == pytest.approx(4.0, abs=1.0)  # a recompile every 25 steps: 4 a window
    assert "compile-check" in change["note"]


@pytest.mark.slow
def test_slow_dataloader_drifts_in_dataloader_wait(tmp_path, cli) -> None:
    folder = _sample(tmp_path, "slow_dataloader.py")
    data = _drift(cli, folder)
    change = _change(data, "dataloader_wait")
    assert change["onset_window"] in ONSET_WINDOWS and change["model"] == "trend"
    # 2 us more a step each step: +2 ms per 1,000 steps
    assert change["rate"] == pytest.approx(2.0, rel=0.3)
    assert "DataLoader" in change["carried_by"][0]["name"]
    # the terminal: a sparkline per figure; HTML: a chart per figure
    table = cli("drift", folder, "--width", "120")
    assert table.code == 0 and "DataLoader wait per step" in table.out and "▁" in table.out


@pytest.mark.slow
@pytest.mark.browser
def test_drift_html_in_a_browser(tmp_path, cli, open_report) -> None:  # noqa: F811
    folder = _sample(tmp_path, "growing_tensor.py")
    out = tmp_path / "drift.html"
    assert cli("drift", folder, "--html", out, "--format", "json").code == 0
    opened = open_report(out)
    assert opened.problems() == [] and opened.dialogs == []
    page = opened.page
    assert page.locator('[data-card="status"] .value').inner_text() == "drift"
    assert page.locator("#drift-charts canvas").count() >= 2
    assert "step time" in page.locator("#change-rows").inner_text()
    assert page.locator("#window-rows tbody tr").count() == 14


def test_profile_every_from_python(tmp_path, cli, db) -> None:  # noqa: F811
    """`opscope.profile(steps=N, every=M)` samples the same way from Python, into SQLite or PostgreSQL."""
    torch = pytest.importorskip("torch")
    import opscope

    with opscope.profile(steps=2, every=5, keep=2, log_dir=tmp_path / "logs", history=db) as prof:
        x = torch.randn(16, 16)
        for _ in range(23):
            (x @ x).sum()
            opscope.step()
    assert prof.sampling is not None
    manifest = read_manifest(prof.sampling.folder)
    assert [(w.first_step, w.last_step) for w in manifest.windows] == [
        (1, 2),
        (6, 7),
        (11, 12),
        (16, 17),
        (21, 22),
    ]
    assert len(list(prof.sampling.folder.glob("*.pt.trace.json.gz"))) == 2
    with History(db) as history:
        assert len(history.runs(tags={"sampling_run": manifest.run_id})) == 5
    # the history says which window each run is, and check can judge a run's newest windows against its earlier
    listed = json.loads(cli("history", "list", "--db", db, "--format", "json").out)
    assert [r["window"]["index"] for r in listed["runs"]] == [0, 1, 2, 3, 4]
    assert {r["window"]["sampling_run"] for r in listed["runs"]} == {manifest.run_id}
    checked = cli("history", "check", "--db", db, "--match", "sampling_run", "--format", "json")
    assert checked.code in (0, 1), checked.err
    assert len(json.loads(checked.out)["recent_runs"]) == 2
    # history report charts the windows as it charts runs (one point per window)
    page = tmp_path / "history.html"
    assert cli("history", "report", "--db", db, "-o", page).code == 0
    assert "sampling_run=" + manifest.run_id in page.read_text()
    with pytest.raises(UsageError, match="sampling"):
        opscope.profile(steps=2, keep=3)


def test_profile_every_seconds_samples_by_the_clock(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    import time

    import opscope

    with opscope.profile(
        steps=1, every_seconds=0.2, log_dir=tmp_path / "logs", history=str(tmp_path / "h.sqlite")
    ) as prof:
        x = torch.randn(8, 8)
        for _ in range(40):
            (x @ x).sum()
            time.sleep(0.02)
            opscope.step()
    assert prof.sampling is not None
    windows = read_manifest(prof.sampling.folder).windows
    assert 3 <= len(windows) <= 6  # 0.8 s of steps, a window every 0.2 s (at the next step boundary)
    starts = [w.elapsed_s for w in windows]
    assert all(b - a >= 0.19 for a, b in itertools.pairwise(starts))


def test_drift_on_a_folder_without_a_run_is_one_line(tmp_path, cli) -> None:
    got = cli("drift", tmp_path)
    assert got.code != 0 and "no sampling run here" in got.err and "Traceback" not in got.err
    bad = tmp_path / "run"
    bad.mkdir()
    (bad / "sampling.json").write_text("{not json")
    got = cli("drift", bad)
    assert got.code != 0 and "not a sampling manifest" in got.err
