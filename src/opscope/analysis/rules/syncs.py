"""`sync_in_loop`: host synchronisations inside the steps (docs/advice.md)."""

from __future__ import annotations

import polars as pl

from opscope.analysis.base import enclosing, intervals
from opscope.analysis.base.intervals import END as STOP
from opscope.analysis.base.intervals import START
from opscope.analysis.base.linking import ROW, Linkage
from opscope.analysis.base.nesting import at_positions
from opscope.analysis.rules.context import RuleContext
from opscope.analysis.rules.model import ABOVE, MAX_EVIDENCE, WINDOW, Hit, Rule, exact_names
from opscope.analysis.timeline.syncs import END, issuing_op_rows, issuing_ops, sync_calls
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace

NOT_HOST_WAIT = r"StreamWaitEvent"  # orders two streams on the GPU; the host does not wait
DEVICE_TO_HOST = r"DtoH|D2H|Device_?To_?Host|Device -> (Pageable|Pinned|Host)"  # GPU memcpy names
ITEM = ".item() / .cpu(): a device-to-host copy, then a wait"
D2H, OTHER_COPY = "d2h", "copy"  # what `copy_then_wait` says


def copy_then_wait(calls: pl.DataFrame, trace: Trace, linkage: Linkage) -> pl.Series:
    """For each synchronising call (name, pid, tid, ts_ns, end_ns): "d2h" when it is the `.item()` / `.cpu()`
    pattern, a device-to-host copy then a wait: the call itself launched a device-to-host memcpy (a blocking
    cudaMemcpy), or the runtime / driver call just before it on the same thread did and both lie in the same
    innermost op (cudaMemcpyAsync DtoH then cudaStreamSynchronize inside aten::_local_scalar_dense); "copy"
    when that copy goes another way (a blocking host-to-device `copy_`); else null. The copy is the GPU
    memcpy event linked to the call (`launch_row`); its direction comes from its name."""
    if calls.height == 0:
        return pl.Series("copy", [], dtype=pl.String)
    d2h = pl.col(Col.NAME).cast(pl.String).str.contains(DEVICE_TO_HOST)
    copies = (
        linkage.gpu.filter((pl.col(Col.KIND) == Kind.MEMCPY) & pl.col("launch_row").is_not_null())
        .select(
            pl.col("launch_row").alias(ROW),
            pl.col("op_row").alias("_copy_op"),
            pl.when(d2h).then(pl.lit(D2H)).otherwise(pl.lit(OTHER_COPY)).alias("_dir"),
        )
        .sort("_dir", descending=True)  # "d2h" first: a call that launched both kinds counts as d2h
        .unique(ROW, keep="first", maintain_order=True)
    )
    host = (
        trace.lazy()
        .with_row_index(ROW)
        .filter(pl.col(Col.KIND).is_in([Kind.RUNTIME, Kind.DRIVER]) & pl.col(Col.TS_NS).is_not_null())
        .select(
            pl.col(ROW).cast(pl.Int64),
            pl.col(Col.PID).cast(pl.String),
            pl.col(Col.TID).cast(pl.String),
            Col.TS_NS,
        )
        .collect()
        .sort(Col.TS_NS)
    )
    queries = (
        calls.select(Col.PID, Col.TID, Col.TS_NS)
        .with_columns(issuing_op_rows(calls, linkage).alias("_op"), pl.int_range(pl.len()).alias("_q"))
        .sort(Col.TS_NS)
    )

    def nearest(exact: bool, alias: str) -> pl.DataFrame:
        found = queries.join_asof(
            host.rename({ROW: alias}),
            on=Col.TS_NS,
            by=[Col.PID, Col.TID],
            strategy="backward",
            allow_exact_matches=exact,
            check_sortedness=False,
        )
        return found.select("_q", "_op", alias)

    own = nearest(True, "_self").join(copies.rename({ROW: "_self"}), on="_self", how="left")
    before = nearest(False, "_prev").join(copies.rename({ROW: "_prev"}), on="_prev", how="left")
    same_op = (pl.col("_copy_op") == pl.col("_op")).fill_null(False)
    marked = own.select("_q", pl.col("_dir").alias("_a")).join(
        before.select("_q", pl.when(same_op).then(pl.col("_dir")).alias("_b")), on="_q"
    )
    by_query = marked.select("_q", pl.coalesce("_a", "_b").alias("copy"))
    ordered = pl.DataFrame({"_q": pl.int_range(calls.height, eager=True)}).join(
        by_query, on="_q", how="left", maintain_order="left"
    )
    return ordered["copy"]


