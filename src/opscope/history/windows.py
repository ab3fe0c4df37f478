"""The windows of a sampled run with their figures, for `opscope drift` (docs/drift.md): from the run history
(every window a sampling run adds), or, for a window not in it, from its trace and the sampling manifest.

IO at the edge: reads the database, the manifest and traces, and hands `analysis.compare.drift` plain figures.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from opscope.analysis.compare.drift import WindowFigures, WindowInfo
from opscope.capture.sampling import Manifest, WindowRecord, window_rows
from opscope.errors import InputError
from opscope.history.api import History
from opscope.history.runs import read_names, read_runs
from opscope.history.store import Tx

Rows = list[tuple[str, str, str, float]]


def _figures(info: WindowInfo, rows: Rows, names: dict[str, str]) -> WindowFigures:
    values = {metric: value for scope, key, metric, value in rows if scope == "global" and key == "run"}
    steps = values.get("steps") or 1.0
    ops_self: dict[str, float] = defaultdict(float)
    ops_calls: dict[str, float] = defaultdict(float)
    kernels: dict[str, float] = {}
    for scope, key, metric, value in rows:
        name = names.get(key, key)
        if scope == "op" and metric == "cpu_self_us" and not name.startswith("ProfilerStep#"):
            ops_self[name] += value / steps
        elif scope == "op" and metric == "calls" and not name.startswith("ProfilerStep#"):
            ops_calls[name] += value / steps
        elif scope == "kernel" and metric == "per_step_us":
            kernels[name] = value
    return WindowFigures(info, values, dict(ops_self), dict(ops_calls), kernels)


def _wanted(tx: Tx, run_ids: list[int]) -> dict[int, Rows]:
    out: dict[int, Rows] = defaultdict(list)
    for start in range(0, len(run_ids), 500):
        chunk = run_ids[start : start + 500]
        marks = ", ".join("?" for _ in chunk)
        for run_id, scope, key, metric, value in tx.execute(
            "SELECT run_id, scope, key, metric, value FROM opscope_metrics WHERE run_id IN "
            f"({marks}) AND ((scope = 'global' AND key = 'run') OR (scope = 'op' AND metric IN "
            "('cpu_self_us', 'calls')) OR (scope = 'kernel' AND metric = 'per_step_us'))",
            chunk,
        ):
            if value is not None:
                out[int(run_id)].append((str(scope), str(key), str(metric), float(value)))
    return out


def _info(record: WindowRecord) -> WindowInfo:
    return WindowInfo(
        record.index,
        record.first_step,
        record.last_step,
        record.started_at,
        record.elapsed_s,
        record.trace,
        record.history_run,
    )


def from_history(db: str | None, sampling_run: str) -> list[WindowFigures]:
    """Every window the history holds of one sampling run, in window order."""
    with History(db) as history, history.reading() as tx:
        runs = [r for r in read_runs(tx) if r.window is not None and r.window.sampling_run == sampling_run]
        if not runs:
            raise InputError(f"{history.url_for_display}: no window of a sampling run {sampling_run!r}")
        runs.sort(key=lambda r: r.window.index if r.window else 0)
        rows = _wanted(tx, [r.id for r in runs])
        names = read_names(tx)
    out = []
    for run in runs:
        window = run.window
        assert window is not None
        info = WindowInfo(
            window.index, window.first_step, window.last_step, window.started_at, None, run.path, run.id
        )
        out.append(_figures(info, rows.get(run.id, []), names))
    return out


def from_folder(folder: Path, manifest: Manifest, db: str | None) -> list[WindowFigures]:
    """The windows of a run folder: from the history where the manifest says a window is in it, else from the
    window's trace (its figures computed now, as `history add` would) and the manifest's measured figures."""
    stored = [w for w in manifest.windows if w.history_run is not None]
    rows: dict[int, Rows] = {}
    names: dict[str, str] = {}
    if stored:
        with (
            History(db if db is not None else manifest.history) as history,
            history.reading() as tx,
        ):
            rows = _wanted(tx, [int(w.history_run or 0) for w in stored])
            names = read_names(tx)
    out = []
    for record in manifest.windows:
        if record.history_run is not None and rows.get(record.history_run):
            out.append(_figures(_info(record), rows[record.history_run], names))
        elif record.trace is not None and (folder / record.trace).is_file():
            from opscope.history.metrics import extract
            from opscope.loading import load

            measured = extract(load(str(folder / record.trace), cache=False))
            out.append(_figures(_info(record), [*measured.rows, *window_rows(record)], measured.names))
        # a window neither in the history nor on disk (deleted by hand) has no figures: left out
    return out
