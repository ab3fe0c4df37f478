"""Per-file memory work for the commands that fan out over traces (diff, ranks): each trace's peak memory per
device (`analysis.memory.peaks`), computed in the same task, from the same read, as the command's other
per-trace result (reading a trace twice cost as much again, all of it with `--no-cache`). `diff` also takes
each trace's advice from that task: the profile and the advice then share one read, one link table and one
operator table (issue 25: `diff` read each trace a second time and ran every analysis again for the
findings)."""

from __future__ import annotations

from opscope.analysis.base.codetag import analysis_tag
from opscope.analysis.base.stored import kept_value
from opscope.analysis.compare.hardware import HardwareSide
from opscope.analysis.compare.profile import TraceProfile, profile_trace
from opscope.analysis.compare.ranks import RankPartial, rank_partial
from opscope.analysis.findings import Advice
from opscope.analysis.memory.peaks import Peaks, peak_memory
from opscope.model.trace import Trace
from opscope.scale.tasks import FileTask


def rank_and_peaks_file(trace: Trace, task: FileTask) -> tuple[RankPartial, Peaks]:
    return rank_partial(trace), peak_memory(trace)


def profile_peaks_and_advice_file(
    trace: Trace, task: FileTask
) -> tuple[TraceProfile, Peaks, Advice | None, tuple[str, ...]]:
    """`diff`'s per-trace work: the comparison profile, the peak memory per device, and the advice (`opscope
    advise`) with the trace's device names, from one read. The advice is kept beside the trace cache
    (`stored.kept_value`, keyed by `analysis_tag`) like the profile, so that diffing against the same trace again
    (a baseline in a CI loop) reads both back instead of running the analyses and rules (issue 25)."""
    profile, peaks = profile_trace(trace, task.by_shape), peak_memory(trace)
    advice, names = kept_value(trace, "diff_advice", analysis_tag(), _Advised, lambda: _advised(trace))
    return profile, peaks, advice, names


_Advised = tuple[Advice, tuple[str, ...]]  # `advise(trace)`'s advice and device names


def _advised(trace: Trace) -> _Advised:
    from opscope.analysis.rules.advise import advise

    analysis = advise(trace)
    assert analysis.advice is not None  # the default options run the rules
    return analysis.advice, analysis.device_names


def hardware_side_file(trace: Trace, task: FileTask) -> HardwareSide:
    """`diff` across hardware: the trace summarised per operator and shapes (analysis/compare/hardware.py)."""
    from opscope.analysis.compare.hardware import hardware_side

    return hardware_side(trace)
