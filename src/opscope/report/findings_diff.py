"""The advice findings of two traces compared, for `opscope diff`: which findings the change fixed, which it
introduced, and which remain (with their time at stake before and after). Matched by rule id (one finding
per rule and trace, docs/advice.md)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from opscope.analysis.findings import Advice, Finding
from opscope.report.document import Document


def _brief(f: Finding) -> dict[str, Any]:
    return {
        "id": f.id,
        "severity": f.severity,
        "title": f.title,
        "time_at_stake_us": round(f.time_at_stake_ns / 1e3, 3),
        "share": round(f.share, 6),
    }


def findings_changes(base: Advice | None, new: Advice | None) -> dict[str, list[dict[str, Any]]]:
    before = {f.id: f for f in base.findings} if base else {}
    after = {f.id: f for f in new.findings} if new else {}
    return {
        "fixed": [_brief(f) for i, f in before.items() if i not in after],
        "new": [_brief(f) for i, f in after.items() if i not in before],
        "remaining": [
            {
                "id": i,
                "severity_before": before[i].severity,
                "severity_after": f.severity,
                "time_at_stake_before_us": round(before[i].time_at_stake_ns / 1e3, 3),
                "time_at_stake_after_us": round(f.time_at_stake_ns / 1e3, 3),
            }
            for i, f in after.items()
            if i in before
        ],
    }


def _line(items: list[dict[str, Any]]) -> str:
    return ", ".join(f"{f['id']} ({f['severity']})" for f in items) or "none"


def with_findings(doc: Document, changes: dict[str, list[dict[str, Any]]]) -> Document:
    """`doc` (the diff document) with the findings' changes as its first lines and as JSON field `findings`."""
    facts = (
        ("findings fixed", _line(changes["fixed"])),
        ("findings new", _line(changes["new"])),
        (
            "findings remaining",
            ", ".join(
                f"{f['id']} ({f['severity_before']} -> {f['severity_after']})" for f in changes["remaining"]
            )
            or "none",
        ),
    )
    return replace(doc, facts=facts + doc.facts, data={**doc.data, "findings": changes})
