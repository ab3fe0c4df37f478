"""`opscope.History(db)`: add traces, list runs, read series, check for regressions, prune, export.

Each `add` is one transaction: the trace is read and reduced before the database is touched, and a run, its
tags, names and metrics are written together or not at all. A trace's identity is the sha256 of its bytes
(of its event table for an in-memory `Trace`), so adding the same trace twice returns the first run's id.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import polars as pl

from opscope.analysis.validity import Validity, validity
from opscope.errors import InputError, UsageError
from opscope.history.gitinfo import git_tags
from opscope.history.metrics import RunMetrics, check_tag, extract
from opscope.history.policy import (
    CHECK_SCOPES,
    CHECKED,
    MIN_BASELINE,
    POLICIES,
    CheckOptions,
    Finding,
    finding,
    judge,
)
from opscope.history.predictions import Record, realised_rows, records
from opscope.history.runs import Run, Window, read_names, read_runs, read_values
from opscope.history.store import Store, Tx, display, resolve_db, retrying
from opscope.model.trace import Trace


@dataclass(frozen=True)
class Added:
    run_id: int
    sha256: str
    path: str
    new: bool  # False: this trace was already in the history (nothing written)
    # what the validity checks found on the trace (docs/validity.md); None where it was not read (already added)
    validity: Validity | None = None


@dataclass(frozen=True)
class CheckResult:
    status: str  # "ok", "regression" or "insufficient_data"
    recent_runs: tuple[Run, ...]
    baseline_runs: tuple[Run, ...]
    regressions: tuple[Finding, ...]
    improvements: tuple[Finding, ...]
    options: CheckOptions
    reason: str | None = None  # why the data is insufficient


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return digest.hexdigest()


def trace_sha256(trace: Trace) -> str:
    buffer = io.BytesIO()
    trace.events.write_ipc(buffer, compression="uncompressed")
    return hashlib.sha256(trace.meta.format.encode() + b"\0" + buffer.getvalue()).hexdigest()


def check_tags(tags: Mapping[str, str]) -> None:
    for key in tags:
        if not check_tag(key):
            raise UsageError(f"tag key {key!r}: use letters, digits, '_', '.' or '-'")


class History:
    """A run history in SQLite (a path; default `.opscope/history.sqlite` or $OPSCOPE_HISTORY) or PostgreSQL
    (`postgresql://user@host/db`)."""

    def __init__(self, db: str | os.PathLike[str] | None = None) -> None:
        self.url = resolve_db(db)
        self._store: Store | None = None

    @property
    def url_for_display(self) -> str:
        """The database as printed: a PostgreSQL URL without its password."""
        return display(self.url)

    def _open(self, create: bool = False, write: bool = False) -> Store:
        """The store; the reading methods open a SQLite history read-only (issue 32: `history list` failed on a
        database in a folder it could not write), and a later write reopens it for writing."""
        write = write or create
        if self._store is not None and write and self._store.read_only:
            self.close()
        if self._store is None:
            self._store = Store(self.url, create=create, read_only=not write)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> History:
        return self

    @contextlib.contextmanager
    def reading(self) -> Iterator[Tx]:
        """A read transaction, for the readers of one table that live beside this module (`history.windows`)."""
        with self._open().transaction() as tx:
            yield tx

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ------------------------------------------------------------------------------------------------

    def add(
        self,
        source: str | os.PathLike[str] | Trace,
        tags: Mapping[str, str] | None = None,
        *,
        git: bool = True,
        cache: bool = True,
        window: Window | None = None,
        extra: Sequence[tuple[str, str, str, float]] = (),
    ) -> Added:
        """Add one trace (a file, or a loaded `Trace`). Tags given here override the automatic ones (git, hip_version).
        `window`: the trace is a window of a sampled long run (stored in `opscope_windows`); `extra`: figures
        measured outside the trace, stored beside its own (scope, key, metric, value)."""
        check_tags(tags or {})
        if isinstance(source, Trace):
            trace: Trace | None = source
            sha, path = trace_sha256(source), source.path
        else:
            trace, file = None, Path(os.fspath(source))
            if not file.is_file():
                raise InputError(f"{file}: no such trace file")
            sha, path = file_sha256(file), str(file)
        store = self._open(create=True)
        existing = retrying(lambda: self._run_id(store, sha))
        if existing:
            return Added(int(existing[0][0]), sha, path, new=False)
        if trace is None:
            from opscope.loading import load  # the trace is read completely before anything is written

            trace = load(path, cache=cache)
        found = validity(trace)
        measured = extract(trace)
        if extra:
            measured = replace(measured, rows=(*measured.rows, *extra))
        all_tags = {**measured.facts.tags(), **(git_tags() if git else {}), **(tags or {})}

        def write() -> Added:
            with store.transaction(write=True) as tx:
                added = self._write(tx, sha, path, measured, all_tags, pair=window is None)
                if window is not None and added.new:
                    tx.execute(
                        "INSERT INTO opscope_windows (run_id, sampling_run, window_index, first_step, last_step, "
                        "started_at) VALUES (?, ?, ?, ?, ?, ?)",
                        (
                            added.run_id,
                            window.sampling_run,
                            window.index,
                            window.first_step,
                            window.last_step,
                            window.started_at,
                        ),
                    )
                return replace(added, validity=found)

        return retrying(write)  # _write is idempotent: a trace added meanwhile is found, not added twice

    @staticmethod
    def _run_id(store: Store, sha: str) -> list[tuple[Any, ...]]:
        with store.transaction() as tx:
            return tx.execute("SELECT id FROM opscope_runs WHERE sha256 = ?", (sha,))

    def _write(
        self, tx: Tx, sha: str, path: str, measured: RunMetrics, tags: dict[str, str], pair: bool = True
    ) -> Added:
        facts = measured.facts
        added_at = datetime.now(timezone.utc).isoformat(timespec="microseconds")
        rows = tx.execute(
            "INSERT INTO opscope_runs (sha256, added_at, path, source_format, host, gpu_name, gpu_count, "
            "torch_version, cuda_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (sha256) DO NOTHING "
            "RETURNING id",
            (
                sha,
                added_at,
                path,
                facts.source_format,
                facts.host,
                facts.gpu_name,
                facts.gpu_count,
                facts.torch_version,
                facts.cuda_version,
            ),
        )
        if not rows:  # another process added the same trace a moment ago
            found = tx.execute("SELECT id FROM opscope_runs WHERE sha256 = ?", (sha,))
            return Added(int(found[0][0]), sha, path, new=False)
        run_id = int(rows[0][0])
        tx.executemany(
            "INSERT INTO opscope_tags (run_id, key, value) VALUES (?, ?, ?)",
            [(run_id, k, v) for k, v in sorted(tags.items())],
        )
        tx.executemany(
            "INSERT INTO opscope_names (key, name) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
            sorted(measured.names.items()),
        )
        tx.executemany(
            "INSERT INTO opscope_metrics (run_id, scope, key, metric, value) VALUES (?, ?, ?, ?, ?)",
            [(run_id, *row) for row in measured.rows],
        )
        # the findings of the run before that this one fixed, with their prediction and what the fix realised
        # (not for a window of a sampled run: the next window of the same job is no fix)
        before = self._previous(tx, run_id) if pair else None
        if before is not None:
            stored = tx.execute(
                "SELECT scope, key, metric, value FROM opscope_metrics WHERE run_id = ? AND "
                "(scope = 'finding' OR (scope = 'global' AND key = 'run'))",
                (before,),
            )
            pairs = realised_rows(
                [(str(a), str(b), str(c), float(d)) for a, b, c, d in stored], before, measured.rows
            )
            tx.executemany(
                "INSERT INTO opscope_metrics (run_id, scope, key, metric, value) VALUES (?, ?, ?, ?, ?)",
                [(run_id, *row) for row in pairs],
            )
        return Added(run_id, sha, path, new=True)

    @staticmethod
    def _previous(tx: Tx, run_id: int) -> int | None:
        """The run added just before `run_id` (history/predictions.py), or None."""
        found = tx.execute("SELECT MAX(id) FROM opscope_runs WHERE id < ?", (run_id,))
        return int(found[0][0]) if found and found[0][0] is not None else None

    def predictions(self) -> list[Record]:
        """Each rule's record of predicted savings against what the fixes realised (history/predictions.py)."""
        with self._open().transaction() as tx:
            rows = tx.execute(
                "SELECT run_id, key, metric, value FROM opscope_metrics WHERE scope = 'realised' ORDER BY run_id"
            )
        return records(rows)

    def prune(self, keep: int) -> list[int]:
        """Delete all but the newest `keep` runs and the full names no remaining figure uses; returns the ids
        removed."""
        if keep < 0:
            raise UsageError("--keep must be 0 or more")
        with self._open(write=True).transaction(write=True) as tx:
            ids = [int(r[0]) for r in tx.execute("SELECT id FROM opscope_runs ORDER BY id")]
            gone = ids[: max(len(ids) - keep, 0)]
            for start in range(0, len(gone), 500):
                chunk = gone[start : start + 500]
                marks = ", ".join("?" for _ in chunk)
                for table, column in (
                    ("opscope_windows", "run_id"),
                    ("opscope_metrics", "run_id"),
                    ("opscope_tags", "run_id"),
                    ("opscope_runs", "id"),
                ):
                    tx.execute(f"DELETE FROM {table} WHERE {column} IN ({marks})", chunk)
            if gone:
                # A full name is kept while a remaining figure still has its key (any scope: kernels and ops).
                tx.execute(
                    "DELETE FROM opscope_names WHERE NOT EXISTS "
                    "(SELECT 1 FROM opscope_metrics m WHERE m.key = opscope_names.key)"
                )
        return gone

    # -- reading ------------------------------------------------------------------------------------------------

    def runs(self, tags: Mapping[str, str] | None = None, last: int | None = None) -> list[Run]:
        with self._open().transaction() as tx:
            return read_runs(tx, tags, last)

    def names(self) -> dict[str, str]:
        with self._open().transaction() as tx:
            return read_names(tx)

    def series(
        self,
        scope: str,
        pattern: str | None = None,
        metric: str = "total_us",
        *,
        last: int | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> pl.DataFrame:
        """One metric over the runs: columns run_id, added_at, commit, scope, key, name, metric, value (oldest
        first). `pattern` is a regular expression searched in the key and the full name (`--kernel`, `--op`); a
        category or a global metric is matched exactly."""
        if scope not in CHECK_SCOPES:
            raise UsageError(f"unknown scope {scope!r} (one of {', '.join(CHECK_SCOPES)})")
        try:
            regex = re.compile(pattern) if pattern is not None and scope in ("kernel", "op") else None
        except re.error as exc:
            raise UsageError(f"bad regular expression {pattern!r}: {exc}") from None
        with self._open().transaction() as tx:
            runs = read_runs(tx, tags, last)
            values = read_values(tx, [r.id for r in runs], scope, metric)
            names = read_names(tx)
        rows: list[dict[str, Any]] = []
        by_id = {r.id: r for r in runs}
        for (run_id, key), value in values.items():
            name = names.get(key, key)
            if regex is not None and not (regex.search(key) or regex.search(name)):
                continue
            if regex is None and pattern is not None and key != pattern:
                continue
            run = by_id[run_id]
            rows.append(
                {
                    "run_id": run_id,
                    "added_at": run.added_at,
                    "commit": run.commit,
                    "scope": scope,
                    "key": key,
                    "name": name,
                    "metric": metric,
                    "value": value,
                }
            )
        schema = {
            "run_id": pl.Int64,
            "added_at": pl.String,
            "commit": pl.String,
            "scope": pl.String,
            "key": pl.String,
            "name": pl.String,
            "metric": pl.String,
            "value": pl.Float64,
        }
        return pl.DataFrame(rows, schema=schema).sort(["key", "run_id"])

    def frame(self) -> pl.DataFrame:
        """Every stored metric joined with its run (the `export --parquet` table), one row per value."""
        with self._open().transaction() as tx:
            runs = read_runs(tx)
            names = read_names(tx)
            metrics = tx.execute(
                "SELECT run_id, scope, key, metric, value FROM opscope_metrics "
                "ORDER BY run_id, scope, key, metric"
            )
        info = pl.DataFrame(
            [
                {
                    "run_id": r.id,
                    "added_at": r.added_at,
                    "sha256": r.sha256,
                    "path": r.path,
                    "source_format": r.source_format,
                    "host": r.host,
                    "gpu_name": r.gpu_name,
                    "gpu_count": r.gpu_count,
                    "torch_version": r.torch_version,
                    "cuda_version": r.cuda_version,
                    "commit": r.commit,
                    "branch": r.tags.get("branch"),
                    "tags": [{"key": k, "value": v} for k, v in sorted(r.tags.items())],
                }
                for r in runs
            ],
            schema={
                "run_id": pl.Int64,
                "added_at": pl.String,
                "sha256": pl.String,
                "path": pl.String,
                "source_format": pl.String,
                "host": pl.String,
                "gpu_name": pl.String,
                "gpu_count": pl.Int64,
                "torch_version": pl.String,
                "cuda_version": pl.String,
                "commit": pl.String,
                "branch": pl.String,
                "tags": pl.List(pl.Struct({"key": pl.String, "value": pl.String})),
            },
        )
        values = pl.DataFrame(
            [(int(m[0]), m[1], m[2], names.get(m[2], m[2]), m[3], m[4]) for m in metrics],
            schema={
                "run_id": pl.Int64,
                "scope": pl.String,
                "key": pl.String,
                "name": pl.String,
                "metric": pl.String,
                "value": pl.Float64,
            },
            orient="row",
        )
        return values.join(info, on="run_id", how="left")

    # -- checking -----------------------------------------------------------------------------------------------

    def check(self, options: CheckOptions | None = None) -> CheckResult:
        """Compare the most recent runs with the baseline runs before them (see `history.policy`)."""
        opts = options or CheckOptions()
        _validate(opts)
        with self._open().transaction() as tx:
            runs = read_runs(tx)
            if runs and opts.match_tags:
                latest = runs[-1]
                runs = [
                    r for r in runs if all(r.attribute(t) == latest.attribute(t) for t in opts.match_tags)
                ]
            recent = runs[-opts.recent :] if runs else []
            baseline = runs[-opts.recent - opts.baseline : -opts.recent] if len(runs) > opts.recent else []
            if len(recent) < opts.recent or len(baseline) < MIN_BASELINE:
                reason = (
                    f"{len(runs)} matching run(s); need {opts.recent} recent and at least {MIN_BASELINE} "
                    "baseline runs before them"
                )
                return CheckResult("insufficient_data", tuple(recent), tuple(baseline), (), (), opts, reason)
            ids = [r.id for r in baseline] + [r.id for r in recent]
            regressions: list[Finding] = []
            improvements: list[Finding] = []
            for scope in opts.scopes:
                shares = read_values(tx, ids, scope, "share") if scope in ("kernel", "op", "category") else {}
                for metric in CHECKED[scope]:
                    values = read_values(tx, ids, scope, metric)
                    # Judged over the runs that have this figure at all (per step: runs with steps; per
                    # second: runs without), every recent run among them.
                    having = {run_id for run_id, _ in values}
                    if not all(r.id in having for r in recent):
                        continue
                    judged = [r for r in baseline if r.id in having]
                    if len(judged) < MIN_BASELINE:
                        continue
                    for key in sorted({k for _, k in values}):
                        if (
                            shares
                            and max((shares.get((i, key), 0.0) for i in ids), default=0.0) < opts.min_share
                        ):
                            continue
                        if scope in ("step", "global") and not all((r.id, key) in values for r in recent):
                            continue
                        base = [values.get((r.id, key), 0.0) for r in judged]
                        new = [values.get((r.id, key), 0.0) for r in recent]
                        if statistics.median(base) <= 0:
                            continue  # appeared after the baseline: nothing to compare with
                        verdict = judge(metric, base, new, opts)
                        if verdict is not None:
                            found = finding(scope, key, metric, base, new, opts)
                            (regressions if verdict == "regression" else improvements).append(found)
        regressions.sort(key=lambda f: -abs(f.ratio - 1.0))
        improvements.sort(key=lambda f: -abs(f.ratio - 1.0))
        status = "regression" if regressions else "ok"
        return CheckResult(
            status, tuple(recent), tuple(baseline), tuple(regressions), tuple(improvements), opts
        )


def _validate(opts: CheckOptions) -> None:
    if opts.recent < 1 or opts.baseline < 1:
        raise UsageError("--recent and --baseline must be at least 1")
    if opts.policy not in POLICIES:
        raise UsageError(f"--policy must be one of {', '.join(POLICIES)}")
    if not opts.threshold > 1.0:
        raise UsageError("--threshold must be greater than 1 (1.10 = 10% worse)")
    if not opts.z > 0:
        raise UsageError("--z must be positive")
    unknown = [s for s in opts.scopes if s not in CHECK_SCOPES]
    if unknown or not opts.scopes:
        raise UsageError(
            f"--scope: unknown {', '.join(unknown) or '(empty)'} (choose from {', '.join(CHECK_SCOPES)})"
        )
    if not 0.0 <= opts.min_share <= 1.0:
        raise UsageError("--min-share must be between 0 and 1")
