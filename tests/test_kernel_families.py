"""The kernel-family table (analysis/kernels/kernel_families.py) on real kernel names.

CORPUS lists real names from ../shared/traces, each with the trace it comes from (the test checks the name is in
that trace, so the list cannot drift from the corpus); very long names (Tensile's run to 800 characters) are
given by a prefix that picks exactly one name of the trace. Families the corpus has no trace for (Hopper and
Blackwell libraries, DeepSeek's kernels) are covered by NOT_IN_CORPUS: real names quoted from public profiles
and from issue 27, each with its source, not from a trace here. Every family has at least one name, and a name
of another family is a negative for each row (first match wins)."""

from __future__ import annotations

from functools import cache

import polars as pl
import pytest

import opscope
from conftest import corpus_path
from opscope.analysis.kernels.categories import classify
from opscope.analysis.kernels.gpu_arch import gpu_identity
from opscope.analysis.kernels.kernel_facts import (
    COMMUNICATION_EXEMPT,
    PERSISTENT_EXEMPT,
    TENSOR_CORE_KERNEL_EXEMPT,
    kernel_facts,
    occupancy_exemption,
)
from opscope.analysis.kernels.kernel_families import FAMILIES, MATH_UNITS, MATRIX_UNITS
from opscope.model.schema import Col, Kind

MI250 = "hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"
MI210 = "tracelens/mi210__gpu_only_trace__gpu_only_trace.json.gz"
MI300_QWEN = "tracelens/inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz"
MI300_VLLM = "tracelens/inference__vllm_decode_full__graph_execution.json.gz"
MI300_JAX = "tracelens/mi300__jax08_attention__tw003.xplane.pb"
MI300_CONV = "tracelens/mi300__jax_conv_minimal_legacy__chi-mi300x-013.ord.vultr.cpe.ice.amd.com.xplane.pb"
MI350X = "tracelens/rocprof__908_results.json.gz"
H100_FALCON = "tracelens/h100__Falconsai_nsfw_image_detection__1016002.json.gz"
H100_QWEN = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
A100_DDP = "hta/nccl_parser_config_nccl_data.json.gz"
A100_ALEXNET = "hta/critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz"
A100_PART = "particle_transformer/run1_chrome_traces__single_epoch_forward_pass_batch_size_2.json"
A100_TRITON = "hta/triton_example_triton_example.json.gz"
V100_NO_PROPS = "kineto/plugin_samples_resnet50_num_workers_0_worker0.pt.trace.json.gz"
V100_DLRM = "param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json"
TURING = "param/et_replay_tests_data_linear_kineto.json.gz"

