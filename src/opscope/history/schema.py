"""The history database's tables, one definition for SQLite and PostgreSQL, and their versioned migrations.

`MIGRATIONS[i]` takes a database from schema version i to i + 1; the version lives in its own one-row table.
Every table name starts with `opscope_` so that a history can share a PostgreSQL database with other tools.
"""

from __future__ import annotations

from typing import Final

SCHEMA_VERSION: Final = 1
VERSION_TABLE: Final = "opscope_history_schema"
TABLES: Final = ("opscope_runs", "opscope_tags", "opscope_names", "opscope_metrics")

# `{id}` is the dialect's auto-numbered primary key (ids are never reused after a prune).
ID_COLUMN: Final = {
    "sqlite": "INTEGER PRIMARY KEY AUTOINCREMENT",
    "postgresql": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
}

MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    (
        f"CREATE TABLE {VERSION_TABLE} (version INTEGER NOT NULL)",
        "CREATE TABLE opscope_runs (id {id}, sha256 TEXT NOT NULL UNIQUE, added_at TEXT NOT NULL, path TEXT, "
        "source_format TEXT, host TEXT, gpu_name TEXT, gpu_count INTEGER, torch_version TEXT, cuda_version TEXT)",
        "CREATE TABLE opscope_tags (run_id BIGINT NOT NULL REFERENCES opscope_runs (id) ON DELETE CASCADE, "
        "key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (run_id, key))",
        "CREATE TABLE opscope_names (key TEXT PRIMARY KEY, name TEXT NOT NULL)",
        "CREATE TABLE opscope_metrics (run_id BIGINT NOT NULL REFERENCES opscope_runs (id) ON DELETE CASCADE, "
        "scope TEXT NOT NULL, key TEXT NOT NULL, metric TEXT NOT NULL, value DOUBLE PRECISION, "
        "PRIMARY KEY (run_id, scope, key, metric))",
        "CREATE INDEX opscope_metrics_series ON opscope_metrics (scope, metric, key)",
    ),
)


def statements(dialect: str, current: int) -> list[str]:
    """The statements that take a database at version `current` to SCHEMA_VERSION."""
    out: list[str] = []
    for step in MIGRATIONS[current:]:
        out += [s.replace("{id}", ID_COLUMN[dialect]) for s in step]
    return out
