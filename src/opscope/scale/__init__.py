"""Fan-out over many traces: per-file work in parallel processes (or on a Dask cluster), merged from small
partial results (`opscope.analysis.base.durations`, `.sketch`). See `executor.run_all` and `tasks`."""

# Here rather than in `executor` so that the CLI can name the default without importing the executor
# (multiprocessing, concurrent.futures), which a single local trace never uses.
CONNECT_TIMEOUT_S = 5.0