# (trace, name or unique prefix, family, math, input dtype, arch)
CORPUS: list[tuple[str, str, str, str, str | None, str | None]] = [
    (
        H100_FALCON,
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment"
        "_k_off_kernel__5x_cublas",
        "xmma",
        "tensor_core",
        "bf16",
        "sm90",
    ),
    (
        A100_DDP,
        "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x128x32_stage5_"
        "warpsize2x2x1_g1_tensor16x8x8_execute_kernel_cudnn_infer",
        "xmma",
        "tensor_core",
        "tf32",
        "sm80",
    ),
    (
        A100_PART,
        "ampere_fp16_s16816gemm_fp16_64x64_sliced1x2_ldg8_f2f_stages_64x5_tn",
        "cublas_legacy_tensor",
        "tensor_core",
        "fp16",
        "sm80",
    ),
    (A100_ALEXNET, "ampere_sgemm_32x32_sliced1x4_tn", "cublas_legacy_simt", "cuda_core", "fp32", "sm80"),
    (
        V100_NO_PROPS,
        "volta_scudnn_128x64_relu_interior_nn_v1",
        "cublas_legacy_simt",
        "cuda_core",
        "fp32",
        "sm70",
    ),
    (V100_NO_PROPS, "volta_sgemm_128x64_nn", "cublas_legacy_simt", "cuda_core", "fp32", "sm70"),
    (TURING, "volta_sgemm_64x64_tn", "cublas_legacy_simt", "cuda_core", "fp32", "sm70"),
    (
        H100_QWEN,
        "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>",
        "cutlass2_simt",
        "cuda_core",
        "fp32",
        "sm80",
    ),
    (
        H100_FALCON,
        "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x64_64x6_tn_align8>",
        "cutlass2_tensorop",
        "tensor_core",
        "bf16",
        "sm80",
    ),
    (
        H100_FALCON,
        "void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4",
        "cutlass2_tensorop",
        "tensor_core",
        "bf16",
        None,
    ),
    (
        A100_DDP,
        "_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_11threadblock22"
        "ImplicitGemmMultistageINS_4gemm9GemmShapeILi128ELi128ELi32",
        "cutlass2_templated_tensor",
        "tensor_core",
        None,
        None,
    ),
    (
        A100_ALEXNET,
        "void fft2d_r2c_32x32<float, false, 5u, true>",
        "cudnn_legacy_conv",
        "cuda_core",
        "fp32",
        None,
    ),
    (
        V100_NO_PROPS,
        "void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, true, true>",
        "cudnn_legacy_conv",
        "cuda_core",
        "fp32",
        None,
    ),
    (
        A100_ALEXNET,
        "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>",
        "cudnn_other",
        "cuda_core",
        None,
        None,
    ),
    (
        A100_ALEXNET,
        "void epilogue::impl::globalKernel<float, float, float, true, true>",
        "cublas_helpers",
        "cuda_core",
        None,
        None,
    ),
    (
        V100_DLRM,
        "void fbgemm_gpu::permute_2D_lengths_kernel<int>",
        "fbgemm_embedding",
        "cuda_core",
        None,
        None,
    ),
    (
        V100_DLRM,
        "void split_embedding_codegen_forward_unweighted_kernel<float, float, float, false, long, 1ul, 8ul>",
        "fbgemm_embedding",
        "cuda_core",
        None,
        None,
    ),
    (
        V100_DLRM,
        "void (anonymous namespace)::indexing_backward_kernel<float, 4>",
        "gather_scatter",
        "cuda_core",
        None,
        None,
    ),
    (
        A100_DDP,
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
        "nccl",
        "none",
        None,
        None,
    ),
    (MI350X, "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)", "nccl", "none", None, None),
    (
        H100_FALCON,
        "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, "
        "false, false, cutlass::bfloat16_t",
        "flash_attention_2",
        "tensor_core",
        "bf16",
        "sm80",
    ),
    (
        A100_PART,
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>",
        "normalization_kernels",
        "cuda_core",
        None,
        None,
    ),
    (A100_TRITON, "triton_poi_fused_add_cos_sin_0", "inductor_pointwise", "cuda_core", None, None),
    (
        MI250,
        "Cijk_Ailk_Bjlk_SB_Bias_AS_SAV_UserArgs_MT64x16x16_MI16x16x1_",
        "tensile_mfma",
        "matrix_core",
        "fp32",
        "gfx90a",
    ),
    (
        MI300_QWEN,
        "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x32x64_MI16x16x1_",
        "tensile_mfma",
        "matrix_core",
        "bf16",
        "gfx942",
    ),
    (
        MI300_JAX,
        "Cijk_Ailk_Bljk_BBS_BH_MT256x112x64_MI16x16x16x1_",
        "tensile_mfma",
        "matrix_core",
        "bf16",
        "gfx942",
    ),
    (
        MI350X,
        "Cijk_Ailk_Bjlk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT128x64x128_MI32x32x1_",
        "tensile_mfma",
        "matrix_core",
        "bf16",
        "gfx950",
    ),
    (
        MI350X,
        "Cijk_Ailk_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT1x4x256_SN_",
        "tensile_simt",
        "simt",
        "bf16",
        "gfx950",
    ),
    (
        MI210,
        "igemm_fwd_gtcx2_nhwc_bf16_bx0_ex1_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x4x1x64_tb1x8x2x1_"
        "1x4x1x64_gkgs",
        "miopen_igemm_xdlops",
        "matrix_core",
        "bf16",
        None,
    ),
    (MI210, "SubTensorOpWithScalar1d", "miopen_tensor_ops", "simt", None, None),
    (MI210, "batched_transpose_64x64_pack_4x4_ediv_4x4_half", "miopen_tensor_ops", "simt", None, None),
    (MI300_CONV, "Im3d2Col", "miopen_conv_simt", "simt", None, None),
    (
        MI300_QWEN,
        "_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi256ELi16ELb0ELb0ELb1ELi1EEE",
        "aiter_other",
        "simt",
        None,
        None,
    ),
    (
        MI300_VLLM,
        "_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwdINS_27Rmsnorm2dFwdPipelineOnePass",
        "composable_kernel_other",
        "simt",
        None,
        None,
    ),
    (
        MI300_QWEN,
        "void paged_attention_ll4mi_QKV_mfma16_kernel<0, __hip_bfloat16",
        "rocm_paged_attention_mfma",
        "matrix_core",
        None,
        None,
    ),
    (MI300_VLLM, "kernel_unified_attention_3d", "triton_attention", "tensor_core", None, None),
    (MI350X, "attn_fwd", "triton_attention", "tensor_core", None, None),
    (
        MI300_VLLM,
        "_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1",
        "triton_matmul_ogs",
        "tensor_core",
        "bf16",
        None,
    ),
    (MI300_VLLM, "_finalize_matmul_scatter_bf16", "triton_moe_finalize", "cuda_core", None, None),
    (MI300_JAX, "gemm_fusion_dot_general_1.kd", "xla_triton_gemm", "tensor_core", None, None),
    (MI300_JAX, "loop_convert_fusion.kd", "xla_fusions", "cuda_core", None, None),
]

