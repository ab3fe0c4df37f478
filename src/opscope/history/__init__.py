"""Run history: every trace of a project in a database, and the regressions found over time.

`keys` normalises kernel names into keys that compare across runs; `metrics` reduces a `Trace` to the figures
a run stores, through the existing analyses (kernel summary selection, operators, categories, steps, timeline);
`schema` holds the tables and their versioned migrations; `store` speaks to SQLite (stdlib `sqlite3`, WAL) or
PostgreSQL (psycopg 3); `policy` decides, as pure functions, what regressed; `api` is `opscope.History`.
Definitions: docs/history.md.
"""

from __future__ import annotations
