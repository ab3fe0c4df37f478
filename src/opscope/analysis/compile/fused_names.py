"""The aten ops an Inductor kernel fused, read from its name (`triton_poi_fused__unsafe_view_mul_silu_2`,
`cpp_fused_add_relu_0`): Inductor writes `<prefix>_fused_` then the op names joined by `_`, then an index.
Op names that themselves contain `_` are kept whole: at each position the longest run of words that is a
known op name (`aten_multiword_ops.txt`, PyTorch's own list, and `MULTI_WORD`) is taken, so
`_scaled_dot_product_flash_attention` stays one op (issue 28: it was read as `scaled, dot, product, ...`);
everything else is one word."""

from __future__ import annotations

import functools
import re
from importlib import resources
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


@functools.cache
def known_ops() -> frozenset[str]:
    """Every multi-word op name: PyTorch's aten list (data/aten_multiword_ops.txt) and `MULTI_WORD`."""
    text = resources.files("opscope.data").joinpath("aten_multiword_ops.txt").read_text(encoding="utf-8")
    names = {line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")}
    return frozenset(names | set(MULTI_WORD))


_LONGEST = 12  # words in the longest op name worth trying (`_scaled_dot_product_flash_attention_backward`: 7)


def fused_ops(name: str) -> tuple[str, ...]:
    """The op names in a fused kernel's name, in order, duplicates kept once, leading underscores dropped."""
    match = re.match(FUSED_KERNEL, name)
    if match is None:
        return ()
    body = re.sub(r"_\d+$", "", name[match.end() :])
    words = body.split("_")  # an op with a leading underscore leaves an empty word before it
    known = known_ops()
    ops: list[str] = []
    i = 0
    while i < len(words):
        for k in range(min(_LONGEST, len(words) - i), 1, -1):
            candidate = "_".join(words[i : i + k])
            if candidate in known:
                ops.append(candidate.strip("_"))
                i += k
                break
        else:
            if words[i]:
                ops.append(words[i])
            i += 1
    return tuple(dict.fromkeys(op for op in ops if op))
