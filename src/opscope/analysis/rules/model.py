"""The advice rules' data types: a `Rule` (data plus its check), what a check returns (`Hit`) and the
`Finding` the engine makes of it (severity, share, threshold, advice). Definitions: docs/advice.md."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from opscope.analysis.rules.context import RuleContext

INFO: Final = "info"
WARN: Final = "warn"
CRIT: Final = "crit"
SEVERITIES: Final[tuple[str, ...]] = (INFO, WARN, CRIT)
CRIT_SHARE: Final = 0.10  # time at stake / basis at or above this: crit
WARN_SHARE: Final = 0.02  # ... at or above this: warn; below: info
MAX_EVIDENCE: Final = 10

ABOVE: Final = "above"  # the rule fires when value > threshold
BELOW: Final = "below"  # the rule fires when value < threshold

GPU_TIME: Final = "gpu_time"  # share = time at stake / summed GPU activity time in the window
WINDOW: Final = "window"  # share = time at stake / analysed window x devices (timeline rules)

SOURCES: Final[dict[str, str]] = {
    "nsys": "Nsight Systems expert rules (nsys analyze)",
    "tensorboard": "PyTorch TensorBoard profiler plugin (performance recommendations)",
    "hta": "Holistic Trace Analysis",
    "nvidia": "NVIDIA Deep Learning Performance Guide",
    "pytorch": "PyTorch performance tuning guide",
    "own": "opscope",
}


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


Check = Callable[["RuleContext", float], "Hit | None"]


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

    def fires(self, value: float, threshold: float) -> bool:
        return value > threshold if self.direction == ABOVE else value < threshold


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


META = set("\\.+*?()|[]{}^$#&-~")  # escaped the same way by Python's re and Rust's regex (polars)


def exact_names(names: list[str]) -> str:
    """A regular expression matching exactly these names (for a what-if selector)."""
    escaped = ("".join("\\" + c if c in META else c for c in name) for name in sorted(set(names)))
    return "^(" + "|".join(escaped) + ")$"


def severity(share: float) -> str:
    if share >= CRIT_SHARE:
        return CRIT
    if share >= WARN_SHARE:
        return WARN
    return INFO
