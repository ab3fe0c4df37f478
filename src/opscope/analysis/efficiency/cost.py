"""What a family sizer returns (`Cost` or `Unsized`) and the small helpers every sizer shares.

A sizer takes the op's tensor arguments (`shapes.tensors`: None for non-tensors) and its Concrete Inputs
(`shapes.concrete_values`: the scalar arguments, None where the trace has none) and returns the FLOPs and bytes
of one call. Formulas: docs/efficiency.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from opscope.analysis.efficiency.shapes import Tensor


@dataclass(frozen=True)
class Cost:
    family: str  # gemm, conv, attention, elementwise, norm, softmax, reduction, copy
    flops: float | None  # per call; None for memory-bound families (bytes only)
    bytes: float  # per call: inputs read once + outputs written once
    dtype: str  # the dtype whose peak applies (first matrix / tensor input)
    model: str  # "exact" | "estimate"
    note: str = ""  # what an estimate assumed, or a convention that applies (causal attention)


@dataclass(frozen=True)
class Unsized:
    reason: str


Args = list[Tensor | None]
Concrete = list[object] | None
Sizer = Callable[[Args, Concrete], "Cost | Unsized"]
COMPUTE_FAMILIES = ("gemm", "conv", "attention")


def need(args: Args, *index: int) -> list[Tensor] | None:
    """The tensors at these argument positions, or None when one is missing."""
    got = [args[i] if i < len(args) else None for i in index]
    return None if any(t is None for t in got) else [t for t in got if t is not None]


def opt_bytes(args: Args, i: int) -> int:
    """Bytes of an optional tensor argument (0 when absent)."""
    t = args[i] if i < len(args) else None
    return t.nbytes if t is not None else 0


def arg(concrete: Concrete, i: int) -> object:
    """A Concrete Input by position, None when not recorded."""
    return concrete[i] if concrete is not None and i < len(concrete) else None


def ints(value: object, rank: int) -> tuple[int, ...] | None:
    """An int list argument (stride, padding, ...) for `rank` spatial dims: a one-element list or an int is
    repeated, as torch does."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return (value,) * rank
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        if len(value) == rank:
            return tuple(value)
        if len(value) == 1:
            return (value[0],) * rank
    return None
