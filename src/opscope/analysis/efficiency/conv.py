"""Convolution sizers: FLOPs = 2·N·K·(C/groups)·prod(kernel)·prod(output spatial), bytes = input + weight (+ bias)
read and output written. The output size comes from stride / padding / dilation in Concrete Inputs; without
them it is taken equal to the input's (an estimate, stated). Backward: from grad_output's recorded size, the
gradients computed per output_mask. Formulas: docs/efficiency.md."""

from __future__ import annotations

import math

from opscope.analysis.efficiency.cost import Args, Concrete, Cost, Sizer, Unsized, arg, ints, need, opt_bytes
from opscope.analysis.efficiency.shapes import Tensor

GUESS = (
    "output spatial size taken equal to the input's (stride 1, same padding): stride and padding not "
    "recorded (Concrete Inputs)"
)

# op -> positions of (stride, padding, dilation, transposed) in its arguments (None: the op has no such arg)
CONV_ARGS: dict[str, tuple[int, int, int, int | None]] = {
    "conv1d": (3, 4, 5, None),
    "conv2d": (3, 4, 5, None),
    "conv3d": (3, 4, 5, None),
    "convolution": (3, 4, 5, 6),
    "_convolution": (3, 4, 5, 6),
    "cudnn_convolution": (3, 2, 4, None),
    "miopen_convolution": (4, 3, 5, None),
}


def flops(n: int, k: int, c_per_group: int, kernel: tuple[int, ...], out_spatial: tuple[int, ...]) -> int:
    return 2 * n * k * c_per_group * math.prod(kernel) * math.prod(out_spatial)


def output_size(
    spatial: tuple[int, ...], kernel: tuple[int, ...], stride: object, padding: object, dilation: object
) -> tuple[int, ...] | None:
    """floor((H + 2·pad − dil·(R − 1) − 1) / stride) + 1 per spatial dim; padding "same" keeps H / stride
    rounded up, "valid" is 0. None when an argument is missing or malformed."""
    rank = len(spatial)
    s, d = ints(stride, rank), ints(dilation, rank)
    if s is None or d is None or any(v <= 0 for v in s):
        return None
    if padding == "same":
        return tuple(-(-h // st) for h, st in zip(spatial, s))
    p = (0,) * rank if padding == "valid" else ints(padding, rank)
    if p is None:
        return None
    out = tuple(
        (h + 2 * pp - dd * (r - 1) - 1) // st + 1 for h, r, st, pp, dd in zip(spatial, kernel, s, p, d)
    )
    return out if all(o > 0 for o in out) else None


def forward(positions: tuple[int, int, int, int | None]) -> Sizer:
    stride_at, pad_at, dil_at, transposed_at = positions

    def size(args: Args, c: Concrete) -> Cost | Unsized:  # (input[N,C,*S], weight[K,C/g,*R], bias?, ...)
        t = need(args, 0, 1)
        if t is None or len(t[0].shape) < 3 or len(t[1].shape) != len(t[0].shape):
            return Unsized("needs an input [N, C, ...] and a weight of the same rank")
        if transposed_at is not None and arg(c, transposed_at) is True:
            return Unsized("transposed convolution: no model")
        x, w = t
        n, spatial, k, kernel = x.shape[0], x.shape[2:], w.shape[0], w.shape[2:]
        out = output_size(spatial, kernel, arg(c, stride_at), arg(c, pad_at), arg(c, dil_at))
        model, note = ("exact", "") if out is not None else ("estimate", GUESS)
        out = out or spatial
        out_bytes = n * k * math.prod(out) * x.itemsize
        return Cost(
            "conv",
            flops(n, k, w.shape[1], kernel, out),
            x.nbytes + w.nbytes + opt_bytes(args, 2) + out_bytes,
            x.dtype,
            model,
            note,
        )

    return size


def _backward(grad: Tensor, x: Tensor, w: Tensor, mask: object) -> Cost:
    """grad_input needs grad_out and weight, grad_weight needs grad_out and input; each costs the forward FLOPs.
    output_mask [input, weight, bias] from Concrete Inputs; both assumed when not recorded."""
    fwd = flops(x.shape[0], w.shape[0], w.shape[1], w.shape[2:], grad.shape[2:])
    known = isinstance(mask, list) and len(mask) >= 2 and all(isinstance(m, bool) for m in mask[:2])
    want_in, want_w = (bool(mask[0]), bool(mask[1])) if known and isinstance(mask, list) else (True, True)
    nbytes = grad.nbytes + (w.nbytes + x.nbytes if want_in else 0) + (x.nbytes + w.nbytes if want_w else 0)
    return Cost(
        "conv",
        fwd * (want_in + want_w),
        nbytes,
        x.dtype,
        "exact" if known else "estimate",
        "" if known else "both input and weight gradients assumed computed (output_mask not recorded)",
    )


def convolution_backward(
    args: Args, c: Concrete
) -> Cost | Unsized:  # (grad_out, input, weight, ..., output_mask)
    t = need(args, 0, 1, 2)
    if t is None or not len(t[0].shape) == len(t[1].shape) == len(t[2].shape) >= 3:
        return Unsized("needs grad_output, input and weight of the same rank")
    return _backward(t[0], t[1], t[2], arg(c, 10))


def cudnn_convolution_backward(
    args: Args, c: Concrete
) -> Cost | Unsized:  # (input, grad_out, weight, ..., mask)
    t = need(args, 0, 1, 2)
    if t is None or not len(t[0].shape) == len(t[1].shape) == len(t[2].shape) >= 3:
        return Unsized("needs input, grad_output and weight of the same rank")
    return _backward(t[1], t[0], t[2], arg(c, 10))


def backward_input(args: Args, _c: Concrete) -> Cost | Unsized:  # (input_size, grad_out, weight, ...)
    t = need(args, 1, 2)
    if t is None or len(t[0].shape) < 3 or len(t[1].shape) != len(t[0].shape):
        return Unsized("needs grad_output and weight of the same rank")
    g, w = t
    grad_in = g.shape[0] * w.shape[1] * math.prod(g.shape[2:]) * g.itemsize
    return Cost(
        "conv",
        flops(g.shape[0], w.shape[0], w.shape[1], w.shape[2:], g.shape[2:]),
        g.nbytes + w.nbytes + grad_in,
        g.dtype,
        "estimate",
        "grad_input bytes assume groups = 1 and the output's spatial size",
    )
