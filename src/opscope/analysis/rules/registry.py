"""Every advice rule, in the order `--list-rules` shows them. Adding a rule: one module with a `RULES` tuple
(or one more `Rule` in an existing family's tuple) and, for a new module, one line here."""

from __future__ import annotations

from opscope.analysis.rules import (
    attention,
    copies,
    efficiency,
    gemm,
    host,
    launch,
    layout,
    memory,
    occupancy,
    syncs,
    timeline,
)
from opscope.analysis.rules.model import Rule

RULES: tuple[Rule, ...] = (
    *copies.RULES,
    *syncs.RULES,
    *gemm.RULES,
    *attention.RULES,
    *host.RULES,
    *launch.RULES,
    *layout.RULES,
    *timeline.RULES,
    *memory.RULES,
    *occupancy.RULES,
    *efficiency.RULES,
)


def rule_ids() -> tuple[str, ...]:
    return tuple(r.id for r in RULES)
