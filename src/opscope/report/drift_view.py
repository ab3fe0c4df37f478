"""`Drift` -> `Document`: the `opscope.drift/1` payload, the changes and a sparkline per figure (docs/drift.md)."""

from __future__ import annotations

from typing import Any

from opscope.analysis.compare.drift import Change, Drift, Series
from opscope.report.document import TEXT, Column, Document, Table
from opscope.report.history_view import sparkline

SCHEMA = "opscope.drift/1"


def _num(value: float, unit: str) -> str:
    if unit == "%":
        return f"{value:,.1f}%"
    digits = 3 if abs(value) < 10 else 1
    return f"{value:,.{digits}f} {unit}".rstrip()


def _signed(value: float) -> str:
    digits = 3 if abs(value) < 10 else 1
    return f"{value:+,.{digits}f}"


def _change_data(c: Change) -> dict[str, Any]:
    return {
        "figure": c.figure.id,
        "label": c.figure.label,
        "direction": c.direction,
        "worse": c.worse,
        "baseline": c.baseline,
        "now": c.now,
        "value_unit": c.figure.unit,
        "noise": c.noise,
        "onset_window": c.onset_window,
        "onset_step": c.onset_step,
        "model": c.model,
        "rate": c.rate,
        "unit": c.unit,
        "rate_per_window": c.rate_per_window,
        "carried_by": [
            {
                "kind": k.kind,
                "name": k.name,
                "before": k.before,
                "after": k.after,
                "change": k.change,
                "unit": k.unit,
            }
            for k in c.carried_by
        ],
        "note": c.note,
    }


def _series_data(s: Series) -> dict[str, Any]:
    return {
        "figure": s.figure.id,
        "label": s.figure.label,
        "unit": s.figure.unit,
        "values": list(s.values),
        "moved": s.moved,
    }


def drift_data(result: Drift, source: dict[str, Any]) -> dict[str, Any]:
    """`source`: where the windows came from (sampling_run, folder, history, overhead)."""
    return {
        "schema": SCHEMA,
        **source,
        "status": result.status,
        "reason": result.reason,
        "policy": {
            "baseline_windows": result.baseline_windows,
            "recent_windows": result.recent_windows,
            "threshold": result.threshold,
            "z": result.z,
        },
        "windows": [
            {
                "index": w.index,
                "first_step": w.first_step,
                "last_step": w.last_step,
                "started_at": w.started_at,
                "elapsed_s": w.elapsed_s,
                "trace": w.trace,
                "history_run": w.history_run,
            }
            for w in result.windows
        ],
        "windows_left_out": list(result.left_out),
        "changes": [_change_data(c) for c in result.changes],
        "figures": [_series_data(s) for s in result.series],
    }


def _carried(c: Change) -> str:
    if not c.carried_by:
        return "—"
    return "; ".join(f"{k.name} {_signed(k.change)} {k.unit}" for k in c.carried_by)


def drift_document(result: Drift, source: dict[str, Any]) -> Document:
    windows = result.windows
    steps = (
        f"steps {windows[0].first_step:,}-{windows[-1].last_step:,}"
        if windows and windows[0].first_step is not None and windows[-1].last_step is not None
        else "no step numbers"
    )
    verdict = {
        "ok": "nothing moved beyond its noise",
        "drift": f"{len(result.changes)} figure(s) moved",
        "insufficient_data": f"insufficient data: {result.reason}",
    }[result.status]
    facts: list[tuple[str, str]] = [
        ("sampling run", str(source.get("sampling_run") or "—")),
        ("windows", f"{len(windows):,} judged ({steps})"),
        ("verdict", verdict),
        (
            "rule",
            f"moved: every one of the last {result.recent_windows} windows beyond the median of the first "
            f"{result.baseline_windows} by more than {result.z:g} x their noise and {(result.threshold - 1) * 100:.0f}%",
        ),
    ]
    if result.left_out:
        facts.append(
            (
                "left out",
                "windows " + ", ".join(map(str, result.left_out)) + " (the first: warm-up; any cut short)",
            )
        )
    cost = source.get("overhead") or {}
    if cost.get("traced_step_overhead_median") is not None:
        facts.append(
            (
                "sampling cost",
                f"traced steps {cost['traced_step_overhead_median'] * 100:+.1f}% against untraced ones (median "
                f"over windows); {cost['export_s_total']:,.2f} s writing and summarising windows",
            )
        )
    changes = Table(
        "changes",
        "What moved, from when, how fast",
        (
            Column("figure", "Figure", TEXT),
            Column("baseline", "Baseline", TEXT),
            Column("now", "Now", TEXT),
            Column("onset", "Onset", TEXT),
            Column("rate", "Rate", TEXT, wrap=True),
            Column("carried", "Carried by", TEXT, wrap=True),
        ),
        tuple(
            {
                "figure": ("▲ " if c.worse else "▼ ") + c.figure.label,
                "baseline": _num(c.baseline, c.figure.unit),
                "now": _num(c.now, c.figure.unit),
                "onset": f"window {c.onset_window}"
                + (f" (step {c.onset_step:,})" if c.onset_step is not None else ""),
                "rate": f"{_signed(c.rate)} {c.unit}",
                "carried": _carried(c),
            }
            for c in result.changes
        ),
        hide_when_empty=True,
    )
    figures = Table(
        "figures",
        "Every figure watched, one mark per window",
        (
            Column("figure", "Figure", TEXT),
            Column("first", "First", TEXT),
            Column("last", "Last", TEXT),
            Column("trend", "Windows", TEXT),
            Column("moved", "Moved", TEXT),
        ),
        tuple(
            {
                "figure": s.figure.label,
                "first": _num(next(v for v in s.values if v is not None), s.figure.unit),
                "last": _num(next(v for v in reversed(s.values) if v is not None), s.figure.unit),
                "trend": sparkline(s.values),
                "moved": "yes" if s.moved else "",
            }
            for s in result.series
        ),
    )
    notes = tuple(dict.fromkeys(f"{c.figure.label}: {c.note}" for c in result.changes if c.note))
    return Document(
        title="What drifted over the run",
        data=drift_data(result, source),
        facts=tuple(facts),
        tables=(changes, figures),
        notes=notes,
    )
