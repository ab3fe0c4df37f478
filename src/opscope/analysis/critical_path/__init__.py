"""Critical path: which ops and kernels really bound a step, and what a fix would buy.

`graph` builds the dependency graph of a window (CPU program order and nesting, launches, GPU stream order,
synchronisations), `path` finds its longest path and answers what-ifs, `stats` runs both over the steps of a
trace (`opscope critical-path`) and offers `predict_saving` to the advice rules. Definitions:
docs/critical-path.md.
"""
