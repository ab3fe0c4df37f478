"""Fan-out over many traces: per-file work in parallel processes (or on a Dask cluster), merged from small
partial results (`opscope.analysis.partials`). See `executor.run_all` and `tasks`."""
