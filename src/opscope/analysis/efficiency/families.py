"""The registry op name -> family sizer, and the memory-bound families' sizers (bytes read + written, no
FLOPs). GEMM, convolution and attention sizers live in gemm.py, conv.py and attention.py. An op not in
`FAMILIES` is unsized ("no model for this op"), never guessed. Formulas: docs/efficiency.md.
"""

from __future__ import annotations

import math

from opscope.analysis.efficiency import attention, conv, gather, gemm
from opscope.analysis.efficiency.cost import COMPUTE_FAMILIES, Args, Concrete, Cost, Sizer, Unsized, arg, need
from opscope.analysis.efficiency.shapes import broadcast

__all__ = ["COMPUTE_FAMILIES", "FAMILIES", "Cost", "Sizer", "Unsized"]

_NO_TENSOR = "no tensor input with a recorded dtype"


def elementwise(name: str) -> Sizer:
    """Every tensor input read once, the output (their broadcast shape) written once. The output's dtype: bool
    for comparisons, the values' (not the condition's) for `where`, else the first input's. An `out=` call
    (`aten::mul` recorded with more arguments than its functional schema has, the last a tensor) writes its
    output into that tensor: it is the output, not an input read (issue 28: counted twice, such rows showed
    more than the peak bandwidth)."""
    arity = _ARITY.get(name.removesuffix("_"))

    def size(args: Args, _c: Concrete) -> Cost | Unsized:
        out = args[-1] if arity is not None and len(args) > arity and args and args[-1] is not None else None
        ins = [t for t in (args[:-1] if out is not None else args) if t is not None]
        if not ins:
            return Unsized(_NO_TENSOR)
        shape = broadcast(*(t.shape for t in ins))
        if shape is None:
            return Unsized("input shapes do not broadcast")
        if out is not None:
            written = out.nbytes
        elif name in _COMPARISONS:
            written = math.prod(shape)  # bool, one byte per element
        else:
            values = ins[1] if name == "where" and len(ins) > 1 else ins[0]
            written = math.prod(shape) * values.itemsize
        return Cost("elementwise", None, sum(t.nbytes for t in ins) + written, ins[0].dtype, "exact")

    return size


def write_only(args: Args, _c: Concrete) -> Cost | Unsized:  # fill_, zero_: the tensor is written
    t = need(args, 0)
    if t is None:
        return Unsized(_NO_TENSOR)
    return Cost("elementwise", None, t[0].nbytes, t[0].dtype, "exact")


def same_size(family: str) -> Sizer:
    """Every tensor input read once, one output the size of the first written (norms, softmax, clone)."""

    def size(args: Args, _c: Concrete) -> Cost | Unsized:
        ins = [t for t in args if t is not None]
        if not ins or args[0] is None:
            return Unsized(_NO_TENSOR)
        return Cost(family, None, sum(t.nbytes for t in ins) + ins[0].nbytes, ins[0].dtype, "exact")

    return size


def copy_(args: Args, _c: Concrete) -> Cost | Unsized:  # (dst, src): read src, write dst
    t = need(args, 0, 1)
    if t is None:
        return Unsized("needs destination and source tensors")
    return Cost("copy", None, t[0].nbytes + t[1].nbytes, t[0].dtype, "exact")


def reduction(args: Args, c: Concrete) -> Cost | Unsized:
    """(x, dim?, keepdim?, ...): x read, the reduced output written. `dim` (a list; [] or absent: every dim)
    is a Concrete Input: without Concrete Inputs the output is not counted (an estimate)."""
    t = need(args, 0)
    if t is None:
        return Unsized(_NO_TENSOR)
    x = t[0]
    if c is None:
        return Cost(
            "reduction",
            None,
            x.nbytes,
            x.dtype,
            "estimate",
            "output not counted: the reduced dims are not recorded (Concrete Inputs)",
        )
    dims = arg(c, 1)
    rank = len(x.shape)
    if isinstance(dims, int) and not isinstance(dims, bool):
        dims = [dims]
    if not isinstance(dims, list) or not dims:
        kept = 1  # no dim list: every dim reduced
    elif all(isinstance(d, int) and -rank <= d < rank for d in dims):
        gone = {d % rank for d in dims if isinstance(d, int)}
        kept = math.prod(s for i, s in enumerate(x.shape) if i not in gone)
    else:
        return Unsized("reduced dims out of range")
    return Cost("reduction", None, x.nbytes + kept * x.itemsize, x.dtype, "exact")


