"""The data of the history HTML report (`opscope history report`): runs, trend series, the check's findings.

Plain data only; `report.html.render_html(data, title, "history")` turns it into the page (assets/history.js draws
one ECharts line chart per trend, points carry their run id and commit, regressed series are marked).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from opscope.report.history_view import check_data

if TYPE_CHECKING:
    import polars as pl

    from opscope.history.api import CheckResult
    from opscope.history.runs import Run


def history_report_data(
    db: str,
    runs: Sequence[Run],
    charts: Sequence[tuple[str, str, str, pl.DataFrame]],
    result: CheckResult,
    names: dict[str, str],
) -> dict[str, Any]:
    """`charts`: (title, scope, metric, series frame from `History.series`) in page order."""
    flagged = {(f.scope, f.key, f.metric): "regression" for f in result.regressions}
    flagged |= {(f.scope, f.key, f.metric): "improvement" for f in result.improvements}
    recent = [r.id for r in result.recent_runs]
    out_charts = []
    for title, scope, metric, frame in charts:
        series = []
        for (key,), part in frame.group_by(["key"], maintain_order=True):
            name = metric if scope == "global" else str(part["name"][0])
            series.append(
                {
                    "key": key,
                    "name": name,
                    "state": flagged.get((scope, key, metric)),
                    "points": [[int(r["run_id"]), float(r["value"])] for r in part.iter_rows(named=True)],
                }
            )
        if series:
            out_charts.append({"title": title, "scope": scope, "metric": metric, "series": series})
    return {
        "schema": "opscope.history.report/1",
        "kind": "history",
        "db": db,
        "runs": [
            {
                "id": r.id,
                "added_at": r.added_at,
                "commit": r.commit,
                "branch": r.tags.get("branch"),
                "gpu": r.gpu_name,
                "path": r.path,
                "tags": " ".join(
                    f"{k}={v}" for k, v in sorted(r.tags.items()) if k not in ("commit", "branch", "dirty")
                ),
            }
            for r in runs
        ],
        "recent_runs": recent,
        "charts": out_charts,
        "check": check_data(result, names, db),
    }
