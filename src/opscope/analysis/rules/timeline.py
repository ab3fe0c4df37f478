"""`exposed_communication`, `gpu_gaps` and `low_utilization_windows`: the GPU timeline (docs/advice.md)."""

from __future__ import annotations

import numpy as np
import polars as pl

from opscope.analysis.base import intervals
from opscope.analysis.kernels.categories import CATEGORY
from opscope.analysis.kernels.category_rules import COMMUNICATION
from opscope.analysis.rules.context import E, RuleContext, S
from opscope.analysis.rules.model import (
    ABOVE,
    BELOW,
    MAX_EVIDENCE,
    SYMPTOM,
    WINDOW,
    Hit,
    Rule,
    Skipped,
    exact_names,
)
from opscope.model.schema import Col

LONG_GAP_NS = 1_000_000  # gaps of at least this long are "long" (the rule's threshold is in us)
SLICES = 20  # without step markers, the window is cut into this many equal slices


def exposed_comm(ctx: RuleContext, threshold: float) -> Hit | None:
    devices = [d for d in ctx.analysis.timeline.devices if d.communication_ns > 0]
    window = ctx.analysis.timeline.window_ns or 0
    if window <= 0:
        return None
    if not devices:
        return Hit(value=0, time_at_stake_ns=0, detail="no communication kernels")
    worst = max(devices, key=lambda d: d.exposed_comm_ns)
    share = worst.exposed_comm_ns / window
    evidence = tuple(
        {
            "device": d.device,
            "communication_us": round(d.communication_ns / 1e3, 3),
            "exposed_us": round(d.exposed_comm_ns / 1e3, 3),
            "overlapped_us": round(d.compute_comm_overlap_ns / 1e3, 3),
        }
        for d in devices[:MAX_EVIDENCE]
    )
    exposed = int(sum(d.exposed_comm_ns for d in devices))
    comm = ctx.clipped.filter(pl.col(CATEGORY) == COMMUNICATION)
    overlapped = worst.communication_ns - worst.exposed_comm_ns
    return Hit(
        value=share,
        time_at_stake_ns=exposed,
        evidence=evidence,
        detail=f"GPU {worst.device}: {share * 100:.1f}% of the window in communication not overlapped "
        f"with compute ({worst.exposed_comm_ns / 1e6:,.3f} ms exposed, {overlapped / 1e6:,.3f} ms of its "
        f"{worst.communication_ns / 1e6:,.3f} ms overlapped)",
        # the model: the exposed communication fully overlapped with compute: off the critical path, as if
        # removed, never more than the exposed time
        what_if=(exact_names(comm[Col.NAME].unique().to_list()), 0.0) if comm.height else None,
        claims=comm.select(S, E),
        estimate_ns=exposed,
        model="communication_overlapped",
    )


def long_gaps(ctx: RuleContext, threshold: float) -> Hit | Skipped | None:
    why = ctx.not_steady()
    if why:
        return Skipped(why)
    gaps = ctx.idle_gaps.with_columns((pl.col(E) - pl.col(S)).alias("_len"))
    if ctx.clipped.height == 0:
        return None
    limit_ns = threshold * 1e3
    long = gaps.filter(pl.col("_len") > limit_ns).sort(["_len", S], descending=[True, False])
    longest = int(gaps["_len"].max() or 0) if gaps.height else 0  # type: ignore[arg-type]
    if long.height == 0:
        return Hit(value=longest / 1e3, time_at_stake_ns=0)
    evidence = []
    for r in long.head(MAX_EVIDENCE).iter_rows(named=True):
        one = long.filter((pl.col(S) == r[S]) & (pl.col(Col.DEVICE) == r[Col.DEVICE]))
        cpu = ctx.cpu_ops_over(one, 3)
        evidence.append(
            {
                "device": r[Col.DEVICE],
                "start_us": round(r[S] / 1e3, 3),
                "length_us": round(r["_len"] / 1e3, 3),
                "cpu_ops": [c["cpu_op"] for c in cpu],
            }
        )
    return Hit(
        value=longest / 1e3,
        time_at_stake_ns=int(long["_len"].sum()),
        evidence=tuple(evidence),
        detail=f"{long.height:,} idle gaps longer than {threshold:,.0f} us, the longest {longest / 1e6:.2f} ms",
        claims=long.select(S, E),
        estimate_ns=int(long["_len"].sum()),
        model="idle_removed",
    )


