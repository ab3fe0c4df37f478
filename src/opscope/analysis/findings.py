"""The findings of the advice rules as plain results: severities, a `Finding` (what a rule found, its share of
the basis, its evidence and advice) and an `Advice` (every finding of one trace), and the threshold overrides a
user passes (`RuleConfig`). `analyze` composes results, the rules (`analysis/rules/`) read them and produce these,
and every view (terminal, JSON, HTML, diff, demo) lays them out. Definitions: docs/advice.md."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Protocol

from opscope.analysis.base.selectors import names_in

INFO: Final = "info"
WARN: Final = "warn"
CRIT: Final = "crit"
SEVERITIES: Final[tuple[str, ...]] = (INFO, WARN, CRIT)
CRIT_SHARE: Final = 0.10  # time at stake / basis at or above this: crit
WARN_SHARE: Final = 0.02  # ... at or above this: warn; below: info
MIN_SAVING_NS: Final = 50_000  # a saving under 50 us is info whatever its share (a tiny run's idle time)
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


ON_PATH_SUFFIX: Final = (
    ", critical path"  # a saving model's name ends so when the what-if produced the saving
)
WHAT_IF_BASIS: Final = "critical_path_what_if"
ESTIMATE_BASIS: Final = "estimate"


def saving_basis(model: str) -> str:
    """`WHAT_IF_BASIS` for a saving model named with `ON_PATH_SUFFIX`, else `ESTIMATE_BASIS`."""
    return WHAT_IF_BASIS if model.endswith(ON_PATH_SUFFIX) else ESTIMATE_BASIS


def saving_label(model: str) -> str:
    """The model that produced a saving, in words: "critical-path what-if" or "estimate: <model>"."""
    if saving_basis(model) == WHAT_IF_BASIS:
        return "critical-path what-if"
    return f"estimate: {model or 'unnamed'}"


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
    # the saving a fix would bring under the finding's model, exclusive of the findings ranked above it
    # (analysis/rules/savings.py); None only on findings built by hand
    predicted_saving_ns: int | None = None
    saving_share: float = 0.0  # predicted saving / the analysed window
    saving_model: str = ""  # the name of the saving model (docs/advice.md, "Savings")
    shared_with: tuple[str, ...] = ()  # findings above this one that claimed part of the same time
    # the change the fix makes, as a what-if of the critical-path model: (regular expression over event names,
    # factor); None where the dependency graph cannot express it (the saving is then the rule's estimate)
    what_if: tuple[str, float] | None = None
    # where the saving model has a measured record (rules/calibration.py): the saving x the lowest and highest
    # realised / predicted ratio of its pairs (ns), and the record in words; None / "" without one
    saving_low_ns: int | None = None
    saving_high_ns: int | None = None
    calibration: str = ""

    @property
    def saving_basis(self) -> str:
        """Which model produced the saving: the critical-path what-if of the fix's change, or the rule's own
        estimate (a change the dependency graph cannot express). docs/advice.md, "Savings"."""
        return saving_basis(self.saving_model)

    @property
    def what_if_names(self) -> list[str] | None:
        """The event names the change rescales, when its selector is a list of exact names (else None)."""
        return names_in(self.what_if[0]) if self.what_if is not None else None

    @property
    def saving_label(self) -> str:
        """The model that produced the saving, in words ("critical-path what-if", "estimate: <model>")."""
        return saving_label(self.saving_model)


@dataclass(frozen=True)
class RuleOutcome:
    """What one rule measured on the trace, finding or not (`rules_evaluated` in the JSON)."""

    id: str
    status: str  # one of OUTCOMES
    value: float | None = None
    threshold: float | None = None
    reason: str = ""


FINDING: Final = "finding"
NOT_CROSSED: Final = "threshold not crossed"
NO_TIME: Final = "no time at stake"
EXPLAINED: Final = "explained by findings above"
NO_SAVING: Final = "no saving on the critical path"
NOT_EVALUATED: Final = "not evaluated"
OUTCOMES: Final = (FINDING, NOT_CROSSED, NO_TIME, EXPLAINED, NO_SAVING, NOT_EVALUATED)


@dataclass(frozen=True)
class CaptureNote:
    """What kind of capture the analysed window is (analysis/timeline/capture.py): steady_state, graph_capture,
    compilation, warm_up or long_head_or_tail; why; how to profile the steady state; and the steady part the
    idle rules read."""

    kind: str
    detail: str
    advice: str
    head_ns: int
    tail_ns: int
    steady_ns: int


@dataclass(frozen=True)
class Advice:
    findings: tuple[Finding, ...]  # sorted by predicted saving, largest first
    rules_checked: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    window_ns: int = 0  # the analysed window: the basis of every saving share
    combined_saving_ns: int = 0  # every finding's remedy applied together (<= the sum, <= the window)
    outcomes: tuple[RuleOutcome, ...] = ()  # every rule checked, in registry order
    # rules that fired but save nothing: their time is claimed by the findings above, or the critical-path
    # what-if of their remedy saves nothing (`outcomes` says which); kept for their evidence, not shown
    withheld: tuple[Finding, ...] = ()
    capture: CaptureNote | None = None  # what kind of capture the window is

    @property
    def not_evaluated(self) -> tuple[RuleOutcome, ...]:
        return tuple(o for o in self.outcomes if o.status == NOT_EVALUATED)

    @property
    def fired(self) -> dict[str, Finding]:
        """Every rule that fired, by id: its findings and those withheld."""
        return {f.id: f for f in (*self.findings, *self.withheld)}

    def worst(self) -> str | None:
        levels = [SEVERITIES.index(f.severity) for f in self.findings]
        return SEVERITIES[max(levels)] if levels else None


def severity(
    share: float,
    crit: float = CRIT_SHARE,
    warn: float = WARN_SHARE,
    saving_ns: int | None = None,
    min_saving_ns: int = MIN_SAVING_NS,
) -> str:
    """From the saving's share of the window; a saving under `min_saving_ns` is info."""
    if saving_ns is not None and saving_ns < min_saving_ns:
        return INFO
    if share >= crit:
        return CRIT
    if share >= warn:
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
    crit_share: float = CRIT_SHARE  # [severity] crit = ...: a saving of this share of the window is crit
    warn_share: float = WARN_SHARE  # [severity] warn = ...
    min_saving_ns: int = MIN_SAVING_NS  # [severity] min_saving_us = ...: below it, info

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
