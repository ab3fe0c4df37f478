"""The advice findings of two traces compared, for `opscope diff`: which findings the change fixed, which it
introduced, and which remain (with their time at stake before and after), and for each fixed or reduced one
the saving BASE predicted against the change NEW measured (`realised`, analysis/compare/realised.py). Matched by
rule id (one finding per rule and trace, docs/advice.md)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from opscope.analysis.compare.realised import Realised
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


def realised_data(r: Realised) -> dict[str, Any]:
    """One prediction against its realisation (analysis/compare/realised.py), times in microseconds."""

    def us(ns: int | None) -> float | None:
        return None if ns is None else round(ns / 1e3, 3)

    return {
        "status": r.status,
        "per_step": r.per_step,
        "steps_before": r.steps_before,
        "steps_after": r.steps_after,
        "predicted_us": us(r.predicted_ns),
        "predicted_per_step_us": us(r.predicted_per_step_ns),
        "realised_per_step_us": us(r.realised_per_step_ns),
        "realised_us": us(r.realised_ns),
        "ratio": None if r.ratio is None else round(r.ratio, 4),
        "saving_model": r.saving_model,
        "also_changed": list(r.also_changed),
    }


def findings_changes(
    base: Advice | None,
    new: Advice | None,
    vendors: tuple[str | None, str | None] = (None, None),
    checked: Sequence[Realised] = (),
) -> dict[str, list[dict[str, Any]]]:
    """fixed: a finding of BASE whose rule no longer fires on NEW; new: the reverse; remaining: a finding on
    either side whose rule fires on both. A rule that still fires but is withheld on one side (its time
    explained by another finding there) is remaining, with a saving of 0 on that side. not_comparable: what
    would be fixed or new but cannot be compared: the rule was not evaluated on the other side, or the two
    GPUs' vendors name the rule's events differently."""
    before = base.fired if base else {}
    after = new.fired if new else {}
    shown = [f.id for f in base.findings] if base else []
    shown += [f.id for f in new.findings if f.id not in shown] if new else []
    fixed = [i for i in shown if i in before and i not in after]
    added = [i for i in shown if i in after and i not in before]
    why = {i: _incomparable(i, base, new, vendors) for i in (*fixed, *added)}
    real = {r.id: realised_data(r) for r in checked}
    return {
        "fixed": [{**_brief(before[i]), "realised": real.get(i)} for i in fixed if not why[i]],
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
                "realised": real.get(i),
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


def realised_text(item: dict[str, Any]) -> str:
    """ "dataloader_bound: predicted 58.985 ms per step, realised 46.582 ms (0.79x); also changed: ..." """
    r = item["realised"]
    unit = " per step" if r["per_step"] else " over the window"
    predicted = r["predicted_per_step_us"] if r["per_step"] else r["predicted_us"]
    got = r["realised_per_step_us"] if r["per_step"] else r["realised_us"]
    ratio = f" ({r['ratio']:.2f}x)" if r["ratio"] is not None else ""
    reduced = " (reduced, not fixed)" if r["status"] == "reduced" else ""
    also = f"; also changed: {'; '.join(r['also_changed'])}" if r["also_changed"] else ""
    return (
        f"{item['id']}{reduced}: predicted {predicted / 1e3:,.3f} ms{unit}, realised {got / 1e3:,.3f} ms"
        f"{ratio}{also}"
    )


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
    checked = [f for f in (*changes["fixed"], *changes["remaining"]) if f.get("realised")]
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
        *(("predicted vs realised", realised_text(f)) for f in checked),
    )
    return replace(doc, facts=facts + doc.facts, data={**doc.data, "findings": changes})
