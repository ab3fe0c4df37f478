"""The advice findings of one trace for the HTML report's first section (the same rules and JSON fields as
`opscope advise`, docs/advice.md); the findings come computed in the bundle (analysis/bundle.py)."""

from __future__ import annotations

from typing import Any

from opscope.analysis.findings import Advice
from opscope.report.advice_view import findings_data


def report_findings(advice: Advice | None) -> list[dict[str, Any]]:
    return findings_data(advice)
