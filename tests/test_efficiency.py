"""Efficiency (issue 12): FLOPs and bytes per op family against hand computation on shapes copied from real
traces, achieved rates against an independent recomputation from the raw events, the peak table, and the
unknown-GPU / unknown-op / missing-shapes cases."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from tests import reference
from tests.conftest import corpus_path

import opscope
from opscope.analysis.efficiency.advice import low_efficiency_candidates
from opscope.analysis.efficiency.families import FAMILIES, Cost, Unsized
from opscope.analysis.efficiency.peaks import match_peaks, peak_table
from opscope.analysis.efficiency.shapes import concrete_values, tensors
from opscope.analysis.efficiency.table import EfficiencyOptions, efficiency
from opscope.model.trace import Trace

VIT_H100 = "tracelens/h100__Falconsai_nsfw_image_detection__1016002.json.gz"  # ViT, bf16, H100 SXM
QWEN_H100 = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
PART_A100 = "particle_transformer/run1_chrome_traces__single_epoch_forward_pass_batch_size_512.json"
NO_SHAPES = (
    "hta/critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz"  # A100, no record_shapes
)


def size(op: str, dims: str, types: str, concrete: str | None = None) -> Cost | Unsized:
    args = tensors(dims, types)
    assert args is not None
    return FAMILIES[op](args, concrete_values(concrete))


# Every case: (op, Input Dims, Input type) exactly as a real trace records them, and the hand computation.
BF16, F32, F16 = '"c10::BFloat16"', '"float"', '"c10::Half"'
CASES = [
    # GEMM (Qwen H100): 2*M*N*K, bytes = A + B + C
    (
        "aten::mm",
        "[[8944,1024],[1024,2816]]",
        f"[{BF16},{BF16}]",
        2 * 8944 * 2816 * 1024,
        (8944 * 1024 + 1024 * 2816 + 8944 * 2816) * 2,
    ),
    # BMM (ParT A100, fp32 x fp16 under autocast): 2*B*M*N*K; output in the first operand's dtype
    (
        "aten::bmm",
        "[[4096,128,128],[4096,128,16]]",
        f"[{F32},{F16}]",
        2 * 4096 * 128 * 16 * 128,
        4096 * 128 * 128 * 4 + 4096 * 128 * 16 * 2 + 4096 * 128 * 16 * 4,
    ),
    # baddbmm (ParT): the added tensor is read too
    (
        "aten::baddbmm",
        "[[4096,128,128],[4096,128,16],[4096,16,128],[],[]]",
        f'[{F32},{F16},{F16},"Scalar","Scalar"]',
        2 * 4096 * 128 * 128 * 16,
        4096 * 128 * 128 * 4 + 2 * 4096 * 128 * 16 * 2 + 4096 * 128 * 128 * 2,
    ),
    # linear with bias (ViT H100): M = 4*197
    (
        "aten::linear",
        "[[4,197,768],[3072,768],[3072]]",
        f"[{BF16},{BF16},{BF16}]",
        2 * 788 * 3072 * 768,
        (788 * 768 + 3072 * 768 + 3072 + 788 * 3072) * 2,
    ),
    # linear without bias (Qwen)
    (
        "aten::linear",
        "[[16,559,1024],[1024,1024],[]]",
        f'[{BF16},{BF16},""]',
        2 * 8944 * 1024 * 1024,
        (8944 * 1024 * 2 + 1024 * 1024) * 2,
    ),
    # convolution (ParT conv1d, kernel 1, stride 1, no padding: the estimate's assumption holds)
    (
        "aten::conv1d",
        "[[512,4,8256],[64,4,1],[64],[],[],[],[]]",
        f'[{F32},{F32},{F32},"ScalarList","ScalarList","ScalarList","Scalar"]',
        2 * 512 * 64 * 4 * 1 * 8256,
        (512 * 4 * 8256 + 64 * 4 + 64 + 512 * 64 * 8256) * 4,
    ),
    # attention (ViT H100): 4*B*H*Sq*Sk*D, bytes = q + k + v + out
    (
        "aten::scaled_dot_product_attention",
        "[[4,12,197,64],[4,12,197,64],[4,12,197,64],[],[],[],[],[]]",
        f'[{BF16},{BF16},{BF16},"","Scalar","Scalar","","Scalar"]',
        4 * 4 * 12 * 197 * 197 * 64,
        4 * (4 * 12 * 197 * 64) * 2,
    ),
    # the flash kernel's own (B, S, H, D) layout (Qwen H100)
    (
        "aten::_flash_attention_forward",
        "[[16,559,16,64],[16,559,16,64],[16,559,16,64],[],[],[],[],[],[],[],[],[],[],[],[]]",
        f'[{BF16},{BF16},{BF16},"","","Scalar","Scalar","Scalar","Scalar","Scalar","Scalar","","","",""]',
        4 * 16 * 16 * 559 * 559 * 64,
        4 * (16 * 559 * 16 * 64) * 2,
    ),
    # elementwise with broadcasting (ViT): read both, write the broadcast shape
    (
        "aten::add",
        "[[4,197,768],[1,197,768],[]]",
        f'[{BF16},{BF16},"Scalar"]',
        None,
        (4 * 197 * 768 + 197 * 768 + 4 * 197 * 768) * 2,
    ),
    ("aten::gelu", "[[4,197,3072],[]]", f'[{BF16},""]', None, 2 * 4 * 197 * 3072 * 2),
    # softmax (ParT, fp16), normalisation (ViT), copy across dtypes (ParT)
    (
        "aten::_softmax",
        "[[4096,128,128],[],[]]",
        f'[{F16},"Scalar","Scalar"]',
        None,
        2 * 4096 * 128 * 128 * 2,
    ),
    (
        "aten::layer_norm",
        "[[4,197,768],[],[768],[768],[],[]]",
        f'[{BF16},"ScalarList",{BF16},{BF16},"Scalar","Scalar"]',
        None,
        (2 * 4 * 197 * 768 + 2 * 768) * 2,
    ),
    ("aten::copy_", "[[512,1,128],[512,1,128],[]]", f'["bool",{F32},"Scalar"]', None, 512 * 128 * (1 + 4)),
]


@pytest.mark.parametrize(
    ("op", "dims", "types", "flops", "nbytes"), CASES, ids=[c[0] + c[1][:20] for c in CASES]
)
def test_family_against_hand_computation(
    op: str, dims: str, types: str, flops: int | None, nbytes: int
) -> None:
    cost = size(op, dims, types)
    assert isinstance(cost, Cost), cost
    assert cost.flops == flops
    assert cost.bytes == nbytes


def test_estimates_say_what_they_assume() -> None:
    conv = size(
        "aten::conv2d",
        "[[4,3,224,224],[768,3,16,16],[768],[],[],[],[]]",
        f'[{BF16},{BF16},{BF16},"ScalarList","ScalarList","ScalarList","Scalar"]',
    )
    # without Concrete Inputs (stride, padding): the output is taken as large as the input, and said so
    assert isinstance(conv, Cost) and conv.model == "estimate" and "stride" in conv.note
    assert conv.flops == 2 * 4 * 768 * 3 * 16 * 16 * 224 * 224
    attn = size(
        "aten::scaled_dot_product_attention",
        "[[1,8,141,64],[1,8,141,64],[1,8,141,64],[],[],[],[],[]]",
        f'[{BF16},{BF16},{BF16},"","Scalar","Scalar","","Scalar"]',
    )
    assert isinstance(attn, Cost) and attn.model == "estimate" and "causal" in attn.note
    mm = size("aten::mm", "[[8944,1024],[1024,1024]]", f"[{BF16},{BF16}]")
    assert isinstance(mm, Cost) and mm.model == "exact"


# Concrete Inputs exactly as the traces record them (ViT and Qwen on the H100).
VIT_CONV = (
    "aten::conv2d",
    "[[4,3,224,224],[768,3,16,16],[768],[],[],[],[]]",
    f'[{BF16},{BF16},{BF16},"ScalarList","ScalarList","ScalarList","Scalar"]',
    '["", "", "", "[16, 16]", "[0, 0]", "[1, 1]", "1"]',
)


def test_convolution_output_from_stride_and_padding() -> None:
    conv = size(*VIT_CONV)  # the ViT patch embedding: 16x16 kernel, stride 16 -> 14x14 output
    assert isinstance(conv, Cost) and conv.model == "exact"
    assert conv.flops == 2 * 4 * 768 * 3 * 16 * 16 * 14 * 14
    assert conv.bytes == (4 * 3 * 224 * 224 + 768 * 3 * 16 * 16 + 768 + 4 * 768 * 14 * 14) * 2
    # cudnn_convolution orders (input, weight, padding, stride, dilation, groups, ...)
    cudnn = size(
        "aten::cudnn_convolution",
        "[[4,3,224,224],[768,3,16,16],[],[],[],[],[],[],[]]",
        f'[{BF16},{BF16},"ScalarList","ScalarList","ScalarList","Scalar","Scalar","Scalar","Scalar"]',
        '["", "", "[0, 0]", "[16, 16]", "[1, 1]", "1", "False", "False", "True"]',
    )
    assert isinstance(cudnn, Cost) and cudnn.flops == conv.flops and cudnn.model == "exact"
    # hand-made: 3x3, stride 2, padding 1 on 56x56 -> 28x28; padding "same" keeps 56x56
    strided = size(
        "aten::conv2d",
        "[[8,64,56,56],[128,64,3,3],[],[],[],[],[]]",
        '["float","float","","ScalarList","ScalarList","ScalarList","Scalar"]',
        '["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"]',
    )
    assert isinstance(strided, Cost) and strided.flops == 2 * 8 * 128 * 64 * 9 * 28 * 28
    same = size(
        "aten::conv2d",
        "[[8,64,56,56],[128,64,3,3],[],[],[],[],[]]",
        '["float","float","","ScalarList","Scalar","ScalarList","Scalar"]',
        '["", "", "", "[1, 1]", "same", "[1, 1]", "1"]',
    )
    assert isinstance(same, Cost) and same.flops == 2 * 8 * 128 * 64 * 9 * 56 * 56
    # grouped (depthwise) convolution: C/groups comes from the weight's second dim
    depthwise = size(
        "aten::conv2d",
        "[[8,64,56,56],[64,1,3,3],[],[],[],[],[]]",
        '["float","float","","ScalarList","ScalarList","ScalarList","Scalar"]',
        '["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "64"]',
    )
    assert isinstance(depthwise, Cost) and depthwise.flops == 2 * 8 * 64 * 1 * 9 * 56 * 56
    transposed = size(
        "aten::convolution",
        "[[8,64,56,56],[64,32,3,3],[],[],[],[],[],[],[]]",
        '["float","float","","ScalarList","ScalarList","ScalarList","Scalar","ScalarList","Scalar"]',
        '["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "True", "[0, 0]", "1"]',
    )
    assert isinstance(transposed, Unsized)


def test_convolution_backward_follows_output_mask() -> None:  # hand-made shapes, real argument order
    dims = "[[8,128,28,28],[8,64,56,56],[128,64,3,3],[],[],[],[],[],[],[],[]]"
    types = '["float","float","float","ScalarList","ScalarList","ScalarList","ScalarList","Scalar","ScalarList","Scalar","ScalarList"]'
    fwd = 2 * 8 * 128 * 64 * 9 * 28 * 28
    grad_out, x, w = 8 * 128 * 28 * 28 * 4, 8 * 64 * 56 * 56 * 4, 128 * 64 * 9 * 4
    both = size(
        "aten::convolution_backward",
        dims,
        types,
        '["", "", "", "[128]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", "[True, True, False]"]',
    )
    assert isinstance(both, Cost) and both.model == "exact"
    assert both.flops == 2 * fwd and both.bytes == grad_out + 2 * (x + w)
    weight_only = size(
        "aten::convolution_backward",
        dims,
        types,
        '["", "", "", "[128]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", "[False, True, True]"]',
    )
    assert (
        isinstance(weight_only, Cost) and weight_only.flops == fwd and weight_only.bytes == grad_out + x + w
    )
    unknown = size("aten::convolution_backward", dims, types)
    assert isinstance(unknown, Cost) and unknown.model == "estimate" and unknown.flops == 2 * fwd


def test_attention_causal_from_concrete_inputs() -> None:
    qwen = (
        "aten::scaled_dot_product_attention",
        "[[16,16,559,64],[16,16,559,64],[16,16,559,64],[],[],[],[],[]]",
        f'[{BF16},{BF16},{BF16},"","Scalar","Scalar","Scalar","Scalar"]',
    )
    causal = size(*qwen, '["", "", "", "", "0.", "True", "0.125", "False"]')  # Qwen: is_causal=True
    assert isinstance(causal, Cost) and causal.model == "exact" and "causal" in causal.note
    assert causal.flops == 4 * 16 * 16 * 559 * 559 * 64 / 2
    full = size(*qwen, '["", "", "", "", "0.", "False", "0.125", "False"]')
    assert isinstance(full, Cost) and full.flops == 4 * 16 * 16 * 559 * 559 * 64 and full.model == "exact"
    flash = size(
        "aten::_flash_attention_forward",
        "[[16,559,16,64],[16,559,16,64],[16,559,16,64],[],[],[],[],[],[],[],[],[],[],[],[]]",
        f'[{BF16},{BF16},{BF16},"","","Scalar","Scalar","Scalar","Scalar","Scalar","Scalar","","","",""]',
        '["", "", "", "", "", "559", "559", "0.", "True", "False", "0.125", "", "", "", ""]',
    )
    assert isinstance(flash, Cost) and flash.flops == causal.flops


def test_reductions_and_scaled_mm_from_concrete_inputs() -> None:  # hand-made
    total = size(
        "aten::sum",
        "[[16,559,1024],[],[],[]]",
        '["float","ScalarList","Scalar",""]',
        '["", "[-1]", "True", ""]',
    )
    assert isinstance(total, Cost) and total.model == "exact"
    assert total.bytes == (16 * 559 * 1024 + 16 * 559) * 4
    everything = size("aten::sum", "[[16,559,1024],[]]", '["float",""]', '["", ""]')
    assert isinstance(everything, Cost) and everything.bytes == 16 * 559 * 1024 * 4 + 4
    fp8 = '"c10::Float8_e4m3fn"'
    scaled = size(
        "aten::_scaled_mm",
        "[[4096,8192],[8192,1024],[],[],[],[],[],[]]",
        f'[{fp8},{fp8},"float","float","","","Scalar","Scalar"]',
        '["", "", "", "", "", "", "15", "False"]',
    )
    assert isinstance(scaled, Cost) and scaled.model == "exact" and scaled.dtype == "fp8"
    assert scaled.flops == 2 * 4096 * 1024 * 8192
    assert scaled.bytes == 4096 * 8192 + 8192 * 1024 + 2 * 4 + 4096 * 1024 * 2  # A, B, two fp32 scales, C


def test_malformed_shapes_are_unsized_not_guessed() -> None:  # hand-made edge cases
    assert isinstance(size("aten::mm", "[[8944,1024,3],[1024,1024]]", f"[{BF16},{BF16}]"), Unsized)
    assert isinstance(size("aten::add", "[[4,3],[5,3]]", f"[{BF16},{BF16}]"), Unsized)
    assert concrete_values("[[[") is None and concrete_values('["", "1", "[2, 2]", "True", "same"]') == [
        None,
        1,
        [2, 2],
        True,
        "same",
    ]
    assert tensors("not json", "[]") is None
    assert tensors(None, "[]") is None
    assert tensors("[[-1,2]]", f"[{BF16}]") == [None]


def test_peak_table_loads_and_every_entry_names_its_source() -> None:
    table = peak_table()
    assert len(table) >= 20
    for entry in table:
        assert entry.source.strip() and entry.match
        assert entry.bandwidth_tbps and entry.bandwidth_tbps > 0
        assert entry.tflops["fp32"] and entry.tflops["fp16"]
    names = {e.name for e in table}
    for gpu in (
        "V100",
        "A100 PCIe 40GB",
        "A100 SXM 80GB",
        "H100 SXM",
        "H100 PCIe",
        "H200",
        "B200",
        "L4",
        "A10",
        "RTX 2080 Ti",
        "RTX 3090",
        "RTX 4090",
        "MI210",
        "MI250X",
        "MI300X",
        "MI325X",
        "MI355X",
    ):
        assert any(gpu in n for n in names), gpu


@pytest.mark.parametrize(
    ("device", "entry"),
    [
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM"),
        ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"),
        ("NVIDIA A100-PCIE-40GB", "NVIDIA A100 PCIe 40GB"),
        ("A100-PG509-200", "NVIDIA A100 SXM 40GB"),
        ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 SXM 80GB"),
        ("Tesla V100-DGXS-32GB", "NVIDIA V100 SXM2"),
        ("AMD Instinct MI300X VF", "AMD Instinct MI300X"),
        ("NVIDIA A10", "NVIDIA A10"),
        ("NVIDIA L4", "NVIDIA L4"),
        ("NVIDIA L40S", "NVIDIA L40S"),  # its own entry, never the L4's
        ("AMD Radeon Graphics", None),
        ("", None),
    ],
)
def test_device_names_match_whole_words(device: str, entry: str | None) -> None:
    found = match_peaks(device)
    assert (found.name if found else None) == entry


def _raw_gpu_time(events: list[dict], name: str, dims: str) -> tuple[int, int]:
    """(calls, GPU ns) of the op instances named `name` with these Input Dims, from the raw events: the GPU
    events whose launch has such an instance among its enclosing ops, each counted once."""
    raw = reference.link(events)

    def key(i: int) -> bool:
        e = events[i]
        return (
            e.get("name") == name
            and json.dumps(reference.args(e).get("Input Dims"), separators=(",", ":")) == dims
        )

    calls = sum(
        1 for i, e in enumerate(events) if e.get("cat") in reference.OP_CATS and reference.is_x(e) and key(i)
    )
    total = 0
    for g in raw.gpu:
        op = raw.op.get(g)
        while op is not None:
            if key(op):
                total += reference.gpu_dur(events, g)
                break
            op = raw.op_parent.get(op)
    return calls, total


@pytest.mark.corpus
def test_vit_h100_rows_against_raw_events() -> None:
    path = corpus_path(VIT_H100)
    result = efficiency(opscope.load(path), EfficiencyOptions(top=0))
    assert (
        result.device == "NVIDIA H100 80GB HBM3" and result.peaks and result.peaks.name == "NVIDIA H100 SXM"
    )
    events = reference.load(path)
    row = next(
        r for r in result.rows if r.op == "aten::linear" and r.shape == "[[4,197,768],[3072,768],[3072]]"
    )
    calls, gpu_ns = _raw_gpu_time(events, "aten::linear", row.shape)
    assert (row.calls, round(row.gpu_time_us * 1e3)) == (calls, gpu_ns) and gpu_ns > 0
    flops = 2 * 788 * 3072 * 768
    assert row.flops_per_call == flops
    assert row.achieved_tflops == pytest.approx(flops * calls / (gpu_ns / 1e9) / 1e12, rel=1e-12)
    assert row.pct_of_peak_compute == pytest.approx(100 * row.achieved_tflops / 989.4, rel=1e-12)
    assert row.peak_tbps == 3.35 and row.model == "exact" and row.dtype == "bf16"
    ridge = 989.4 / 3.35
    assert row.bound == ("compute" if row.intensity_flops_per_byte >= ridge else "memory")
    for r in result.rows:  # achieved = FLOPs x calls / GPU time, in every row
        seconds = r.gpu_time_us / 1e6
        assert r.achieved_tbps == pytest.approx(r.bytes_per_call * r.calls / seconds / 1e12, rel=1e-9)
        if r.flops_per_call is not None:
            assert r.achieved_tflops == pytest.approx(r.flops_per_call * r.calls / seconds / 1e12, rel=1e-9)
    # nested sized ops are not listed twice: addmm runs inside linear, the flash kernel inside sdpa
    assert not any(r.op in ("aten::addmm", "aten::_flash_attention_forward") for r in result.rows)
    # the cls-token cat (unsized before it had a model): bf16 from the op that produced its inputs
    cat = next(r for r in result.rows if r.op == "aten::cat")
    assert (cat.shape, cat.dtype, cat.model) == ("[[[4,1,768],[4,196,768]],[]]", "bf16", "exact")
    assert cat.bytes_per_call == 2 * (4 * 1 * 768 + 4 * 196 * 768) * 2
    assert result.sized_gpu_time_ns + result.unsized_gpu_time_ns == result.gpu_time_ns


@pytest.mark.corpus
def test_unknown_gpu_gets_no_percentages_and_overrides_apply() -> None:
    trace = opscope.load(corpus_path(VIT_H100))
    known = efficiency(trace)
    # the same events with the GPU renamed to one the table does not know (hand-made edge case)
    meta = dataclasses.replace(
        trace.meta, devices=tuple(dataclasses.replace(d, name="Mystery GPU 9000") for d in trace.meta.devices)
    )
    unknown = efficiency(Trace.from_frame(meta, trace.events))
    assert unknown.device == "Mystery GPU 9000" and unknown.peaks is None
    assert all(r.pct_of_peak_compute is None and r.pct_of_peak_bandwidth is None for r in unknown.rows)
    assert [r.achieved_tflops for r in unknown.rows] == [r.achieved_tflops for r in known.rows]
    assert {r.bound for r in unknown.rows if r.family == "gemm"} == {None}
    given = efficiency(trace, EfficiencyOptions(peak_tflops=100.0, peak_tbps=2.0))
    gemm = next(r for r in given.rows if r.family == "gemm")
    assert gemm.peak_tflops == 100.0 and gemm.pct_of_peak_compute == pytest.approx(gemm.achieved_tflops)
    assert gemm.pct_of_peak_bandwidth == pytest.approx(50 * gemm.achieved_tbps)


@pytest.mark.corpus
def test_trace_without_shapes_lists_ops_as_unsized() -> None:
    result = efficiency(opscope.load(corpus_path(NO_SHAPES)), EfficiencyOptions(top=0))
    assert result.rows == ()
    assert result.unsized and all(u.shape is None for u in result.unsized)
    reasons = {u.op: u.reason for u in result.unsized}
    assert any("record_shapes" in reason for op, reason in reasons.items() if op in FAMILIES)


@pytest.mark.corpus
def test_per_op_rows_sum_the_shapes() -> None:
    trace = opscope.load(corpus_path(VIT_H100))
    shapes = efficiency(trace, EfficiencyOptions(top=0))
    ops = efficiency(trace, EfficiencyOptions(top=0, by_shape=False))
    linear = next(r for r in ops.rows if r.op == "aten::linear")
    parts = [r for r in shapes.rows if r.op == "aten::linear"]
    assert linear.shape is None and linear.calls == sum(r.calls for r in parts)
    total_flops = sum(r.flops_per_call * r.calls for r in parts if r.flops_per_call)
    assert linear.flops_per_call == pytest.approx(total_flops / linear.calls)
    assert linear.gpu_time_us == pytest.approx(sum(r.gpu_time_us for r in parts))


@pytest.mark.corpus
def test_python_api_and_frames() -> None:
    result = opscope.efficiency(opscope.load(corpus_path(VIT_H100)))
    frame = result.to_polars()
    assert frame.height == len(result.rows) and "pct_of_peak_compute" in frame.columns
    assert result.to_pandas().shape == frame.shape


@pytest.mark.corpus
def test_low_efficiency_candidates() -> None:
    result = efficiency(opscope.load(corpus_path(VIT_H100)), EfficiencyOptions(top=0))
    found = low_efficiency_candidates(result.rows, gpu_time_us=result.gpu_time_ns / 1e3)
    assert found and found == sorted(found, key=lambda c: -c.gpu_time_us)
    for c in found:
        assert c.pct_of_peak < 30
        assert c.kind == ("compute" if c.row.family in ("gemm", "conv", "attention") else "memory")
    sdpa = next(c for c in found if c.row.op == "aten::scaled_dot_product_attention")
    assert sdpa.kind == "compute" and math.isclose(sdpa.share, sdpa.gpu_time_us * 1e3 / result.gpu_time_ns)
    assert low_efficiency_candidates(result.rows, compute_threshold=0.0, bandwidth_threshold=0.0) == []


@pytest.mark.corpus
def test_cli_json_schema(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("efficiency", corpus_path(VIT_H100), "--format", "json", "--top", "3")
    assert res.code == 0, res.err
    data = json.loads(res.out)
    assert data["schema"] == "opscope.efficiency/1" and len(data["rows"]) == 3
    for row in data["rows"]:
        assert {
            "op",
            "shape",
            "dtype",
            "calls",
            "gpu_time_us",
            "flops_per_call",
            "bytes_per_call",
            "achieved_tflops",
            "achieved_tbps",
            "intensity_flops_per_byte",
            "peak_tflops",
            "peak_tbps",
            "pct_of_peak_compute",
            "pct_of_peak_bandwidth",
            "bound",
            "model",
        } <= set(row)
        assert row["bound"] in ("compute", "memory", None) and row["model"] in ("exact", "estimate")
    assert data["device"]["source"]


@pytest.mark.corpus
@pytest.mark.parametrize("fmt", ["table", "csv", "markdown"])
def test_cli_formats(cli, fmt: str) -> None:  # type: ignore[no-untyped-def]
    res = cli("efficiency", corpus_path(VIT_H100), "--format", fmt, "--no-by-shape")
    assert res.code == 0, res.err
    assert "aten::linear" in res.out


@pytest.mark.corpus
def test_cli_rejects_bad_peaks(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("efficiency", corpus_path(VIT_H100), "--peak-tflops", "-3")
    assert res.code == 2 and "--peak-tflops" in res.err


@pytest.mark.corpus
def test_ops_efficiency_columns(cli) -> None:  # type: ignore[no-untyped-def]
    path = corpus_path(VIT_H100)
    res = cli("ops", path, "--by-shape", "--efficiency", "--top", "0", "--format", "json")
    assert res.code == 0, res.err
    data = json.loads(res.out)
    expected = {(r.op, r.shape): r for r in efficiency(opscope.load(path), EfficiencyOptions(top=0)).rows}
    listed = [r for r in data["rows"] if r["efficiency"] is not None and r["efficiency_via"] is None]
    assert len(listed) == len(expected)  # rows "via" an enclosing op: tests/test_ops_efficiency_via.py
    for row in listed:
        want = expected[(row["name"], row["input_dims"])]
        assert row["efficiency"]["achieved_tflops"] == (
            None if want.achieved_tflops is None else round(want.achieved_tflops, 6)
        )
        assert row["gpu_total_us"] == pytest.approx(want.gpu_time_us, abs=1e-3)
    assert cli("ops", path, "--efficiency", "--format", "markdown").code == 0


def _tiny_trace(path: Path) -> Path:
    """HAND-MADE: one aten::mm with shapes and one op with a terminal-escape name and no shapes, each launching
    one kernel; the GPU is not in the peak table."""
    events: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "pid": 1,
            "tid": 1,
            "ts": 10,
            "dur": 20,
            "args": {"Input Dims": [[64, 32], [32, 16]], "Input type": ["float", "float"], "External id": 1},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 12,
            "dur": 4,
            "args": {"correlation": 7},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "gemm_kernel",
            "pid": 0,
            "tid": 7,
            "ts": 40,
            "dur": 8,
            "args": {"correlation": 7, "device": 0, "stream": 7},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "evil\u001b[31mop",
            "pid": 1,
            "tid": 1,
            "ts": 50,
            "dur": 20,
            "args": {"External id": 2},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 52,
            "dur": 4,
            "args": {"correlation": 8},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "other_kernel",
            "pid": 0,
            "tid": 7,
            "ts": 80,
            "dur": 2,
            "args": {"correlation": 8, "device": 0, "stream": 7},
        },
    ]
    doc = {"traceEvents": events, "deviceProperties": [{"id": 0, "name": "Mystery GPU 9000"}]}
    path.write_text(json.dumps(doc))
    return path


def test_unknown_gpu_and_hostile_names_hand_made(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = _tiny_trace(tmp_path / "tiny.json")
    data = json.loads(cli("efficiency", path, "--format", "json").out)
    (row,) = data["rows"]
    assert row["op"] == "aten::mm" and row["flops_per_call"] == 2 * 64 * 16 * 32
    assert row["achieved_tflops"] == pytest.approx(2 * 64 * 16 * 32 / 8e-6 / 1e12)
    assert row["bytes_per_call"] == (64 * 32 + 32 * 16 + 64 * 16) * 4
    assert row["peak_tflops"] is None and row["pct_of_peak_compute"] is None and row["bound"] is None
    gpu = data["device"].pop("gpu")
    assert data["device"] == {
        "name": "Mystery GPU 9000",
        "peaks": None,
        "source": None,
        "peak_tflops_override": None,
        "peak_tbps_override": None,
    }
    assert gpu["arch"] is None and gpu["inferred"] is False  # a named GPU nobody knows: nothing inferred
    (unsized,) = data["unsized"]
    assert unsized["op"] == "evil\u001b[31mop" and unsized["reason"] == "no model for this op"
    for fmt in ("table", "markdown", "csv"):
        res = cli("efficiency", path, "--format", fmt)
        assert res.code == 0 and "\u001b" not in res.out and "aten::mm" in res.out
    given = json.loads(cli("efficiency", path, "--format", "json", "--peak-tflops", "10").out)["rows"][0]
    assert given["pct_of_peak_compute"] == pytest.approx(100 * given["achieved_tflops"] / 10, abs=1e-3)


@pytest.mark.corpus
def test_trace_without_operators_says_why(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("efficiency", corpus_path("pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"))
    assert res.code == 0 and "No op could be sized" in res.out
    assert "TFLOP/s" not in res.out.split("No op could be sized")[0]  # no empty table above the reason
    data = json.loads(cli("efficiency", corpus_path(NO_SHAPES), "--format", "json").out)
    assert data["rows"] == [] and data["device"]["peaks"] == "NVIDIA A100 SXM 40GB"


@pytest.mark.corpus
def test_cpu_only_trace_says_there_is_no_gpu_work(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("efficiency", corpus_path("hta/cpu_only_rank-34.OLDVERSION_b8cce2cd9c.pt.trace.json.gz"))
    assert (
        res.code == 0
        and "No GPU kernels, memcpys or memsets" in res.out
        and "No op could be sized" not in res.out
    )
    csv_out = cli(
        "efficiency",
        corpus_path("hta/cpu_only_rank-34.OLDVERSION_b8cce2cd9c.pt.trace.json.gz"),
        "--format",
        "csv",
    ).out
    assert csv_out.startswith("op,")  # CSV keeps its header


def _torch_flops(build, only: str | None = None):  # type: ignore[no-untyped-def]
    """FLOPs PyTorch's own counter (torch.utils.flop_counter) gives for `build(torch, meta)`: an independent
    check. `only`: the count of that aten op alone (the backward, without the forward that builds its graph)."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        build(torch, torch.device("meta"))
    if only is None:
        return counter.get_total_flops()
    return sum(n for op, n in counter.get_flop_counts()["Global"].items() if str(op).startswith(only))


