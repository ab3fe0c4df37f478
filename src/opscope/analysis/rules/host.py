"""`host_bound` and `dataloader_bound`: the GPU waits for the host (docs/advice.md)."""

from __future__ import annotations

import polars as pl

from opscope.analysis.base import intervals
from opscope.analysis.base.windows import names_matching
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

DATALOADER = r"DataLoader.*__next__|DataLoaderIter.*__next__"


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
    evidence = tuple(ctx.cpu_ops_over(gaps, MAX_EVIDENCE))
    return Hit(
        value=util,
        time_at_stake_ns=int(i.host_wait_ns),
        evidence=evidence,
        detail=f"GPU {d.device} busy {util * 100:.1f}%, host wait {i.host_wait_ns / max(1, i.idle_ns) * 100:.0f}% "
        "of its idle time",
        # the model: the host wait removed (the work moved off the critical host thread); it claims the
        # device's idle time, after the rules that name a cause of it
        claims=gaps.select(S, E),
        estimate_ns=int(i.host_wait_ns),
        model="idle_removed",
    )


def dataloader_time(ctx: RuleContext, threshold: float) -> Hit | None:
    scopes = ctx.linkage.scopes
    names = names_matching(scopes, Col.NAME, DATALOADER)
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
        role=SYMPTOM,
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
    ),
)