# Real names from traces that are not in the corpus: (source, name, family, math, input dtype, arch).
NOT_IN_CORPUS: list[tuple[str, str, str, str, str | None, str | None]] = [
    (
        "issue 27 (B200 MXFP4/FP8 MoE trace)",
        "bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_..._sm100f",
        "trtllm_gen_bmm",
        "tensor_core",
        "mxfp4",
        "sm100",
    ),
    (
        "public SGLang B200 profile (code search)",
        "bmm_E4m3_E4m3E4m3_Fp32_t128x64x128u2_s6_et64x64_m64x64x32_"
        "c1x1x1_rM_TN_transOut_noShfl_dsFp8_schPd4x2x2x3_bN_tma_tmaSf_rgTma_clmp_lbW4_dynB_sm100f",
        "trtllm_gen_bmm",
        "tensor_core",
        "fp8",
        "sm100",
    ),
    (
        "issue 27 (GH200 trace)",
        "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_"
        "aligna4_alignc4_execute_kernel__5x_cublas",
        "xmma_ffma",
        "cuda_core",
        "fp32",
        "sm80",
    ),
    (
        "public vLLM/SGLang profiles (code search)",
        "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT",
        "nvjet",
        "tensor_core",
        "bf16",
        "sm90",
    ),
    (
        "public SGLang B200 profile (code search)",
        "nvjet_sm100_tst_128x256_64x6_2x1_2cta_v_bz_TNT",
        "nvjet",
        "tensor_core",
        "bf16",
        "sm100",
    ),
    (
        "public torch matmul profile (code search)",
        "nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_TNN",
        "nvjet",
        "tensor_core",
        "fp16",
        "sm90",
    ),
    (
        "issue 27 (H800 DeepSeek-style trace)",
        "cutlass::device_kernel<dpsk::grouped_gemm::...GemmKernel>",
        "deepgemm",
        "tensor_core",
        None,
        "sm90",
    ),
    (
        "public SGLang H200 profile (code search)",
        "void deep_gemm::sm90_fp8_gemm_1d2d_impl<(cute::UMMA::Major)0, 0u, "
        "4096u, 1024u, 1u, 256u, 128u, 128u, 128u, 128u, 128u, 3u, 128u, 256u, 2u, true, 132u, (deep_gemm::GemmType)0, "
        "deep_gemm::epilogue::transform::EpilogueIdentity>",
        "deepgemm",
        "tensor_core",
        "fp8",
        "sm90",
    ),
    (
        "public diffusion profile (code search)",
        "void cutlass::device_kernel<flash::enable_sm90_or_later<"
        "flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, "
        "cute::tuple<cute::C<128>, cute::C<176>, cute::C<128> >, 128, cutlass::bfloat16_t, float, cutlass::arch::Sm90",
        "flash_attention_3",
        "tensor_core",
        "bf16",
        "sm90",
    ),
    (
        "public vLLM profile (code search)",
        "kernel_cutlass_kernel_flash_attncuteflash_fwd_sm100FlashAttentionForward"
        "Sm100_object_at__tensor0000o11101213_tensor0000o11101213_tensor0000o10111213_tensor0000o11101213_None_None_"
        "None_Non_0",
        "flash_attention_4_sm100",
        "tensor_core",
        None,
        "sm100",
    ),
    (
        "public RTX 50 profile (code search)",
        "kernel_cutlass_kernel_flash_attncuteflash_fwd_sm120FlashAttention"
        "ForwardSm120_object_at__tensorptrbf16gmemalign16oi64div8",
        "flash_attention_4",
        "tensor_core",
        None,
        "sm120",
    ),
    (
        "public B200 nsys summary (code search)",
        "fmhaSm100aKernel_QE4m3KvE2m1OE4m3H128PagedKvDenseP16VarSeqQ8Kv128PersistentSwapsAbForGen",
        "trtllm_gen_fmha",
        "tensor_core",
        "fp8",
        "sm100",
    ),
    (
        "public SGLang profile (code search)",
        "flashinfer::BatchPrefillWithPagedKVCacheKernel",
        "flashinfer_prefill",
        "tensor_core",
        None,
        None,
    ),
    (
        "public SGLang profile (code search)",
        "BatchDecodeWithPagedKVCacheKernel",
        "flashinfer_decode",
        "cuda_core",
        None,
        None,
    ),
    (
        "public vLLM profile (code search)",
        "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>"
        "(c10::BFloat16*, unsigned long, unsigned int**, unsigned long, unsigned long)",
        "nvls_multimem",
        "none",
        None,
        "sm90",
    ),
    (
        "public vLLM profile (code search)",
        "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*)",
        "deepep",
        "none",
        None,
        None,
    ),
    (
        "DeepSeek profile-data kernel list (code search)",
        "dpsk::ep::internode::dispatch_ll",
        "deepep",
        "none",
        None,
        None,
    ),
    (
        "public vLLM profile (code search)",
        "cross_device_reduce_1stage",
        "custom_allreduce",
        "none",
        None,
        None,
    ),
    (
        "public CUTLASS walkthrough (code search)",
        "cutlass3x_sm90_tensorop_s64x128x16gemm_bf16_bf16_f32_void_bf16_"
        "128x128x64_1x1x1_0_tnn_align8_warpspecialized_pingpong_epi_tma",
        "cutlass3x_persistent",
        "tensor_core",
        "bf16",
        "sm90",
    ),
    (
        "public MI355X comparison (code search)",
        "void cutlass::device_kernel<at::cuda::detail::enable_3x_kernel_for_"
        "sm9x<cutlass::gemm::kernel::GemmUniversal",
        "cutlass3_device_kernel",
        "tensor_core",
        None,
        "sm90",
    ),
]

