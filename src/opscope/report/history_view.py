"""History results -> `Document`s (and the stable `opscope.history.<command>/1` JSON payloads).

Metric values are stored in microseconds (`*_us`), shares and utilisation as fractions; tables show them through
the column kinds of `report.document` (US takes nanoseconds, hence the x1000).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from opscope.report.document import FLOAT, INT, MS, NAME, PCT, TEXT, US, Column, Document, Table

if TYPE_CHECKING:
    import polars as pl

    from opscope.history.api import Added, CheckResult
    from opscope.history.policy import Finding
    from opscope.history.predictions import Record
    from opscope.history.runs import Run

BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float | None]) -> str:
    """One block character per value, scaled from the series' minimum to its maximum; a gap (' ') for a value
    that is missing (None) or not finite (also `opscope drift`'s marks per window)."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return ""
    low, high = min(finite), max(finite)
    span = high - low
    return "".join(
        BARS[0 if span == 0 else min(int((v - low) / span * len(BARS)), len(BARS) - 1)]
        if v is not None and math.isfinite(v)
        else " "
        for v in values
    )


def metric_kind(metric: str) -> str:
    return (
        US
        if metric.endswith("_us")
        else PCT
        if metric in ("share", "utilization")
        else INT
        if metric in ("calls", "gpu_calls", "steps")
        else FLOAT
    )


def cell(metric: str, value: float | None) -> float | None:
    """The value as its column kind expects it (US: nanoseconds)."""
    return None if value is None else value * 1e3 if metric.endswith("_us") else value


def short_commit(run: Run) -> str:
    return (run.commit or "")[:12]


def run_ref(run: Run) -> dict[str, Any]:
    return {"id": run.id, "added_at": run.added_at, "commit": run.commit, "tags": dict(run.tags)}


def added_document(db: str, added: Sequence[Added]) -> Document:
    data = {
        "schema": "opscope.history.add/1",
        "db": db,
        "runs": [{"run_id": a.run_id, "sha256": a.sha256, "path": a.path, "new": a.new} for a in added],
    }
    rows = tuple(
        {"run": a.run_id, "state": "added" if a.new else "already present", "path": a.path} for a in added
    )
    table = Table(
        "added",
        "",
        (Column("run", "Run", INT), Column("state", "", TEXT), Column("path", "Trace", NAME)),
        rows,
    )
    return Document(title="opscope history add", data=data, facts=(("database", db),), tables=(table,))


def runs_document(db: str, runs: Sequence[Run]) -> Document:
    data = {"schema": "opscope.history.list/1", "db": db, "runs": [r.to_dict() for r in runs]}
    columns = (
        Column("id", "Run", INT),
        Column("added_at", "Added (UTC)", TEXT),
        Column("commit", "Commit", TEXT),
        Column("branch", "Branch", TEXT),
        Column("gpu", "GPU", TEXT),
        Column("tags", "Tags", TEXT),
        Column("path", "Trace", NAME),
    )
    rows = tuple(
        {
            "id": r.id,
            "added_at": r.added_at[:19].replace("T", " "),
            "commit": short_commit(r),
            "branch": r.tags.get("branch", ""),
            "gpu": f"{r.gpu_count}x {r.gpu_name}" if r.gpu_name else "",
            "format": r.source_format or "",
            "path": r.path or "",
            "tags": " ".join(
                f"{k}={v}" for k, v in sorted(r.tags.items()) if k not in ("commit", "branch", "dirty")
            ),
        }
        for r in runs
    )
    return Document(
        title="opscope history list",
        data=data,
        facts=(("database", db), ("runs", str(len(runs)))),
        tables=(Table("runs", "", columns, rows),),
    )


def series_document(db: str, scope: str, metric: str, frame: pl.DataFrame) -> Document:
    series = []
    points_rows: list[dict[str, Any]] = []
    spark_rows: list[dict[str, Any]] = []
    for (key,), part in frame.group_by(["key"], maintain_order=True):
        points = [
            {"run_id": r["run_id"], "added_at": r["added_at"], "commit": r["commit"], "value": r["value"]}
            for r in part.iter_rows(named=True)
        ]
        name = str(part["name"][0])
        series.append({"key": key, "name": name, "points": points})
        values = [float(p["value"]) for p in points]
        spark_rows.append(
            {
                "name": name,
                "runs": len(points),
                "first": cell(metric, values[0]),
                "last": cell(metric, values[-1]),
                "trend": sparkline(values),
            }
        )
        points_rows += [
            {
                "name": name,
                "run": p["run_id"],
                "added_at": str(p["added_at"])[:19].replace("T", " "),
                "commit": (p["commit"] or "")[:12],
                "value": cell(metric, p["value"]),
            }
            for p in points
        ]
    data = {"schema": "opscope.history.show/1", "db": db, "scope": scope, "metric": metric, "series": series}
    kind = metric_kind(metric)
    points_table = Table(
        "points",
        "Series",
        (
            Column("run", "Run", INT),
            Column("added_at", "Added (UTC)", TEXT),
            Column("commit", "Commit", TEXT),
            Column("value", metric, kind),
            Column("name", scope, NAME),
        ),
        tuple(points_rows),
    )
    trend_table = Table(
        "trend",
        "Trend",
        (
            Column("runs", "Runs", INT),
            Column("first", "First", kind),
            Column("last", "Last", kind),
            Column("trend", "Sparkline", TEXT),
            Column("name", scope, NAME),
        ),
        tuple(spark_rows),
    )
    notes = () if series else (f"no {scope} series matched (metric {metric})",)
    return Document(
        title=f"opscope history show: {scope} {metric}",
        data=data,
        facts=(("database", db), ("series", str(len(series)))),
        tables=(points_table, trend_table),
        notes=notes,
    )


def _finding(f: Finding, names: dict[str, str]) -> dict[str, Any]:
    return {
        "scope": f.scope,
        "key": f.key,
        "name": names.get(f.key, f.key),
        "metric": f.metric,
        "baseline": f.baseline,
        "values": list(f.values),
        "ratio": f.ratio if math.isfinite(f.ratio) else None,
    }


def check_data(result: CheckResult, names: dict[str, str], db: str) -> dict[str, Any]:
    o = result.options
    return {
        "schema": "opscope.history.check/1",
        "db": db,
        "status": result.status,
        "reason": result.reason,
        "policy": o.policy,
        "threshold": o.threshold,
        "z": o.z,
        "recent": o.recent,
        "baseline": o.baseline,
        "match_tags": list(o.match_tags),
        "scopes": list(o.scopes),
        "min_share": o.min_share,
        "recent_runs": [run_ref(r) for r in result.recent_runs],
        "baseline_runs": [run_ref(r) for r in result.baseline_runs],
        "regressions": [_finding(f, names) for f in result.regressions],
        "improvements": [_finding(f, names) for f in result.improvements],
    }


def _findings_table(name: str, title: str, found: Sequence[Finding], names: dict[str, str]) -> Table:
    rows = tuple(
        {
            "scope": f.scope,
            "metric": f.metric,
            "baseline": f.baseline,
            "values": " ".join(f"{v:,.3f}" for v in f.values),
            "ratio": f.ratio,
            "name": names.get(f.key, f.key),
        }
        for f in found
    )
    return Table(
        name,
        title,
        (
            Column("scope", "Scope", TEXT),
            Column("metric", "Metric", TEXT),
            Column("baseline", "Baseline", FLOAT),
            Column("values", "Recent", TEXT),
            Column("ratio", "Ratio", FLOAT),
            Column("name", "Key", NAME),
        ),
        rows,
    )


def predictions_data(found: Sequence[Record]) -> list[dict[str, Any]]:
    """Each rule's record (history/predictions.py): its fixes, each with the run that fixed it, the run whose
    prediction it was, the predicted and realised saving per step (us) and their ratio."""
    return [
        {
            "rule": r.rule,
            "fixes": len(r.pairs),
            "ratio_min": min(r.ratios) if r.ratios else None,
            "ratio_max": max(r.ratios) if r.ratios else None,
            "text": r.text(),
            "pairs": [
                {
                    "run_id": p.run_id,
                    "from_run": p.from_run,
                    "predicted_per_step_us": round(p.predicted_per_step_us, 3),
                    "realised_per_step_us": round(p.realised_per_step_us, 3),
                    "ratio": None if p.ratio is None else round(p.ratio, 4),
                }
                for p in r.pairs
            ],
        }
        for r in found
    ]


def _predictions_table(found: Sequence[Record]) -> Table:
    rows = tuple(
        {
            "rule": r.rule,
            "run": p.run_id,
            "from_run": p.from_run,
            "predicted": p.predicted_per_step_us * 1e3,
            "realised": p.realised_per_step_us * 1e3,
            "ratio": p.ratio,
        }
        for r in found
        for p in r.pairs
    )
    return Table(
        "predictions",
        "Predicted against realised, per step (each fix: the run that fixed it against the run before)",
        (
            Column("rule", "Rule", TEXT),
            Column("from_run", "Predicted in run", INT),
            Column("run", "Fixed in run", INT),
            Column("predicted", "Predicted ms", MS),
            Column("realised", "Realised ms", MS),
            Column("ratio", "Ratio", FLOAT),
        ),
        rows,
    )


def predictions_document(db: str, found: Sequence[Record]) -> Document:
    data = {"schema": "opscope.history.predictions/1", "db": db, "rules": predictions_data(found)}
    notes = (
        ()
        if found
        else ("no fix recorded yet: a run that no longer has a finding the run added before it showed",)
    )
    return Document(
        title="opscope history show --predictions",
        data=data,
        facts=(("database", db), *(("record", r.text()) for r in found)),
        tables=(_predictions_table(found),),
        notes=notes,
    )


def check_document(
    result: CheckResult, names: dict[str, str], db: str, predictions: Sequence[Record] = ()
) -> Document:
    o = result.options
    rule = (
        f"every recent run worse than {o.threshold:g} x the baseline median"
        if o.policy == "threshold"
        else f"every recent run more than {o.z:g} baseline standard deviations worse than the baseline mean"
    )
    facts = (
        ("database", db),
        ("status", result.status.replace("_", " ")),
        ("policy", f"{o.policy}: {rule}"),
        ("recent runs", ", ".join(str(r.id) for r in result.recent_runs) or "—"),
        ("baseline runs", ", ".join(str(r.id) for r in result.baseline_runs) or "—"),
        # each rule's record of predictions against what fixes realised (issue 53)
        *(("predictions", r.text()) for r in predictions),
    )
    notes = (f"insufficient data: {result.reason}",) if result.reason else ()
    return Document(
        title="opscope history check",
        data={**check_data(result, names, db), "predictions": predictions_data(predictions)},
        facts=facts,
        tables=tuple(
            t
            for t in (
                _findings_table("regressions", "Regressions", result.regressions, names),
                _findings_table("improvements", "Improvements", result.improvements, names),
            )
            if t.rows or t.name == "regressions"  # the first table (CSV's) is there even when empty
        ),
        notes=notes,
    )


def pruned_document(db: str, removed: Sequence[int], kept: int) -> Document:
    data = {"schema": "opscope.history.prune/1", "db": db, "removed": list(removed), "kept": kept}
    return Document(
        title="opscope history prune",
        data=data,
        facts=(("database", db), ("removed runs", str(len(removed))), ("kept runs", str(kept))),
    )


def written_document(kind: str, db: str, path: str, facts: dict[str, Any]) -> Document:
    """What `export` / `report` wrote (JSON `opscope.history.<kind>/1`)."""
    data = {"schema": f"opscope.history.{kind}/1", "db": db, "path": path, **facts}
    return Document(
        title=f"opscope history {kind}",
        data=data,
        facts=(
            ("database", db),
            ("written", path),
            *((k.replace("_", " "), str(v)) for k, v in facts.items()),
        ),
    )
