"""`host_bound` and `dataloader_bound`: the GPU waits for the host (docs/advice.md)."""

from __future__ import annotations

import re

import polars as pl

from opscope.analysis.base import intervals
from opscope.analysis.base.windows import names_matching
from opscope.analysis.kernels.gpu_arch import AMD
from opscope.analysis.rules.context import E, RuleContext, S
from opscope.analysis.rules.frameworks import PYTORCH, framework_of, remedies
from opscope.analysis.rules.model import (
    ABOVE,
    BELOW,
    GENERAL,
    MAX_EVIDENCE,
    WINDOW,
    Hit,
    Rule,
    Skipped,
    exact_names,
)
from opscope.analysis.timeline.gap_causes import (
    AFTER_LAST,
    BEFORE_FIRST,
    BETWEEN_OPS,
    DATALOADER,
    DATALOADER_PATTERN,
    IN_OP,
    LAUNCHING,
    QUEUED,
    RUNTIME_CALL,
    SYNC_WAIT,
    UNTRACED,
    IdleCause,
)
from opscope.analysis.timeline.step_figures import ALLOCATOR_CALL
from opscope.model.schema import Col

DATALOADER_NAMES = DATALOADER_PATTERN


ALLOCATOR = re.compile(ALLOCATOR_CALL)
MODULE_LOAD = re.compile(
    r"Lazy Function Loading|^cuModuleLoad|^cuLibraryLoad|^hipModuleLoad|^cudaGetFuncBySymbol"
)
GRAPH_SETUP = re.compile(r"GraphInstantiate|StreamBeginCapture|StreamEndCapture")


def _runtime_kinds(free: str) -> tuple[tuple[re.Pattern[str], str, str], ...]:
    """The runtime calls that name a host cause of their own: (call names, what the host was doing, remedy)."""
    return (
        (
            ALLOCATOR,
            "allocating and freeing GPU memory",
            f"Allocator churn: the step allocates and frees device memory through the driver ({free} synchronises "
            "the device). In PyTorch keep the caching allocator on (PYTORCH_NO_CUDA_MEMORY_CACHING / "
            "PYTORCH_NO_HIP_MEMORY_CACHING unset), do not call torch.cuda.empty_cache() in the loop, and try "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True where fragmentation forces frees; elsewhere allocate "
            "once outside the loop or use a memory pool (cudaMallocAsync / hipMallocAsync).",
        ),
        (
            MODULE_LOAD,
            "loading GPU code (a cold start)",
            "Cold start: the first calls load GPU modules lazily, and the window holds them. Profile after warm-up "
            "(torch.profiler.schedule(wait=1, warmup=2, active=3)); if the first step's latency itself matters, "
            "load eagerly (CUDA_MODULE_LOADING=EAGER) or run a warm-up step at start-up.",
        ),
        (
            GRAPH_SETUP,
            "capturing or instantiating a graph",
            "Graph capture and instantiation are in the window: capture once at start-up and profile the "
            "replays.",
        ),
    )


