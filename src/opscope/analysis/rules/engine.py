"""Run the advice rules over one trace: thresholds (defaults or from a TOML file), savings that add up
(savings.py), severity from the saving's share of the window, findings sorted by saving. Definitions:
docs/advice.md."""

from __future__ import annotations

import hashlib
import logging
import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import polars as pl

from opscope.analysis.base import intervals
from opscope.analysis.base.codetag import analysis_tag
from opscope.analysis.base.linking import is_trace_link
from opscope.analysis.base.stages import stage
from opscope.analysis.base.stored import value_frames, value_of
from opscope.analysis.findings import (
    CRIT_SHARE,
    EXPLAINED,
    FINDING,
    MAX_EVIDENCE,
    MIN_SAVING_NS,
    NO_SAVING,
    NO_TIME,
    NOT_CROSSED,
    NOT_EVALUATED,
    WARN_SHARE,
    Advice,
    CaptureNote,
    Finding,
    RuleConfig,
    RuleOutcome,
    severity,
)
from opscope.analysis.rules.calibration import record_for
from opscope.analysis.rules.context import RuleContext
from opscope.analysis.rules.model import Hit, Rule, Skipped
from opscope.analysis.rules.registry import RULES
from opscope.analysis.rules.savings import (
    Attributed,
    Candidate,
    alone_ns,
    attribute,
    combined_ns,
    on_path,
    window_claims,
    within_joint,
)
from opscope.errors import UsageError

log = logging.getLogger("opscope")


def parse_config(data: Mapping[str, Any], origin: str = "rules file") -> RuleConfig:
    """A TOML document of `[rules.<id>]` tables with `threshold = <number>` and / or `enabled = false`, and an
    optional `[severity]` table with `crit` / `warn` (shares of the window a saving must reach)."""
    known = {r.id for r in RULES}
    section = data.get("rules", {})
    extra = sorted(set(data) - {"rules", "severity"})
    if extra or not isinstance(section, dict):
        raise UsageError(
            f"{origin}: expected only [rules.<id>] and [severity] tables, found "
            f"{', '.join(extra) or 'rules = ...'}"
        )
    crit, warn, floor = _severity(data.get("severity", {}), origin)
    thresholds: dict[str, float] = {}
    disabled = set()
    for rule_id, values in section.items():
        if rule_id not in known:
            raise UsageError(f"{origin}: unknown rule {rule_id!r} (opscope advise --list-rules lists them)")
        if not isinstance(values, dict) or set(values) - {"threshold", "enabled"}:
            raise UsageError(f"{origin}: [rules.{rule_id}] takes only 'threshold' and 'enabled'")
        if "threshold" in values:
            value = values["threshold"]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
                raise UsageError(f"{origin}: [rules.{rule_id}] threshold must be a number")
            thresholds[rule_id] = float(value)
        if "enabled" in values:
            if not isinstance(values["enabled"], bool):
                raise UsageError(f"{origin}: [rules.{rule_id}] enabled must be true or false")
            if not values["enabled"]:
                disabled.add(rule_id)
    return RuleConfig(
        thresholds=thresholds,
        disabled=frozenset(disabled),
        crit_share=crit,
        warn_share=warn,
        min_saving_ns=floor,
    )


Checked = Hit | Skipped | None | Exception  # what a rule's check gave (an exception: it failed)


def _checks(
    ctx: RuleContext, cfg: RuleConfig, rules: list[Rule], before: Callable[[], object] | None = None
) -> list[Checked]:
    """Each rule's check over `ctx`, in order (nothing for a rule with no GPU activity to read). Those of the
    whole trace (no device, stream, step or window selection) over the trace's own link table are kept beside
    the trace cache (`Trace.persisted`), keyed by the analysis sources and the thresholds: `analyze`, `advise`,
    `report` and `diff` on the same trace run the checks once (issue 25). A set with a failed check is not
    kept (it is run again, and fails or not again)."""

    def compute() -> list[Checked]:
        if before is not None:
            before()
        out: list[Checked] = []
        for rule in rules:
            stage(f"advice rules: {rule.id}")
            out.append(_check(ctx, cfg.threshold(rule), rule))
        return out

    opts = ctx.analysis.options
    tag = analysis_tag()
    if tag is None or not opts.whole_trace or not is_trace_link(ctx.trace, ctx.linkage):
        return compute()
    thresholds = repr([(r.id, cfg.threshold(r)) for r in rules])
    key = hashlib.sha256(f"{tag}|{opts.top}|{thresholds}".encode()).hexdigest()[:16]
    stage("advice rules")
    return ctx.trace.persisted(f"rule_checks-{key}", compute, _encode_checks, _decode_checks)


