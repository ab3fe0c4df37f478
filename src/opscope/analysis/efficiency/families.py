"""One function per op family: FLOPs and bytes of one call from its recorded shapes.

Each sizer takes the op's tensor arguments (`shapes.tensors`, None for non-tensors) and the raw Input Dims
text, and returns a `Cost` or an `Unsized` with the reason. `FAMILIES` maps op names to sizers; an op not in it
is unsized ("no model for this op"), never guessed. Formulas: docs/efficiency.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from opscope.analysis.efficiency.shapes import Tensor, broadcast


@dataclass(frozen=True)
class Cost:
    family: str  # gemm, conv, attention, elementwise, norm, softmax, reduction, copy
    flops: int | None  # per call; None for memory-bound families (bytes only)
    bytes: int  # per call: inputs read once + outputs written once
    dtype: str  # the dtype whose peak applies (first tensor input)
    model: str  # "exact" | "estimate"
    note: str = ""  # what an estimate assumed


@dataclass(frozen=True)
class Unsized:
    reason: str


Args = list[Tensor | None]
Sizer = Callable[[Args, str | None], "Cost | Unsized"]
COMPUTE_FAMILIES = ("gemm", "conv", "attention")


def _need(args: Args, *index: int) -> list[Tensor] | None:
    got = [args[i] if i < len(args) else None for i in index]
    return None if any(t is None for t in got) else [t for t in got if t is not None]


def _opt(args: Args, i: int) -> int:
    t = args[i] if i < len(args) else None
    return t.nbytes if t is not None else 0


# ---- GEMM: 2*M*N*K (*batch); bytes = inputs + output (output in the first matrix's dtype) -------------------


def _gemm(
    batch: int, m: int, n: int, k: int, a: Tensor, extra_bytes: int, model: str = "exact", note: str = ""
) -> Cost:
    out = batch * m * n * a.itemsize
    return Cost("gemm", 2 * batch * m * n * k, extra_bytes + out, a.dtype, model, note)


def mm(args: Args, _dims: str | None) -> Cost | Unsized:
    t = _need(args, 0, 1)
    if t is None or len(t[0].shape) != 2 or len(t[1].shape) != 2:
        return Unsized("needs two 2-D matrices")
    (m, k), (_, n) = t[0].shape, t[1].shape
    return _gemm(1, m, n, k, t[0], t[0].nbytes + t[1].nbytes)


def addmm(args: Args, _dims: str | None) -> Cost | Unsized:  # (bias, a, b): the bias add is not counted
    t = _need(args, 1, 2)
    if t is None or len(t[0].shape) != 2 or len(t[1].shape) != 2:
        return Unsized("needs two 2-D matrices")
    (m, k), (_, n) = t[0].shape, t[1].shape
    return _gemm(1, m, n, k, t[0], t[0].nbytes + t[1].nbytes + _opt(args, 0))


def bmm(args: Args, _dims: str | None) -> Cost | Unsized:
    t = _need(args, 0, 1)
    if t is None or len(t[0].shape) != 3 or len(t[1].shape) != 3:
        return Unsized("needs two 3-D batches of matrices")
    (b, m, k), (_, _, n) = t[0].shape, t[1].shape
    return _gemm(b, m, n, k, t[0], t[0].nbytes + t[1].nbytes)


def baddbmm(args: Args, dims: str | None) -> Cost | Unsized:  # (c, a, b)
    cost = bmm(args[1:], dims)
    return (
        Cost(cost.family, cost.flops, cost.bytes + _opt(args, 0), cost.dtype, cost.model)
        if isinstance(cost, Cost)
        else cost
    )


def matmul(args: Args, _dims: str | None) -> Cost | Unsized:
    t = _need(args, 0, 1)
    if t is None or not t[0].shape or not t[1].shape:
        return Unsized("needs two tensors of at least one dimension")
    a, b = t[0].shape, t[1].shape
    m, k = (1, a[0]) if len(a) == 1 else a[-2:]
    n = 1 if len(b) == 1 else b[-1]
    batch_shape = broadcast(a[:-2], b[:-2])
    if batch_shape is None:
        return Unsized("batch dimensions do not broadcast")
    return _gemm(math.prod(batch_shape), m, n, k, t[0], t[0].nbytes + t[1].nbytes)


def linear(args: Args, _dims: str | None) -> Cost | Unsized:  # (x[..., K], w[N, K], bias[N]?)
    t = _need(args, 0, 1)
    if t is None or not t[0].shape or len(t[1].shape) != 2:
        return Unsized("needs an input and a 2-D weight")
    k, n = t[0].shape[-1], t[1].shape[0]
    m = math.prod(t[0].shape[:-1])
    return _gemm(1, m, n, k, t[0], t[0].nbytes + t[1].nbytes + _opt(args, 2))


def scaled_mm(
    args: Args, _dims: str | None
) -> Cost | Unsized:  # (a[M,K], b[K,N], scale_a, scale_b, bias?, ...)
    t = _need(args, 0, 1)
    if t is None or len(t[0].shape) != 2 or len(t[1].shape) != 2:
        return Unsized("needs two 2-D matrices")
    (m, k), (_, n) = t[0].shape, t[1].shape
    extra = sum(_opt(args, i) for i in range(2, 5))
    # the output dtype (out_dtype) is a Concrete Input: assumed 2 bytes (bf16), the common choice
    return Cost(
        "gemm",
        2 * m * n * k,
        t[0].nbytes + t[1].nbytes + extra + 2 * m * n,
        t[0].dtype,
        "estimate",
        "output assumed 2 bytes per element (out_dtype is not in Input Dims)",
    )


# ---- convolution: 2*N*K*(C/groups)*prod(kernel)*prod(output spatial) --------------------------------------

_CONV_NOTE = (
    "output spatial size assumed equal to the input's (stride 1, same padding): stride and padding "
    "are Concrete Inputs, which opscope does not read"
)


def _conv_flops(
    n: int, k: int, c_per_group: int, kernel: tuple[int, ...], out_spatial: tuple[int, ...]
) -> int:
    return 2 * n * k * c_per_group * math.prod(kernel) * math.prod(out_spatial)


def conv(args: Args, _dims: str | None) -> Cost | Unsized:  # (input[N,C,*S], weight[K,C/g,*R], bias?, ...)
    t = _need(args, 0, 1)
    if t is None or len(t[0].shape) < 3 or len(t[1].shape) != len(t[0].shape):
        return Unsized("needs an input [N, C, ...] and a weight of the same rank")
    x, w = t
    n, spatial, k = x.shape[0], x.shape[2:], w.shape[0]
    out_bytes = n * k * math.prod(spatial) * x.itemsize
    flops = _conv_flops(n, k, w.shape[1], w.shape[2:], spatial)
    return Cost(
        "conv", flops, x.nbytes + w.nbytes + _opt(args, 2) + out_bytes, x.dtype, "estimate", _CONV_NOTE
    )


def _conv_backward(grad: Tensor, x: Tensor, w: Tensor) -> Cost:
    fwd = _conv_flops(x.shape[0], w.shape[0], w.shape[1], w.shape[2:], grad.shape[2:])
    return Cost(
        "conv",
        2 * fwd,
        grad.nbytes + 2 * x.nbytes + 2 * w.nbytes,
        x.dtype,
        "estimate",
        "both input and weight gradients assumed computed (output_mask is a Concrete Input)",
    )


def convolution_backward(args: Args, _dims: str | None) -> Cost | Unsized:  # (grad_out, input, weight, ...)
    t = _need(args, 0, 1, 2)
    if t is None or not len(t[0].shape) == len(t[1].shape) == len(t[2].shape) >= 3:
        return Unsized("needs grad_output, input and weight of the same rank")
    return _conv_backward(t[0], t[1], t[2])


def cudnn_convolution_backward(args: Args, _dims: str | None) -> Cost | Unsized:  # (input, grad_out, weight)
    t = _need(args, 0, 1, 2)
    if t is None or not len(t[0].shape) == len(t[1].shape) == len(t[2].shape) >= 3:
        return Unsized("needs input, grad_output and weight of the same rank")
    return _conv_backward(t[1], t[0], t[2])


def conv_backward_input(args: Args, _dims: str | None) -> Cost | Unsized:  # (input_size, grad_out, weight)
    t = _need(args, 1, 2)
    if t is None or len(t[0].shape) < 3 or len(t[1].shape) != len(t[0].shape):
        return Unsized("needs grad_output and weight of the same rank")
    g, w = t
    flops = _conv_flops(g.shape[0], w.shape[0], w.shape[1], w.shape[2:], g.shape[2:])
    grad_in = g.shape[0] * w.shape[1] * math.prod(g.shape[2:]) * g.itemsize
    return Cost(
        "conv",
        flops,
        g.nbytes + w.nbytes + grad_in,
        g.dtype,
        "estimate",
        "grad_input bytes assume groups = 1 and the output's spatial size",
    )


# ---- attention: 2*B*H*Sq*Sk*(D + Dv) forward (= 4*B*H*Sq*Sk*D when Dv = D) ---------------------------------

_CAUSAL_NOTE = "causal masking unknown (is_causal is a Concrete Input): counted as full attention"


def _attention(
    q: Tensor, k: Tensor, v: Tensor, heads_first: bool, factor: float, note: str
) -> Cost | Unsized:
    if not len(q.shape) == len(k.shape) == len(v.shape) == 4:
        return Unsized("needs 4-D query, key and value")
    if heads_first:  # (B, H, S, D)
        b, h, sq, d = q.shape
        sk, dv = k.shape[2], v.shape[3]
    else:  # (B, S, H, D): the flash / efficient kernels' own layout
        b, sq, h, d = q.shape
        sk, dv = k.shape[1], v.shape[3]
    fwd = 2 * b * h * sq * sk * (d + dv)
    out = b * h * sq * dv * q.itemsize
    scale = 1 if factor == 1 else 2  # backward reads grad_out and the forward output, writes dq, dk, dv
    return Cost(
        "attention",
        int(fwd * factor),
        scale * (q.nbytes + k.nbytes + v.nbytes + out),
        q.dtype,
        "estimate",
        note,
    )


def _attention_sizer(first: int, heads_first: bool, backward: bool = False) -> Sizer:
    def size(args: Args, _dims: str | None) -> Cost | Unsized:
        t = _need(args, first, first + 1, first + 2)
        if t is None:
            return Unsized("needs query, key and value tensors")
        if backward:
            return _attention(
                t[0], t[1], t[2], heads_first, 2.5, _CAUSAL_NOTE + "; backward = 2.5 x forward FLOPs"
            )
        return _attention(t[0], t[1], t[2], heads_first, 1, _CAUSAL_NOTE)

    return size


# ---- memory-bound families: bytes read + written, no FLOPs -------------------------------------------------


def elementwise(args: Args, _dims: str | None) -> Cost | Unsized:
    ins = [t for t in args if t is not None]
    if not ins:
        return Unsized("no tensor input with a recorded dtype")
    shape = broadcast(*(t.shape for t in ins))
    if shape is None:
        return Unsized("input shapes do not broadcast")
    out = math.prod(shape) * ins[0].itemsize
    return Cost("elementwise", None, sum(t.nbytes for t in ins) + out, ins[0].dtype, "exact")


def write_only(args: Args, _dims: str | None) -> Cost | Unsized:  # fill_, zero_: the tensor is written
    t = _need(args, 0)
    if t is None:
        return Unsized("no tensor input with a recorded dtype")
    return Cost("elementwise", None, t[0].nbytes, t[0].dtype, "exact")


def same_size(family: str, model: str = "exact", note: str = "") -> Sizer:
    """Read every tensor input once, write one output the size of the first (norms, softmax, clone)."""

    def size(args: Args, _dims: str | None) -> Cost | Unsized:
        ins = [t for t in args if t is not None]
        if not ins or args[0] is None:
            return Unsized("no tensor input with a recorded dtype")
        return Cost(family, None, sum(t.nbytes for t in ins) + ins[0].nbytes, ins[0].dtype, model, note)

    return size


def copy_(args: Args, _dims: str | None) -> Cost | Unsized:  # (dst, src): read src, write dst
    t = _need(args, 0, 1)
    if t is None:
        return Unsized("needs destination and source tensors")
    return Cost("copy", None, t[0].nbytes + t[1].nbytes, t[0].dtype, "exact")


def reduction(args: Args, _dims: str | None) -> Cost | Unsized:
    t = _need(args, 0)
    if t is None:
        return Unsized("no tensor input with a recorded dtype")
    return Cost(
        "reduction",
        None,
        t[0].nbytes,
        t[0].dtype,
        "estimate",
        "input read once; the (smaller) output is not counted: its size depends on Concrete Inputs",
    )


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
_SOFTMAX = ["softmax", "_softmax", "log_softmax", "_log_softmax", "_safe_softmax"]
_REDUCTION = [
    "sum",
    "mean",
    "amax",
    "amin",
    "max",
    "min",
    "argmax",
    "norm",
    "linalg_vector_norm",
    "var",
    "std",
    "var_mean",
]
_COPY = ["clone", "contiguous"]
_CONV = [
    "conv1d",
    "conv2d",
    "conv3d",
    "convolution",
    "_convolution",
    "cudnn_convolution",
    "miopen_convolution",
]


def _registry() -> dict[str, Sizer]:
    table: dict[str, Sizer] = {
        "mm": mm,
        "addmm": addmm,
        "bmm": bmm,
        "baddbmm": baddbmm,
        "matmul": matmul,
        "linear": linear,
        "_scaled_mm": scaled_mm,
        "convolution_backward": convolution_backward,
        "cudnn_convolution_backward": cudnn_convolution_backward,
        "cudnn_convolution_backward_input": conv_backward_input,
        "copy_": copy_,
        "fill_": write_only,
        "zero_": write_only,
        "scaled_dot_product_attention": _attention_sizer(0, True),
        "_scaled_dot_product_flash_attention": _attention_sizer(0, True),
        "_scaled_dot_product_efficient_attention": _attention_sizer(0, True),
        "_scaled_dot_product_cudnn_attention": _attention_sizer(0, True),
        "_flash_attention_forward": _attention_sizer(0, False),
        "_efficient_attention_forward": _attention_sizer(0, False),
        # backward: (grad_out, q, k, v, ...)
        "_scaled_dot_product_flash_attention_backward": _attention_sizer(1, True, backward=True),
        "_scaled_dot_product_efficient_attention_backward": _attention_sizer(1, True, backward=True),
        "_flash_attention_backward": _attention_sizer(1, False, backward=True),
    }
    table.update(dict.fromkeys(_CONV, conv))
    table.update(dict.fromkeys(_ELEMENTWISE, elementwise))
    table.update(dict.fromkeys(_NORM, same_size("norm")))
    table.update(dict.fromkeys(_SOFTMAX, same_size("softmax")))
    table.update(dict.fromkeys(_REDUCTION, reduction))
    table.update(dict.fromkeys(_COPY, same_size("copy")))
    return {f"aten::{name}": sizer for name, sizer in table.items()}


FAMILIES: dict[str, Sizer] = _registry()
