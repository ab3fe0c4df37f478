"""FLOPs and bytes per (op, Input Dims): every call sized by its family from its own Input type and Concrete
Inputs (calls with the same dims may differ in dtype or stride), then summed, so that the per-call figures
of a row are the mean over its calls and total FLOPs = flops_per_call · calls exactly."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import polars as pl

from opscope.analysis.efficiency import gather
from opscope.analysis.efficiency.cost import Cost, Unsized
from opscope.analysis.efficiency.families import FAMILIES
from opscope.analysis.efficiency.shapes import DTYPES, concrete_values, tensors
from opscope.model.schema import Col

Key = tuple[str, "str | None"]
LIST_OPS = ("aten::cat",)  # sized from a TensorList (gather.cat), with the dtype of the inputs' producer
MODELLED = (*FAMILIES, *LIST_OPS)
LIST_DTYPE = "list_dtype"  # the scopes column size_ops reads the TensorList dtype label from
_SIZES = {label: size for size, label in DTYPES.values()}
_CASTS = ("aten::to", "aten::_to_copy", "aten::type_as")  # their output dtype is not their input's
_LOOK_BACK = 64  # ops examined before a cat for the producer of its inputs


def size_call(
    name: str, dims: str | None, types: str | None, concrete: str | None, list_dtype: str | None = None
) -> Cost | Unsized:
    """One call's cost, or why it cannot be sized. `list_dtype`: the dtype label of a TensorList input
    (aten::cat), found by `list_dtypes`; None: not known."""
    if dims is None and name in MODELLED:
        return Unsized("no Input Dims recorded (record_shapes off)")
    if name in LIST_OPS:
        shapes = gather.tensor_list(dims, types, 0)
        if shapes is None:
            return Unsized("no Input type recorded" if types is None else "needs a TensorList of shapes")
        size = _SIZES.get(list_dtype) if list_dtype else None
        return gather.cat(shapes, (size, list_dtype) if size and list_dtype else None)
    sizer = FAMILIES.get(name)
    if sizer is None:
        return Unsized("no model for this op")
    args = tensors(dims, types)
    if args is None:
        return Unsized("no Input type recorded" if types is None else "Input Dims or Input type unreadable")
    return sizer(args, concrete_values(concrete))


def size_ops(scopes: pl.DataFrame) -> dict[Key, Cost | Unsized]:
    """Per (name, input_dims) of the modelled ops in `scopes` (columns name, input_dims, input_types,
    concrete_inputs, and list_dtype when present): the mean cost per call over its calls; Unsized when any of
    its calls is."""
    if LIST_DTYPE not in scopes.columns:
        scopes = scopes.with_columns(pl.lit(None, dtype=pl.String).alias(LIST_DTYPE))
    group = (Col.NAME, Col.INPUT_DIMS, Col.INPUT_TYPES, Col.CONCRETE_INPUTS, LIST_DTYPE)
    variants = (
        scopes.filter(pl.col(Col.NAME).is_in(list(MODELLED)))
        .group_by(*group)
        .agg(pl.len().alias("calls"))
        .sort(*group, "calls", nulls_last=True)
    )
    parts: dict[Key, list[tuple[int, Cost | Unsized]]] = defaultdict(list)
    for name, dims, types, concrete, list_dtype, calls in variants.iter_rows():
        parts[(name, dims)].append((calls, size_call(name, dims, types, concrete, list_dtype)))
    return {key: _combine(found) for key, found in parts.items()}


def list_dtypes(scopes: pl.DataFrame) -> pl.DataFrame:
    """(row, list_dtype) of every aten::cat call whose inputs' producer is found: walking back over the ops
    of the same thread that ended before the cat began (latest start first, at most _LOOK_BACK), the first
    with a tensor argument of as many elements as one of the cat's inputs gives that tensor's dtype (views,
    transposes, elementwise ops and copy_'s destination keep it); a cast op (aten::to, _to_copy, type_as)
    met first ends the search (its output dtype is not recorded). `scopes`: row, name, input_dims,
    input_types, pid, tid, ts_ns, dur_ns."""
    found: list[tuple[int, str]] = []
    # only the cats with their inputs' shapes and types recorded can be given a dtype (`gather.tensor_list`):
    # a trace profiled without shapes walks no lane at all (x64: 1.5 M ops sorted for none, +180 MB)
    recorded = [(pl.col(c).str.len_bytes() > 0).fill_null(False) for c in (Col.INPUT_DIMS, Col.INPUT_TYPES)]
    cats = scopes.filter(pl.col(Col.NAME).is_in(list(LIST_OPS)) & recorded[0] & recorded[1])
    if cats.height == 0:
        return pl.DataFrame(found, schema={"row": pl.Int64, LIST_DTYPE: pl.String}, orient="row")
    threads = cats.select(Col.PID, Col.TID).unique().with_row_index("_lane")
    cats = cats.join(threads, on=[Col.PID, Col.TID])
    # The ops of the cats' threads in (lane, start) order, as positions into `scopes`: only integers are
    # sorted (sorting the op table itself moved its text columns: 0.26 s for 1.5 M ops), and only the ops
    # within reach of a cat are gathered from `scopes`.
    ops = (
        scopes.select(pl.int_range(pl.len(), dtype=pl.Int64).alias("_at"), Col.PID, Col.TID, Col.TS_NS)
        .join(threads, on=[Col.PID, Col.TID])
        .select("_at", "_lane", Col.TS_NS)
        .sort("_lane", Col.TS_NS, maintain_order=True)
    )
    lanes = ops["_lane"].to_numpy()
    bounds = np.flatnonzero(np.r_[True, lanes[1:] != lanes[:-1], True]) if len(lanes) else np.zeros(1, int)
    reach = 4 * _LOOK_BACK  # _producer_dtype reads at most this many ops before a cat
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        lane_cats = cats.filter(pl.col("_lane") == int(lanes[lo])).select(
            "row", Col.INPUT_DIMS, Col.INPUT_TYPES, Col.TS_NS
        )
        starts = ops[Col.TS_NS].to_numpy()[lo:hi]
        before = np.searchsorted(starts, lane_cats[Col.TS_NS].to_numpy(), side="left")
        # Only the ops within reach of a cat become Python rows (not the whole lane: a Python object per op of
        # a multi-GB trace was the largest allocation of `opscope analyze`).
        marks = np.zeros(len(starts) + 1, dtype=np.int64)
        np.add.at(marks, np.maximum(before - reach, 0), 1)
        np.add.at(marks, before, -1)
        wanted = np.flatnonzero(np.cumsum(marks[:-1]) > 0)
        at = ops["_at"].to_numpy()[lo:hi][wanted]
        picked = scopes[at].select(Col.NAME, Col.INPUT_DIMS, Col.INPUT_TYPES, Col.TS_NS, Col.DUR_NS).rows()
        rows = dict(zip(wanted.tolist(), picked, strict=True))
        for (row, dims, types, ts), position in zip(lane_cats.iter_rows(), before.tolist(), strict=True):
            shapes = gather.tensor_list(dims, types, 0)
            if shapes is None:
                continue
            label = _producer_dtype(rows, position, ts, {gather.numel(s) for s in shapes})
            if label is not None:
                found.append((row, label))
    return pl.DataFrame(found, schema={"row": pl.Int64, LIST_DTYPE: pl.String}, orient="row")


def _producer_dtype(
    rows: dict[int, tuple[str, str | None, str | None, int, int]], before: int, start: int, sizes: set[int]
) -> str | None:
    """`rows`: the lane's ops by position (at least those within 4 * _LOOK_BACK before `before`)."""
    looked = 0
    for position in range(before - 1, max(0, before - 4 * _LOOK_BACK) - 1, -1):
        name, dims, types, ts, dur = rows[position]
        if ts + dur > start:  # an enclosing op, or one still running
            continue
        if name in _CASTS:
            return None
        for t in tensors(dims, types) or []:
            if t is not None and t.numel in sizes:
                return t.dtype
        looked += 1
        if looked >= _LOOK_BACK:
            break
    return None


def _combine(found: list[tuple[int, Cost | Unsized]]) -> Cost | Unsized:
    for _, cost in found:
        if isinstance(cost, Unsized):
            return cost
    costs = [(n, c) for n, c in found if isinstance(c, Cost)]
    if len(costs) == 1:
        return costs[0][1]
    calls = sum(n for n, _ in costs)
    main = max(costs, key=lambda nc: nc[0])[1]  # the most frequent variant names the dtype and family
    flops = (
        None if any(c.flops is None for _, c in costs) else sum(n * (c.flops or 0) for n, c in costs) / calls
    )
    estimate = any(c.model == "estimate" for _, c in costs)
    dtypes = {c.dtype for _, c in costs}
    notes = sorted({c.note for _, c in costs if c.note})
    return Cost(
        main.family,
        flops,
        sum(n * c.bytes for n, c in costs) / calls,
        main.dtype if len(dtypes) == 1 else "mixed",
        "estimate" if estimate else "exact",
        "; ".join(notes),
    )
