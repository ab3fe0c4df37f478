"""Peak memory for `diff` (before / after, `--fail-memory PCT`) and `ranks` (per rank): the memory part of
those commands, kept here so that each of them changes by a line or two."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field

from opscope.analysis.memory.peaks import PeakChange, Peaks
from opscope.report.document import Document


@dataclass(frozen=True)
class MemoryDiff:
    changes: tuple[PeakChange, ...]
    limit_pct: float | None
    tripped: list[str] = field(default_factory=list)

    def add(self, doc: Document) -> Document:
        from opscope.report.memory_brief import with_peak_changes

        return with_peak_changes(doc, self.changes, self.limit_pct)


def memory_diff(args: argparse.Namespace, base: Peaks, new: Peaks) -> MemoryDiff:
    """The two traces' peaks (read in the same task as their profiles) compared, and the `--fail-memory`
    gate."""
    from opscope.analysis.compare.gates import parse_pct
    from opscope.analysis.memory.peaks import compare_peaks
    from opscope.report.memory_brief import memory_gate

    limit = parse_pct(args.fail_memory, "--fail-memory") if args.fail_memory is not None else None
    changes = compare_peaks(base, new)
    return MemoryDiff(changes, limit, memory_gate(changes, limit))


def rank_peaks(doc: Document, peaks: Mapping[str, Peaks]) -> Document:
    """`ranks`: the peak memory of each rank's trace (by its label), in the order of the ranks table."""
    from opscope.report.memory_brief import with_rank_peaks

    rows = [
        (int(r["rank"]), str(r["path"]), peaks.get(str(r["path"]), ()))
        for r in doc.data.get("ranks", [])
        if r.get("rank") is not None
    ]
    return with_rank_peaks(doc, rows)
