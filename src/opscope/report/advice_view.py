"""Advice findings -> plain data and tables: the stable `opscope.advise/1` payload, the findings table that
`advise`, `analyze` and the HTML report show, and the `--list-rules` table. Definitions: docs/advice.md.

Evidence items are small dicts whose text comes from the trace; tables show them as `key=value` text, which
the renderers escape like every other cell.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from opscope.analysis.findings import ESTIMATE_BASIS, EXPLAINED, SOURCES, Advice, Finding, RuleConfig
from opscope.analysis.overview import Analysis
from opscope.analysis.rules.registry import RULES
from opscope.report.document import FLOAT, MS, NAME, PCT, TEXT, Column, Document, Table
from opscope.report.evidence_text import distinct

SCHEMA = "opscope.advise/1"
# the JSON's scalar fields that the table leaves out, as CSV-only columns (names as in the JSON)
CSV_EXTRA = (
    Column("metric", "Metric", TEXT),
    Column("value", "Value", FLOAT),
    Column("threshold", "Threshold", FLOAT),
    Column("time_at_stake_us", "At stake us", FLOAT),
    Column("predicted_saving_us", "Saving us", FLOAT),
    Column("saving_share", "Saving share", FLOAT),
    Column("saving_model", "Saving model", TEXT),
    Column("saving_basis", "Saving basis", TEXT),
    Column("source", "Source", TEXT),
    Column("advice", "Advice", NAME),
)
CSV_EXTRA_KEYS = frozenset(c.key for c in CSV_EXTRA)
EVIDENCE_IN_TABLE = 3  # evidence items per finding in the text tables (JSON carries up to 10)


def _what_if(f: Finding) -> dict[str, Any] | None:
    """The change the fix makes: the events it rescales (`names`, exact names; else `pattern`, a regular
    expression) and the `factor` (0 removes them), as `opscope critical-path --what-if` takes them."""
    if f.what_if is None:
        return None
    names = f.what_if_names
    found: dict[str, Any] = {"names": names} if names is not None else {"pattern": f.what_if[0]}
    return {**found, "factor": f.what_if[1]}


def finding_data(f: Finding) -> dict[str, Any]:
    return {
        "id": f.id,
        "severity": f.severity,
        "title": f.title,
        "time_at_stake_us": round(f.time_at_stake_ns / 1e3, 3),
        "share": round(f.share, 6),
        "metric": f.metric,
        "value": round(f.value, 6),
        "threshold": f.threshold,
        "evidence": [dict(e) for e in f.evidence],
        "advice": f.advice,
        "source": f.source,
        "predicted_saving_us": None
        if f.predicted_saving_ns is None
        else round(f.predicted_saving_ns / 1e3, 3),
        "saving_share": round(f.saving_share, 6),
        "saving_model": f.saving_model,
        "saving_basis": f.saving_basis,
        "what_if": _what_if(f),
        "saving_range_us": None
        if f.saving_low_ns is None or f.saving_high_ns is None
        else [round(f.saving_low_ns / 1e3, 3), round(f.saving_high_ns / 1e3, 3)],
        "calibration": f.calibration or None,
        "shared_with": list(f.shared_with),
    }


def findings_data(advice: Advice | None) -> list[dict[str, Any]]:
    return [finding_data(f) for f in advice.findings] if advice else []


def findings_table(advice: Advice | None, name: str = "findings", total: int | None = None) -> Table:
    rows = []
    for f in advice.findings if advice else ():
        rows.append(
            {
                "severity": f.severity,
                "id": f.id,
                "saving": f.predicted_saving_ns,
                "time": f.time_at_stake_ns,
                "share": f.share,
                "title": f.title,
                **{k: v for k, v in finding_data(f).items() if k in CSV_EXTRA_KEYS},
            }
        )
    return Table(
        name,
        "Findings, the largest predicted saving first",
        (
            Column("severity", "Sev", TEXT),
            Column("id", "Rule", TEXT),
            Column("saving", "Saving ms", MS),
            Column("saving_share", "Share", PCT),
            Column("title", "Finding", TEXT, wrap=True),
        ),
        tuple(rows),
        footer=_footer(advice, total),
        csv_extra=CSV_EXTRA,
        # the CSV's first columns as they always were (time at stake and its share), the savings after them
        csv_columns=(
            Column("severity", "Sev", TEXT),
            Column("id", "Rule", TEXT),
            Column("time", "At stake ms", MS),
            Column("share", "Share", PCT),
            Column("title", "Finding", NAME),
        ),
    )


def combined_line(advice: Advice, total: int | None = None) -> str:
    """The combined saving: "fixing all of these: about X ms of the Y ms analysed" (the window: the analysed
    steps, or the whole trace); with `total` (the findings before --top cut them), "fixing all N findings"."""
    these = "all of these" if total is None or total == len(advice.findings) else f"all {total} findings"
    return (
        f"fixing {these}: about {advice.combined_saving_ns / 1e6:,.3f} ms of the "
        f"{advice.window_ns / 1e6:,.3f} ms analysed"
    )


def range_line(advice: Advice) -> str | None:
    """The findings whose saving model has a measured record, with the range it gives (issue 53)."""
    ranged = [
        f"{f.id} {f.saving_low_ns / 1e6:,.3f}-{f.saving_high_ns / 1e6:,.3f} ms ({f.calibration})"
        for f in advice.findings
        if f.saving_low_ns is not None and f.saving_high_ns is not None
    ]
    return "as measured: " + "; ".join(ranged) if ranged else None


def basis_line(advice: Advice) -> str | None:
    """Which model produced the savings: the critical-path what-if of each fix's change, and the findings whose
    change the dependency graph cannot express (their rule's estimate, docs/advice.md "Savings")."""
    if not advice.findings:
        return None
    estimates = [f"{f.id} ({f.saving_model})" for f in advice.findings if f.saving_basis == ESTIMATE_BASIS]
    if not estimates:
        return "savings: the critical-path what-if of each fix"
    if len(estimates) == len(advice.findings):
        return "savings: each rule's estimate (no what-if of these fixes could be computed)"
    return "savings: the critical-path what-if of each fix, except estimates: " + "; ".join(estimates)


def not_evaluated_line(advice: Advice) -> str | None:
    skipped = advice.not_evaluated
    if not skipped:
        return None
    return "not evaluated: " + "; ".join(f"{o.id} ({o.reason})" for o in skipped)


def withheld_line(advice: Advice) -> str | None:
    """The rules that fired but save nothing of their own, and why."""
    why = {o.id: o for o in advice.outcomes}
    if not advice.withheld:
        return None
    parts = []
    for f in advice.withheld:
        o = why.get(f.id)
        reason = (
            f"its time is explained by {o.reason}"
            if o is not None and o.status == EXPLAINED
            else "no saving on the critical path"
        )
        parts.append(f"{f.id} ({reason})")
    return "also fired, saving nothing of their own: " + "; ".join(parts)


def _footer(advice: Advice | None, total: int | None = None) -> tuple[str, ...]:
    if advice is None:
        return ()
    lines = [combined_line(advice, total)] if advice.findings else []
    lines += [
        line
        for line in (
            basis_line(advice),
            range_line(advice),
            withheld_line(advice),
            not_evaluated_line(advice),
        )
        if line
    ]
    return tuple(lines)


def finding_facts(advice: Advice | None, top: int = 5) -> list[tuple[str, str]]:
    """The findings as headline lines (label, text), for the top of `analyze`: the largest saving first."""
    if advice is None:
        return []
    if not advice.findings:
        return [("findings", f"none from {len(advice.rules_checked)} rules (docs/advice.md)")]
    lines = [
        (
            f"{f.severity} {f.id}",
            f"{f.title} (saving about {(f.predicted_saving_ns or 0) / 1e6:,.3f} ms, "
            f"{f.saving_share * 100:.1f}% of the window)",
        )
        for f in advice.findings[:top]
    ]
    more = len(advice.findings) - top
    lines.append(("findings", (f"{more} more; " if more > 0 else "") + combined_line(advice)))
    lines.append(("evidence", "and advice: opscope advise"))
    return lines


def evidence_table(advice: Advice, origin_ns: int | None = None) -> Table:
    rows = [
        {"id": f.id, "item": text}
        for f in advice.findings
        for text in distinct(f.evidence, origin_ns)[:EVIDENCE_IN_TABLE]
    ]
    return Table(
        "evidence",
        "Evidence (top items; times from the window's start; --format json has up to 10)",
        (Column("id", "Rule", TEXT), Column("item", "Evidence", TEXT, wrap=True)),
        tuple(rows),
    )


def outcomes_data(advice: Advice) -> list[dict[str, Any]]:
    return [
        {"id": o.id, "status": o.status, "value": o.value, "threshold": o.threshold, "reason": o.reason}
        for o in advice.outcomes
    ]


def advise_data(result: Analysis) -> dict[str, Any]:
    advice = result.advice or Advice(findings=(), rules_checked=())
    return {
        "schema": SCHEMA,
        "trace": {"path": result.path, "devices": list(result.device_names)},
        "gpu": result.gpu.data() if result.gpu else None,
        "steps_spec": result.options.steps,
        "findings": findings_data(advice),
        "rules_checked": list(advice.rules_checked),
        "warnings": [*result.warnings, *advice.warnings],
        "window_us": round(advice.window_ns / 1e3, 3),
        "combined_saving_us": round(advice.combined_saving_ns / 1e3, 3),
        "not_evaluated": [{"id": o.id, "reason": o.reason} for o in advice.not_evaluated],
        "rules_evaluated": outcomes_data(advice),
        "capture": capture_data(advice),
    }


def capture_data(advice: Advice) -> dict[str, Any] | None:
    c = advice.capture
    if c is None:
        return None
    return {
        "kind": c.kind,
        "detail": c.detail,
        "advice": c.advice,
        "head_us": round(c.head_ns / 1e3, 3),
        "tail_us": round(c.tail_ns / 1e3, 3),
        "steady_us": round(c.steady_ns / 1e3, 3),
    }


def capture_fact(advice: Advice) -> tuple[str, str] | None:
    """("capture", what the window is) when it is not steady state, or its head / tail is long."""
    c = advice.capture
    if c is None or c.kind == "steady_state":
        return None
    return ("capture", f"{c.kind.replace('_', ' ')}: {c.detail}")


def advise_document(result: Analysis, top: int | None = None) -> Document:
    advice = result.advice or Advice(findings=(), rules_checked=())
    total = len(advice.findings)
    if top:  # the first N findings; the combined saving stays that of all of them
        advice = replace(advice, findings=advice.findings[:top])
        result = replace(result, advice=advice)
    worst = advice.worst()
    capture = capture_fact(advice)
    facts = (
        ("trace", result.path),
        ("devices", ", ".join(result.device_names) or "none recorded"),
        *gpu_facts(result),
        *([capture] if capture else []),
        (
            "findings",
            f"{len(advice.findings)} ({worst or 'none'} at worst) from {len(advice.rules_checked)} rules",
        ),
    )
    origin = result.timeline.window_start_ns
    tables = (
        (findings_table(advice, total=total), evidence_table(advice, origin))
        if advice.findings
        else (findings_table(advice, total=total),)
    )
    notes = (
        *([f"capture: {advice.capture.advice}"] if capture and advice.capture else []),
        *(f"{f.id}: {f.advice}" for f in advice.findings),
        "Saving: what the fix would save under the finding's model, not counting time a finding above "
        "already claims, so the savings add up to at most the window. Severity from the saving's share of "
        "the window: >= 10% crit, >= 2% warn, else info. Definitions: docs/advice.md.",
        *(f"warning: {w}" for w in [*result.warnings, *advice.warnings]),
    )
    return Document(
        title="What to fix first", data=advise_data(result), facts=facts, tables=tables, notes=notes
    )


def gpu_facts(result: Analysis) -> tuple[tuple[str, str], ...]:
    """The GPU line: its architecture, and how opscope knows it ("inferred from kernel names")."""
    gpu = result.gpu
    if gpu is None or gpu.arch is None:
        return ()
    how = "inferred from kernel names" if gpu.inferred else "from the trace's device description"
    return (("GPU", f"{gpu.label}, {how}"),)


def rules_document(config: RuleConfig | None = None) -> Document:
    cfg = config or RuleConfig()
    rows = tuple(
        {
            "id": r.id,
            "source": SOURCES.get(r.source, r.source),
            "metric": r.metric,
            "fires": f"{'>' if r.direction == 'above' else '<'} {cfg.threshold(r):g}",
            "default": r.threshold,
            "enabled": "no" if r.id in cfg.disabled else "yes",
            "advice": r.advice,
        }
        for r in RULES
    )
    data = {
        "schema": "opscope.rules/1",
        "rules": [
            {
                "id": r.id,
                "title": r.title,
                "source": r.source,
                "metric": r.metric,
                "direction": r.direction,
                "threshold": cfg.threshold(r),
                "default_threshold": r.threshold,
                "basis": r.basis,
                "enabled": r.id not in cfg.disabled,
                "advice": r.advice,
            }
            for r in RULES
        ],
    }
    table = Table(
        "rules",
        "Advice rules",
        (
            Column("id", "Rule", TEXT),
            Column("metric", "Metric", TEXT),
            Column("fires", "Fires when", TEXT),
            Column("default", "Default", FLOAT),
            Column("enabled", "On", TEXT),
            Column("source", "Source", TEXT),
        ),
        rows,
    )
    return Document(
        title="opscope advice rules",
        data=data,
        tables=(table,),
        notes=(
            "Thresholds: --rules FILE with [rules.<id>] threshold = N / enabled = false. "
            "Definitions: docs/advice.md.",
        ),
    )
