"""Per-file memory work for the commands that fan out over traces (diff, ranks): each trace's peak memory per
device (`analysis.memory.peaks`), computed in the same task, from the same read, as the command's other
per-trace result (reading a trace twice cost as much again, all of it with `--no-cache`)."""

from __future__ import annotations

from opscope.analysis.compare.profile import TraceProfile, profile_trace
from opscope.analysis.compare.ranks import RankPartial, rank_partial
from opscope.analysis.memory.peaks import Peaks, peak_memory
from opscope.scale.tasks import FileTask, read


def rank_and_peaks_file(task: FileTask) -> tuple[RankPartial, Peaks]:
    trace = read(task)
    return rank_partial(trace), peak_memory(trace)


def profile_and_peaks_file(task: FileTask) -> tuple[TraceProfile, Peaks]:
    trace = read(task)
    return profile_trace(trace, task.by_shape), peak_memory(trace)
