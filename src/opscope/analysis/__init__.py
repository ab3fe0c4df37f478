"""Analyses: pure functions from a `Trace` (plus options) to a frozen result dataclass. No IO, no printing, and
no file format (never `ingest`).

One room per concern; a newcomer finds a figure by the room's name:

- `base/`: the ground floor every analysis stands on: step windows and the analysed window, interval
  arithmetic, selections, time nesting, the link table (GPU event -> launch -> CPU ops), and the results that
  merge exactly across traces (durations, the quantile sketch). It imports no other analysis.
- `timeline/`: when the GPU works and why it waits: GPU activity, busy / idle per device and stream, idle
  causes, launch delay, synchronisations, memory copies, the CPU lanes of the timeline.
- `attribution/`: which CPU code launched which GPU work: per-operator table (CPU total / self time, GPU time),
  the operator tree, per-step figures.
- `kernels/`: per-kernel figures: the summary table and its merge over traces, launch configuration and
  occupancy, the Nsight Compute metrics join, kernel categories and their rule table.
- `compare/`: two or more traces side by side: headline figures, `diff`, CI gates, `ranks`.
- `critical_path/`, `memory/`, `efficiency/`, `compile/`: one room per concern (docs/).
- `findings.py`: the advice's result types (`Finding`, `Advice`, severities, threshold overrides).
- `overview.py`: `opscope analyze`, the one-page diagnosis that composes the rooms; it does not run the rules.
- `rules/`: the advice rules (`opscope advise`): rules as data, one module per family, the engine, and
  `advise.py`, the entry point that runs `analyze` and then the rules over its result.
- `bundle.py`: every result the HTML report shows, computed once.

Imports run one way: no circle between modules or rooms, and never up to `scale`, `export`, `capture`, `report`
or `cli` (tests/test_layers.py).
"""
