"""The advice findings of one trace for the HTML report's first section (the same rules and JSON fields as
`opscope advise`, docs/advice.md)."""

from __future__ import annotations

from typing import Any

from opscope.analysis.attribution.linking import Linkage
from opscope.analysis.overview import AnalyzeOptions, analyze
from opscope.analysis.timeline.activity import Activity
from opscope.model.trace import Trace
from opscope.report.advice_view import findings_data


def report_findings(
    trace: Trace, linkage: Linkage, devices: tuple[int, ...] | None, streams: tuple[int, ...] | None,
    activity: Activity | None = None,
) -> list[dict[str, Any]]:
    """`activity`: the report's `gpu_activity` of the same devices and streams, reused rather than recomputed."""
    result = analyze(trace, AnalyzeOptions(devices=devices, streams=streams), linkage, activity)
    return findings_data(result.advice)
