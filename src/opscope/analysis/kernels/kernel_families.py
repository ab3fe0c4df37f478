"""Kernel knowledge as data: one row per kernel-name family, first match wins (`kernel_facts.py` applies them).

Each row says what a kernel's name tells about it: the vendor and library that wrote it, the math unit it runs
on (tensor core / CUDA core on NVIDIA, matrix core / SIMT on AMD; a vendor-neutral row says `tensor_core` for
"the GPU's matrix unit" and `cuda_core` for its vector units), the input and accumulator data types where the
name spells them, the lowest architecture it was built for, whether it is a warp-specialised / persistent kernel
(one CTA per SM by design: occupancy rules do not apply), its category (category_rules.py decides categories;
this column documents the family, and tests/test_kernel_families.py checks the two agree on real names) and a
source for each row. docs/advice.md ("Kernel families") lists them.

Patterns are Python regular expressions, searched anywhere in the full kernel name, case-insensitively unless
the row says otherwise. Named groups carry what the name spells: `arch` (formatted with `arch_format`, e.g.
"sm{}" or "gfx{}"), `input` / `input2` (the A operand's data type; `input2` is the fallback when `input` did not
match), `input_b` (the B operand, when it differs) and `acc` (the accumulator). Group values are read through the
row's `letters` (library-specific one-letter codes) and then `kernel_facts.DTYPES`.

Order matters: specific rows (an `_ffma` SIMT xmma kernel, a persistent CUTLASS 3 schedule, MIOpen's
`SubTensorOp` element-wise kernels that contain "TensorOp") come before the generic ones they would also match.
Every row is unit-tested with real kernel names (tests/test_kernel_families.py lists each name and its trace).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from opscope.analysis.kernels.category_rules import (
    ATTENTION,
    COMMUNICATION,
    CONVOLUTION,
    ELEMENTWISE,
    GEMM,
    NORMALIZATION,
    REDUCTION,
)

NVIDIA: Final = "nvidia"
AMD: Final = "amd"
ANY: Final = "any"  # Triton, NCCL/RCCL, FBGEMM, XLA: the same names on both vendors

TENSOR_CORE: Final = "tensor_core"  # NVIDIA tensor cores (vendor-neutral rows: the GPU's matrix unit)
CUDA_CORE: Final = "cuda_core"  # NVIDIA CUDA cores: FFMA / HFMA2 (vendor-neutral rows: the vector units)
MATRIX_CORE: Final = "matrix_core"  # AMD matrix cores (MFMA / XDLOPS / WMMA)
SIMT: Final = "simt"  # AMD vector ALUs (VALU): no matrix instructions
NONE: Final = "none"  # data movement and synchronisation (collectives), no arithmetic of note
MATH_UNITS: Final = (TENSOR_CORE, CUDA_CORE, MATRIX_CORE, SIMT, NONE)
MATRIX_UNITS: Final = frozenset({TENSOR_CORE, MATRIX_CORE})

# Element types of xmma / CUTLASS names: A and B operands, then C and the accumulator.
_XMMA_T = r"bf16|f16|tf32|f32|f64|e4m3|e5m2|e2m1|s8|i8|u8"
# Tensile / hipBLASLt type characters (Tensile/SolutionStructs.py, DataType.toChar), longest first.
_TENSILE_T = r"4xi8|F8B8|B8F8|F8N|B8N|F8|B8|I8|X|S|D|H|B|C|Z|I"
_TENSILE_LETTERS: Final = {
    "S": "fp32",
    "D": "fp64",
    "H": "fp16",
    "B": "bf16",
    "X": "tf32",  # xf32 (CDNA 3)
    "I8": "int8",
    "4xi8": "int8",
    "I": "int32",
    "F8": "fp8",
    "F8N": "fp8",
    "B8": "fp8",
    "B8N": "fp8",
    "F8B8": "fp8",
    "B8F8": "fp8",
    "C": "complex64",
    "Z": "complex128",
}
# cuBLAS / cuDNN / CUTLASS 2 one-letter codes: s = single, h = half, d = double, i = int32, c / gc = complex.
_BLAS_LETTERS: Final = {
    "s": "fp32",
    "h": "fp16",
    "d": "fp64",
    "i": "int32",
    "c": "complex64",
    "gc": "complex64",
    "z": "complex128",
    "hc": "complex32",
}


@dataclass(frozen=True)
class KernelFamily:
    id: str
    pattern: str
    vendor: str  # NVIDIA, AMD or ANY
    library: str
    math: str  # one of MATH_UNITS
    category: str | None  # the family's category (None: varies; category_rules decides)
    source: str
    arch: str | None = None  # the lowest architecture when the name does not say it ("sm90", "gfx942")
    arch_format: str = "{}"  # how the `arch` group becomes an architecture key
    input: str | None = None  # the A operand's dtype when the name does not say it
    acc: str | None = None  # the accumulator's dtype when the name does not say it
    persistent: bool = False  # warp-specialised / persistent (one CTA per SM by design)
    block_scaled: bool = False  # block-scaled (MX / NVFP4) formats whatever the groups say
    # an NVIDIA kernel whose A operand is fp32 computes on CUDA cores (tensor cores take tf32, not fp32)
    fp32_means_cuda_core: bool = False
    ignore_case: bool = True
    letters: dict[str, str] = field(default_factory=dict)


FAMILIES: Final[tuple[KernelFamily, ...]] = (
    # --- communication: a small grid (NVLS, DeepEP's 20 SMs) or few resident blocks are by design ----------
    KernelFamily(
        "nccl",
        r"\bnccl|^nccl|ncclDevKernel|ncclKernel|rccl|msccl",
        ANY,
        "NCCL / RCCL / MSCCL",
        NONE,
        COMMUNICATION,
        "NVIDIA/nccl src/device/ (ncclDevKernel_*, ncclKernel_*); ROCm/rccl keeps the same kernel names",
    ),
    KernelFamily(
        "nvls_multimem",
        r"multimem_",
        NVIDIA,
        "PyTorch SymmetricMemory / vLLM (NVLink SHARP)",
        NONE,
        COMMUNICATION,
        "pytorch/pytorch torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemoryOps.cu "
        "(multimem_all_reduce_kernel: multimem.ld_reduce on an NVLS multicast address, Hopper and later)",
        arch="sm90",
    ),
    KernelFamily(
        "deepep",
        r"deep_?ep::|dpsk::ep|(?:inter|intra)node(?:_ll)?::(?:dispatch|combine)|notify_dispatch|notify_combine"
        r"|cached_notify|get_dispatch_layout",
        NVIDIA,
        "DeepEP",
        NONE,
        COMMUNICATION,
        "deepseek-ai/DeepEP csrc/kernels/intranode.cu, internode.cu, internode_ll.cu (dispatch / combine use a "
        "fixed number of SMs on purpose, e.g. 20)",
        persistent=True,
    ),
    KernelFamily(
        "custom_allreduce",
        r"cross_device_reduce|custom_?all_?reduce|(?:one|two)_shot_all_?reduce|quick_?all_?reduce"
        r"|allreduce_fusion|lamport|nvshmem|all_?gather_kernel|reduce_?scatter_kernel|alltoall|all_to_all",
        ANY,
        "vLLM / SGLang / PyTorch / TensorRT-LLM custom collectives",
        NONE,
        COMMUNICATION,
        "vllm-project/vllm csrc/custom_all_reduce.cuh (cross_device_reduce_1stage / 2stage); pytorch/pytorch "
        "CUDASymmetricMemoryOps.cu (one_shot_all_reduce_kernel, two_shot_all_reduce_kernel)",
    ),
    # --- not GEMMs, though their names contain "gemm" or "TensorOp" -------------------------------------------
    KernelFamily(
        "fbgemm_embedding",
        r"embedding_codegen|embedding_backward|dense_embedding|split_embedding|bounds_check_indices"
        r"|fbgemm_gpu::permute|embedding_?bag",
        ANY,
        "FBGEMM GPU / ATen EmbeddingBag",
        CUDA_CORE,
        ELEMENTWISE,
        "pytorch/FBGEMM fbgemm_gpu/codegen (split_embedding_codegen_forward_*_kernel: table look-ups, no matrix "
        "math); pytorch/pytorch aten/src/ATen/native/cuda/EmbeddingBag.cu",
    ),
    KernelFamily(
        "triton_moe_finalize",
        r"_finalize_matmul",
        ANY,
        "triton_kernels (matmul_ogs)",
        CUDA_CORE,
        REDUCTION,
        "triton-lang/triton python/triton_kernels/triton_kernels/matmul_ogs_details/_finalize_matmul.py (sums "
        "each token's expert outputs: a reduction, not a GEMM)",
    ),
    KernelFamily(
        "gather_scatter",
        r"gather_kernel|scatter_kernel|_scatter_|scatter_add|sum_and_scatter|index_?select|indexSelect"
        r"|index_put|indexing_backward",
        ANY,
        "ATen indexing",
        CUDA_CORE,
        ELEMENTWISE,
        "pytorch/pytorch aten/src/ATen/native/cuda/Indexing.cu, ScatterGatherKernel.cu (memory-bound copies)",
    ),
    KernelFamily(
        "miopen_tensor_ops",
        r"SubTensorOp|OpTensor(?:Fwd|Lite)|batched_transpose_|transpose_NCHW|transpose_NHWC",
        AMD,
        "MIOpen",
        SIMT,
        ELEMENTWISE,
        "ROCm/MIOpen src/kernels/MIOpenSubTensorOpWithScalarKernel.cl, gpu_batched_transpose_kernel/ "
        "(element-wise tensor ops and layout transposes)",
    ),
    # --- attention ---------------------------------------------------------------------------------------------
    KernelFamily(
        "flash_attention_3",
        r"(?:FlashAttn(?:Fwd|Bwd)Sm90|flash::enable_sm90|CollectiveMainloop(?:Fwd|Bwd)Sm90)"
        r"(?:.*?cutlass::(?P<input>bfloat16_t|half_t|float_e4m3_t))?",
        NVIDIA,
        "FlashAttention 3",
        TENSOR_CORE,
        ATTENTION,
        "Dao-AILab/flash-attention hopper/flash_fwd_launch_template.h "
        "(flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<...>>: TMA + WGMMA, warp-specialised)",
        arch="sm90",
        persistent=True,
    ),
    KernelFamily(
        "flash_attention_3_sm80",
        r"FlashAttn(?:Fwd|Bwd)Sm80",
        NVIDIA,
        "FlashAttention 3 (Ampere path)",
        TENSOR_CORE,
        ATTENTION,
        "Dao-AILab/flash-attention hopper/flash_fwd_launch_template.h (flash::FlashAttnFwdSm80: mma.sync)",
        arch="sm80",
    ),
    KernelFamily(
        "flash_attention_4_sm100",
        r"FlashAttention(?:Forward|Backward)Sm(?P<arch>10\d)",
        NVIDIA,
        "FlashAttention 4 (CuTe DSL)",
        TENSOR_CORE,
        ATTENTION,
        "Dao-AILab/flash-attention flash_attn/cute/flash_fwd_sm100.py (FlashAttentionForwardSm100: tcgen05, "
        "tensor memory, a persistent tile scheduler); CuTe DSL kernels are named "
        "kernel_cutlass_kernel_flash_attncute...",
        arch_format="sm{}",
        persistent=True,
    ),
    KernelFamily(
        "flash_attention_4",
        r"(?:flash_attncute\w*?)?FlashAttention(?:Forward|Backward)Sm(?P<arch>\d{2,3})|flash_attncute",
        NVIDIA,
        "FlashAttention 4 (CuTe DSL)",
        TENSOR_CORE,
        ATTENTION,
        "Dao-AILab/flash-attention flash_attn/cute/ (flash_fwd.py FlashAttentionForwardSm90, "
        "flash_fwd_sm120.py)",
        arch_format="sm{}",
    ),
    KernelFamily(
        "flash_mla",
        r"flash_?mla|flash_fwd_splitkv_mla",
        NVIDIA,
        "FlashMLA",
        TENSOR_CORE,
        ATTENTION,
        "deepseek-ai/FlashMLA csrc/ (Hopper MLA decoding kernels, warp-specialised)",
        arch="sm90",
        persistent=True,
    ),
    KernelFamily(
        "flash_attention_2",
        r"(?:flash_fwd_kernel|flash_bwd_\w*kernel|flash_fwd_splitkv_kernel|pytorch_flash::|Flash_(?:fwd|bwd)_kernel)"
        r"(?:.*?cutlass::(?P<input>bfloat16_t|half_t))?",
        NVIDIA,
        "FlashAttention 2",
        TENSOR_CORE,
        ATTENTION,
        "Dao-AILab/flash-attention csrc/flash_attn/src/flash_fwd_kernel.h (mma.sync, sm80+); PyTorch vendors it "
        "as pytorch_flash:: (aten/src/ATen/native/transformers/cuda/flash_attn)",
        arch="sm80",
    ),
    KernelFamily(
        "trtllm_gen_fmha",
        r"fmhaSm(?P<arch>\d{2,3})[a-z]?Kernel_Q(?P<input>E4m3|E2m1|Bfloat16|Fp16)",
        NVIDIA,
        "TensorRT-LLM / FlashInfer trtllm-gen FMHA",
        TENSOR_CORE,
        ATTENTION,
        "NVIDIA/TensorRT-LLM cpp/tensorrt_llm/kernels/trtllmGenKernels/fmha (cubins named "
        "fmhaSm100aKernel_Q<dtype>Kv<dtype>O<dtype>...)",
        arch_format="sm{}",
        ignore_case=False,
    ),
    KernelFamily(
        "cudnn_sdpa",
        r"cudnn_generated_fort_native_sdpa|cudnn\w*sdpa",
        NVIDIA,
        "cuDNN fused attention",
        TENSOR_CORE,
        ATTENTION,
        "NVIDIA cuDNN frontend SDPA (runtime-compiled kernels named cudnn_generated_fort_native_sdpa_*)",
        arch="sm80",
    ),
    KernelFamily(
        "xformers_fmha",
        r"fmha_cutlass[FB]_(?P<input>f16|bf16|f32)\w*?_sm(?P<arch>\d{2,3})",
        NVIDIA,
        "xFormers / PyTorch memory-efficient attention (CUTLASS)",
        TENSOR_CORE,
        ATTENTION,
        "facebookresearch/xformers and pytorch/pytorch aten/src/ATen/native/transformers/cuda/mem_eff_attention/"
        "kernels/cutlassF_*.cu (fmha_cutlassF_<dtype>_..._sm<arch>)",
        arch_format="sm{}",
    ),
    KernelFamily(
        "flashinfer_decode",
        r"(?:Batch|Single)Decode\w*Kernel",
        ANY,
        "FlashInfer",
        CUDA_CORE,
        ATTENTION,
        "flashinfer-ai/flashinfer include/flashinfer/attention/decode.cuh (decode runs on CUDA cores; with "
        "use_tensor_cores=True FlashInfer runs its prefill kernels instead)",
    ),
    KernelFamily(
        "flashinfer_prefill",
        r"(?:Batch|Single)Prefill\w*Kernel|flashinfer::\w*(?:MLA|Mla|mla|Attention)",
        ANY,
        "FlashInfer",
        TENSOR_CORE,
        ATTENTION,
        "flashinfer-ai/flashinfer include/flashinfer/attention/prefill.cuh (BatchPrefillWithPagedKVCacheKernel: "
        "mma.sync)",
    ),
    KernelFamily(
        "ck_tile_fmha",
        r"ck_tile::Fmha|FmhaFwdKernel|FmhaBwd\w*Kernel|fmha_(?:fwd|bwd)_(?:hd|d)\d+",
        AMD,
        "composable_kernel (ck_tile FMHA)",
        MATRIX_CORE,
        ATTENTION,
        "ROCm/composable_kernel include/ck_tile/ops/fmha/kernel/ (FmhaFwdKernel: MFMA)",
    ),
    KernelFamily(
        "aiter_attention",
        r"aiter.*?(?:fmha|mha_|_mha|attn|pa_fwd|paged|mla_)|fmha_v3",
        AMD,
        "aiter",
        MATRIX_CORE,
        ATTENTION,
        "ROCm/aiter csrc/ and hsa/ (assembly FMHA / paged-attention / MLA kernels on MFMA)",
    ),
    KernelFamily(
        "rocm_paged_attention_mfma",
        r"paged_attention_ll4mi_QKV_mfma",
        AMD,
        "vLLM ROCm paged attention",
        MATRIX_CORE,
        ATTENTION,
        "vllm-project/vllm csrc/rocm/attention.cu (paged_attention_ll4mi_QKV_mfma16_kernel: MFMA)",
    ),
    KernelFamily(
        "triton_attention",
        r"^_?attn_(?:fwd|bwd)|kernel_unified_attention|^_fwd_kernel|^_bwd_kernel|_attn_fwd",
        ANY,
        "Triton attention (vLLM, AMD)",
        TENSOR_CORE,
        ATTENTION,
        "vllm-project/vllm vllm/attention/ops/triton_unified_attention.py (kernel_unified_attention_2d / 3d) and "
        "triton_flash_attention.py (attn_fwd): tl.dot on the matrix unit",
    ),
    # --- GEMM: NVIDIA -------------------------------------------------------------------------------------------
    KernelFamily(
        "deepgemm",
        r"deep_gemm::(?:sm(?P<arch>\d{2,3})_(?P<input>fp8|bf16|fp4))?|dpsk::\w*gemm|dpsk::\w*Gemm",
        NVIDIA,
        "DeepGEMM",
        TENSOR_CORE,
        GEMM,
        "deepseek-ai/DeepGEMM deep_gemm/include/deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh (persistent, "
        "warp-specialised: one TMA warp group and two math warp groups, 384 threads, one CTA per SM)",
        arch="sm90",
        arch_format="sm{}",
        acc="fp32",
        persistent=True,
    ),
    KernelFamily(
        "trtllm_gen_bmm",
        r"^bmm_(?:(?:Mx)?[A-Z][a-z0-9]+_)?(?P<input>(?:Mx)?E\dm\d|Bfloat16|Fp16|Fp32|Int8)"
        r"(?P<input_b>(?:Mx)?E\dm\d|Bfloat16|Fp16|Fp32|Int8)_(?P<acc>Fp32|Fp16)(?:.*_sm(?P<arch>\d{2,3})[a-z]*$)?",
        NVIDIA,
        "TensorRT-LLM / FlashInfer trtllm-gen batched GEMM",
        TENSOR_CORE,
        GEMM,
        "NVIDIA/TensorRT-LLM cpp/tensorrt_llm/kernels/trtllmGenKernels/batchedGemm (cubins named "
        "Bmm_<C>_<A><B>_<accumulator>_t<tile>..._sm100f; Mx = MX block-scaled, E2m1 = FP4, E4m3 = FP8)",
        arch="sm100",
        arch_format="sm{}",
        ignore_case=False,
    ),
    KernelFamily(
        "nvjet",
        r"^nvjet_(?:sm(?P<arch>\d{2,3})_)?(?P<input>[a-z])(?P<acc>[a-z])[a-z]_",
        NVIDIA,
        "cuBLASLt (nvjet)",
        TENSOR_CORE,
        GEMM,
        "NVIDIA developer forums, 'Switch from sm90_xmma_gemm / cutlass_80_tensorop kernels with CUDA 12.1 to "
        "nvjet_tst kernels with CUDA 12.8' (cuBLASLt's Hopper / Blackwell GEMMs: TMA, cooperative "
        "warp-specialised schedules, coopA / coopB)",
        arch="sm90",
        arch_format="sm{}",
        persistent=True,
        letters={"h": "fp16", "t": "bf16", "s": "fp32"},
    ),
    KernelFamily(
        "xmma_ffma",
        r"^sm(?P<arch>\d{2,3})_xmma_\w*_ffma(?:_|$)",
        NVIDIA,
        "cuBLAS / cuDNN (xmma, SIMT)",
        CUDA_CORE,
        GEMM,
        "NVIDIA cuBLAS / cuDNN kernel names (closed source): the _ffma suffix is fp32 FMA on CUDA cores, e.g. "
        "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_"
        "execute_kernel__5x_cublas (fp32 GEMMs on a GH200)",
        arch_format="sm{}",
        input="fp32",
        acc="fp32",
    ),
    KernelFamily(
        "xmma",
        rf"^sm(?P<arch>\d{{2,3}})_xmma_(?:\w*?_(?P<input>{_XMMA_T})(?:{_XMMA_T})_(?:{_XMMA_T}|s32|i32)"
        r"(?P<acc>f32|f16|s32|i32|f64)_)?",
        NVIDIA,
        "cuBLAS / cuDNN (xmma)",
        TENSOR_CORE,
        None,
        "NVIDIA cuBLAS / cuDNN kernel names (closed source): sm<arch>_xmma_<op>_<A><B>_<C><accumulator>_<scale>"
        "_..., e.g. sm90_xmma_gemm_bf16bf16_bf16f32_f32_... (H100) and sm80_xmma_fprop_implicit_gemm_tf32f32_"
        "tf32f32_f32_... (A100) in the corpus",
        arch_format="sm{}",
        fp32_means_cuda_core=True,
    ),
    KernelFamily(
        "cublas_legacy_tensor",
        r"(?:^|_)(?P<arch>volta|turing|ampere|hopper)_(?:(?P<input>fp16|bf16|int8)_)?(?P<acc>h|s|i)"
        r"(?:884|1688|16816|8816|16832|161616)(?:tf32)?(?:gemm|cudnn)",
        NVIDIA,
        "cuBLAS / cuDNN (per-architecture names)",
        TENSOR_CORE,
        None,
        "NVIDIA cuBLAS / cuDNN kernel names (closed source): <arch>_[<storage>_]<accumulator><mma shape>gemm, "
        "e.g. ampere_fp16_s16816gemm_fp16_... (an HMMA m16n8k16 shape) in the corpus",
        letters=_BLAS_LETTERS,
    ),
    KernelFamily(
        "cublas_legacy_simt",
        r"(?:^|_)(?P<arch>maxwell|pascal|volta|turing|ampere|hopper)_(?:(?P<input>fp16|bf16)_)?"
        r"(?P<input2>gc|hc|s|d|c|z|h)(?:gemm|cudnn)",
        NVIDIA,
        "cuBLAS / cuDNN (per-architecture names, SIMT)",
        CUDA_CORE,
        None,
        "NVIDIA cuBLAS / cuDNN kernel names (closed source): <arch>_[<storage>_]<type>gemm / <type>cudnn without "
        "an MMA shape run on CUDA cores, e.g. volta_sgemm_128x64_nn, volta_scudnn_128x64_relu_interior_nn_v1 "
        "(fp32) and ampere_fp16_sgemm_fp16_128x64_tn (fp16 storage, fp32 FMA) in the corpus",
        letters=_BLAS_LETTERS,
    ),
    KernelFamily(
        "cutlass2_simt",
        r"cutlass_(?:(?P<arch>\d{2,3})_)?simt_(?P<input2>[sdhc])(?:gemm|\d*\w*?(?:fprop|dgrad|wgrad))",
        NVIDIA,
        "CUTLASS 2 (SIMT)",
        CUDA_CORE,
        None,
        "NVIDIA/cutlass python/cutlass_library/library.py procedural names (cutlass_<arch>_simt_<type>gemm_...: "
        "arch::OpClassSimt)",
        arch_format="sm{}",
        letters=_BLAS_LETTERS,
    ),
    KernelFamily(
        "cutlass2_tensorop",
        rf"cutlass_(?:(?P<arch>\d{{2,3}})_)?(?:wmma_)?tensorop_(?:(?P<input>{_XMMA_T})_)?(?P<acc>[shid])\d+"
        r"(?:tf32)?(?:gemm|fprop|dgrad|wgrad)(?:\w*?_(?P<input2>tf32|bf16|f16)_)?",
        NVIDIA,
        "CUTLASS 2 (tensor op)",
        TENSOR_CORE,
        None,
        "NVIDIA/cutlass python/cutlass_library/library.py procedural names "
        "(cutlass_<arch>_tensorop_<A>_<accumulator><mma shape>gemm_...: arch::OpClassTensorOp)",
        arch_format="sm{}",
        letters=_BLAS_LETTERS,
    ),
    KernelFamily(
        "cutlass3x_persistent",
        rf"cutlass3x_sm(?P<arch>\d{{2,3}})_\w*?(?:gemm_(?P<input>{_XMMA_T})_\w*?)?"
        r"(?:warpspecialized|_ws_|_ws$|cooperative|pingpong|persistent)",
        NVIDIA,
        "CUTLASS 3 (warp-specialised)",
        TENSOR_CORE,
        GEMM,
        "NVIDIA/cutlass include/cutlass/gemm/dispatch_policy.hpp (KernelTmaWarpSpecialized, ...Cooperative, "
        "...Pingpong) and python/cutlass_library/library.py (cutlass3x_sm90_tensorop_..._warpspecialized_...)",
        arch_format="sm{}",
        persistent=True,
    ),
    KernelFamily(
        "cutlass3x",
        rf"cutlass3x_sm(?P<arch>\d{{2,3}})_(?:bs)?tensorop\w*?gemm_(?P<input>{_XMMA_T})_",
        NVIDIA,
        "CUTLASS 3",
        TENSOR_CORE,
        GEMM,
        "NVIDIA/cutlass python/cutlass_library/library.py (cutlass3x_sm<arch>_[bs]tensorop_..._gemm_<A>_<B>_...; "
        "bstensorop = block-scaled MX / NVFP4)",
        arch_format="sm{}",
    ),
    KernelFamily(
        "cutlass_block_scaled",
        r"bstensorop|mxf8f6f4|mxf4nvf4|BlockScaled",
        NVIDIA,
        "CUTLASS 3 (block-scaled)",
        TENSOR_CORE,
        GEMM,
        "NVIDIA/cutlass include/cutlass/gemm/collective/sm100_blockscaled_mma_warpspecialized.hpp "
        "(tcgen05.mma kind::mxf8f6f4 / mxf4nvf4)",
        arch="sm100",
        persistent=True,
        block_scaled=True,
    ),
    KernelFamily(
        "cutlass3_device_kernel",
        r"cutlass::device_kernel<(?:.*?[Ss]m_?(?P<arch>\d{2,3}))?.*(?:GemmUniversal|GemmKernel|gemm::kernel)"
        r"|enable_3x_kernel_for_sm\d+",
        NVIDIA,
        "CUTLASS 3 (templated, e.g. torch._scaled_mm, DeepGEMM-style grouped GEMMs)",
        TENSOR_CORE,
        GEMM,
        "NVIDIA/cutlass include/cutlass/device_kernel.h (device_kernel<GemmKernel>: CUTLASS 3 kernels on sm90+ "
        "are TMA warp-specialised, one CTA per SM)",
        arch="sm90",
        arch_format="sm{}",
        persistent=True,
    ),
    KernelFamily(
        "cutlass2_templated_tensor",
        r"MmaTensorOp|OpClassTensorOp|OpClassWmmaTensorOp",
        NVIDIA,
        "CUTLASS 2 (templated)",
        TENSOR_CORE,
        None,
        "NVIDIA/cutlass include/cutlass/arch/mma.h (OpClassTensorOp) and gemm/warp/mma_tensor_op.h",
    ),
    KernelFamily(
        "cutlass2_templated_simt",
        r"MmaSimt|OpClassSimt",
        NVIDIA,
        "CUTLASS 2 (templated, SIMT)",
        CUDA_CORE,
        None,
        "NVIDIA/cutlass include/cutlass/arch/mma.h (OpClassSimt) and gemm/warp/mma_simt.h",
    ),
    KernelFamily(
        "cublas_helpers",
        r"gemv|gemmSN_|gemmk1_kernel|dot_kernel|reduce_1Block_kernel|splitKreduce|scal_kernel|axpy_kernel"
        r"|nrm2_kernel|asum_kernel|cublasLt::|epilogue::impl|transpose_readWrite",
        NVIDIA,
        "cuBLAS / cuBLASLt helpers (GEMV, split-K reduction, epilogues)",
        CUDA_CORE,
        GEMM,
        "NVIDIA cuBLAS kernel names (closed source): gemv / gemmSN / gemmk1 / splitKreduce kernels are CUDA-core "
        "kernels for skinny shapes and split-K sums (corpus: A100 and V100 traces)",
    ),
    KernelFamily(
        "cudnn_legacy_conv",
        r"(?:implicit_convolve_[sh]+gemm|explicit_convolve_sgemm|precomputed_convolve_sgemm|conv2d_grouped_direct"
        r"|wgrad_alg\d_engine|dgrad_engine|dgrad2d_alg\d|dgrad_alg\d_engine|winograd|fft\dd_[rc]2[cr]"
        r"|cnn::im2col)(?:.*?<(?P<input>float|__half|double)\b)?",
        NVIDIA,
        "cuDNN (legacy engines)",
        CUDA_CORE,
        CONVOLUTION,
        "NVIDIA cuDNN kernel names (closed source): implicit_convolve_sgemm<float, ...>, wgrad_alg0_engine<float, "
        "...> and the Winograd / FFT engines run on CUDA cores (corpus: DLRM and ResNet-50 V100 traces)",
        letters={"float": "fp32", "__half": "fp16", "double": "fp64"},
    ),
    # --- GEMM: Triton, Inductor, XLA ------------------------------------------------------------------------------
    KernelFamily(
        "triton_matmul_ogs",
        r"_matmul_ogs_\w*?(?:bf16|fp16|fp8|fp32)x(?P<input>bf16|fp16|fp8|mxfp8|mxfp4|fp32)"
        r"x(?P<input_b>bf16|fp16|fp8|mxfp8|mxfp4|fp32)_",
        ANY,
        "triton_kernels (matmul_ogs, MoE)",
        TENSOR_CORE,
        GEMM,
        "triton-lang/triton python/triton_kernels/triton_kernels/matmul_ogs.py (names _matmul_ogs_<layout>_"
        "<out>x<lhs>x<rhs>_<tile>; tl.dot; MX weights are upcast where the GPU has no MX instructions)",
    ),
    KernelFamily(
        "triton_gemm",
        r"fused_moe_kernel|_w8a8_block_fp8_matmul|^_?matmul_kernel|_scaled_mm_kernel|^triton_(?:mm|bmm|tem)_",
        ANY,
        "Triton GEMMs (vLLM / SGLang fused MoE, Inductor templates)",
        TENSOR_CORE,
        GEMM,
        "vllm-project/vllm vllm/model_executor/layers/fused_moe/fused_moe.py (fused_moe_kernel); pytorch/pytorch "
        "torch/_inductor/kernel/mm.py (triton_mm / triton_tem_* templates): tl.dot",
    ),
    KernelFamily(
        "inductor_pointwise",
        r"^triton_(?:poi|red|per)_",
        ANY,
        "TorchInductor (Triton)",
        CUDA_CORE,
        None,
        "pytorch/pytorch torch/_inductor/codegen/triton.py (kernel name prefixes triton_poi_ pointwise, "
        "triton_red_ / triton_per_ reductions: vector units)",
    ),
    KernelFamily(
        "xla_triton_gemm",
        r"gemm_fusion_dot|triton_gemm",
        ANY,
        "XLA (Triton GEMM fusions)",
        TENSOR_CORE,
        GEMM,
        "openxla/xla xla/service/gpu/transforms/gemm_fusion.cc (gemm_fusion_dot.* computations, emitted by the "
        "Triton GEMM emitter)",
    ),
    KernelFamily(
        "xla_fusions",
        r"^(?:loop|input|wrapped)_",
        ANY,
        "XLA fusions",
        CUDA_CORE,
        None,
        "openxla/xla fusion naming (loop_*_fusion, input_*_fusion, wrapped_*: element-wise / reduction fusions)",
    ),
    # --- GEMM and convolution: AMD --------------------------------------------------------------------------------
    KernelFamily(
        "tensile_mfma",
        rf"^Cijk_A[a-zA-Z]*_B[a-zA-Z]*_(?P<input>{_TENSILE_T})[A-Za-z0-9]*_.*?_(?:MI\d+x\d+x\d+|MFMA)"
        r"(?:.*?_ISA(?P<arch>[0-9a-f]{3,4})_)?",
        AMD,
        "hipBLASLt / rocBLAS (Tensile)",
        MATRIX_CORE,
        GEMM,
        "ROCm/Tensile Tensile/SolutionStructs.py (Cijk_<A>_<B>_<type chars>...; MI<M>x<N>x<K>: the MFMA "
        "matrix instruction; ISA<gfx>: the target) and ROCm/hipBLASLt tensilelite",
        arch_format="gfx{}",
        ignore_case=False,
        letters=_TENSILE_LETTERS,
    ),
    KernelFamily(
        "tensile_simt",
        rf"^Cijk_A[a-zA-Z]*_B[a-zA-Z]*_(?P<input>{_TENSILE_T})[A-Za-z0-9]*_(?:.*?_ISA(?P<arch>[0-9a-f]{{3,4}})_)?",
        AMD,
        "hipBLASLt / rocBLAS (Tensile, no matrix instruction)",
        SIMT,
        GEMM,
        "ROCm/Tensile Tensile/SolutionStructs.py (a solution without MatrixInstruction runs on the vector ALUs)",
        arch_format="gfx{}",
        ignore_case=False,
        letters=_TENSILE_LETTERS,
    ),
    KernelFamily(
        "miopen_igemm_xdlops",
        r"igemm_(?:fwd|bwd|wrw)_gtcx\d?_(?:nhwc|nchw)_(?P<input>fp32|fp16|bf16|int8)",
        AMD,
        "MIOpen (implicit GEMM, XDLOPS)",
        MATRIX_CORE,
        CONVOLUTION,
        "ROCm/MIOpen src/kernels/dynamic_igemm/igemm_gtc_xdlops_nhwc (gtcx: generic tensor contraction with "
        "XDLOPS, i.e. MFMA)",
        letters={"fp32": "fp32"},
    ),
    KernelFamily(
        "miopen_conv_simt",
        r"igemm_(?:fwd|bwd|wrw)_gtc_|naive_conv|MIOpenConv|miopenSp3AsmConv|gcnAsmConv|Im3d2Col|Im2Col|Col2Im",
        AMD,
        "MIOpen (direct / naive convolutions, im2col)",
        SIMT,
        CONVOLUTION,
        "ROCm/MIOpen src/kernels/ (naive_conv.cpp, MIOpenIm2d2Col / Im3d2Col, assembly direct convolutions)",
    ),
    KernelFamily(
        "composable_kernel_matrix",
        r"(?:\bck::|_ZN2ck|ck_tile|\bck_)(?:.*?)(?:Gemm|gemm|GEMM|Xdl|xdl|Wmma|wmma|Mfma|mfma|Conv[A-Z]|conv_fwd"
        r"|conv_bwd)",
        AMD,
        "composable_kernel",
        MATRIX_CORE,
        None,
        "ROCm/composable_kernel include/ck/tensor_operation/gpu/device/ (DeviceGemm*_Xdl_*: XDL = MFMA) and "
        "include/ck_tile/ops/gemm",
        ignore_case=False,
    ),
    KernelFamily(
        "composable_kernel_other",
        r"\bck::|_ZN2ck|ck_tile",
        AMD,
        "composable_kernel (norms, reductions, element-wise)",
        SIMT,
        None,
        "ROCm/composable_kernel include/ck_tile/ops/ (rmsnorm2d, layernorm2d, reduce, elementwise: vector ALUs)",
        ignore_case=False,
    ),
    KernelFamily(
        "aiter_matrix",
        r"aiter.*?(?:gemm|Gemm|GEMM|fmoe|moe_|_moe|a8w8|bpreshuffle)",
        AMD,
        "aiter",
        MATRIX_CORE,
        GEMM,
        "ROCm/aiter csrc/ and hsa/ (assembly and CK GEMM / fused-MoE kernels on MFMA)",
    ),
    KernelFamily(
        "aiter_other",
        r"aiter",
        AMD,
        "aiter (norms, quantisation, activation)",
        SIMT,
        None,
        "ROCm/aiter csrc/kernels/ (e.g. add_rmsnorm_quant_kernel: vector ALUs)",
    ),
    KernelFamily(
        "rocm_skinny_gemm",
        r"wvSplitK|wvSpltK|LLGemm",
        AMD,
        "vLLM ROCm skinny GEMMs",
        SIMT,
        GEMM,
        "vllm-project/vllm csrc/rocm/skinny_gemms.cu (wvSplitK: dot instructions for small-batch decode)",
    ),
    KernelFamily(
        "amd_mfma_named",
        r"mfma",
        AMD,
        "AMD kernels named for their MFMA instruction",
        MATRIX_CORE,
        None,
        "AMD CDNA ISA reference guides (V_MFMA_* matrix fused multiply-add instructions)",
    ),
    # --- what remains: names that say their unit, then the frameworks' own kernels --------------------------------
    KernelFamily(
        "named_tensor_core",
        r"wmma|hmma|imma|wgmma|\bgmma|tcgen05|tensorop|_tc_",
        ANY,
        "kernels named for their matrix instruction",
        TENSOR_CORE,
        None,
        "PTX ISA (wmma, mma / HMMA, wgmma, tcgen05.mma); AMD RDNA 3 WMMA (rocWMMA)",
    ),
    KernelFamily(
        "cudnn_other",
        r"cudnn::|cask_cudnn|cask__5x_cudnn",
        NVIDIA,
        "cuDNN helpers (batch norm, offsets, scaling, layout)",
        CUDA_CORE,
        None,
        "NVIDIA cuDNN kernel names (closed source): cudnn::bn_fw_*, cask_cudnn::computeOffsetsKernel, "
        "cudnn::ops::nchwToNhwcKernel (corpus: A100 and V100 traces)",
    ),
    KernelFamily(
        "normalization_kernels",
        r"layer_norm|rms_?norm|RMSNorm|batch_norm|group_norm",
        ANY,
        "normalisation kernels (ATen, apex, vLLM, FlashInfer)",
        CUDA_CORE,
        NORMALIZATION,
        "pytorch/pytorch aten/src/ATen/native/cuda/layer_norm_kernel.cu; vllm csrc/layernorm_kernels.cu",
    ),
    KernelFamily(
        "aten_native",
        r"at::native::|at::cuda::|c10::|\bvoid at_",
        ANY,
        "ATen native kernels",
        CUDA_CORE,
        None,
        "pytorch/pytorch aten/src/ATen/native/cuda/ (element-wise, reduction, copy kernels on the vector units)",
    ),
)
