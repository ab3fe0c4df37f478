"""Kernels: per-kernel figures.

The `opscope summary` table (`summary`) and its exact merge over many traces (`merge`), launch configuration,
occupancy and waves (`launch_config`), the Nsight Compute metrics join (`metrics`), and kernel categories
(`categories`) with their rule table kept as data (`category_rules`). Definitions: docs/guide.md, docs/readers.md.
"""
