"""Partials: results that merge exactly across traces.

Per-name duration statistics (`durations`: count, sum, min, max) and the mergeable quantile sketch (`sketch`).
The per-trace analyses build them, `scale/` carries them between processes, the comparisons merge them.
"""