def cause_advice(cause: IdleCause, framework: str, amd: bool) -> tuple[str, str]:
    """(what the host was doing, in words; the remedy for it) for the idle time's largest host-side cause."""
    names = [n.name for n in cause.top]
    if cause.cause == RUNTIME_CALL:
        for calls, doing, remedy in _runtime_kinds("hipFree" if amd else "cudaFree"):
            if any(calls.search(n) for n in names):
                return doing, remedy
    text = {
        RUNTIME_CALL: (
            "inside runtime calls",
            "The host spends the GPU's idle time in runtime calls (evidence): "
            "move them out of the loop or make them asynchronous.",
        ),
        LAUNCHING: (
            "launching kernels one at a time",
            remedies("launch_bound_small_kernels", framework, amd)
            or "Launch-bound: capture the step in a CUDA graph (torch.cuda.graphs, torch.compile(mode="
            "'reduce-overhead')), fuse small ops (torch.compile) or give each kernel more work.",
        ),
        DATALOADER: (
            "waiting for the DataLoader",
            "Load data ahead of the GPU: DataLoader(num_workers=N, "
            "pin_memory=True, prefetch_factor=2, persistent_workers=True).",
        ),
        IN_OP: (
            "in CPU operators",
            "The operators' own CPU time (evidence) keeps the GPU waiting: fewer, larger "
            "ops (torch.compile fuses them), bigger batches, and no per-op host work (.item(), .cpu(), "
            "Python scalars) in the loop.",
        ),
        BETWEEN_OPS: (
            "in Python between operators",
            "Python between operators keeps the GPU waiting: record with "
            "with_stack=True to see which lines (opscope lines), then move that work off the step "
            "or compile the step (torch.compile, CUDA graphs).",
        ),
        UNTRACED: (
            "in code the trace does not record",
            "The host was busy in code the profiler did not record: "
            "profile with with_stack=True (and record_function around the suspect blocks) to name it.",
        ),
        BEFORE_FIRST: (
            "before each step's first GPU work",
            "Each step starts with host work before its first "
            "kernel (data preparation, preprocessing, logging): overlap it with the previous step's "
            "GPU work or move it to a background thread / DataLoader worker.",
        ),
        AFTER_LAST: (
            "after the GPU's last work in the window",
            "The window ends with host work after the GPU's "
            "last kernel: the capture stops mid-work or the step ends with host-side work (logging, "
            "checkpointing, evaluation); profile steady steps, or move that work off the step.",
        ),
        SYNC_WAIT: (
            "waiting on synchronisations",
            "Each synchronisation stops the host from queueing work ahead "
            "of the GPU: remove .item() / .cpu() / torch.cuda.synchronize() from the loop, or read "
            "results once per N steps.",
        ),
    }.get(cause.cause)
    if text is None:
        return ("", "")
    return text


def host_bound(ctx: RuleContext, threshold: float) -> Hit | Skipped | None:
    why = ctx.not_steady()
    if why:
        return Skipped(why)
    idle = {d.device: d for d in ctx.analysis.idle.devices}
    candidates = []
    for d in ctx.analysis.timeline.devices:
        i = idle.get(d.device)
        if i is None or i.idle_ns <= 0:
            continue
        host_largest = i.host_wait_ns > 0 and i.host_wait_ns >= max(i.sync_wait_ns, i.other_ns)
        candidates.append((d.utilization, d, i, host_largest))
    if not candidates:
        return None
    eligible = [c for c in candidates if c[3]]
    if not eligible:
        return Hit(
            value=min(c[0] for c in candidates),
            time_at_stake_ns=0,
            detail="idle time is not mostly host wait",
        )
    util, d, i, _ = min(eligible, key=lambda c: c[0])
    gaps = ctx.idle_gaps.filter(pl.col(Col.DEVICE) == d.device) if d.device is not None else ctx.idle_gaps
    # the host's own causes: not the DataLoader's nor the synchronisations' (their rules name and claim them)
    host_causes = sorted(
        (c for c in i.causes if c.cause not in (QUEUED, DATALOADER, SYNC_WAIT) and c.ns > 0),
        key=lambda c: -c.ns,
    )
    own_ns = sum(c.ns for c in host_causes)
    amd = ctx.gpu.vendor == AMD
    framework = framework_of(ctx.trace)
    doing, advice = cause_advice(host_causes[0], framework, amd) if host_causes else ("", "")
    if framework != PYTORCH and host_causes and host_causes[0].cause in (BETWEEN_OPS, IN_OP, UNTRACED):
        advice = remedies("host_bound", framework, amd) or advice
    causes = [
        {
            "cause": c.cause,
            "idle_us": round(c.ns / 1e3, 3),
            "share_of_idle": round(c.ns / i.idle_ns, 4),
            "calls": [f"{n.name} ({n.ns / 1e6:,.3f} ms)" for n in c.top[:3]],
        }
        for c in host_causes[:3]
    ]
    # the largest cause first, then the CPU ops over the gaps, then the other causes
    evidence = tuple(causes[:1] + ctx.cpu_ops_over(gaps, MAX_EVIDENCE - len(causes)) + causes[1:])
    mostly = (
        f"; mostly {doing} ({host_causes[0].ns / i.idle_ns * 100:.0f}% of its idle time)"
        if doing and host_causes
        else ""
    )
    return Hit(
        value=util,
        time_at_stake_ns=int(i.host_wait_ns),
        evidence=evidence[:MAX_EVIDENCE],
        detail=f"GPU {d.device} busy {util * 100:.1f}%, host wait {i.host_wait_ns / max(1, i.idle_ns) * 100:.0f}% "
        f"of its idle time{mostly}",
        # the model: the host's own share of the idle time removed (its cause moved off the critical host
        # thread: runtime calls, launches, operators, Python, untraced code; the DataLoader's and the
        # synchronisations' idle time is their rules'); it claims the device's idle time
        claims=gaps.select(S, E),
        estimate_ns=int(own_ns),
        model="idle_removed",
        advice=advice,
    )


