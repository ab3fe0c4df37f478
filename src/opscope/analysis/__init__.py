"""Analyses: pure functions from a `Trace` (plus options) to a frozen result dataclass. No IO, no printing."""