def _low_detail(low: int, windows: int, devices: int, threshold: float) -> str:
    """ "3 of 20 windows below 50% busy" on one GPU; on several, the whole the count is of: "25 of 160 (GPU,
    window) pairs (20 windows x 8 GPUs)", never "160 of 20 windows" (issue 59)."""
    below = f"below {threshold * 100:.0f}% busy"
    if devices <= 1:
        return f"{low} of {windows} windows {below}"
    return f"{low} of {windows * devices} (GPU, window) pairs ({windows} windows x {devices} GPUs) {below}"


def low_windows(ctx: RuleContext, threshold: float) -> Hit | Skipped | None:
    if ctx.clipped.height == 0:
        return None
    why = ctx.not_steady()
    if why:
        return Skipped(why)
    steps = [(w.name, w.start_ns, w.end_ns) for w in ctx.steady_steps]
    if not steps:  # the steady part (no long head or tail) in equal slices
        steady = ctx.capture.steady
        lo, hi = steady[0][0], steady[-1][1]
        if hi <= lo:
            return None
        edges = [lo + (hi - lo) * i // SLICES for i in range(SLICES + 1)]
        steps = [(f"slice {i + 1}/{SLICES}", edges[i], edges[i + 1]) for i in range(SLICES)]
    low = []
    lowest = 1.0
    los = np.array([lo for _, lo, _ in steps], dtype=np.int64)
    his = np.array([hi for _, _, hi in steps], dtype=np.int64)
    for device, events in ctx.clipped.partition_by(Col.DEVICE, as_dict=True).items():
        # busy time of every window in one sweep (intervals.Coverage), not one pass over the events per window
        busy = intervals.Coverage(intervals.merge(events.select(S, E))).inside(los, his)
        for (name, lo, hi), busy_ns in zip(steps, busy.tolist(), strict=True):
            if hi <= lo:
                continue
            util = busy_ns / (hi - lo)
            lowest = min(lowest, util)
            if util < threshold:
                low.append(
                    {
                        "device": device[0],
                        "window": name,
                        "start_us": round(lo / 1e3, 3),
                        "length_us": round((hi - lo) / 1e3, 3),
                        "busy": round(util, 4),
                        "_idle": (hi - lo) - busy_ns,
                        "_lo": lo,
                        "_hi": hi,
                    }
                )
    if not low:
        return Hit(value=lowest, time_at_stake_ns=0)
    low.sort(key=lambda w: (-w["_idle"], w["start_us"]))
    total = sum(w["_idle"] for w in low)
    windows = pl.DataFrame(
        {S: [w["_lo"] for w in low], E: [w["_hi"] for w in low]}, schema={S: pl.Int64, E: pl.Int64}
    )
    evidence = tuple({k: v for k, v in w.items() if not k.startswith("_")} for w in low[:MAX_EVIDENCE])
    return Hit(
        value=lowest,
        time_at_stake_ns=total,
        evidence=evidence,
        detail=_low_detail(len(low), len(steps), ctx.clipped[Col.DEVICE].n_unique(), threshold),
        # the model: the idle time of the low windows removed
        claims=intervals.intersect(ctx.idle_gaps.select(S, E), windows),
        estimate_ns=total,
        model="idle_removed",
    )


RULES = (
    Rule(
        id="exposed_communication",
        title="Communication not overlapped with compute",
        source="hta",
        metric="exposed communication / window",
        threshold=0.10,
        direction=ABOVE,
        basis=WINDOW,
        advice="Overlap collectives with compute: DDP bucketing (bucket_cap_mb) and gradient_as_bucket_view, "
        "FSDP forward/backward prefetch, fewer and larger collectives; check the interconnect and that "
        "NCCL uses it (NCCL_DEBUG=INFO).",
        check=exposed_comm,
    ),
    Rule(
        id="gpu_gaps",
        title="Long idle gaps on the GPU",
        source="nsys",
        metric="longest idle gap (us)",
        threshold=1000,
        direction=ABOVE,
        basis=WINDOW,
        advice="Each long gap is time the GPU waits: the evidence names the CPU ops running meanwhile (data "
        "loading, checkpointing, logging, synchronisations, Python). Move that work off the critical "
        "path or overlap it with GPU work.",
        check=long_gaps,
        role=SYMPTOM,
    ),
    Rule(
        id="low_utilization_windows",
        title="Steps (or time slices) with the GPU mostly idle",
        source="nsys",
        metric="lowest busy share of a step window",
        threshold=0.5,
        direction=BELOW,
        basis=WINDOW,
        advice="Look at what the host does during these windows (opscope steps, opscope report's timeline): "
        "a slow first step is warm-up (profile with wait/warmup), recurring ones point at data loading, "
        "evaluation or synchronisation.",
        check=low_windows,
        role=SYMPTOM,
    ),
)
