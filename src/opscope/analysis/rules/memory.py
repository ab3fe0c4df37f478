"""`memory_near_capacity`: peak allocated memory against the device's memory (docs/advice.md).

The event table does not carry the `[memory]` events' `Total Allocated` (it keeps no per-event allocator
state); the peak comes with the memory analysis (analysis/memory/). Until then the rule reports that it could
not be evaluated, and `peak_fraction` is the trigger it will apply.
"""

from __future__ import annotations

from opscope.analysis.rules.context import RuleContext
from opscope.analysis.rules.model import ABOVE, WINDOW, Hit, Rule

NOT_YET = (
    "memory_near_capacity: not evaluated: the event table carries no allocator totals ([memory] events' "
    "'Total Allocated'); it arrives with the memory analysis"
)


def peak_fraction(peak_bytes: int, capacity_bytes: int) -> float:
    return peak_bytes / capacity_bytes if capacity_bytes > 0 else 0.0


def near_capacity(ctx: RuleContext, threshold: float) -> Hit | None:
    ctx.notes.append(NOT_YET)
    return None


RULES = (
    Rule(
        id="memory_near_capacity",
        title="Peak allocated memory close to the device's capacity",
        source="tensorboard",
        metric="peak allocated / device memory",
        threshold=0.9,
        direction=ABOVE,
        basis=WINDOW,
        advice="Close to the limit the caching allocator frees and retries (cudaFree + synchronisation) and "
        "fragmentation can end in out-of-memory: reduce activation memory (activation checkpointing, "
        "smaller micro-batches), set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, free references "
        "to tensors not needed any more.",
        check=near_capacity,
    ),
)
