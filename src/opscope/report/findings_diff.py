"""The advice findings of two traces compared, for `opscope diff`: which findings the change fixed, which it
introduced, and which remain (with their time at stake before and after). Matched by rule id (one finding
per rule and trace, docs/advice.md)."""

from __future__ import annotations

import re
from collections.abc import Sequence
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
        "predicted_saving_us": round((f.predicted_saving_ns or 0) / 1e3, 3),
    }


# Rules whose events are recognised by their names, which differ between GPU vendors (copies, kernel families,
# launch fields): across vendors, a rule that fires on one side only says nothing about the change.
NAME_DEPENDENT = frozenset(
    {"pageable_memcpy", "tensor_cores_unused", "channels_last", "low_occupancy", "fusion_candidates"}
)
AMD = re.compile(r"(?i)\bAMD\b|\bMI\d{3}|Instinct|Radeon|gfx\d")
NVIDIA = re.compile(r"(?i)NVIDIA|Tesla|GeForce|Quadro|\b[ABHLV]\d{2,3}\b|\bGB?\d{3}\b|RTX")


def vendor(device_names: Sequence[str]) -> str | None:
    """ "amd" / "nvidia" from the devices' names, None when unknown or mixed."""
    found = {"amd" if AMD.search(n) else "nvidia" if NVIDIA.search(n) else None for n in device_names if n}
    found.discard(None)
    return found.pop() if len(found) == 1 else None


def findings_changes(
    base: Advice | None, new: Advice | None, vendors: tuple[str | None, str | None] = (None, None)
) -> dict[str, list[dict[str, Any]]]:
    """fixed: a finding of BASE whose rule no longer fires on NEW; new: the reverse; remaining: a finding on
    either side whose rule fires on both. A rule that still fires but is withheld on one side (its time
    explained by another finding there) is remaining, with a saving of 0 on that side. not_comparable: what
    would be fixed or new but cannot be compared: the rule was not evaluated on the other side, or the two
    GPUs' vendors name the rule's events differently."""
    before = _all(base)
    after = _all(new)
    shown = [f.id for f in base.findings] if base else []
    shown += [f.id for f in new.findings if f.id not in shown] if new else []
    fixed = [i for i in shown if i in before and i not in after]
    added = [i for i in shown if i in after and i not in before]
    why = {i: _incomparable(i, base, new, vendors) for i in (*fixed, *added)}
    return {
        "fixed": [_brief(before[i]) for i in fixed if not why[i]],
        "new": [_brief(after[i]) for i in added if not why[i]],
        "remaining": [
            {
                "id": i,
                "severity_before": before[i].severity,
                "severity_after": after[i].severity,
                "time_at_stake_before_us": round(before[i].time_at_stake_ns / 1e3, 3),
                "time_at_stake_after_us": round(after[i].time_at_stake_ns / 1e3, 3),
                "predicted_saving_before_us": round((before[i].predicted_saving_ns or 0) / 1e3, 3),
                "predicted_saving_after_us": round((after[i].predicted_saving_ns or 0) / 1e3, 3),
            }
            for i in shown
            if i in before and i in after
        ],
        "not_comparable": [{"id": i, "reason": why[i]} for i in (*fixed, *added) if why[i]],
    }


def _incomparable(
    rule: str, base: Advice | None, new: Advice | None, vendors: tuple[str | None, str | None]
) -> str:
    for side, advice in (("BASE", base), ("NEW", new)):
        skipped = {o.id: o.reason for o in advice.not_evaluated} if advice else {}
        if rule in skipped:
            return f"not evaluated on {side}: {skipped[rule]}"
    a, b = vendors
    if rule in NAME_DEPENDENT and a and b and a != b:
        return f"{a.upper()} and {b.upper()} GPUs name these events differently"
    return ""


def _all(advice: Advice | None) -> dict[str, Finding]:
    """Every rule that fired on a trace, by id: its findings and those withheld."""
    return {f.id: f for f in (*advice.findings, *advice.withheld)} if advice else {}


def _line(items: list[dict[str, Any]]) -> str:
    if items and "reason" in items[0]:
        return "; ".join(f"{f['id']} ({f['reason']})" for f in items)
    return (
        ", ".join(
            f"{f['id']} ({f['severity']}, saving {f['predicted_saving_us'] / 1e3:,.3f} ms)" for f in items
        )
        or "none"
    )


def with_findings(doc: Document, changes: dict[str, list[dict[str, Any]]]) -> Document:
    """`doc` (the diff document) with the findings' changes as its first lines and as JSON field `findings`."""
    facts = (
        ("findings fixed", _line(changes["fixed"])),
        ("findings new", _line(changes["new"])),
        *(
            [("findings not comparable", _line(changes["not_comparable"]))]
            if changes.get("not_comparable")
            else []
        ),
        (
            "findings remaining",
            ", ".join(
                f"{f['id']} ({f['severity_before']} -> {f['severity_after']})" for f in changes["remaining"]
            )
            or "none",
        ),
    )
    return replace(doc, facts=facts + doc.facts, data={**doc.data, "findings": changes})
