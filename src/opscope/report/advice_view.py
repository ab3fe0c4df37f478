"""Advice findings -> plain data and tables: the stable `opscope.advise/1` payload, the findings table that
`advise`, `analyze` and the HTML report show, and the `--list-rules` table. Definitions: docs/advice.md.

Evidence items are small dicts whose text comes from the trace; tables show them as `key=value` text, which
the renderers escape like every other cell.
"""

from __future__ import annotations

from typing import Any

from opscope.analysis.findings import SOURCES, Advice, Finding, RuleConfig
from opscope.analysis.overview import Analysis
from opscope.analysis.rules.registry import RULES
from opscope.report.document import FLOAT, MS, NAME, PCT, TEXT, Column, Document, Table
from opscope.report.frame_names import short_frame

SCHEMA = "opscope.advise/1"
# the JSON's scalar fields that the table leaves out, as CSV-only columns (names as in the JSON)
CSV_EXTRA = (
    Column("metric", "Metric", TEXT),
    Column("value", "Value", FLOAT),
    Column("threshold", "Threshold", FLOAT),
    Column("time_at_stake_us", "At stake us", FLOAT),
    Column("predicted_saving_us", "Saving us", FLOAT),
    Column("source", "Source", TEXT),
    Column("advice", "Advice", NAME),
)
CSV_EXTRA_KEYS = frozenset(c.key for c in CSV_EXTRA)
EVIDENCE_IN_TABLE = 3  # evidence items per finding in the text tables (JSON carries up to 10)


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
    }


def findings_data(advice: Advice | None) -> list[dict[str, Any]]:
    return [finding_data(f) for f in advice.findings] if advice else []


def _evidence_text(item: dict[str, Any]) -> str:
    """`key=value; ...`, and where the evidence has the user's frame that launched it, " at file(line): function"
    (the file shortened, `frame_names.short_frame`)."""
    text = "; ".join(f"{k}={v}" for k, v in item.items() if k != "frame")
    frame = item.get("frame")
    return f"{text} at {short_frame(frame)}" if isinstance(frame, str) else text


def findings_table(advice: Advice | None, name: str = "findings") -> Table:
    rows = []
    for f in advice.findings if advice else ():
        rows.append(
            {
                "severity": f.severity,
                "id": f.id,
                "time": f.time_at_stake_ns,
                "share": f.share,
                "title": f.title,
                **{k: v for k, v in finding_data(f).items() if k in CSV_EXTRA_KEYS},
            }
        )
    return Table(
        name,
        "Findings, the most GPU time at stake first",
        (
            Column("severity", "Sev", TEXT),
            Column("id", "Rule", TEXT),
            Column("time", "At stake ms", MS),
            Column("share", "Share", PCT),
            Column("title", "Finding", NAME),
        ),
        tuple(rows),
        csv_extra=CSV_EXTRA,
    )


def finding_facts(advice: Advice | None, top: int = 5) -> list[tuple[str, str]]:
    """The findings as headline lines (label, text), for the top of `analyze`: the most time at stake first."""
    if advice is None:
        return []
    if not advice.findings:
        return [("findings", f"none from {len(advice.rules_checked)} rules (docs/advice.md)")]
    lines = [
        (
            f"{f.severity} {f.id}",
            f"{f.title} ({f.time_at_stake_ns / 1e6:,.3f} ms at stake, {f.share * 100:.1f}%)",
        )
        for f in advice.findings[:top]
    ]
    more = len(advice.findings) - top
    lines.append(("findings", (f"{more} more; " if more > 0 else "") + "evidence and advice: opscope advise"))
    return lines


def evidence_table(advice: Advice) -> Table:
    rows = [
        {"id": f.id, "item": _evidence_text(e)}
        for f in advice.findings
        for e in f.evidence[:EVIDENCE_IN_TABLE]
    ]
    return Table(
        "evidence",
        "Evidence (top items; --format json has up to 10)",
        (Column("id", "Rule", TEXT), Column("item", "Evidence", NAME)),
        tuple(rows),
    )


def advise_data(result: Analysis) -> dict[str, Any]:
    advice = result.advice or Advice(findings=(), rules_checked=())
    return {
        "schema": SCHEMA,
        "trace": {"path": result.path, "devices": list(result.device_names)},
        "steps_spec": result.options.steps,
        "findings": findings_data(advice),
        "rules_checked": list(advice.rules_checked),
        "warnings": [*result.warnings, *advice.warnings],
    }


def advise_document(result: Analysis) -> Document:
    advice = result.advice or Advice(findings=(), rules_checked=())
    worst = advice.worst()
    facts = (
        ("trace", result.path),
        ("devices", ", ".join(result.device_names) or "none recorded"),
        (
            "findings",
            f"{len(advice.findings)} ({worst or 'none'} at worst) from {len(advice.rules_checked)} rules",
        ),
    )
    tables = (
        (findings_table(advice), evidence_table(advice)) if advice.findings else (findings_table(advice),)
    )
    notes = (
        *(f"{f.id}: {f.advice}" for f in advice.findings),
        "Severity from the share of GPU time at stake: >= 10% crit, >= 2% warn, else info. "
        "Definitions: docs/advice.md.",
        *(f"warning: {w}" for w in [*result.warnings, *advice.warnings]),
    )
    return Document(
        title="What to fix first", data=advise_data(result), facts=facts, tables=tables, notes=notes
    )


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
