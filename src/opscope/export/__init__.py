"""Writers of other tools' formats, at the edge like `ingest/`: a trimmed Chrome-trace / Perfetto JSON copy of a
trace (`chrome`), folded stacks for flame-graph tools (`folded`) and the event table as Parquet (`parquet`).
They read computed results (or stream the source file again) and write files; they compute no figure of their
own."""
