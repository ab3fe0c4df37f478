"""Each rule's record of predictions against realisations, kept in the history (issue 53, docs/history.md
"Predictions"): a run stores its findings' predicted savings (scope `finding`, `metrics.finding_rows`); when a
run is added whose advice no longer has a finding the run before it showed (and whose rule was evaluated), the
pair is stored with the new run (scope `realised`): the prediction per step of the run before, the fall of the
mean step time between the two, their ratio, and the run it came from. `history show --predictions` and
`history check` report each rule's record ("dataloader_bound: 3 fixes, realised 0.45-0.60x of predicted").

Only runs with ProfilerStep markers on both sides are paired (a per-step figure is what a fix changes); the
run before is the one added just before (add a job's runs in order: before, then after the change).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Row = tuple[str, str, str, float]  # (scope, key, metric, value)


@dataclass(frozen=True)
class Pair:
    rule: str
    run_id: int  # the run that fixed it
    from_run: int  # the run whose prediction it was
    predicted_per_step_us: float
    realised_per_step_us: float
    ratio: float | None


@dataclass(frozen=True)
class Record:
    """One rule's fixes so far, in the order they were added."""

    rule: str
    pairs: tuple[Pair, ...]

    @property
    def ratios(self) -> list[float]:
        return [p.ratio for p in self.pairs if p.ratio is not None]

    def text(self) -> str:
        fixes = f"{len(self.pairs)} fix{'es' if len(self.pairs) != 1 else ''}"
        ratios = self.ratios
        if not ratios:
            return f"{self.rule}: {fixes}, nothing predicted to compare"
        lo, hi = min(ratios), max(ratios)
        span = f"{lo:.2f}x" if abs(hi - lo) < 0.005 else f"{lo:.2f}-{hi:.2f}x"
        return f"{self.rule}: {fixes}, realised {span} of predicted"


def _by_key(rows: Sequence[Row], scope: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for s, key, metric, value in rows:
        if s == scope:
            out.setdefault(key, {})[metric] = value
    return out


def _global(rows: Sequence[Row]) -> dict[str, float]:
    return {metric: value for s, key, metric, value in rows if s == "global" and key == "run"}


def realised_rows(before: Sequence[Row], before_id: int, after: Sequence[Row]) -> list[Row]:
    """The `realised` rows of the run whose figures are `after`, against the run `before_id` (figures
    `before`): one set per finding `before` showed that `after` no longer has (module doc)."""
    g0, g1 = _global(before), _global(after)
    steps0, steps1 = g0.get("steps", 0.0), g1.get("steps", 0.0)
    mean0, mean1 = g0.get("step_time_mean_us"), g1.get("step_time_mean_us")
    if steps0 <= 0 or steps1 <= 0 or mean0 is None or mean1 is None:
        return []
    found0, found1 = _by_key(before, "finding"), _by_key(after, "finding")
    out: list[Row] = []
    for rule, figures in sorted(found0.items()):
        if figures.get("shown") != 1.0 or rule in found1:  # still fired (shown, withheld or not evaluated)
            continue
        predicted = figures.get("predicted_saving_us", 0.0) / steps0
        realised = mean0 - mean1
        out += [
            ("realised", rule, "predicted_per_step_us", predicted),
            ("realised", rule, "realised_per_step_us", realised),
            ("realised", rule, "from_run", float(before_id)),
        ]
        if predicted > 0:
            out.append(("realised", rule, "ratio", realised / predicted))
    return out


def records(rows: Sequence[tuple[Any, ...]]) -> list[Record]:
    """Each rule's record from the stored `realised` rows (run_id, key, metric, value), rules in name order."""
    pairs: dict[tuple[str, int], dict[str, float]] = {}
    for run_id, rule, metric, value in rows:
        pairs.setdefault((str(rule), int(run_id)), {})[str(metric)] = float(value)
    by_rule: dict[str, list[Pair]] = {}
    for (rule, run_id), figures in sorted(pairs.items(), key=lambda item: (item[0][0], item[0][1])):
        by_rule.setdefault(rule, []).append(
            Pair(
                rule=rule,
                run_id=run_id,
                from_run=int(figures.get("from_run", 0)),
                predicted_per_step_us=figures.get("predicted_per_step_us", 0.0),
                realised_per_step_us=figures.get("realised_per_step_us", 0.0),
                ratio=figures.get("ratio"),
            )
        )
    return [Record(rule, tuple(found)) for rule, found in sorted(by_rule.items())]


__all__ = ["Pair", "Record", "realised_rows", "records"]
