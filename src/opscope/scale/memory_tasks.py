"""Per-file memory work for the commands that fan out over traces (diff, ranks): each trace's peak memory per
device (`analysis.memory.peaks`), read with the same `FileTask` (and cache) as their other work."""

from __future__ import annotations

from opscope.analysis.memory.peaks import DevicePeak, peak_memory
from opscope.scale.tasks import FileTask, read


def peaks_file(task: FileTask) -> tuple[DevicePeak, ...]:
    return peak_memory(read(task))
