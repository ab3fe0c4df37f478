"""What each saving model's predictions realised on measured before/after pairs (issue 53 item 4): the table
`bench/bench_predictions.py --write-calibration` writes (opscope/data/calibration.json: per model, the pairs
and the range of realised / predicted), read here so that a finding whose model has a record states its range
("saves 280-368 ms; fixes of this kind realised 0.79-1.04x of the model on 3 pairs"). Only pairs of one job
before and after its change count (docs/advice.md, "Predicted against realised")."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources

from opscope.analysis.findings import ON_PATH_SUFFIX


@dataclass(frozen=True)
class ModelRecord:
    model: str  # the saving model's name (without ", critical path")
    pairs: int
    ratio_min: float
    ratio_max: float
    source: str  # where the pairs were measured

    def text(self) -> str:
        span = (
            f"{self.ratio_min:.2f}x"
            if abs(self.ratio_max - self.ratio_min) < 0.005
            else f"{self.ratio_min:.2f}-{self.ratio_max:.2f}x"
        )
        return f"fixes of this kind realised {span} of the model on {self.pairs} pair{'s' if self.pairs != 1 else ''}"


@functools.cache
def records() -> dict[str, ModelRecord]:
    """The shipped table, by model name (empty when the file is absent or not of this form)."""
    try:
        text = resources.files("opscope.data").joinpath("calibration.json").read_text(encoding="utf-8")
        data = json.loads(text)
        return {
            str(m["model"]): ModelRecord(
                model=str(m["model"]),
                pairs=int(m["pairs"]),
                ratio_min=float(m["ratio_min"]),
                ratio_max=float(m["ratio_max"]),
                source=str(data.get("source", "")),
            )
            for m in data.get("models", [])
            if int(m["pairs"]) > 0
        }
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def record_for(saving_model: str) -> ModelRecord | None:
    """The record of a finding's saving model (its name with or without the critical-path suffix)."""
    base = saving_model.removesuffix(ON_PATH_SUFFIX)
    return records().get(base)


__all__ = ["ModelRecord", "record_for", "records"]