def _conv_backward(torch, meta):  # type: ignore[no-untyped-def]
    x = torch.empty(8, 64, 56, 56, device=meta, requires_grad=True)
    w = torch.empty(128, 64, 3, 3, device=meta, requires_grad=True)
    out = torch.nn.functional.conv2d(x, w, stride=2, padding=1)
    torch.autograd.grad(out, (x, w), torch.empty_like(out))


TORCH_CASES = [  # (op, dims, types, concrete) as the traces record them, and the same call for torch
    (
        "aten::mm",
        "[[8944,1024],[1024,2816]]",
        f"[{BF16},{BF16}]",
        None,
        lambda t, m: torch_mm(t, m, (8944, 1024), (1024, 2816)),
    ),
    (
        "aten::linear",
        "[[4,197,3072],[768,3072],[768]]",
        f"[{BF16},{BF16},{BF16}]",
        None,
        lambda t, m: t.nn.functional.linear(
            t.empty(4, 197, 3072, device=m), t.empty(768, 3072, device=m), t.empty(768, device=m)
        ),
    ),
    (
        "aten::bmm",
        "[[4096,128,128],[4096,128,16]]",
        f"[{F32},{F32}]",
        None,
        lambda t, m: t.bmm(t.empty(4096, 128, 128, device=m), t.empty(4096, 128, 16, device=m)),
    ),
    (
        "aten::baddbmm",
        "[[4096,128,128],[4096,128,16],[4096,16,128],[],[]]",
        f'[{F32},{F32},{F32},"Scalar","Scalar"]',
        None,
        lambda t, m: t.baddbmm(
            t.empty(4096, 128, 128, device=m),
            t.empty(4096, 128, 16, device=m),
            t.empty(4096, 16, 128, device=m),
        ),
    ),
    (
        *VIT_CONV,
        lambda t, m: t.nn.functional.conv2d(
            t.empty(4, 3, 224, 224, device=m),
            t.empty(768, 3, 16, 16, device=m),
            t.empty(768, device=m),
            stride=16,
        ),
    ),
    (
        "aten::conv1d",
        "[[512,4,8256],[64,4,1],[64],[],[],[],[]]",
        f'[{F32},{F32},{F32},"ScalarList","ScalarList","ScalarList","Scalar"]',
        '["", "", "", "[1]", "[0]", "[1]", "1"]',
        lambda t, m: t.nn.functional.conv1d(
            t.empty(512, 4, 8256, device=m), t.empty(64, 4, 1, device=m), t.empty(64, device=m)
        ),
    ),
    (
        "aten::scaled_dot_product_attention",
        "[[4,12,197,64],[4,12,197,64],[4,12,197,64],[],[],[],[],[]]",
        f'[{BF16},{BF16},{BF16},"","Scalar","Scalar","","Scalar"]',
        '["", "", "", "", "0.", "False", "", "False"]',
        lambda t, m: t.nn.functional.scaled_dot_product_attention(
            *(t.empty(4, 12, 197, 64, device=m) for _ in range(3))
        ),
    ),
    (
        "aten::convolution_backward",
        "[[8,128,28,28],[8,64,56,56],[128,64,3,3],[],[],[],[],[],[],[],[]]",
        '["float","float","float","ScalarList","ScalarList","ScalarList","ScalarList","Scalar","ScalarList","Scalar","ScalarList"]',
        '["", "", "", "[128]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", "[True, True, False]"]',
        _conv_backward,
    ),
]


def torch_mm(t, m, a, b):  # type: ignore[no-untyped-def]
    return t.empty(*a, device=m) @ t.empty(*b, device=m)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("op", "dims", "types", "concrete", "build"), TORCH_CASES, ids=[c[0] for c in TORCH_CASES]
)
def test_flops_agree_with_torch_flop_counter(
    op: str, dims: str, types: str, concrete: str | None, build
) -> None:  # type: ignore[no-untyped-def]
    cost = size(op, dims, types, concrete)
    assert isinstance(cost, Cost) and cost.model == "exact"
    only = "aten.convolution_backward" if op == "aten::convolution_backward" else None
    assert cost.flops == _torch_flops(build, only)
