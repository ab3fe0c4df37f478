"""FLOPs and bytes per (op, Input Dims): every call sized by its family from its own Input type and Concrete
Inputs (calls with the same dims may differ in dtype or stride), then summed, so that the per-call figures
of a row are the mean over its calls and total FLOPs = flops_per_call · calls exactly."""

from __future__ import annotations

from collections import defaultdict

import polars as pl

from opscope.analysis.efficiency.cost import Cost, Unsized
from opscope.analysis.efficiency.families import FAMILIES
from opscope.analysis.efficiency.shapes import concrete_values, tensors
from opscope.model.schema import Col

Key = tuple[str, "str | None"]


def size_call(name: str, dims: str | None, types: str | None, concrete: str | None) -> Cost | Unsized:
    """One call's cost, or why it cannot be sized."""
    sizer = FAMILIES.get(name)
    if sizer is None:
        return Unsized("no model for this op")
    if dims is None:
        return Unsized("no Input Dims recorded (record_shapes off)")
    args = tensors(dims, types)
    if args is None:
        return Unsized("no Input type recorded" if types is None else "Input Dims or Input type unreadable")
    return sizer(args, concrete_values(concrete))


def size_ops(scopes: pl.DataFrame) -> dict[Key, Cost | Unsized]:
    """Per (name, input_dims) of the modelled ops in `scopes` (columns name, input_dims, input_types,
    concrete_inputs): the mean cost per call over its calls; Unsized when any of its calls is."""
    variants = (
        scopes.filter(pl.col(Col.NAME).is_in(list(FAMILIES)))
        .group_by(Col.NAME, Col.INPUT_DIMS, Col.INPUT_TYPES, Col.CONCRETE_INPUTS)
        .agg(pl.len().alias("calls"))
        .sort(Col.NAME, Col.INPUT_DIMS, Col.INPUT_TYPES, Col.CONCRETE_INPUTS, "calls", nulls_last=True)
    )
    parts: dict[Key, list[tuple[int, Cost | Unsized]]] = defaultdict(list)
    for name, dims, types, concrete, calls in variants.iter_rows():
        parts[(name, dims)].append((calls, size_call(name, dims, types, concrete)))
    return {key: _combine(found) for key, found in parts.items()}


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
