"""Peak memory for `diff` (before / after, `--fail-memory PCT`) and `ranks` (per rank): the memory part of
those commands, kept here so that each of them changes by a line or two."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from opscope.analysis.memory.peaks import PeakChange
from opscope.report.document import Document


@dataclass(frozen=True)
class MemoryDiff:
    changes: tuple[PeakChange, ...]
    limit_pct: float | None
    tripped: list[str] = field(default_factory=list)

    def add(self, doc: Document) -> Document:
        from opscope.report.memory_brief import with_peak_changes

        return with_peak_changes(doc, self.changes, self.limit_pct)


def memory_diff(args: argparse.Namespace) -> MemoryDiff:
    """Each trace's peaks (a second pass over the cached traces) compared, and the `--fail-memory` gate."""
    from opscope.analysis.compare.gates import parse_pct
    from opscope.analysis.memory.peaks import compare_peaks
    from opscope.cli.fanout import file_tasks, run_tasks
    from opscope.report.memory_brief import memory_gate
    from opscope.scale.memory_tasks import peaks_file

    limit = parse_pct(args.fail_memory, "--fail-memory") if args.fail_memory is not None else None
    base, new = run_tasks(peaks_file, file_tasks([args.base, args.new], args, args.by_shape), args)
    changes = compare_peaks(base, new)
    return MemoryDiff(changes, limit, memory_gate(changes, limit))


def rank_peaks(doc: Document, args: argparse.Namespace) -> Document:
    """`ranks`: the peak memory of each rank's trace, in the order of the ranks table."""
    from opscope.cli.fanout import file_tasks, run_tasks
    from opscope.cli.ranks import _files
    from opscope.report.memory_brief import with_rank_peaks
    from opscope.scale.memory_tasks import peaks_file

    tasks = file_tasks(_files(args.paths), args)
    peaks = dict(zip((t.label for t in tasks), run_tasks(peaks_file, tasks, args), strict=True))
    rows = [
        (int(r["rank"]), str(r["path"]), peaks.get(str(r["path"]), ()))
        for r in doc.data.get("ranks", [])
        if r.get("rank") is not None
    ]
    return with_rank_peaks(doc, rows)
