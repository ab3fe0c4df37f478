"""The history database's tables, one definition for SQLite and PostgreSQL, and their versioned migrations.

`MIGRATIONS[i]` takes a database from schema version i to i + 1; the version lives in its own one-row table.
Every table name starts with `opscope_` so that a history can share a PostgreSQL database with other tools.
"""

from __future__ import annotations

from typing import Final

SCHEMA_VERSION: Final = 3
VERSION_TABLE: Final = "opscope_history_schema"
TABLES: Final = ("opscope_runs", "opscope_tags", "opscope_names", "opscope_metrics", "opscope_windows")

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
    # 1 -> 2 (issue 28): `check` judges per-step figures. Runs stored before have whole-trace totals only: those
    # with steps get per_step_us = total_us / steps (what their figures allow; runs added since use the step
    # windows, as `diff`), tagged `figures=schema-1`; those without steps have no window length stored, so no
    # per-second figure: they take no part in the kernel / op / category checks (re-add their traces).
    (
        "INSERT INTO opscope_metrics (run_id, scope, key, metric, value) "
        "SELECT m.run_id, m.scope, m.key, 'per_step_us', m.value / g.value FROM opscope_metrics m "
        "JOIN opscope_metrics g ON g.run_id = m.run_id AND g.scope = 'global' AND g.key = 'run' "
        "AND g.metric = 'steps' "
        "WHERE g.value > 0 AND m.scope IN ('kernel', 'op', 'category') AND m.metric = 'total_us'",
        "INSERT INTO opscope_metrics (run_id, scope, key, metric, value) "
        "SELECT m.run_id, 'global', 'run', 'gpu_time_per_step_mean_us', m.value / g.value "
        "FROM opscope_metrics m JOIN opscope_metrics g ON g.run_id = m.run_id AND g.scope = 'global' "
        "AND g.key = 'run' AND g.metric = 'steps' "
        "WHERE g.value > 0 AND m.scope = 'global' AND m.key = 'run' AND m.metric = 'gpu_time_us'",
        "INSERT INTO opscope_tags (run_id, key, value) SELECT id, 'figures', 'schema-1' FROM opscope_runs "
        "WHERE NOT EXISTS (SELECT 1 FROM opscope_tags t WHERE t.run_id = opscope_runs.id AND t.key = 'figures')",
    ),
    # 2 -> 3: a long run sampled in windows (`opscope run --every`, docs/drift.md): each window is a run of its
    # own, and this table says which sampling run it belongs to, its place in it and the steps it recorded
    (
        "CREATE TABLE opscope_windows (run_id BIGINT PRIMARY KEY REFERENCES opscope_runs (id) ON DELETE CASCADE, "
        "sampling_run TEXT NOT NULL, window_index INTEGER NOT NULL, first_step BIGINT, last_step BIGINT, "
        "started_at TEXT)",
        "CREATE UNIQUE INDEX opscope_windows_order ON opscope_windows (sampling_run, window_index)",
    ),
)


def statements(dialect: str, current: int) -> list[str]:
    """The statements that take a database at version `current` to SCHEMA_VERSION."""
    out: list[str] = []
    for step in MIGRATIONS[current:]:
        out += [s.replace("{id}", ID_COLUMN[dialect]) for s in step]
    return out