def syncs_in_steps(ctx: RuleContext, threshold: float) -> Hit | None:
    calls = sync_calls(ctx.trace).filter(~pl.col(Col.NAME).str.contains(NOT_HOST_WAIT))
    steps = list(ctx.steps)
    bounds = [(w.start_ns, w.end_ns) for w in steps] or list(ctx.activity.window.bounds)
    if not bounds:
        return None
    # held whole by a window: one sorted search per call (intervals.inside_any), not a test per window
    found = calls.filter(intervals.inside_any(calls[Col.TS_NS], calls[END], bounds))
    per_step = found.height / max(1, len(steps) or 1)
    if found.height == 0:
        return Hit(value=0, time_at_stake_ns=0)
    found = found.with_columns(
        issuing_ops(found, ctx.linkage).fill_null("(no op)").alias("op"),
        python_context(found, ctx.linkage.scopes).alias("python"),
        copy_then_wait(found, ctx.trace, ctx.linkage).alias("copy"),
    )
    groups = (
        found.group_by(Col.NAME, "op", "python", "copy")
        .agg(pl.len().alias("calls"), pl.col(Col.DUR_NS).sum().alias("_ns"))
        .sort(
            ["_ns", Col.NAME, "op", "python", "copy"],
            descending=[True, False, False, False, False],
            nulls_last=True,
        )
    )
    evidence = tuple(
        {
            "call": r[Col.NAME],
            "op": r["op"],
            "python": r["python"],
            "calls": r["calls"],
            "time_us": round(r["_ns"] / 1e3, 3),
            "pattern": ITEM
            if r["copy"] == D2H
            else "blocking copy: a copy to or from the device, then a wait"
            if r["copy"] == OTHER_COPY
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
        # the model: the calls' host time removed (each sync made asynchronous or read once per N steps);
        # the what-if also drops their wait for the GPU, and the smaller saving wins. The claim is the GPU
        # idle time around the calls (the device drains during the wait and idles until the next launch)
        claims=ctx.idle_touching(found.select(pl.col(Col.TS_NS).alias(START), pl.col(END).alias(STOP))),
        estimate_ns=int(found[Col.DUR_NS].sum()),
        model="sync_removed",
    )


def python_context(calls: pl.DataFrame, scopes: pl.DataFrame) -> pl.Series:
    """The Python context (with_stack traces) of each call on its thread: the innermost frame of the user's own
    code around the call (a `file.py(line)` frame outside torch), else the innermost frame; null where none.
    One sweep over the frames and the calls (`enclosing.innermost_where`), not a pairing of every call with
    every frame of its thread."""
    frames = scopes.filter(pl.col(Col.KIND) == Kind.PYTHON)
    if frames.height == 0 or calls.height == 0:
        return pl.Series("python", [None] * calls.height, dtype=pl.String)
    # prefer the caller's own source line over torch's internals and built-in functions (the patterns run on
    # the distinct names, not on every frame)
    distinct = frames[Col.NAME].unique().drop_nulls().cast(pl.String)
    own_names = distinct.filter(
        distinct.str.contains(r"\.py\(\d+\)") & ~distinct.str.contains(r"^(torch|<built-in)")
    )
    own = frames[Col.NAME].is_in(own_names.implode()) if own_names.len() else None
    frame_lanes, call_lanes = enclosing.lanes(frames, calls)
    spans = enclosing.Spans.of(frames, frame_lanes), enclosing.Spans.of(calls, call_lanes, end=END)
    found = (
        enclosing.innermost(*spans)
        if own is None
        else enclosing.innermost_where(*spans, own.fill_null(False).to_numpy())
    )
    return at_positions(frames[Col.NAME], found).cast(pl.String).alias("python")


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
