"""The kernel-category rule table, kept as data: (category, regular expression) pairs, first match wins.

Patterns are matched (case-insensitively, anywhere in the name) against the full kernel name, by polars (Rust's
`regex` crate) over all distinct names at once: write them in the syntax common to Rust's `regex` and Python's
`re` (no look-around, no backreferences). The order matters:
communication before everything (NCCL kernel names contain "Reduce"), the semantic families (attention,
softmax, normalization) before the generic building blocks they are made of (GEMM, reduction, elementwise),
convolution before GEMM (cuDNN's implicit-GEMM and `*_convolve_sgemm` kernels are convolutions).
GPU events of kind memcpy / memset are categorised by kind before these rules are consulted.

Each rule is unit-tested with real kernel names from the trace corpus (tests/test_categories.py); add the
name that motivated a new rule to that test.
"""

from __future__ import annotations

from typing import Final

GEMM: Final = "gemm"
CONVOLUTION: Final = "convolution"
ATTENTION: Final = "attention"
ELEMENTWISE: Final = "elementwise"
REDUCTION: Final = "reduction"
NORMALIZATION: Final = "normalization"
SOFTMAX: Final = "softmax"
COMMUNICATION: Final = "communication"
MEMCPY: Final = "memcpy"
MEMSET: Final = "memset"
OTHER: Final = "other"

CATEGORIES: Final[tuple[str, ...]] = (
    GEMM,
    CONVOLUTION,
    ATTENTION,
    ELEMENTWISE,
    REDUCTION,
    NORMALIZATION,
    SOFTMAX,
    COMMUNICATION,
    MEMCPY,
    MEMSET,
    OTHER,
)