# HAND-MADE names for families with no real name at hand: each spells the library's documented naming scheme.
HAND_MADE: list[tuple[str, str, str, str | None, str | None]] = [
    ("volta_hcudnn_128x128_relu_interior_nn_v1", "cublas_legacy_simt", "cuda_core", "fp16", "sm70"),
    (
        "turing_fp16_s1688cudnn_fp16_256x128_ldg8_relu_f2f_exp_small_nhwc_tn_v1",
        "cublas_legacy_tensor",
        "tensor_core",
        "fp16",
        "sm75",
    ),
    (
        "void flash::FlashAttnFwdSm80<Mainloop, Epilogue, Scheduler>",
        "flash_attention_3_sm80",
        "tensor_core",
        None,
        "sm80",
    ),
    ("flash_mla_decode_kernel", "flash_mla", "tensor_core", None, "sm90"),
    (
        "cudnn_generated_fort_native_sdpa_sm90_knob_7_64x128x64_4x1x1_kernel0_0",
        "cudnn_sdpa",
        "tensor_core",
        None,
        "sm80",
    ),
    ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80", "xformers_fmha", "tensor_core", "bf16", "sm80"),
    (
        "ck_tile::FmhaFwdKernel<ck_tile::BlockFmhaPipelineQRKSVS<...>>",
        "ck_tile_fmha",
        "matrix_core",
        None,
        None,
    ),
    ("_ZN5aiter14fmha_fwd_v3_kernelE", "aiter_attention", "matrix_core", None, None),
    (
        "cutlass3x_sm90_tensorop_gemm_e4m3_e4m3_f32_bf16_bf16_128x128x128_1x1x1_0_tnt_align16",
        "cutlass3x",
        "tensor_core",
        "fp8",
        "sm90",
    ),
    ("cutlass3x_sm100_bstensorop_mxf8f6f4_kernel", "cutlass_block_scaled", "tensor_core", None, "sm100"),
    (
        "cutlass::gemm::kernel::DefaultGemm<float, cutlass::arch::OpClassSimt>",
        "cutlass2_templated_simt",
        "cuda_core",
        None,
        None,
    ),
    ("fused_moe_kernel", "triton_gemm", "tensor_core", None, None),
    (
        "ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemm_xdl_cshuffle_v3<...>>",
        "composable_kernel_matrix",
        "matrix_core",
        None,
        None,
    ),
    (
        "_ZN5aiter42fmoe_bf16_blockscaleFp8_g1u1_vs_silu_1tg_ps_32x256E",
        "aiter_matrix",
        "matrix_core",
        None,
        None,
    ),
    ("void wvSplitK_hf_sml_<__hip_bfloat16, 64, 2, 16, 8, 2, 1>", "rocm_skinny_gemm", "simt", None, None),
    ("my_mfma_gemm_kernel", "amd_mfma_named", "matrix_core", None, None),
    ("my_wgmma_kernel", "named_tensor_core", "tensor_core", None, None),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
        "aten_native",
        "cuda_core",
        None,
        None,
    ),
]


