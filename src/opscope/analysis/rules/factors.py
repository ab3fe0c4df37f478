"""The speed-up factors of the advice rules' saving models, as data: what the remedy would cost as a share of
what it replaces, each with its source. `docs/advice.md` lists them; the saving models (savings.py and the rule
modules) read them from here and nowhere else.

A factor is a model, not a promise: each is the conservative end of what its source reports, so a predicted
saving errs on the small side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Factor:
    value: float
    meaning: str
    source: str


FACTORS: Final[dict[str, Factor]] = {
    "pinned_copy": Factor(
        0.5,
        "a copy from pinned host memory, as a share of the same copy from pageable memory (copies of at least "
        "min_pinned_copy_bytes)",
        "NVIDIA developer blog, 'How to Optimize Data Transfers in CUDA C/C++' (pageable copies are staged "
        "through a pinned buffer; the measured speed-up of pinned copies ranges up to about 2x)",
    ),
    "min_pinned_copy_bytes": Factor(
        65536,
        "smaller copies are bound by their fixed latency, not bandwidth: pinning them saves nothing",
        "CUDA samples, bandwidthTest (shmoo mode): bandwidth is latency-bound below about 64 KiB",
    ),
    "fused_attention": Factor(
        0.5,
        "a fused attention kernel (FlashAttention / scaled_dot_product_attention), as a share of the unfused "
        "matmul -> softmax -> matmul chain",
        "Dao et al., 'FlashAttention' (arXiv:2205.14135): 2-4x faster than standard PyTorch attention",
    ),
    "aligned_gemm": Factor(
        0.5,
        "a GEMM / convolution with its sizes padded to the tensor-core multiple, as a share of the misaligned "
        "one",
        "NVIDIA Deep Learning Performance Guide, 'Matrix Multiplication Background': misaligned sizes fall back "
        "to slower kernels (align1 / align2 or no tensor cores); 2x is the conservative end",
    ),
    "tensor_core_gemm": Factor(
        0.5,
        "an fp32 GEMM / convolution run on tensor cores (TF32, or bf16 / fp16 under autocast), as a share of "
        "the same on CUDA cores",
        "NVIDIA A100 Tensor Core GPU Architecture whitepaper: TF32 tensor cores have 8x the fp32 peak; 2x is "
        "the conservative end for whole kernels",
    ),
    "fused_chain": Factor(
        1.0,
        "a fused chain of short elementwise / normalisation kernels costs about its longest kernel (one read "
        "and one write instead of one per kernel)",
        "opscope model (memory-bound kernels: time follows bytes moved)",
    ),
}


def factor(name: str) -> float:
    return FACTORS[name].value
