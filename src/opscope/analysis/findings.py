"""The findings of the advice rules as plain results: severities, a `Finding` (what a rule found, its share of
the basis, its evidence and advice) and an `Advice` (every finding of one trace), and the threshold overrides a
user passes (`RuleConfig`). `analyze` composes results, the rules (`analysis/rules/`) read them and produce these,
and every view (terminal, JSON, HTML, diff, demo) lays them out. Definitions: docs/advice.md."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
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


# Evidence keys naming what a frame is looked up for: a kernel name, or an op name (docs/advice.md, "frame").
KERNEL_KEYS: Final = ("kernel", "kernels")
OP_KEYS: Final = ("op", "cpu_op")


def evidence_names(advice: Advice) -> tuple[set[str], set[str]]:
    """The kernel names and the op names the evidence of `advice` mentions (what `with_frames` looks up)."""
    found: tuple[set[str], set[str]] = (set(), set())
    for f in advice.findings:
        for item in f.evidence:
            for keys, names in ((KERNEL_KEYS, found[0]), (OP_KEYS, found[1])):
                for key in keys:
                    value = item.get(key)
                    names.update(
                        n for n in (value if isinstance(value, list) else [value]) if isinstance(n, str)
                    )
    return found


def with_frames(advice: Advice, by_kernel: Mapping[str, str], by_op: Mapping[str, str]) -> Advice:
    """`advice` with a `frame` on each evidence item that names a kernel or an op the user's code launched:
    the frame of the user's code that launched the most GPU time of that kernel (else of that op), from
    `by_kernel` / `by_op` (`attribution.lines.launch_sites`; empty on a trace without Python stacks). An item
    that already has a `frame`, or whose names are not found, is left as it is."""
    if not by_kernel and not by_op:
        return advice

    def frame_of(item: dict[str, Any]) -> str | None:
        for keys, table in ((KERNEL_KEYS, by_kernel), (OP_KEYS, by_op)):
            for key in keys:
                value = item.get(key)
                for name in value if isinstance(value, list) else [value]:
                    if isinstance(name, str) and name in table:
                        return table[name]
        return None

    def item_with_frame(item: dict[str, Any]) -> dict[str, Any]:
        frame = None if "frame" in item else frame_of(item)
        return item if frame is None else {**item, "frame": frame}

    findings = tuple(
        replace(f, evidence=tuple(item_with_frame(e) for e in f.evidence)) for f in advice.findings
    )
    return replace(advice, findings=findings)