def dataloader_time(ctx: RuleContext, threshold: float) -> Hit | None:
    scopes = ctx.linkage.scopes
    names = names_matching(scopes, Col.NAME, DATALOADER_NAMES)
    steps = list(ctx.steps)
    bounds = [(w.start_ns, w.end_ns) for w in steps] or list(ctx.activity.window.bounds)
    total_ns = sum(hi - lo for lo, hi in bounds)
    if total_ns <= 0:
        return None
    loads = scopes.filter(pl.col(Col.NAME).is_in(names)).select(
        pl.col(Col.NAME).cast(pl.String), Col.TS_NS, Col.DUR_NS
    )
    # starting inside a window [lo, hi): lo <= ts and ts + 1 <= hi (integer ns), one sorted search per load
    loads = loads.filter(intervals.inside_any(loads[Col.TS_NS], loads[Col.TS_NS] + 1, bounds))
    spent = int(loads[Col.DUR_NS].sum() or 0) if loads.height else 0
    evidence = tuple(
        {
            "call": r[Col.NAME],
            "calls": r["calls"],
            "time_us": round(r[Col.DUR_NS] / 1e3, 3),
            "max_us": round(r["max"] / 1e3, 3),
        }
        for r in loads.group_by(Col.NAME)
        .agg(pl.len().alias("calls"), pl.col(Col.DUR_NS).sum(), pl.col(Col.DUR_NS).max().alias("max"))
        .sort([Col.DUR_NS, Col.NAME], descending=[True, False])
        .head(MAX_EVIDENCE)
        .iter_rows(named=True)
    )
    where = f"{len(steps)} steps" if steps else "the analysed window (no ProfilerStep markers)"
    return Hit(
        value=spent / total_ns,
        time_at_stake_ns=spent,
        evidence=evidence,
        detail=f"{spent / total_ns * 100:.1f}% of {where} in DataLoader __next__",
        what_if=(exact_names(names), 0.0) if names else None,
        # the model: the loads overlapped with the step (workers prefetch ahead): their time removed; the
        # claim is the GPU idle time around them
        claims=ctx.idle_touching(
            loads.select(pl.col(Col.TS_NS).alias(S), (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS)).alias(E))
        ),
        estimate_ns=spent,
        model="data_loading_overlapped",
    )


RULES = (
    Rule(
        id="host_bound",
        title="The GPU waits for the host",
        source="hta",
        metric="GPU utilisation (busy / window)",
        threshold=0.5,
        direction=BELOW,
        basis=WINDOW,
        advice="The host does not queue work fast enough: look at the CPU ops in the evidence (data loading, "
        "optimizer, Python between ops). Larger batches, CUDA graphs or torch.compile(mode="
        "'reduce-overhead'), moving work off the critical host thread, and fewer synchronisations help.",
        check=host_bound,
        role=GENERAL,  # it names what the host was doing: after the rules of a specific cause, before the symptoms
    ),
    Rule(
        id="dataloader_bound",
        title="Steps spend their time waiting for the DataLoader",
        source="tensorboard",
        metric="DataLoader __next__ time / step time",
        threshold=0.05,
        direction=ABOVE,
        basis=WINDOW,
        advice="Load data in parallel and ahead of the GPU: DataLoader(num_workers=N, pin_memory=True, "
        "prefetch_factor=2, persistent_workers=True); move decoding / augmentation off the main process or "
        "onto the GPU.",
        check=dataloader_time,
        reads_gpu=False,  # it reads the loader's CPU spans: a CPU-only capture waits for its batches too
    ),
)
