"""Per-file memory work for the commands that fan out over traces (diff, ranks): each trace's peak memory per
device (`analysis.memory.peaks`), computed in the same task, from the same read, as the command's other
per-trace result (reading a trace twice cost as much again, all of it with `--no-cache`). `diff` also takes
each trace's advice from that task: the profile and the advice then share one read, one link table and one
operator table (issue 25: `diff` read each trace a second time and ran every analysis again for the
findings)."""

from __future__ import annotations

from opscope.analysis.compare.profile import TraceProfile, profile_trace
from opscope.analysis.compare.ranks import RankPartial, rank_partial
from opscope.analysis.findings import Advice
from opscope.analysis.memory.peaks import Peaks, peak_memory
from opscope.scale.tasks import FileTask, read


def rank_and_peaks_file(task: FileTask) -> tuple[RankPartial, Peaks]:
    trace = read(task)
    return rank_partial(trace), peak_memory(trace)


def profile_peaks_and_advice_file(
    task: FileTask,
) -> tuple[TraceProfile, Peaks, Advice | None, tuple[str, ...]]:
    """`diff`'s per-trace work: the comparison profile, the peak memory per device, and the advice (`opscope
    advise`) with the trace's device names, from one read."""
    from opscope.analysis.rules.advise import advise

    trace = read(task)
    profile, peaks = profile_trace(trace, task.by_shape), peak_memory(trace)
    analysis = advise(trace)
    return profile, peaks, analysis.advice, analysis.device_names
