"""The Nsight Compute metric table (opscope/data/ncu_metrics.json) as lookups for `ingest/ncu.py`: which metric
ids fill each field of `model.ncu.FIELDS`, which metric id a display name of the details page shows, and how a
unit converts to its base unit. The table is data, with the ncu versions it was checked against; this module
only reads it."""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from importlib import resources

# An ncu metric id: `unit__counter.rollup...` (lower case, a double underscore after the unit).
METRIC_ID = re.compile(r"^[a-z0-9]+__[A-Za-z0-9_.]+$")
_TIME_SECONDS = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0}


@dataclass(frozen=True)
class MetricTable:
    fields: dict[str, tuple[str, ...]]  # field -> metric ids, first present wins
    labels: tuple[tuple[str, str | None, str], ...]  # (display name lower case, unit or None, metric id)
    units: dict[str, tuple[float, str]]  # unit lower case -> (factor, base unit)

    def metric_of(self, name: str, unit: str, section: str) -> str:
        """The key of a details-page row: its metric id, the id its display name shows, else "Section: Name"."""
        text = name.strip()
        if METRIC_ID.match(text):
            return text
        lowered, unit_lowered = text.lower(), unit.strip().lower()
        for label, wanted_unit, metric in self.labels:
            if label == lowered and (wanted_unit is None or wanted_unit == unit_lowered):
                return metric
        return f"{section.strip()}: {text}" if section.strip() else text

    def convert(self, unit: str) -> tuple[float, str]:
        """(factor, base unit) for a unit as ncu writes it: "Kbyte" -> (1000, "byte"), "usecond" -> (1000,
        "nsecond"), "Gbyte/second" -> (1e9, "byte/second"), "cycle/usecond" -> (1e6, "cycle/second");
        units the table does not know stay as they are (factor 1)."""
        text = unit.strip()
        top, _, bottom = text.partition("/")
        factor, base = self.units.get(top.lower(), (1.0, top))
        if not bottom:
            return factor, base
        seconds = _TIME_SECONDS.get(bottom.lower())
        if seconds is None:
            return factor, f"{base}/{bottom}"
        return factor / seconds, f"{base}/second"


@functools.cache
def metric_table() -> MetricTable:
    text = resources.files("opscope.data").joinpath("ncu_metrics.json").read_text(encoding="utf-8")
    data = json.loads(text)
    return MetricTable(
        fields={k: tuple(v) for k, v in data["fields"].items()},
        labels=tuple((e["label"].lower(), e.get("unit"), e["id"]) for e in data["labels"]),
        units={k: (float(v[0]), str(v[1])) for k, v in data["units"].items()},
    )
