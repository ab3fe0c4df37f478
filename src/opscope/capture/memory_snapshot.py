"""`opscope.profile(memory_snapshot=True)`: record the CUDA caching allocator's history while profiling and
write its snapshot (`torch.cuda.memory._dump_snapshot`) next to each trace, for `opscope memory FILE.pickle`
and pytorch.org/memory_viz. CUDA only: on other devices the profile goes on without it, with a note.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MAX_ENTRIES = 100_000  # allocator history kept (torch's ring buffer); bounds the snapshot's size
SUFFIX = ".memory_snapshot.pickle"
TRACE_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json")
SKIPPED = "memory_snapshot=True skipped: allocator snapshots need a CUDA device (this run has none)"


def snapshot_path(trace: Path) -> Path:
    """`run.123.pt.trace.json.gz` -> `run.123.memory_snapshot.pickle` (same folder)."""
    name = trace.name
    for suffix in TRACE_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return trace.with_name(name + SUFFIX)


def start(torch: Any) -> bool:
    """Start recording the allocator history; False (nothing started) without CUDA."""
    if not torch.cuda.is_available():
        return False
    torch.cuda.memory._record_memory_history(max_entries=MAX_ENTRIES)
    return True


def dump(torch: Any, trace: Path) -> Path:
    path = snapshot_path(trace)
    torch.cuda.memory._dump_snapshot(str(path))
    return path


def stop(torch: Any) -> None:
    torch.cuda.memory._record_memory_history(enabled=None)
