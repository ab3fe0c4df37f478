"""`history check` judges per-step figures (issue 28): a capture of more steps of the same code is not a regression,
nor is a longer capture of a trace without steps (per second of window), while a slower kernel still is; an old
(schema 1) database is migrated. The traces are HAND-MADE (tests/handmade_traces.py): identical steps whose
figures are read off the events written."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import handmade_traces as hm
from opscope.history.api import History
from opscope.history.policy import CheckOptions
from opscope.history.schema import MIGRATIONS, SCHEMA_VERSION, VERSION_TABLE


def _steps_trace(tmp_path: Path, run: int, steps: int, kernel_us: float = 10.0) -> Path:
    """`steps` identical steps of 100 µs, each with two 10 µs `gemm_kernel`s (kernel_us each)."""
    doc = hm.document(hm.training_steps(steps, kernel_us=kernel_us))
    doc["run"] = run  # a distinct file per run (a run's identity is its bytes)
    return hm.write(tmp_path / f"run{run}.json", doc)


def _no_steps_trace(tmp_path: Path, run: int, seconds: float, kernel_us: float = 10.0) -> Path:
    """No step markers: one 10 µs kernel (kernel_us) every millisecond for `seconds`."""
    events: list[hm.Event] = []
    for i in range(round(seconds * 1000)):
        events.append(hm.launch(1000 * i, i + 1))
        events.append(hm.kernel("gemm_kernel", 1000 * i + 3, kernel_us, i + 1))
    events.append(hm.cpu_op("aten::mm", 0, seconds * 1e6))
    doc = hm.document(events)
    doc["run"] = run
    return hm.write(tmp_path / f"flat{run}.json", doc)


def test_more_steps_of_the_same_code_is_not_a_regression(tmp_path: Path) -> None:
    with History(tmp_path / "h.sqlite") as history:
        for run in range(4):
            history.add(_steps_trace(tmp_path, run, steps=4), git=False)
        for run in range(4, 6):  # twice the steps: every whole-trace total doubles
            history.add(_steps_trace(tmp_path, run, steps=8), git=False)
        result = history.check()
        per_step = history.series("kernel", "gemm_kernel", "per_step_us")
        totals = history.series("kernel", "gemm_kernel", "total_us")
    assert result.status == "ok" and result.regressions == () and result.improvements == ()
    assert per_step["value"].to_list() == [20.0] * 6  # two 10 µs kernels per step, in every run
    assert totals["value"].to_list() == [80.0] * 4 + [160.0] * 2  # what `check` judged before issue 28


def test_a_slower_kernel_is_still_found_per_step(tmp_path: Path) -> None:
    with History(tmp_path / "h.sqlite") as history:
        for run in range(4):
            history.add(_steps_trace(tmp_path, run, steps=8), git=False)
        for run in range(4, 6):  # fewer steps, but each kernel 1.5x slower
            history.add(_steps_trace(tmp_path, run, steps=3, kernel_us=15.0), git=False)
        result = history.check()
    kernel = [f for f in result.regressions if f.scope == "kernel"]
    assert result.status == "regression" and [(f.key, f.metric) for f in kernel] == [
        ("gemm_kernel", "per_step_us")
    ]
    assert kernel[0].ratio == pytest.approx(1.5)


def test_a_longer_capture_without_steps_is_not_a_regression(tmp_path: Path) -> None:
    with History(tmp_path / "h.sqlite") as history:
        for run in range(4):
            history.add(_no_steps_trace(tmp_path, run, seconds=0.05), git=False)
        for run in range(4, 6):
            history.add(_no_steps_trace(tmp_path, run, seconds=0.1), git=False)
        result = history.check()
        per_second = history.series("kernel", "gemm_kernel", "per_s_us")["value"].to_list()
    assert result.status == "ok" and not result.regressions
    # 10 µs of kernel per millisecond: 10,000 µs per second, in both lengths (within one kernel's edge)
    assert all(v == pytest.approx(10_000, rel=0.03) for v in per_second)


def test_show_defaults_to_the_per_step_figure(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "h.sqlite"
    for run in range(2):
        assert (
            cli("history", "add", "--db", db, "--no-git", _steps_trace(tmp_path, run, steps=run + 2)).code
            == 0
        )
    shown = cli("history", "show", "--db", db, "--kernel", "gemm", "--format", "json")
    assert shown.code == 0, shown.err
    assert '"metric": "per_step_us"' in shown.out


def test_a_schema_1_database_is_migrated(tmp_path: Path) -> None:
    """A database written before per-step figures: its runs with steps get per_step_us = total_us / steps and
    the tag figures=schema-1; the version becomes the current one."""
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    for statement in MIGRATIONS[0]:
        conn.execute(statement.replace("{id}", "INTEGER PRIMARY KEY AUTOINCREMENT"))
    conn.execute(f"INSERT INTO {VERSION_TABLE} (version) VALUES (1)")
    conn.execute("INSERT INTO opscope_runs (sha256, added_at) VALUES ('a', '2024-01-01T00:00:00+00:00')")
    conn.executemany(
        "INSERT INTO opscope_metrics (run_id, scope, key, metric, value) VALUES (1, ?, ?, ?, ?)",
        [
            ("kernel", "gemm_kernel", "total_us", 100.0),
            ("category", "gemm", "total_us", 100.0),
            ("global", "run", "steps", 4.0),
            ("global", "run", "gpu_time_us", 120.0),
        ],
    )
    conn.commit()
    conn.close()
    with History(path) as history:
        (run,) = history.runs()
        kernel = history.series("kernel", "gemm_kernel", "per_step_us")["value"].to_list()
        mean = history.series("global", None, "gpu_time_per_step_mean_us")
    assert kernel == [25.0] and mean["value"].to_list() == [30.0]
    assert run.tags == {"figures": "schema-1"}
    with sqlite3.connect(path) as check:
        assert check.execute(f"SELECT version FROM {VERSION_TABLE}").fetchall() == [(SCHEMA_VERSION,)]


def test_check_options_judge_normalised_figures() -> None:
    from opscope.history.policy import CHECKED

    assert "total_us" not in CHECKED["kernel"] and "gpu_time_us" not in CHECKED["global"]
    assert CheckOptions().scopes  # unchanged defaults
