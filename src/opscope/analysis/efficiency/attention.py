"""Attention sizers: forward FLOPs = 2·B·H·Sq·Sk·(D + Dv) (= 4·B·H·Sq·Sk·D), halved when the call is causal
(is_causal in Concrete Inputs); bytes = q + k + v read, output written. Backward: 2.5 × the forward FLOPs (the
FlashAttention convention: five matrix products against two, one of them the recomputed scores), bytes twice
the forward's. Formulas: docs/efficiency.md."""

from __future__ import annotations

from opscope.analysis.efficiency.cost import Args, Concrete, Cost, Sizer, Unsized, arg, need

UNKNOWN_CAUSAL = "is_causal not recorded (Concrete Inputs): counted as full attention"
CAUSAL = "causal: half the FLOPs of full attention"
BACKWARD = "backward = 2.5 x forward FLOPs (FlashAttention convention)"

# op -> (position of q, heads before sequence?, position of is_causal (or custom_mask_type), backward?)
ATTENTION: dict[str, tuple[int, bool, int, bool]] = {
    "scaled_dot_product_attention": (0, True, 5, False),
    "_scaled_dot_product_flash_attention": (0, True, 4, False),
    "_scaled_dot_product_efficient_attention": (0, True, 6, False),
    "_scaled_dot_product_cudnn_attention": (0, True, 6, False),
    "_flash_attention_forward": (0, False, 8, False),
    "_efficient_attention_forward": (0, False, 9, False),  # custom_mask_type: 0 none, 1 / 2 causal
    "_scaled_dot_product_flash_attention_backward": (1, True, 11, True),
    "_scaled_dot_product_efficient_attention_backward": (1, True, 11, True),
    "_flash_attention_backward": (1, False, 11, True),
}


def _causal(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):  # custom_mask_type
        return value != 0
    return None


def sizer(first: int, heads_first: bool, causal_at: int, backward: bool) -> Sizer:
    def size(args: Args, c: Concrete) -> Cost | Unsized:
        t = need(args, first, first + 1, first + 2)
        if t is None:
            return Unsized("needs query, key and value tensors")
        q, k, v = t
        if not len(q.shape) == len(k.shape) == len(v.shape) == 4:
            return Unsized("needs 4-D query, key and value")
        if heads_first:  # (B, H, S, D)
            b, h, sq, d = q.shape
            sk, dv = k.shape[2], v.shape[3]
        else:  # (B, S, H, D): the flash / efficient kernels' own layout
            b, sq, h, d = q.shape
            sk, dv = k.shape[1], v.shape[3]
        causal = _causal(arg(c, causal_at))
        flops = 2 * b * h * sq * sk * (d + dv) * (0.5 if causal else 1.0) * (2.5 if backward else 1.0)
        nbytes = (q.nbytes + k.nbytes + v.nbytes + b * h * sq * dv * q.itemsize) * (2 if backward else 1)
        notes = [UNKNOWN_CAUSAL if causal is None else CAUSAL if causal else ""] + (
            [BACKWARD] if backward else []
        )
        model = "estimate" if causal is None or backward else "exact"
        return Cost("attention", flops, nbytes, q.dtype, model, "; ".join(n for n in notes if n))

    return size
