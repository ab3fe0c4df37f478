"""Runs as read back from the database, and the queries every command shares."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from opscope.history.store import Tx

RUN_COLUMNS = (
    "id",
    "sha256",
    "added_at",
    "path",
    "source_format",
    "host",
    "gpu_name",
    "gpu_count",
    "torch_version",
    "cuda_version",
)


@dataclass(frozen=True)
class Window:
    """A run that is one window of a sampled long run (`opscope run --every`, docs/drift.md)."""

    sampling_run: str
    index: int
    first_step: int | None
    last_step: int | None
    started_at: str | None

    def to_dict(self) -> dict[str, object]:
        return {
            "sampling_run": self.sampling_run,
            "index": self.index,
            "first_step": self.first_step,
            "last_step": self.last_step,
            "started_at": self.started_at,
        }


@dataclass(frozen=True)
class Run:
    id: int
    sha256: str
    added_at: str  # ISO 8601, UTC
    path: str | None
    source_format: str | None
    host: str | None
    gpu_name: str | None
    gpu_count: int | None
    torch_version: str | None
    cuda_version: str | None
    tags: dict[str, str] = field(default_factory=dict)
    window: Window | None = None  # set when the run is a window of a sampled long run

    @property
    def commit(self) -> str | None:
        return self.tags.get("commit")

    def attribute(self, name: str) -> str | None:
        """A tag, or one of the run's own facts under a short name (gpu, host, format, torch, cuda)."""
        if name in self.tags:
            return self.tags[name]
        builtin = {
            "gpu": self.gpu_name,
            "host": self.host,
            "format": self.source_format,
            "torch": self.torch_version,
            "cuda": self.cuda_version,
            "sampling_run": self.window.sampling_run if self.window else None,
            "window": str(self.window.index) if self.window else None,
        }
        return builtin.get(name)

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "sha256": self.sha256,
            "added_at": self.added_at,
            "path": self.path,
            "source_format": self.source_format,
            "host": self.host,
            "gpu_name": self.gpu_name,
            "gpu_count": self.gpu_count,
            "torch_version": self.torch_version,
            "cuda_version": self.cuda_version,
            "tags": dict(self.tags),
            "window": self.window.to_dict() if self.window else None,
        }


def read_runs(tx: Tx, tags: Mapping[str, str] | None = None, last: int | None = None) -> list[Run]:
    """Runs oldest first (by id: the order they were added), those carrying every tag in `tags`, the last
    `last` of them."""
    rows = tx.execute(f"SELECT {', '.join(RUN_COLUMNS)} FROM opscope_runs ORDER BY id")
    found: dict[int, dict[str, str]] = {int(r[0]): {} for r in rows}
    for run_id, key, value in tx.execute("SELECT run_id, key, value FROM opscope_tags"):
        if int(run_id) in found:
            found[int(run_id)][str(key)] = str(value)
    windows = {
        int(r[0]): Window(str(r[1]), int(r[2]), _int(r[3]), _int(r[4]), r[5])
        for r in tx.execute(
            "SELECT run_id, sampling_run, window_index, first_step, last_step, started_at FROM opscope_windows"
        )
    }
    runs = [
        Run(
            id=int(r[0]),
            sha256=r[1],
            added_at=r[2],
            path=r[3],
            source_format=r[4],
            host=r[5],
            gpu_name=r[6],
            gpu_count=int(r[7]) if r[7] is not None else None,
            torch_version=r[8],
            cuda_version=r[9],
            tags=found[int(r[0])],
            window=windows.get(int(r[0])),
        )
        for r in rows
    ]
    if tags:
        runs = [r for r in runs if all(r.attribute(k) == v for k, v in tags.items())]
    if last is not None and last > 0:
        runs = runs[-last:]
    return runs


def _int(value: object) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def read_values(tx: Tx, run_ids: list[int], scope: str, metric: str) -> dict[tuple[int, str], float]:
    """(run id, key) -> value of one metric of one scope over the given runs."""
    if not run_ids:
        return {}
    marks = ", ".join("?" for _ in run_ids)
    rows = tx.execute(
        f"SELECT run_id, key, value FROM opscope_metrics WHERE scope = ? AND metric = ? "
        f"AND run_id IN ({marks})",
        (scope, metric, *run_ids),
    )
    return {(int(r[0]), str(r[1])): float(r[2]) for r in rows if r[2] is not None}


def read_names(tx: Tx) -> dict[str, str]:
    return {str(k): str(v) for k, v in tx.execute("SELECT key, name FROM opscope_names")}
