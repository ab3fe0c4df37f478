"""The findings section of the trace report: every finding as a card (severity, saving, title, advice) with its
evidence as a short readable table (the terminal's text: report/evidence_text.py; names shortened, the full
name on hover), and for each evidence item what the timeline can show: a time span (relative to the timeline's
`t0_ns`) or the string id of a kernel / copy name (the page zooms to its longest event). Packs computed
results; computes nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opscope.analysis.findings import EXPLAINED, Advice, Finding
from opscope.report.advice_view import capture_data
from opscope.report.evidence_text import field

NAME_KEYS = ("kernel", "copy")  # evidence keys whose value is a GPU event name on the timeline


def _item(item: dict[str, Any], origin_ns: int, strings: Callable[[str | None], int]) -> dict[str, Any]:
    cells = []
    for key, value in item.items():
        label, text = field(key, value, origin_ns)
        full = value if isinstance(value, str) and value != text else None
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            full = "\n".join(value)
        cells.append({"label": label, "text": text, "full": full})
    span = None
    start, length = item.get("start_us"), item.get("length_us")
    if isinstance(start, (int, float)) and isinstance(length, (int, float)):
        lo = round(start * 1e3) - origin_ns
        span = [lo, lo + round(length * 1e3)]
    names = [item[k] for k in NAME_KEYS if isinstance(item.get(k), str)]
    return {"cells": cells, "span": span, "name": strings(names[0]) if names else None}


def _finding(f: Finding, origin_ns: int, strings: Callable[[str | None], int]) -> dict[str, Any]:
    seen: set[str] = set()
    evidence = []
    for item in f.evidence:
        packed = _item(item, origin_ns, strings)
        key = repr([(c["label"], c["text"]) for c in packed["cells"]])
        if key not in seen:  # each item once
            seen.add(key)
            evidence.append(packed)
    return {
        "id": f.id,
        "severity": f.severity,
        "title": f.title,
        "saving_us": round((f.predicted_saving_ns or 0) / 1e3, 3),
        "saving_share": round(f.saving_share, 6),
        "saving_model": f.saving_model,
        "saving_basis": f.saving_basis,
        "time_at_stake_us": round(f.time_at_stake_ns / 1e3, 3),
        "advice": f.advice,
        "source": f.source,
        "shared_with": list(f.shared_with),
        "evidence": evidence,
    }


def findings_panel(
    advice: Advice | None, origin_ns: int, strings: Callable[[str | None], int]
) -> dict[str, Any]:
    if advice is None:
        return {"rows": [], "window_us": 0, "combined_saving_us": 0, "withheld": [], "not_evaluated": []}
    why = {o.id: o for o in advice.outcomes}
    return {
        "rows": [_finding(f, origin_ns, strings) for f in advice.findings],
        "window_us": round(advice.window_ns / 1e3, 3),
        "combined_saving_us": round(advice.combined_saving_ns / 1e3, 3),
        "withheld": [
            {
                "id": f.id,
                "why": why[f.id].reason if f.id in why and why[f.id].status == EXPLAINED else "",
                **_finding(f, origin_ns, strings),
            }
            for f in advice.withheld
        ],
        "not_evaluated": [{"id": o.id, "reason": o.reason} for o in advice.not_evaluated],
        "capture": capture_data(advice),
    }
