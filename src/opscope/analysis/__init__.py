"""Analyses: pure functions from a `Trace` (plus options) to a frozen result dataclass. No IO, no printing.

One room per concern; a newcomer finds a figure by the room's name:

- `timeline/`: when the GPU works and why it waits: step windows and the analysed window, interval arithmetic,
  busy / idle per device and stream, idle causes, launch delay, synchronisations, memory copies.
- `attribution/`: which CPU code launched which GPU work: linking, CPU call nesting, per-operator table (CPU
  total / self time, GPU time), the operator tree, per-step figures.
- `kernels/`: per-kernel figures: the summary table and its merge over traces, launch configuration and
  occupancy, Nsight Compute metrics, kernel categories and their rule table.
- `compare/`: two or more traces side by side: headline figures, `diff`, CI gates, `ranks`.
- `partials/`: results that merge exactly across traces (durations, the quantile sketch), for the comparisons
  and for `scale/`, which only fans work out and merges through them.
- `rules/`: the advice rules (`opscope advise`): rules as data, one module per family, the engine that runs
  them over `overview.py`'s result.
- `compile/`: what torch.compile did (`opscope compile-check`): compiled regions, graph breaks, recompiles,
  Inductor's fused kernels.
- `memory/`, `efficiency/`: rooms for the analyses that come next (memory, efficiency).
- `overview.py`: `opscope analyze`, the one-page diagnosis that combines the rooms.

Imports run one way: the analyses read `model` and `ingest` and each other, never `scale`, `capture`, `report`
or `cli` (tests/test_layers.py).
"""
