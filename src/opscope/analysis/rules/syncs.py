"""`sync_in_loop`: host synchronisations inside the steps (docs/advice.md)."""

from __future__ import annotations

import polars as pl

from opscope.analysis.rules.context import RuleContext
from opscope.analysis.rules.model import ABOVE, MAX_EVIDENCE, WINDOW, Hit, Rule, exact_names
from opscope.analysis.timeline.syncs import END, issuing_ops, sync_calls
from opscope.model.schema import Col, Kind

NOT_HOST_WAIT = r"StreamWaitEvent"  # orders two streams on the GPU; the host does not wait
SCALAR_OPS = (
    "aten::item",
    "aten::_local_scalar_dense",
    "aten::cpu",
    "aten::to",
    "aten::_to_copy",
    "aten::copy_",
    "aten::nonzero",
    "aten::is_nonzero",
    "aten::tolist",
)


def syncs_in_steps(ctx: RuleContext, threshold: float) -> Hit | None:
    calls = sync_calls(ctx.trace).filter(~pl.col(Col.NAME).str.contains(NOT_HOST_WAIT))
    steps = list(ctx.steps)
    bounds = [(w.start_ns, w.end_ns) for w in steps] or list(ctx.activity.window.bounds)
    if not bounds:
        return None
    inside = pl.any_horizontal([(pl.col(Col.TS_NS) >= lo) & (pl.col(END) <= hi) for lo, hi in bounds])
    found = calls.filter(inside)
    per_step = found.height / max(1, len(steps) or 1)
    if found.height == 0:
        return Hit(value=0, time_at_stake_ns=0)
    found = found.with_columns(
        issuing_ops(found, ctx.linkage).fill_null("(no op)").alias("op"),
        python_context(found, ctx.linkage.scopes).alias("python"),
    )
    groups = (
        found.group_by(Col.NAME, "op", "python")
        .agg(pl.len().alias("calls"), pl.col(Col.DUR_NS).sum().alias("_ns"))
        .sort(["_ns", Col.NAME, "op", "python"], descending=[True, False, False, False], nulls_last=True)
    )
    evidence = tuple(
        {
            "call": r[Col.NAME],
            "op": r["op"],
            "python": r["python"],
            "calls": r["calls"],
            "time_us": round(r["_ns"] / 1e3, 3),
            "pattern": ".item() / .cpu(): a device-to-host copy, then a wait"
            if r["op"] in SCALAR_OPS
            else "explicit synchronisation"
            if "Synchronize" in r[Col.NAME]
            else "blocking copy",
        }
        for r in groups.head(MAX_EVIDENCE).iter_rows(named=True)
    )
    where = (
        f"per step over {len(steps)} steps" if steps else "in the analysed window (no ProfilerStep markers)"
    )
    return Hit(
        value=per_step,
        time_at_stake_ns=int(found[Col.DUR_NS].sum()),
        evidence=evidence,
        detail=f"{found.height:,} calls, {per_step:.1f} {where}",
        what_if=(exact_names(found[Col.NAME].unique().to_list()), 0.0),
    )


def python_context(calls: pl.DataFrame, scopes: pl.DataFrame) -> pl.Series:
    """The Python context (with_stack traces) of each call on its thread: the innermost frame of the user's own
    code around the call (a `file.py(line)` frame outside torch), else the innermost frame; null where none."""
    frames = scopes.filter(pl.col(Col.KIND) == Kind.PYTHON)
    if frames.height == 0 or calls.height == 0:
        return pl.Series("python", [None] * calls.height, dtype=pl.String)
    frames = frames.select(
        pl.col(Col.PID).cast(pl.String),
        pl.col(Col.TID).cast(pl.String),
        pl.col(Col.TS_NS).alias("_fs"),
        (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS).clip(lower_bound=0)).alias("_fe"),
        pl.col(Col.NAME).cast(pl.String).alias("python"),
    )
    queries = calls.with_row_index("_q").select("_q", Col.PID, Col.TID, Col.TS_NS, END)
    inside = queries.join(frames, on=[Col.PID, Col.TID]).filter(
        (pl.col("_fs") <= pl.col(Col.TS_NS)) & (pl.col("_fe") >= pl.col(END))
    )
    # prefer the caller's own source line over torch's internals and built-in functions
    own = pl.col("python").str.contains(r"\.py\(\d+\)") & ~pl.col("python").str.contains(
        r"^(torch|<built-in)"
    )
    innermost = (
        inside.with_columns(own.alias("_own"))
        .sort(["_q", "_own", "_fs"])
        .group_by("_q")
        .agg(pl.col("python").last())
    )
    return queries.select("_q").join(innermost, on="_q", how="left", maintain_order="left")["python"]


RULES = (
    Rule(
        id="sync_in_loop",
        title="Host synchronisations inside the steps",
        source="tensorboard",
        metric="synchronising calls per step",
        threshold=0,
        direction=ABOVE,
        basis=WINDOW,
        advice="Each synchronisation stops the host from queueing work ahead of the GPU. Remove "
        "torch.cuda.synchronize() from the loop, avoid .item() / .cpu() / print(tensor) / Python "
        "conditions on GPU values inside the step (accumulate on the GPU, read once per N steps), and "
        "copy with non_blocking=True into pinned memory.",
        check=syncs_in_steps,
    ),
)
