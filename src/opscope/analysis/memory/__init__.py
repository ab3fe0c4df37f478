"""Memory: the caching allocator's `[memory]` events (profile_memory=True) and allocator snapshots.

`events` selects and pairs the events, `owners` finds the op that made each allocation, `summary` is
`opscope memory`, `steps` the per-step levels, `peaks` the peak per device other commands show, `snapshot`
reads a `torch.cuda.memory._snapshot()` dictionary. Every figure is defined in `docs/memory.md`.
"""
