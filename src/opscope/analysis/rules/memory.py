"""`memory_near_capacity`: peak allocated memory against the device's memory (docs/advice.md).

The peak per device comes from the memory analysis (analysis/memory/: the largest `Total Allocated` of the
allocator's `[memory]` events), the capacity from `deviceProperties[].totalGlobalMem`. Memory is not time: the
time at stake is what the allocator's own runtime calls (cudaMalloc / cudaFree and their HIP twins) took in the
window, which is what running close to the limit costs first (the caching allocator frees its cache and retries,
synchronising the device).
"""

from __future__ import annotations

import polars as pl

from opscope.analysis.base.names import names_of
from opscope.analysis.base.window import starts_inside
from opscope.analysis.memory.peaks import peak_memory
from opscope.analysis.memory.summary import CAPACITY_TYPES, MemoryOptions, memory_stats
from opscope.analysis.rules.context import E, RuleContext, S
from opscope.analysis.rules.model import ABOVE, MAX_EVIDENCE, WINDOW, Hit, Rule, Skipped
from opscope.model.schema import Col, Kind

ALLOCATOR_CALLS = r"^(cuda|hip)(Malloc|Free)(Async)?$|^cu(MemAlloc|MemFree)"


def peak_fraction(peak_bytes: int, capacity_bytes: int) -> float:
    return peak_bytes / capacity_bytes if capacity_bytes > 0 else 0.0


def _allocator_calls(ctx: RuleContext) -> pl.DataFrame:
    """The allocator's runtime calls (start_ns, end_ns), those that start in the selected steps with
    `--steps`."""
    window = ctx.selected_window
    return (
        ctx.trace.lazy()
        .filter(pl.col(Col.KIND) == Kind.RUNTIME)
        .filter(pl.col(Col.NAME).is_in(names_of(ctx.trace, [Kind.RUNTIME], ALLOCATOR_CALLS)))
        .filter(starts_inside(window) if window is not None else pl.lit(True))
        .select(pl.col(Col.TS_NS).alias(S), (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS)).alias(E))
        .collect()
    )


SERVING_ENGINES = (("vLLM", r"(^|/)vllm/|^vllm[:.]"), ("SGLang", r"(^|/)sglang/|^sglang[:.]"))


def serving_engine(ctx: RuleContext) -> str | None:
    """The serving engine the trace's Python frames or annotations come from (vLLM, SGLang), if any: engines
    that reserve most of the device's memory for their KV cache up front."""
    for name, pattern in SERVING_ENGINES:
        if names_of(ctx.trace, [Kind.PYTHON, Kind.USER_ANNOTATION, Kind.CPU_OP], pattern):
            return name
    return None


def _capacity(ctx: RuleContext, device: str) -> int | None:
    """The capacity of a CUDA / HIP device from its deviceProperties entry (by index), as `memory` reads it."""
    kind, _, index = device.partition(":")
    if kind not in CAPACITY_TYPES or not index.isdigit():
        return None
    return {d.id: d.total_memory for d in ctx.trace.meta.devices}.get(int(index))


def near_capacity(ctx: RuleContext, threshold: float) -> Hit | Skipped | None:
    # the peaks alone first (`peak_memory`: the same figure as `memory`'s, without its per-op work); the whole
    # memory analysis only where a device is near capacity, for the evidence
    steps = ctx.analysis.options.steps
    peaks = peak_memory(ctx.trace, steps)
    capacity = {p.device: _capacity(ctx, p.device) for p in peaks}
    gpus = [p for p in peaks if p.device != "cpu" and not p.relative and (capacity[p.device] or 0) > 0]
    if not gpus:
        if any(p.device != "cpu" for p in peaks):
            return Skipped(
                "no device capacity (deviceProperties) or no allocator totals for the GPU memory events"
            )
        return Skipped("no GPU memory events (profile with profile_memory=True)")
    fractions = {p.device: peak_fraction(p.peak_allocated_bytes, capacity[p.device] or 0) for p in gpus}
    value = max(fractions.values())
    if value <= threshold:
        return Hit(value=value, time_at_stake_ns=0)
    engine = serving_engine(ctx)
    if engine is not None:  # right by design (issue 59): not a finding, and the outcome says why
        return Skipped(
            f"{engine} reserves device memory for its KV cache by design (gpu_memory_utilization / "
            f"mem_fraction_static): {100 * value:.1f}% is its setting, not a leak"
        )
    stats = memory_stats(ctx.trace, MemoryOptions(steps=steps, top=0))
    near = sorted(
        (d for d in stats.devices if fractions.get(d.device, 0.0) > threshold),
        key=lambda d: -fractions[d.device],
    )
    evidence = tuple(
        {
            "device": d.device,
            "peak_allocated_bytes": d.peak_allocated_bytes,
            "capacity_bytes": d.capacity_bytes,
            "fraction": round(fractions[d.device], 4),
            "peak_reserved_bytes": d.peak_reserved_bytes,
            "op_at_peak": d.peak_allocated_op,
            "step_at_peak": d.peak_allocated_step,
        }
        for d in near[:MAX_EVIDENCE]
    )
    calls = _allocator_calls(ctx)
    spent = int(calls.select((pl.col(E) - pl.col(S)).sum()).item() or 0) if calls.height else 0
    return Hit(
        value=value,
        time_at_stake_ns=spent,
        evidence=evidence,
        detail=f"{', '.join(d.device for d in near)} at {100 * value:.1f}% of device memory",
        # the model: with headroom the caching allocator stops freeing and retrying: its calls removed
        what_if=(ALLOCATOR_CALLS, 0.0),
        claims=calls,
        estimate_ns=spent,
        model="allocator_calls_removed",
    )


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
        reads_gpu=False,
    ),
)