@cache
def kernel_names(relative: str) -> frozenset[str]:
    kernels = (
        opscope.load(corpus_path(relative)).lazy().filter(pl.col(Col.KIND).cast(pl.String) == Kind.KERNEL)
    )
    return frozenset(kernels.select(pl.col(Col.NAME).cast(pl.String)).collect().to_series().drop_nulls())


def real_name(relative: str, prefix: str) -> str:
    """The one kernel name of the trace that starts with `prefix` (a whole name is its own prefix)."""
    found = sorted(n for n in kernel_names(relative) if n.startswith(prefix))
    assert found, f"{prefix[:60]!r} is not a kernel of {relative}"
    exact = [n for n in found if n == prefix]
    return exact[0] if exact else found[0]


def test_every_family_has_a_source_a_known_unit_and_a_name_in_these_tests() -> None:
    ids = [f.id for f in FAMILIES]
    assert len(ids) == len(set(ids))
    for family in FAMILIES:
        assert family.source and family.math in MATH_UNITS, family.id
    named = {c[2] for c in CORPUS} | {c[2] for c in NOT_IN_CORPUS} | {c[1] for c in HAND_MADE}
    assert set(ids) <= named, sorted(set(ids) - named)


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("trace", "prefix", "family", "math", "dtype", "arch"), CORPUS, ids=[c[2] for c in CORPUS]
)
def test_real_corpus_names(
    trace: str, prefix: str, family: str, math: str, dtype: str | None, arch: str | None
):
    name = real_name(trace, prefix)
    facts = kernel_facts(name)
    assert (facts.family, facts.math, facts.input, facts.arch) == (family, math, dtype, arch), name
    row = next(f for f in FAMILIES if f.id == family)
    if row.category is not None:  # the table's category agrees with the category rules on real names
        assert classify(name) == row.category, name


@pytest.mark.parametrize(
    ("source", "name", "family", "math", "dtype", "arch"), NOT_IN_CORPUS, ids=[c[2] for c in NOT_IN_CORPUS]
)
def test_real_names_from_traces_not_in_the_corpus(
    source: str, name: str, family: str, math: str, dtype: str | None, arch: str | None
) -> None:
    facts = kernel_facts(name)
    assert (facts.family, facts.math, facts.input, facts.arch) == (family, math, dtype, arch), (source, name)


@pytest.mark.parametrize(
    ("name", "family", "math", "dtype", "arch"), HAND_MADE, ids=[c[1] for c in HAND_MADE]
)
def test_hand_made_names(name: str, family: str, math: str, dtype: str | None, arch: str | None) -> None:
    """HAND-MADE names, one per family the corpus and the public profiles found have none of."""
    facts = kernel_facts(name)
    assert (facts.family, facts.math, facts.input, facts.arch) == (family, math, dtype, arch), name


