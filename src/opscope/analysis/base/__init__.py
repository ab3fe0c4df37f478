"""The ground floor every analysis stands on; nothing here imports another analysis (tests/test_layers.py).

Step windows and `--steps` (`windows`), the analysed window (`window`), interval arithmetic (`intervals`), row
selection by device, stream and step (`select`), time nesting on a thread (`nesting`, the one definition of parent
and child), the link table GPU event -> launch call -> CPU ops (`linking`), and the results that merge exactly
across traces (`durations`: count, sum, min, max per name; `sketch`: the mergeable quantile sketch).
Definitions: docs/analysis-timeline.md, docs/analysis-attribution.md, docs/compare.md.
"""
