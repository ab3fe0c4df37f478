"""The aten ops an Inductor kernel fused, read from its name (`triton_poi_fused__unsafe_view_mul_silu_2`,
`cpp_fused_add_relu_0`): Inductor writes `<prefix>_fused_` then the op names joined by `_`, then an index.
Op names that themselves contain `_` are matched whole from `MULTI_WORD`; everything else is one word."""

from __future__ import annotations

import re
from typing import Final

# "graph_0_": the prefix Inductor's C++ kernel profile puts before the kernel name on a CPU run
FUSED_KERNEL: Final = r"^(?:graph_\d+_)?(triton_(poi|red|per|tem)|cpp)_fused_"
KINDS: Final[dict[str, str]] = {
    "poi": "pointwise",
    "red": "reduction",
    "per": "persistent_reduction",
    "tem": "template",
    "cpp": "cpp",
}
MULTI_WORD: Final[tuple[str, ...]] = tuple(
    sorted(
        (
            "unsafe_view",
            "_unsafe_view",
            "native_layer_norm",
            "native_batch_norm",
            "native_group_norm",
            "layer_norm",
            "group_norm",
            "batch_norm",
            "_to_copy",
            "to_copy",
            "log_softmax",
            "_log_softmax",
            "_softmax",
            "index_select",
            "embedding_dense_backward",
            "scatter_add",
            "slice_scatter",
            "select_scatter",
            "constant_pad_nd",
            "new_zeros",
            "new_ones",
            "new_empty",
            "full_like",
            "zeros_like",
            "ones_like",
            "empty_like",
            "clamp_min",
            "clamp_max",
            "sigmoid_backward",
            "threshold_backward",
            "tanh_backward",
            "gelu_backward",
            "silu_backward",
            "native_dropout",
            "rand_like",
            "randn_like",
            "masked_fill",
            "index_put",
            "_native_batch_norm_legit_functional",
            "_native_batch_norm_legit_no_training",
            "convolution_backward",
            "max_pool2d_with_indices",
            "avg_pool2d",
            "adaptive_avg_pool2d",
            "upsample_nearest2d",
            "upsample_bilinear2d",
            "bitwise_and",
            "bitwise_or",
            "bitwise_not",
            "logical_and",
            "logical_or",
            "logical_not",
            "where_self",
            "scalar_tensor",
            "lift_fresh",
            "nll_loss_forward",
            "nll_loss_backward",
            "_log_softmax_backward_data",
            "_softmax_backward_data",
            "leaky_relu",
            "hardtanh",
            "addcmul",
            "addcdiv",
            "mul_tensor",
            "add_tensor",
        ),
        key=len,
        reverse=True,
    )
)


def is_fused_kernel(name: str) -> bool:
    return re.match(FUSED_KERNEL, name) is not None


def kernel_kind(name: str) -> str:
    match = re.match(FUSED_KERNEL, name)
    if match is None:
        return "other"
    return KINDS.get(match.group(2) or "cpp", "other")


def fused_ops(name: str) -> tuple[str, ...]:
    """The op names in a fused kernel's name, in order, duplicates kept once."""
    match = re.match(FUSED_KERNEL, name)
    if match is None:
        return ()
    body = re.sub(r"_\d+$", "", name[match.end() :])
    ops: list[str] = []
    rest = body
    while rest:
        rest = (
            rest.lstrip("_") if not any(rest.startswith(m) for m in MULTI_WORD if m.startswith("_")) else rest
        )
        for word in MULTI_WORD:
            if rest.startswith(word) and (len(rest) == len(word) or rest[len(word)] == "_"):
                ops.append(word.lstrip("_"))
                rest = rest[len(word) :]
                break
        else:
            word, _, rest = rest.partition("_")
            if word:
                ops.append(word)
    seen: list[str] = []
    for op in ops:
        if op not in seen:
            seen.append(op)
    return tuple(seen)
