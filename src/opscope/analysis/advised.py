"""`opscope.advise(trace)`'s result in a notebook: the `Analysis` that `advise` computes (the analyses and the
rules' findings), whose main table is the findings, largest saving first, and whose `str()` is `opscope
advise`'s terminal table (not `analyze`'s). The rules and their findings stay in `analysis/rules/` and
`analysis/findings.py`; this module only says what the advise view's table is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opscope.analysis.findings import Advice
from opscope.analysis.overview import Analysis
from opscope.tables import Tabular


@dataclass(frozen=True)
class Advised(Tabular):
    analysis: Analysis  # `advise(trace)`: every analysis of `analyze`, with the findings

    @property
    def advice(self) -> Advice:
        return self.analysis.advice or Advice(findings=(), rules_checked=())

    @property
    def path(self) -> str:
        return self.analysis.path

    def _table_rows(self) -> list[dict[str, Any]]:
        """One row per finding, largest predicted saving first (`.advice.findings` for the evidence)."""
        return [
            {
                "id": f.id,
                "severity": f.severity,
                "title": f.title,
                "saving_ns": f.predicted_saving_ns,
                "saving_share": f.saving_share,
                "time_at_stake_ns": f.time_at_stake_ns,
                "saving_model": f.saving_model,
                "saving_basis": f.saving_basis,
                "source": f.source,
                "advice": f.advice,
            }
            for f in self.advice.findings
        ]

    def _table_title(self) -> str:
        return f"Advice: {self.path} ({len(self.advice.findings)} findings)"