_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
# Arguments of each elementwise op's functional schema (scalars included: the profiler records every argument, a
# scalar as []); an `out=` overload records one more, the output tensor, last. In-place forms (`add_`) take the
# functional form's arguments.
_ARITY = {
    "abs": 1,
    "add": 3,
    "addcdiv": 4,
    "addcmul": 4,
    "clamp": 3,
    "clamp_min": 2,
    "clamp_max": 2,
    "cos": 1,
    "div": 2,
    "eq": 2,
    "exp": 1,
    "ge": 2,
    "gelu": 2,
    "gelu_backward": 3,
    "gt": 2,
    "hardswish": 1,
    "le": 2,
    "leaky_relu": 2,
    "log": 1,
    "lt": 2,
    "maximum": 2,
    "minimum": 2,
    "mul": 2,
    "ne": 2,
    "neg": 1,
    "pow": 2,
    "relu": 1,
    "rsqrt": 1,
    "sigmoid": 1,
    "sigmoid_backward": 2,
    "silu": 1,
    "silu_backward": 2,
    "sin": 1,
    "sqrt": 1,
    "sub": 3,
    "tanh": 1,
    "tanh_backward": 2,
    "threshold_backward": 3,
    "where": 3,
    "lerp": 3,
    "masked_fill": 3,
    "reciprocal": 1,
    "erf": 1,
}
_ELEMENTWISE = [
    "abs",
    "add",
    "add_",
    "addcdiv",
    "addcdiv_",
    "addcmul",
    "addcmul_",
    "clamp",
    "clamp_",
    "clamp_min",
    "clamp_min_",
    "clamp_max",
    "clamp_max_",
    "cos",
    "div",
    "div_",
    "eq",
    "exp",
    "exp_",
    "ge",
    "gelu",
    "gelu_",
    "gelu_backward",
    "gt",
    "hardswish",
    "le",
    "leaky_relu",
    "log",
    "lt",
    "maximum",
    "minimum",
    "mul",
    "mul_",
    "ne",
    "neg",
    "pow",
    "relu",
    "relu_",
    "rsqrt",
    "rsqrt_",
    "sigmoid",
    "sigmoid_",
    "sigmoid_backward",
    "silu",
    "silu_",
    "silu_backward",
    "sin",
    "sqrt",
    "sub",
    "sub_",
    "tanh",
    "tanh_",
    "tanh_backward",
    "threshold_backward",
    "where",
    "lerp_",
    "masked_fill",
    "masked_fill_",
    "reciprocal",
    "erf",
]
_NORM = [
    "layer_norm",
    "native_layer_norm",
    "batch_norm",
    "native_batch_norm",
    "cudnn_batch_norm",
    "_batch_norm_impl_index",
    "group_norm",
    "native_group_norm",
    "rms_norm",
    "_fused_rms_norm",
    "instance_norm",
]
_SOFTMAX = ("softmax", "_softmax", "log_softmax", "_log_softmax", "_safe_softmax")
_REDUCTION = ("sum", "mean", "amax", "amin")


def _registry() -> dict[str, Sizer]:
    table: dict[str, Sizer] = {
        "mm": gemm.mm,
        "addmm": gemm.addmm,
        "bmm": gemm.bmm,
        "baddbmm": gemm.baddbmm,
        "matmul": gemm.matmul,
        "linear": gemm.linear,
        "_scaled_mm": gemm.scaled_mm,
        "convolution_backward": conv.convolution_backward,
        "cudnn_convolution_backward": conv.cudnn_convolution_backward,
        "cudnn_convolution_backward_input": conv.backward_input,
        "copy_": copy_,
        "fill_": write_only,
        "zero_": write_only,
        "clone": same_size("copy"),
        "contiguous": same_size("copy"),
        "index_select": gather.index_select,
        "arange": gather.arange,
    }
    table.update({name: conv.forward(positions) for name, positions in conv.CONV_ARGS.items()})
    table.update({name: attention.sizer(*spec) for name, spec in attention.ATTENTION.items()})
    table.update({name: elementwise(name) for name in _ELEMENTWISE})
    table.update(dict.fromkeys(_NORM, same_size("norm")))
    table.update(dict.fromkeys(_SOFTMAX, same_size("softmax")))
    table.update(dict.fromkeys(_REDUCTION, reduction))
    return {f"aten::{name}": sizer for name, sizer in table.items()}


FAMILIES: dict[str, Sizer] = _registry()
