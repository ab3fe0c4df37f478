"""How soon polars' allocator gives freed memory back (issue 25: peak RSS on the 1 GB benchmark trace).

polars allocates through jemalloc, which keeps pages freed by a finished query ("dirty") for a while before it
returns them to the system, so that the next query can reuse them; its arenas are per thread, so pages freed
in one of polars' threads are not reused by another, and a command that runs many large queries in a row (the
advice's efficiency stage: ~600 MB of transient frames at x64) holds the sum of what several of them freed.
Returning dirty pages after 300 ms (and "muzzy" ones, already advised away, at once) measured x64: `analyze`
1.39 -> 1.28 GB, `report` 1.42 -> 1.29 GB at about the same time (sooner, 0-100 ms, costs time in page faults:
`advise` 3.2 -> 3.5-4.7 s; later, 2-5 s, adds 50-150 MB; docs/analysis-scale.md). jemalloc reads
`$_RJEM_MALLOC_CONF` (polars' prefix) once, when polars starts; polars' own `__init__` puts its defaults
(dirty 500 ms, muzzy 1 s) before the variable's value, and jemalloc takes the last value of an option. So
`prepare` runs before polars is imported; a value the user set is kept."""

from __future__ import annotations

import os

JEMALLOC_CONF = "_RJEM_MALLOC_CONF"
DECAY = "dirty_decay_ms:300,muzzy_decay_ms:0"


def prepare() -> None:
    """Set polars' jemalloc decay (the module doc) unless the user set one. Before polars is imported."""
    os.environ.setdefault(JEMALLOC_CONF, DECAY)
