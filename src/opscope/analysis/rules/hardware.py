"""Advice that knows the GPU: the remedies of the precision rules name what the trace's GPU supports (TF32 on
Ampere and later, bf16 on Ampere / CDNA 2 and later, FP8 on Ada / Hopper / CDNA 3 and later, the MX formats on
Blackwell / CDNA 4), from the architecture table (analysis/kernels/gpu_arch.py). A rule with `advice_for` gets
its finding's advice from it; `--list-rules` and a GPU nobody knows keep the rule's general text."""

from __future__ import annotations

from dataclasses import replace

from opscope.analysis.findings import Advice, Finding
from opscope.analysis.kernels.gpu_arch import AMD, BF16, FP8, FP16, INT8, MX, TF32, GpuIdentity

TF32_SWITCHES = (
    "torch.backends.cuda.matmul.allow_tf32 = True, torch.backends.cudnn.allow_tf32 = True, or "
    "torch.set_float32_matmul_precision('high')"
)


def supported_types(gpu: GpuIdentity) -> str:
    """ "fp16, bf16, TF32, FP8 and the MX block-scaled formats": the matrix units' reduced types."""
    assert gpu.arch is not None
    names = {FP16: "fp16", BF16: "bf16", TF32: "TF32", INT8: "int8", FP8: "FP8"}
    found = [names[t] for t in (FP16, BF16, TF32, INT8, FP8) if t in gpu.arch.matrix]
    if MX in gpu.arch.matrix:
        found.append(
            "the MX block-scaled formats (MXFP8, MXFP6, MXFP4" + (", NVFP4)" if gpu.vendor != AMD else ")")
        )
    return ", ".join(found[:-1]) + " and " + found[-1] if len(found) > 1 else "".join(found)


def _inferred(gpu: GpuIdentity) -> str:
    return (
        " (The GPU is inferred from kernel names: a lower bound of its architecture.)" if gpu.inferred else ""
    )


def tensor_core_advice(gpu: GpuIdentity) -> str | None:
    """`tensor_cores_unused`: the reduced precision the GPU runs on its matrix units, never one it lacks (no
    TF32 on Volta or Turing, no bf16 advice before CDNA 2)."""
    arch = gpu.arch
    if arch is None or not arch.matrix:
        return None
    unit = "matrix cores" if gpu.vendor == AMD else "tensor cores"
    where = f"{gpu.label}'s {unit} take {supported_types(gpu)}."
    fp8 = (
        " FP8 GEMMs (Transformer Engine, torch._scaled_mm) halve the time again where accuracy allows."
        if FP8 in arch.matrix
        else ""
    )
    if BF16 in arch.matrix and TF32 in arch.matrix and gpu.vendor != AMD:
        return (
            "Use automatic mixed precision (torch.autocast with bf16 or fp16) or allow TF32 "
            f"({TF32_SWITCHES}) so GEMMs and convolutions run on tensor cores. {where}{fp8}{_inferred(gpu)}"
        )
    if BF16 in arch.matrix:
        return (
            "Use automatic mixed precision with bf16 (torch.autocast(device_type='cuda', dtype=torch.bfloat16); "
            f"'cuda' is the ROCm device too) so GEMMs and convolutions run on the {unit} in bf16, at several times "
            f"the fp32 rate. {where}{fp8}{_inferred(gpu)}"
        )
    later = "CDNA 2 (MI200)" if gpu.vendor == AMD else "Ampere (sm80)"
    return (
        "Use automatic mixed precision with fp16 (torch.autocast(device_type='cuda', dtype=torch.float16), with "
        f"a GradScaler when training) so GEMMs and convolutions run on {unit}. {gpu.label} has fp16 {unit} "
        f"only: bf16 and TF32 need {later} or later.{_inferred(gpu)}"
    )


def alignment_advice(gpu: GpuIdentity) -> str | None:
    """`gemm_alignment`: the multiples for the types this GPU's matrix units take."""
    arch = gpu.arch
    if arch is None or not arch.matrix:
        return None
    parts = ["8 for fp16/bf16" if BF16 in arch.matrix else "8 for fp16"]
    wide = [t for t, name in ((INT8, "int8"), (FP8, "fp8")) if t in arch.matrix]
    if wide:
        parts.append("16 for " + "/".join("int8" if t == INT8 else "fp8" for t in wide))
    if TF32 in arch.matrix:
        parts.append("4 for tf32")
    return (
        f"Pad K and N (channels for convolutions) to multiples of {', '.join(parts)} on {gpu.label} (64 is "
        "better still for large sizes: a vocabulary of 50257 -> 50304); misaligned sizes fall back to slower "
        f"kernels (align1 / align2 variants, or no tensor cores at all).{_inferred(gpu)}"
    )


def efficiency_advice(gpu: GpuIdentity) -> str | None:
    """`low_efficiency`: the lower precisions worth trying on this GPU."""
    arch = gpu.arch
    if arch is None or not arch.matrix:
        return None
    low = "bf16/fp16" if BF16 in arch.matrix else "fp16"
    if FP8 in arch.matrix:
        low += " or fp8"
    if MX in arch.matrix:
        low += " (or the MX formats)"
    return (
        "A GEMM or attention op far below peak FLOP/s is usually too small or badly shaped (pad M, N, K to "
        f"multiples of 64-128, batch small GEMMs, use {low}, fused attention); a memory-bound op "
        "far below peak bandwidth moves data in small or strided pieces: fuse it with its neighbours "
        f"(torch.compile) or make its inputs contiguous.{_inferred(gpu)}"
    )


ADVICE_FOR = {
    "tensor_cores_unused": tensor_core_advice,
    "gemm_alignment": alignment_advice,
    "low_efficiency": efficiency_advice,
}


def _for_gpu(finding: Finding, gpu: GpuIdentity) -> Finding:
    make = ADVICE_FOR.get(finding.id)
    text = make(gpu) if make else None
    return replace(finding, advice=text) if text else finding


def with_gpu_advice(advice: Advice, gpu: GpuIdentity) -> Advice:
    """`advice` with the GPU-aware remedies in place of the rules' general ones (the JSON `advice` stays a
    string)."""
    return replace(
        advice,
        findings=tuple(_for_gpu(f, gpu) for f in advice.findings),
        withheld=tuple(_for_gpu(f, gpu) for f in advice.withheld),
    )
