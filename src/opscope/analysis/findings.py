"""The findings of the advice rules as plain results: severities, a `Finding` (what a rule found, its share of
the basis, its evidence and advice) and an `Advice` (every finding of one trace), and the threshold overrides a
user passes (`RuleConfig`). `analyze` composes results, the rules (`analysis/rules/`) read them and produce these,
and every view (terminal, JSON, HTML, diff, demo) lays them out. Definitions: docs/advice.md."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

INFO: Final = "info"
WARN: Final = "warn"
CRIT: Final = "crit"
SEVERITIES: Final[tuple[str, ...]] = (INFO, WARN, CRIT)
CRIT_SHARE: Final = 0.10  # time at stake / basis at or above this: crit
WARN_SHARE: Final = 0.02  # ... at or above this: warn; below: info
MAX_EVIDENCE: Final = 10

SOURCES: Final[dict[str, str]] = {
    "nsys": "Nsight Systems expert rules (nsys analyze)",
    "tensorboard": "PyTorch TensorBoard profiler plugin (performance recommendations)",
    "hta": "Holistic Trace Analysis",
    "nvidia": "NVIDIA Deep Learning Performance Guide",
    "pytorch": "PyTorch performance tuning guide",
    "ncu": "Nsight Compute rule results, quoted from the export",
    "own": "opscope",
}


@dataclass(frozen=True)
class Finding:
    id: str
    severity: str
    title: str
    time_at_stake_ns: int
    share: float
    metric: str
    value: float
    threshold: float
    evidence: tuple[dict[str, Any], ...]
    advice: str
    source: str
    predicted_saving_ns: int | None = None  # filled by the what-if analysis when it lands; None until then


@dataclass(frozen=True)
class Advice:
    findings: tuple[Finding, ...]  # sorted by time at stake, largest first
    rules_checked: tuple[str, ...]
    warnings: tuple[str, ...] = ()

    def worst(self) -> str | None:
        levels = [SEVERITIES.index(f.severity) for f in self.findings]
        return SEVERITIES[max(levels)] if levels else None


def severity(share: float) -> str:
    if share >= CRIT_SHARE:
        return CRIT
    if share >= WARN_SHARE:
        return WARN
    return INFO


class Thresholded(Protocol):
    """What `RuleConfig` reads of a rule: its id and its documented default threshold."""

    @property
    def id(self) -> str: ...

    @property
    def threshold(self) -> float: ...


@dataclass(frozen=True)
class RuleConfig:
    """Threshold overrides by rule id, and rules switched off (`--rules FILE`; `rules.engine.load_config`)."""

    thresholds: Mapping[str, float] = field(default_factory=dict)
    disabled: frozenset[str] = frozenset()

    def threshold(self, rule: Thresholded) -> float:
        return float(self.thresholds.get(rule.id, rule.threshold))