def _check(ctx: RuleContext, threshold: float, rule: Rule) -> Checked:
    if rule.reads_gpu and ctx.clipped.height == 0:  # nothing to read (`evaluate` says so)
        return None
    try:
        hit = rule.check(ctx, threshold)
    except Exception as exc:
        log.debug("rule %s failed", rule.id, exc_info=True)
        return exc
    # the metric as the float its type says (a rule may measure 0): every view reads it as one, and a kept
    # check reads back as one
    return replace(hit, value=float(hit.value)) if isinstance(hit, Hit) else hit


# (a hit, or None and the reason the check was skipped)
_Kept = list[tuple[Hit | None, str | None]]


def _encode_checks(checked: list[Checked]) -> dict[str, pl.DataFrame]:
    """The checks as MessagePack; refused (not kept) when a check failed or one would not read back equal
    (evidence of a type MessagePack does not keep, such as a tuple)."""
    kept: _Kept = []
    for c in checked:
        if isinstance(c, Exception):
            raise ValueError("a failed check is not kept")
        kept.append((c, None) if isinstance(c, Hit) else (None, c.reason if c is not None else None))
    return value_frames(kept, _Kept)


def _decode_checks(frames: dict[str, pl.DataFrame]) -> list[Checked]:
    return [
        hit if hit is not None else None if why is None else Skipped(why)
        for hit, why in value_of(_Kept, frames)
    ]


def _severity(table: Any, origin: str) -> tuple[float, float, int]:
    """(crit, warn, min saving ns) from a `[severity]` table: shares of the window in [0, 1], warn <= crit;
    `min_saving_us` >= 0."""
    if not isinstance(table, dict) or set(table) - {"crit", "warn", "min_saving_us"}:
        raise UsageError(f"{origin}: [severity] takes only 'crit', 'warn' and 'min_saving_us'")
    floor = table.get("min_saving_us", MIN_SAVING_NS / 1e3)
    if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0 <= floor < 1e12:
        raise UsageError(f"{origin}: [severity] min_saving_us must be a number of microseconds >= 0")
    out = []
    for key, default in (("crit", CRIT_SHARE), ("warn", WARN_SHARE)):
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise UsageError(f"{origin}: [severity] {key} must be a share of the window between 0 and 1")
        out.append(float(value))
    if out[1] > out[0]:
        raise UsageError(f"{origin}: [severity] warn must not be above crit")
    return out[0], out[1], round(floor * 1e3)


