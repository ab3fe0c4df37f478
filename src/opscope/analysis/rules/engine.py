"""Run the advice rules over one trace: thresholds (defaults or from a TOML file), severity from the time at
stake, findings sorted by time at stake. Definitions: docs/advice.md."""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from opscope.analysis.base.stages import stage
from opscope.analysis.findings import MAX_EVIDENCE, Advice, Finding, RuleConfig, severity
from opscope.analysis.rules.context import RuleContext
from opscope.analysis.rules.registry import RULES
from opscope.errors import UsageError

log = logging.getLogger("opscope")


def parse_config(data: Mapping[str, Any], origin: str = "rules file") -> RuleConfig:
    """A TOML document of the form `[rules.<id>]` with `threshold = <number>` and / or `enabled = false`."""
    known = {r.id for r in RULES}
    section = data.get("rules", {})
    extra = sorted(set(data) - {"rules"})
    if extra or not isinstance(section, dict):
        raise UsageError(
            f"{origin}: expected only [rules.<id>] tables, found {', '.join(extra) or 'rules = ...'}"
        )
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
    return RuleConfig(thresholds=thresholds, disabled=frozenset(disabled))


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


def evaluate(ctx: RuleContext, config: RuleConfig | None = None, predict: bool = False) -> Advice:
    """Every enabled rule over `ctx`; a rule that fails is reported as a warning, not an error. With `predict`,
    findings whose rule defines its remedy as a what-if get `predicted_saving_ns` from the critical path."""
    cfg = config or RuleConfig()
    findings: list[Finding] = []
    checked: list[str] = []
    warnings: list[str] = []
    what_ifs: dict[str, tuple[str, float]] = {}
    for rule in RULES:
        if rule.id in cfg.disabled:
            continue
        threshold = cfg.threshold(rule)
        checked.append(rule.id)
        stage(f"advice rules: {rule.id}")
        try:
            hit = rule.check(ctx, threshold)
        except Exception as exc:  # one broken rule must not cost the user the others
            log.debug("rule %s failed", rule.id, exc_info=True)
            warnings.append(f"{rule.id}: not evaluated: {type(exc).__name__}: {exc}")
            continue
        if hit is None or not rule.fires(hit.value, threshold):
            continue
        basis = ctx.basis_ns(rule.basis)
        share = hit.time_at_stake_ns / basis if basis > 0 else 0.0
        title = f"{rule.title}: {hit.detail}" if hit.detail else rule.title
        if hit.what_if is not None:
            what_ifs[rule.id] = hit.what_if
        findings.append(
            Finding(
                id=rule.id,
                severity=severity(share),
                title=title,
                time_at_stake_ns=hit.time_at_stake_ns,
                share=share,
                metric=rule.metric,
                value=float(hit.value),
                threshold=threshold,
                evidence=hit.evidence[:MAX_EVIDENCE],
                advice=rule.advice,
                source=rule.source,
            )
        )
    if predict:
        findings = _predicted(ctx, findings, what_ifs, warnings)
    findings.sort(key=lambda f: (-f.time_at_stake_ns, f.id))
    return Advice(
        findings=tuple(findings), rules_checked=tuple(checked), warnings=tuple(warnings + ctx.notes)
    )


def _predicted(
    ctx: RuleContext, findings: list[Finding], what_ifs: dict[str, tuple[str, float]], warnings: list[str]
) -> list[Finding]:
    """Fill `predicted_saving_ns` from the critical-path what-if of each finding's remedy (docs/advice.md)."""
    wanted = [f for f in findings if f.id in what_ifs]
    if not wanted:
        return findings
    from opscope.analysis.critical_path.stats import SavingModel

    try:
        model = SavingModel(ctx.trace, ctx.analysis.options.steps, ctx.linkage)
        saved = {f.id: model.saving_us(*what_ifs[f.id]) for f in wanted}
    except Exception as exc:  # the prediction is an extra: the findings stand without it
        log.debug("predicted saving failed", exc_info=True)
        warnings.append(f"predicted saving not computed: {type(exc).__name__}: {exc}")
        return findings
    return [
        replace(f, predicted_saving_ns=round(saved[f.id] * 1e3)) if f.id in saved else f for f in findings
    ]
