"""`pageable_memcpy`: copies to or from pageable host memory (docs/advice.md)."""

from __future__ import annotations

import polars as pl

from opscope.analysis.rules.context import E, RuleContext, S
from opscope.analysis.rules.factors import factor
from opscope.analysis.rules.model import ABOVE, GPU_TIME, MAX_EVIDENCE, Hit, Rule, exact_names
from opscope.analysis.timeline.activity import LAUNCH_NAME, LAUNCH_OP
from opscope.analysis.timeline.memcpy import direction, host_memory
from opscope.model.schema import Col, Kind

# What pinned memory would cost, as a share of the pageable copy, and the size below which a copy's fixed
# latency, not its bandwidth, sets its time (factors.py has the sources)
PINNED_FACTOR = factor("pinned_copy")
MIN_BYTES = int(factor("min_pinned_copy_bytes"))


def pageable_copies(ctx: RuleContext, threshold: float) -> Hit | None:
    copies = ctx.clipped.filter(pl.col(Col.KIND) == Kind.MEMCPY)
    if copies.height == 0:
        return Hit(value=0, time_at_stake_ns=0)
    names = copies[Col.NAME].unique().to_list()
    pageable = [n for n in names if host_memory(n or "", direction(n or "")) == "pageable"]
    found = copies.filter(pl.col(Col.NAME).is_in(pageable))
    if found.height == 0:
        return Hit(value=0, time_at_stake_ns=0)
    groups = (
        found.with_columns(
            (pl.col(E) - pl.col(S)).alias("_ns"),
            pl.col(LAUNCH_NAME).fill_null("(launch not in trace)"),
            pl.col(LAUNCH_OP).fill_null("(no op)"),
        )
        .group_by(Col.NAME, LAUNCH_NAME, LAUNCH_OP)
        .agg(pl.len().alias("calls"), pl.col(Col.BYTES).sum().alias("bytes"), pl.col("_ns").sum())
        # every group key breaks ties, so equal times list in one order on every run
        .sort(["_ns", Col.NAME, LAUNCH_NAME, LAUNCH_OP], descending=[True, False, False, False])
    )
    evidence = tuple(
        {
            "copy": r[Col.NAME],
            "launch_call": r[LAUNCH_NAME],
            "op": r[LAUNCH_OP],
            "calls": r["calls"],
            "bytes": int(r["bytes"] or 0),
            "time_us": round(r["_ns"] / 1e3, 3),
            "async": "Async" in (r[LAUNCH_NAME] or ""),
        }
        for r in groups.head(MAX_EVIDENCE).iter_rows(named=True)
    )
    total = int(groups["_ns"].sum())
    n_async = int(groups.filter(pl.col(LAUNCH_NAME).str.contains("Async"))["calls"].sum())
    detail = f"{found.height:,} copies, {int(found[Col.BYTES].fill_null(0).sum()):,} bytes"
    if n_async:
        detail += f", {n_async:,} through an Async call (made synchronous by the pageable memory)"
    # the model: each copy of at least MIN_BYTES at pinned speed (PINNED_FACTOR of its time); smaller ones
    # unchanged. The what-if rescales the same copies on the critical path (the smaller saving wins).
    big = found.filter(pl.col(Col.BYTES).fill_null(0) >= MIN_BYTES)
    estimate = int(big.select((pl.col(E) - pl.col(S)).sum()).item() or 0) if big.height else 0
    return Hit(
        value=found.height,
        time_at_stake_ns=total,
        evidence=evidence,
        detail=detail,
        what_if=(exact_names(big[Col.NAME].unique().to_list()), PINNED_FACTOR) if big.height else None,
        claims=big.select(S, E),
        estimate_ns=round(estimate * (1 - PINNED_FACTOR)),
        model="pinned_copy",
    )


RULES = (
    Rule(
        id="pageable_memcpy",
        title="Memory copies to or from pageable host memory",
        source="nsys",
        metric="pageable copies",
        threshold=0,
        direction=ABOVE,
        basis=GPU_TIME,
        advice="Pin the host memory (DataLoader(pin_memory=True), tensor.pin_memory()) and copy with "
        "non_blocking=True: pageable copies go through a staging buffer and block the host, even when "
        "issued with cudaMemcpyAsync.",
        check=pageable_copies,
    ),
)