RULES: Final[tuple[tuple[str, str], ...]] = (
    # NCCL / RCCL / MSCCL collectives, vLLM / SGLang / TensorRT-LLM custom all-reduce (cross_device_reduce_*,
    # one/two-shot allreduce, quick all-reduce), DeepEP expert-parallel dispatch / combine and their notify
    # kernels, NVSHMEM, and custom all-to-all kernels.
    (
        COMMUNICATION,
        r"\bnccl|^nccl|rccl|msccl|cross_device_reduce|custom_?all_?reduce|all_?reduce_kernel"
        r"|all_?gather_kernel|reduce_?scatter_kernel|alltoall|all_to_all|allreduce|quick_?all_?reduce"
        r"|dpsk::ep|deep_?ep|(inter|intra)node::(dispatch|combine)|notify_dispatch|notify_combine"
        r"|cached_notify|nvshmem"
        # XLA's collective HLO names (all-reduce-start.1, all-gather, ...) where a kernel carries them
        r"|all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute",
    ),
    # ROCm's blit kernels that implement hipMemcpy / hipMemset on older runtimes.
    (MEMCPY, r"__amd_rocclr_copy"),
    (MEMSET, r"__amd_rocclr_fill"),
    (
        ATTENTION,
        r"flash|fmha|attention|attn|sdpa|mha_(fwd|bwd)|_mha_|xformers|paged_?attn|decode_?attention"
        r"|prefill_?attention|mla_(decode|prefill)|fused_multi_head"
        # cuDNN SDPA's backward helpers (dot(dO, O), dQ to 16 bits): before "cudnn" makes them convolutions
        r"|cudnn::fusion::(compute_dot_do_o|convert_dq)",
    ),
    (SOFTMAX, r"softmax"),
    (
        NORMALIZATION,
        r"(layer|rms|batch|group|instance)_?norm|bn_(fw|bw)|RowwiseMoments|ComputeFusedParams"
        r"|cuApplyLayerNorm|cuApplyRMSNorm|cuComputeGradInput|cuComputePartGradGammaBeta|welford"
        r"|norm_(fwd|bwd)_kernel|normalize_kernel|GammaBetaBackward|ComputeInternalGradients"
        r"|cuComputeGradGammaBeta|ComputeGradientFusedParams",
    ),
    # `conv` not followed by `ert` or `ers` (convert_*, hipCUB's conversion_op in a reduction's template
    # arguments), spelled without look-ahead.
    (
        CONVOLUTION,
        r"conv(?:[^e]|e[^r]|er[^ts]|er?$|$)|convolve|cudnn|scudnn|implicit_?gemm|winograd|dgrad|wgrad|fprop|fft[12]d"
        r"|im2col|col2im|igemm_(fwd|bwd|wrw)|MIOpen|naive_conv|cask_|flip_filter"
        r"|pointwise_mult_and_sum_complex|im3d2col|cudnn-conv",
    ),
    # Not GEMMs, though their names say gemm or TensorOp: FBGEMM's embedding look-ups (their arguments name
    # fbgemm_gpu), gathers and scatters, MIOpen's element-wise SubTensorOp kernels; the MoE finalize step of
    # triton_kernels' matmul_ogs sums each token's expert outputs (a reduction).
    (REDUCTION, r"_finalize_matmul"),
    (
        ELEMENTWISE,
        r"embedding_codegen|embedding_backward|dense_embedding|split_embedding|bounds_check_indices"
        r"|fbgemm_gpu::permute|embedding_?bag|gather_kernel|scatter_kernel|_scatter_|scatter_add|SubTensorOp",
    ),
    # cuBLASLt's Blackwell / Hopper `nvjet_*` kernels and the TensorRT-LLM `bmm_<dtype>_*` batched GEMMs.
    (
        GEMM,
        r"gemm|gemv|^Cijk_|cublas|hipblaslt|matmul|triton_(mm|tem|bmm)|wmma|xmma|tensorop|_ogs_|dot_kernel"
        r"|splitKreduce|mfma_f|nvjet|\bbmm_|^bmm_|dot_general|custom-call",
    ),
    # MoE routing (top-k expert choice: moe::dev::routing, vLLM's _combined_routing_compute) and finalize (the
    # weighted sum of each token's expert outputs), sorting (cub radix sort) next to scans and top-k.
    (
        REDUCTION,
        r"moe::dev::(routing|finalize)|routing_?(kernel|compute)|_routing_|moe_align|moe_sum"
        r"|finalize_?(kernel|moe)|finalizeKernel|radix_?sort|DeviceRadixSort|DeviceSegmentedRadixSort"
        r"|bitonic_?sort|sort_kernel",
    ),
    (
        REDUCTION,
        r"reduce|triton_(red|per)_|sum_kernel|mean_kernel|argmax|argmin|max_pool|avg_pool|adaptive_av"
        r"|_pool\d?d|pooling|nll_loss|NLLCriterion|cross_entropy|cumsum|cumprod|scan_kernel|DeviceScan"
        r"|scan_config|topk|norm_kernel",
    ),
    (
        ELEMENTWISE,
        r"elementwise|triton_poi_|pointwise|vectorized|unrolled|fill|copy|CatArray|index_?kernel"
        r"|index_put|gather|scatter|embedding|multi_tensor_apply|masked|where_kernel|clamp|transpose"
        r"|nchwToNhwc|nhwcToNchw|autocast|tril|triu|arange|distribution|random|dropout|gelu|silu"
        # random-number engines (rocRAND / cuRAND: xorwow, Philox, MRG32k3a, MTGP32, Sobol state set-up)
        r"|xorwow|philox|mrg32k3a|mtgp32|rocrand|curand"
        r"|relu|act_and_mul|rotary|rope|quant|cast|bitwise|compare|fused_add|eltwise|scalePacked"
        r"|upsample|interpolate|pad_kernel|cat_kernel|roll_kernel|flip_kernel|index_?select|indexSelect"
        r"|indexing_backward|kvcache"
        # XLA fusions left after the reduction / GEMM / convolution rules: loop and input fusions,
        # wrapped single ops (wrapped_broadcast.kd, loop_convert_fusion, input_transpose_fusion)
        r"|^loop_|^input_|^wrapped_|_fusion|broadcast",
    ),
)
