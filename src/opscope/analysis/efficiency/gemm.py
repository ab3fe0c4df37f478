"""GEMM family sizers: FLOPs = 2·M·N·K (·batch), bytes = the matrices read + the output written (in the first
matrix's dtype; `_scaled_mm` in its out_dtype). The bias / added tensor of addmm / baddbmm / linear is read
but its addition is not counted as FLOPs. Formulas: docs/efficiency.md."""

from __future__ import annotations

import math

from opscope.analysis.efficiency.cost import Args, Concrete, Cost, Unsized, arg, need, opt_bytes
from opscope.analysis.efficiency.shapes import Tensor, broadcast

# c10::ScalarType codes (as Concrete Inputs write a dtype argument) -> bytes per element
_SCALAR_TYPE_BYTES = {
    0: 1,
    1: 1,
    2: 2,
    3: 4,
    4: 8,
    5: 2,
    6: 4,
    7: 8,
    11: 1,
    15: 2,
    23: 1,
    24: 1,
    25: 1,
    26: 1,
}


def _gemm(batch: int, m: int, n: int, k: int, a: Tensor, read: int, out_itemsize: int | None = None) -> Cost:
    out = batch * m * n * (out_itemsize or a.itemsize)
    return Cost("gemm", 2 * batch * m * n * k, read + out, a.dtype, "exact")


def mm(args: Args, _c: Concrete) -> Cost | Unsized:  # (a[M,K], b[K,N])
    t = need(args, 0, 1)
    if t is None or len(t[0].shape) != 2 or len(t[1].shape) != 2:
        return Unsized("needs two 2-D matrices")
    (m, k), (_, n) = t[0].shape, t[1].shape
    return _gemm(1, m, n, k, t[0], t[0].nbytes + t[1].nbytes)


def addmm(args: Args, c: Concrete) -> Cost | Unsized:  # (bias, a, b)
    cost = mm(args[1:], c)
    return (
        Cost("gemm", cost.flops, cost.bytes + opt_bytes(args, 0), cost.dtype, "exact")
        if isinstance(cost, Cost)
        else cost
    )


def bmm(args: Args, _c: Concrete) -> Cost | Unsized:  # (a[B,M,K], b[B,K,N])
    t = need(args, 0, 1)
    if t is None or len(t[0].shape) != 3 or len(t[1].shape) != 3:
        return Unsized("needs two 3-D batches of matrices")
    (b, m, k), (_, _, n) = t[0].shape, t[1].shape
    return _gemm(b, m, n, k, t[0], t[0].nbytes + t[1].nbytes)


def baddbmm(args: Args, c: Concrete) -> Cost | Unsized:  # (c, a, b)
    cost = bmm(args[1:], c)
    return (
        Cost("gemm", cost.flops, cost.bytes + opt_bytes(args, 0), cost.dtype, "exact")
        if isinstance(cost, Cost)
        else cost
    )


def matmul(args: Args, _c: Concrete) -> Cost | Unsized:  # torch.matmul: 1-D operands and broadcast batches
    t = need(args, 0, 1)
    if t is None or not t[0].shape or not t[1].shape:
        return Unsized("needs two tensors of at least one dimension")
    a, b = t[0].shape, t[1].shape
    m, k = (1, a[0]) if len(a) == 1 else a[-2:]
    n = 1 if len(b) == 1 else b[-1]
    batch_shape = broadcast(a[:-2], b[:-2])
    if batch_shape is None:
        return Unsized("batch dimensions do not broadcast")
    return _gemm(math.prod(batch_shape), m, n, k, t[0], t[0].nbytes + t[1].nbytes)


def linear(args: Args, _c: Concrete) -> Cost | Unsized:  # (x[..., K], w[N, K], bias[N]?)
    t = need(args, 0, 1)
    if t is None or not t[0].shape or len(t[1].shape) != 2:
        return Unsized("needs an input and a 2-D weight")
    k, n = t[0].shape[-1], t[1].shape[0]
    m = math.prod(t[0].shape[:-1])
    return _gemm(1, m, n, k, t[0], t[0].nbytes + t[1].nbytes + opt_bytes(args, 2))


def scaled_mm(args: Args, c: Concrete) -> Cost | Unsized:
    """(a[M,K], b[K,N], scale_a, scale_b, bias?, scale_result?, out_dtype?, ...): the output is in out_dtype,
    or in the inputs' dtype when out_dtype is not given."""
    t = need(args, 0, 1)
    if t is None or len(t[0].shape) != 2 or len(t[1].shape) != 2:
        return Unsized("needs two 2-D matrices")
    (m, k), (_, n) = t[0].shape, t[1].shape
    out_dtype = arg(c, 6)
    out = _SCALAR_TYPE_BYTES.get(out_dtype) if isinstance(out_dtype, int) else None
    if c is None or (out_dtype is not None and out is None):
        cost = _gemm(1, m, n, k, t[0], 0, 2)
        read = sum(opt_bytes(args, i) for i in range(6))
        return Cost(
            "gemm",
            cost.flops,
            cost.bytes + read,
            t[0].dtype,
            "estimate",
            "output assumed 2 bytes per element (out_dtype not recorded)",
        )
    return _gemm(1, m, n, k, t[0], sum(opt_bytes(args, i) for i in range(6)), out)
