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
        }


def read_runs(tx: Tx, tags: Mapping[str, str] | None = None, last: int | None = None) -> list[Run]:
    """Runs oldest first (by id: the order they were added), those carrying every tag in `tags`, the last
    `last` of them."""
    rows = tx.execute(f"SELECT {', '.join(RUN_COLUMNS)} FROM opscope_runs ORDER BY id")
    found: dict[int, dict[str, str]] = {int(r[0]): {} for r in rows}
    for run_id, key, value in tx.execute("SELECT run_id, key, value FROM opscope_tags"):
        if int(run_id) in found:
            found[int(run_id)][str(key)] = str(value)
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
        )
        for r in rows
    ]
    if tags:
        runs = [r for r in runs if all(r.attribute(k) == v for k, v in tags.items())]
    if last is not None and last > 0:
        runs = runs[-last:]
    return runs


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
