"""The advice rules' data types: a `Rule` (data plus its check) and what a check returns (`Hit`); the engine
makes a `Finding` of it (analysis/findings.py: severity, share, threshold, advice). Definitions: docs/advice.md."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import polars as pl

from opscope.analysis.findings import MAX_EVIDENCE, SOURCES

if TYPE_CHECKING:
    from opscope.analysis.rules.context import RuleContext

ABOVE: Final = "above"  # the rule fires when value > threshold
BELOW: Final = "below"  # the rule fires when value < threshold

GPU_TIME: Final = "gpu_time"  # share = time at stake / summed GPU activity time in the window
WINDOW: Final = "window"  # share = time at stake / analysed window x devices (timeline rules)

# Whose claim on the window comes first (savings.py): a rule that names a cause and its specific remedy (a
# DataLoader wait, a sync, a pageable copy, fp32 GEMMs) claims its time before a rule that measures a general
# inefficiency of the same kernels (far from peak, low occupancy), and both before a rule that only observes
# a symptom (idle GPU, a low-utilisation step), which keeps what no cause explains.
CAUSE: Final = "cause"
GENERAL: Final = "general"
SYMPTOM: Final = "symptom"
ROLES: Final = (CAUSE, GENERAL, SYMPTOM)  # the claim order


@dataclass(frozen=True)
class Hit:
    """What a check found: the measured value of the rule's metric, the time at stake (ns) and evidence."""

    value: float
    time_at_stake_ns: int
    evidence: tuple[dict[str, Any], ...] = ()
    detail: str = ""  # appended to the rule's title (e.g. "on GPU 0")
    # (regex over event names, factor): the remedy as a what-if of the critical-path model, for the predicted
    # saving (e.g. the layout-conversion kernels removed: factor 0); None where no such model is defined
    what_if: tuple[str, float] | None = None
    # The saving model (analysis/rules/savings.py, docs/advice.md): the time the remedy acts on, as intervals
    # (start_ns, end_ns) on the trace's clock (the finding's claim on the window: one microsecond saved belongs
    # to one finding), the model's own estimate of the saving (ns) and the model's name. A hit without an
    # estimate is not a finding.
    claims: pl.DataFrame | None = None
    estimate_ns: int | None = None
    model: str = ""
    # the advice for what this trace shows (its cause, its framework), where it is more specific than the
    # rule's own; empty: the rule's
    advice: str = ""


@dataclass(frozen=True)
class Skipped:
    """What a check returns when it could not run on this trace, and why (listed under `not_evaluated`)."""

    reason: str


Check = Callable[["RuleContext", float], "Hit | Skipped | None"]


@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    source: str  # a key of SOURCES
    metric: str
    threshold: float  # the documented default; `--rules FILE` overrides it
    direction: str  # ABOVE or BELOW
    basis: str  # GPU_TIME or WINDOW
    advice: str
    check: Check
    role: str = CAUSE  # CAUSE, GENERAL or SYMPTOM
    reads_gpu: bool = True  # False: it reads other events (memory), so it runs without GPU activity too

    def fires(self, value: float, threshold: float) -> bool:
        return value > threshold if self.direction == ABOVE else value < threshold


from opscope.analysis.base.selectors import exact_names, names_in  # noqa: E402  (re-exported)

__all__ = [
    "ABOVE",
    "BELOW",
    "CAUSE",
    "GENERAL",
    "GPU_TIME",
    "MAX_EVIDENCE",
    "ROLES",
    "SOURCES",
    "SYMPTOM",
    "WINDOW",
    "Check",
    "Hit",
    "Rule",
    "Skipped",
    "exact_names",
    "names_in",
]