def test_an_fp32_accumulator_never_makes_a_kernel_fp32() -> None:
    """Issue 27: the B200 trace's block-scaled GEMM ends its type list with Fp32, its accumulator."""
    facts = kernel_facts(NOT_IN_CORPUS[0][1])
    assert facts.input == "mxfp4" and facts.input_b == "mxfp8" and facts.acc == "fp32"
    assert facts.block_scaled and facts.on_matrix_unit


def test_ffma_kernels_are_never_tensor_core_kernels_whatever_their_prefix() -> None:
    """Issue 27: a GH200 ran 88% of its time in sm80_xmma_..._ffma, fp32 FMA on CUDA cores."""
    ffma = NOT_IN_CORPUS[2][1]
    assert not kernel_facts(ffma).on_matrix_unit and occupancy_exemption(ffma) is None
    # HAND-MADE: the same kernel's name cut before its suffix still says f32 inputs: an FFMA kernel
    assert kernel_facts("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize256x64x8").math == "cuda_core"


def test_occupancy_exemptions() -> None:
    deepgemm = NOT_IN_CORPUS[6][1]
    assert occupancy_exemption(deepgemm) == PERSISTENT_EXEMPT
    for name in (NOT_IN_CORPUS[14][1], NOT_IN_CORPUS[15][1], "ncclKernel_AllReduce_RING_LL_Sum_float"):
        assert occupancy_exemption(name) == COMMUNICATION_EXEMPT, name
    assert occupancy_exemption("ampere_fp16_s16816gemm_fp16_64x64_ldg8_f2f_nn") == TENSOR_CORE_KERNEL_EXEMPT
    assert occupancy_exemption("volta_sgemm_128x64_nn") is None


def test_matrix_units() -> None:
    assert {"tensor_core", "matrix_core"} == MATRIX_UNITS
    assert kernel_facts("no_family_knows_this_kernel").family is None


# --- the GPU inferred from kernel names ----------------------------------------------------------------------------


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("trace", "arch", "source"),
    [
        (V100_NO_PROPS, "sm70", "kernel names"),  # no deviceProperties; volta_sgemm_*, volta_scudnn_*
        (MI250, "gfx90a", "kernel names"),  # deviceProperties name "AMD Radeon Graphics", compute 9.0
        (MI300_JAX, "gfx942", "kernel names"),  # xplane device "AMD GPU"; Tensile ..._ISA942_...
        (MI300_VLLM, "gfx942", "trace"),  # nameless deviceProperties, compute 9.4 (gfx942)
        (MI350X, "gfx950", "trace"),  # rocprofv3 agents name gfx950
        (MI210, "gfx90a", "trace"),  # "AMD Instinct MI210"
        (H100_QWEN, "sm90", "trace"),
        (TURING, "sm75", "trace"),  # an RTX 2080 Ti running cuBLAS's volta_* kernels: the trace says Turing
    ],
)
def test_gpu_identity(trace: str, arch: str, source: str) -> None:
    gpu = gpu_identity(opscope.load(corpus_path(trace)))
    assert gpu.arch is not None and (gpu.arch.key, gpu.source) == (arch, source)
    assert (gpu.note is not None) == (source == "kernel names")


@pytest.mark.corpus
def test_inferred_architecture_is_the_newest_one_the_names_say() -> None:
    """Recomputed with plain Python: the V100 trace's kernel names name Volta and nothing newer."""
    names = kernel_names(V100_NO_PROPS)
    assert any(n.startswith("volta_") for n in names)
    newer = ("turing_", "ampere_", "sm80_", "sm90_", "cutlass_80_", "nvjet_")
    assert not any(n.startswith(p) or f"_{p}" in n for n in names for p in newer)
    gpu = gpu_identity(opscope.load(corpus_path(V100_NO_PROPS)))
    assert gpu.note is not None and gpu.note.startswith("GPU: inferred Volta (sm70) from kernel names")
    assert all(n in names and "volta" in n for n in gpu.evidence)


def test_docs_list_every_family_and_architecture() -> None:
    """docs/advice.md ("Kernel families", "The GPU") lists every row of both tables."""
    from pathlib import Path

    from opscope.analysis.kernels.gpu_arch import ARCHITECTURES

    text = (Path(__file__).resolve().parents[1] / "docs" / "advice.md").read_text()
    assert [f.id for f in FAMILIES if f"`{f.id}`" not in text] == []
    assert [k for k in ARCHITECTURES if f"`{k}`" not in text] == []