def load_config(path: str) -> RuleConfig:
    """Read a rules TOML file (tomllib; tomli on Python 3.10)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise UsageError(f"--rules {path}: cannot read: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"--rules {path}: not valid TOML: {exc}") from None
    return parse_config(data, f"--rules {path}")


def evaluate(
    ctx: RuleContext,
    config: RuleConfig | None = None,
    predict: bool = True,
    before_checks: Callable[[], object] | None = None,
) -> Advice:
    """Every enabled rule over `ctx`, then savings (savings.py): each finding's predicted saving under its model
    (refined by the critical-path what-if of its remedy when `predict`), exclusive of the findings ranked above
    it; severity from the saving's share of the window; findings sorted by saving. `before_checks` is called
    before the checks run (not when they are read back: `_checks`). A rule that fails or cannot
    run is listed as not evaluated, with the reason; the others still run."""
    cfg = config or RuleConfig()
    checked: list[str] = []
    warnings: list[str] = []
    outcomes: dict[str, RuleOutcome] = {}
    candidates: list[Candidate] = []
    bounds = ctx.activity.window.bounds
    claimed: dict[str, int] = {}
    enabled = [rule for rule in RULES if rule.id not in cfg.disabled]
    for rule, hit in zip(enabled, _checks(ctx, cfg, enabled, before_checks), strict=True):
        threshold = cfg.threshold(rule)
        checked.append(rule.id)
        if rule.reads_gpu and ctx.clipped.height == 0:  # nothing to read: it says so
            outcomes[rule.id] = RuleOutcome(rule.id, NOT_EVALUATED, threshold=threshold, reason=_nothing(ctx))
            continue
        if isinstance(hit, Exception):  # one broken rule must not cost the user the others
            reason = f"{type(hit).__name__}: {hit}"
            warnings.append(f"{rule.id}: not evaluated: {reason}")
            outcomes[rule.id] = RuleOutcome(rule.id, NOT_EVALUATED, threshold=threshold, reason=reason)
            continue
        if hit is None or isinstance(hit, Skipped):
            reason = hit.reason if isinstance(hit, Skipped) else _note_for(ctx, rule.id) or _nothing(ctx)
            outcomes[rule.id] = RuleOutcome(rule.id, NOT_EVALUATED, threshold=threshold, reason=reason)
            continue
        if not rule.fires(hit.value, threshold):
            outcomes[rule.id] = RuleOutcome(rule.id, NOT_CROSSED, float(hit.value), threshold)
            continue
        claimed[rule.id] = intervals.covered_ns(window_claims(hit.claims, bounds))
        saving, model = alone_ns(hit, claimed[rule.id], None)
        # a change the what-if can apply is judged by the what-if (below), not by its estimate: on a CPU-only
        # capture a DataLoader wait claims no GPU idle time, yet removing it shortens every step
        judged_later = predict and hit.what_if is not None
        if hit.time_at_stake_ns <= 0 or (saving <= 0 and not judged_later):
            outcomes[rule.id] = RuleOutcome(rule.id, NO_TIME, float(hit.value), threshold, hit.detail)
            continue
        candidates.append(Candidate(rule, hit, threshold, saving, model))
    joint = None
    if predict:
        candidates, joint = _refined(ctx, candidates, claimed, warnings)
    attributed = attribute(candidates, bounds)
    with_what_if = {a.candidate.rule.id for a in attributed if on_path(a.candidate.model)}
    joint_ns = _joint(
        ctx, [a for a in attributed if a.saving_ns > 0 and a.candidate.rule.id in with_what_if], joint
    )
    attributed = sorted(within_joint(attributed, joint_ns), key=lambda a: (-a.saving_ns, a.candidate.rule.id))
    window = int(ctx.analysis.timeline.window_ns or 0)
    findings, withheld = [], []
    for a in attributed:
        c = a.candidate
        if a.saving_ns <= 0:
            status, reason = (
                (NO_SAVING, c.model) if c.alone_ns <= 0 else (EXPLAINED, ", ".join(a.shared_with))
            )
            outcomes[c.rule.id] = RuleOutcome(c.rule.id, status, float(c.hit.value), c.threshold, reason)
            withheld.append(_finding(ctx, c, a, window, cfg))
            continue
        outcomes[c.rule.id] = RuleOutcome(c.rule.id, FINDING, float(c.hit.value), c.threshold)
        findings.append(_finding(ctx, c, a, window, cfg))
    kept = [a for a in attributed if a.saving_ns > 0]
    combined = combined_ns(kept, joint_ns, with_what_if)
    return Advice(
        findings=tuple(findings),
        rules_checked=tuple(checked),
        warnings=tuple(warnings + ctx.notes),
        window_ns=window,
        combined_saving_ns=min(combined, window) if window else combined,
        outcomes=tuple(outcomes[i] for i in checked if i in outcomes),
        withheld=tuple(withheld),
        capture=CaptureNote(
            kind=ctx.capture.kind,
            detail=ctx.capture.detail,
            advice=ctx.capture.advice,
            head_ns=ctx.capture.head_ns,
            tail_ns=ctx.capture.tail_ns,
            steady_ns=ctx.capture.steady_ns,
        ),
    )


NOTHING_TO_READ = "no events of the kinds this rule reads in the analysed window"


def _nothing(ctx: RuleContext) -> str:
    """Why a rule that returned nothing could not run: no GPU activity at all, or none of its events."""
    if ctx.clipped.height == 0:
        return "no GPU activity in the analysed window"
    return NOTHING_TO_READ


def _note_for(ctx: RuleContext, rule_id: str) -> str | None:
    """The reason a rule gave in `ctx.notes` ("<id>: not evaluated: <reason>"), if it gave one."""
    prefix = f"{rule_id}: not evaluated: "
    return next((n[len(prefix) :] for n in ctx.notes if n.startswith(prefix)), None)


def _finding(ctx: RuleContext, c: Candidate, a: Attributed, window: int, cfg: RuleConfig) -> Finding:
    basis = ctx.basis_ns(c.rule.basis)
    known = record_for(c.model) if a.saving_ns > 0 else None
    share = c.hit.time_at_stake_ns / basis if basis > 0 else 0.0
    saving_share = a.saving_ns / window if window > 0 else 0.0
    return Finding(
        id=c.rule.id,
        severity=severity(saving_share, cfg.crit_share, cfg.warn_share, a.saving_ns, cfg.min_saving_ns),
        title=f"{c.rule.title}: {c.hit.detail}" if c.hit.detail else c.rule.title,
        time_at_stake_ns=c.hit.time_at_stake_ns,
        share=share,
        metric=c.rule.metric,
        value=float(c.hit.value),
        threshold=c.threshold,
        evidence=c.hit.evidence[:MAX_EVIDENCE],
        advice=c.hit.advice or c.rule.advice,
        source=c.rule.source,
        predicted_saving_ns=a.saving_ns,
        saving_share=saving_share,
        saving_model=c.model,
        shared_with=a.shared_with,
        what_if=c.hit.what_if,
        saving_low_ns=round(a.saving_ns * known.ratio_min) if known else None,
        saving_high_ns=round(a.saving_ns * known.ratio_max) if known else None,
        calibration=known.text() if known else "",
    )


def _refined(
    ctx: RuleContext, candidates: list[Candidate], claimed: dict[str, int], warnings: list[str]
) -> tuple[list[Candidate], Any]:
    """The candidates whose remedy is a what-if, with their saving refined by the critical path; and the model
    (None when no candidate has a what-if or the model could not be built)."""
    wanted = [c for c in candidates if c.hit.what_if is not None]
    if not wanted:
        return candidates, None
    from opscope.analysis.critical_path.stats import SavingModel

    try:
        model = SavingModel(ctx.trace, ctx.analysis.options.steps, ctx.linkage)
        saved = {c.rule.id: model.saving_ns([c.hit.what_if]) for c in wanted if c.hit.what_if}
    except Exception as exc:  # the refinement is an extra: the estimates stand without it
        log.debug("critical-path what-if failed", exc_info=True)
        warnings.append(f"critical-path what-if not computed: {type(exc).__name__}: {exc}")
        return candidates, None
    out = []
    for c in candidates:
        if c.rule.id in saved:
            saving, name = alone_ns(c.hit, claimed[c.rule.id], saved[c.rule.id])
            c = replace(c, alone_ns=saving, model=name)
        out.append(c)
    return out, model


def _joint(ctx: RuleContext, kept: list[Attributed], model: Any) -> int | None:
    """The critical-path what-if of the transformations of `kept` (the findings whose saving is a what-if) at
    once (None without a model)."""
    rules = [a.candidate.hit.what_if for a in kept if a.candidate.hit.what_if is not None]
    if model is None or not rules:
        return None
    try:
        return int(model.saving_ns(rules))
    except Exception:  # pragma: no cover - the same model answered each rule alone
        log.debug("joint what-if failed", exc_info=True)
        return None
