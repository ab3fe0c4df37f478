"""`gemm_alignment` and `tensor_cores_unused`: GEMM / convolution shapes and data types (docs/advice.md)."""

from __future__ import annotations

import json
import re
from typing import Any

import polars as pl

from opscope.analysis.base.linking import ROW
from opscope.analysis.kernels.categories import CATEGORY
from opscope.analysis.kernels.category_rules import CONVOLUTION, GEMM
from opscope.analysis.kernels.gpu_arch import AMD
from opscope.analysis.kernels.kernel_facts import KernelFacts, facts_of
from opscope.analysis.kernels.kernel_families import CUDA_CORE, MATRIX_CORE, SIMT
from opscope.analysis.rules.context import E, RuleContext, S
from opscope.analysis.rules.factors import factor
from opscope.analysis.rules.model import ABOVE, GPU_TIME, MAX_EVIDENCE, Hit, Rule, Skipped, exact_names
from opscope.model.schema import Col

GEMM_OPS = (
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::matmul",
    "aten::linear",
    "aten::_scaled_mm",  # fp8 GEMMs (16-element alignment)
    "aten::_int_mm",  # int8 GEMMs
    "aten::conv1d",
    "aten::conv2d",
    "aten::conv3d",
    "aten::convolution",
    "aten::_convolution",
    "aten::cudnn_convolution",
    "aten::conv_transpose2d",
)
HALF = ("c10::Half", "c10::BFloat16", "half", "bfloat16")
BYTE = (
    "signed char",
    "c10::Float8_e4m3fn",
    "c10::Float8_e5m2",
    "c10::Float8_e4m3fnuz",
    "c10::Float8_e5m2fnuz",
    "int8",
)
FAST_MULTIPLE = 64
TF32_KERNEL = re.compile(r"tf32", re.IGNORECASE)
# For names no kernel family knows: an fp32 type in the name, never a bare "fp32" / "_f32_" (that is often the
# accumulator: bmm_MxE4m3_MxE2m1MxE4m3_Fp32_... is a block-scaled tensor-core GEMM).
FP32_KERNEL = re.compile(r"sgemm|scudnn|<float\b", re.IGNORECASE)
HALF_KERNEL = re.compile(r"half|bfloat16|__nv_bfloat|_bf16|_f16|_fp16|hgemm|hcudnn", re.IGNORECASE)
LAYOUT_KERNEL = re.compile(r"nchwToNhwc|nhwcToNchw|transpose", re.IGNORECASE)
MATRIX_KERNEL = re.compile(r"hmma|imma|wmma|mfma|tensorop|xmma|gmma|_tc_", re.IGNORECASE)
# CUTLASS / cuBLAS alignment markers: the elements per vector access the kernel was built for (align1, aligna4)
ALIGN_MARKER = re.compile(r"_align[ac]?(\d+)", re.IGNORECASE)


def alignment(dtype: str, tf32: bool) -> int | None:
    """Elements a GEMM dimension must be a multiple of to use tensor cores (None: rule does not apply)."""
    if dtype in HALF:
        return 8
    if dtype in BYTE:
        return 16
    if dtype == "float" and tf32:
        return 4
    return None


def gemm_dims(name: str, dims: list[Any]) -> tuple[int, list[tuple[str, int]]] | None:
    """(index of the input whose dtype decides, [(dimension label, size), ...]) for a GEMM / conv op: the
    dimensions that select the kernel. For a GEMM that is K and N, the leading dimensions of row-major A [M, K],
    B [K, N] and C [M, N]; M (tokens, batch) is never a leading dimension and selects no align1 kernel. For a
    convolution, the channels."""

    def shape(i: int) -> list[int] | None:
        value = dims[i] if i < len(dims) else None
        return value if isinstance(value, list) and value and all(isinstance(v, int) for v in value) else None

    base = name.split("::")[-1]
    if base in ("mm", "matmul", "bmm", "addmm", "baddbmm", "_scaled_mm", "_int_mm"):
        a, b = (1, 2) if base in ("addmm", "baddbmm") else (0, 1)
        x, y = shape(a), shape(b)
        if not x or not y or len(x) < 2 or len(y) < 2:
            return None
        return a, [("K", x[-1]), ("N", y[-1])]
    if base == "linear":
        x, w = shape(0), shape(1)
        if not x or not w or len(w) != 2:
            return None
        return 0, [("K", w[1]), ("N", w[0])]
    if "conv" in base:
        x, w = shape(0), shape(1)
        if not x or not w or len(x) < 3 or len(w) < 3:
            return None
        return 0, [("C_in", x[1]), ("C_out", w[0])]
    return None


def kernel_alignment(kernels: list[str]) -> int | None:
    """The smallest alignment marker (elements per vector access) in the kernels' names: align1 / align2 prove
    a misaligned size chose a slower kernel, align8 that it did not; None when no name says."""
    found = [int(m) for k in kernels for m in ALIGN_MARKER.findall(k or "")]
    return min(found) if found else None


def selecting(sizes: list[tuple[str, int]], align: int) -> list[tuple[str, int]]:
    """The misaligned sizes that select a kernel: input channels fewer than one vector (the 3 channels of an
    RGB image at a network's stem) are the data's format, not a choice, and cuDNN pads them itself."""
    return [(label, size) for label, size in sizes if size % align and not (label == "C_in" and size < align)]


def _types(text: str | None) -> list[str]:
    try:
        value = json.loads(text) if text else []
    except ValueError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []


def _dims(text: str | None) -> list[Any]:
    try:
        value = json.loads(text) if text else []
    except ValueError:
        return []
    return value if isinstance(value, list) else []


def misaligned_gemms(ctx: RuleContext, threshold: float) -> Hit | Skipped | None:
    missing = ctx.shapes_missing()
    if missing is not None:
        return Skipped(missing)
    if ctx.gpu_total_ns == 0:
        return None
    ops = ctx.ops.filter(pl.col(Col.NAME).is_in(GEMM_OPS) & pl.col(Col.INPUT_DIMS).is_not_null())
    if ops.height == 0:
        return Hit(value=0, time_at_stake_ns=0)
    gemm_rows = set(ops[ROW].to_list())
    ops = ops.filter(
        ~pl.col("op_parent_row").is_in(list(gemm_rows)).fill_null(False)
    )  # outermost GEMM op only
    under = ctx.gpu_ns_under(ops[ROW])
    # what decides a call is its op, shapes and types and its kernels' tf32 and alignment markers: the calls
    # are grouped by those first (in polars), and only the distinct groups are parsed and judged in Python
    kernel = pl.element().fill_null("")
    marks = under.select(
        ROW,
        "gpu_ns",
        "kernels",
        pl.col("kernels")
        .list.eval(kernel.str.contains(TF32_KERNEL.pattern, literal=False))
        .list.any()
        .fill_null(False)
        .alias("_tf32"),
        # the markers of all of a call's kernels: one text of its names (a marker never spans two of them)
        pl.col("kernels")
        .list.eval(kernel)
        .list.join("\n")
        .str.extract_all(r"(?i)_align[ac]?\d+")
        .list.eval(pl.element().str.extract(r"(\d+)$").cast(pl.Int64))
        .list.min()
        .alias("_align"),
    )
    calls = ops.select(ROW, Col.NAME, Col.INPUT_DIMS, Col.INPUT_TYPES).join(
        marks, on=ROW, how="inner", maintain_order="left"
    )
    keys = [Col.NAME, Col.INPUT_DIMS, Col.INPUT_TYPES, "_tf32", "_align"]
    distinct = calls.group_by(keys, maintain_order=True).agg(
        pl.col(ROW),
        pl.len().alias("_calls"),
        pl.col("gpu_ns").sum().alias("_gpu_ns"),
        pl.col("kernels").explode().unique().alias("_kernels"),
    )
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    bad_rows: list[int] = []
    for r in distinct.iter_rows(named=True):
        dims = _dims(r[Col.INPUT_DIMS])
        parsed = gemm_dims(r[Col.NAME], dims)
        if parsed is None:
            continue
        index, sizes = parsed
        types = _types(r[Col.INPUT_TYPES])
        dtype = types[index] if index < len(types) else ""
        align = alignment(dtype, bool(r["_tf32"]))
        if align is None:
            continue
        bad = selecting(sizes, align)
        chosen = r["_align"]
        if not bad or (chosen is not None and chosen >= align):
            continue  # nothing misaligned, or the kernel that ran is an aligned one after all
        key = (r[Col.NAME], json.dumps(dims), dtype)
        group = groups.setdefault(
            key,
            {
                "op": r[Col.NAME],
                "input_dims": dims,
                "dtype": dtype,
                "multiple_of": align,
                "misaligned": {f"{label}": size for label, size in bad},
                "pad_to": {label: -(-size // align) * align for label, size in bad},
                # the size to prefer where padding is cheap (a vocabulary): a multiple of 64, the tile width
                # of most GEMM kernels (50257 -> 50304)
                "pad_to_64": {label: -(-size // FAST_MULTIPLE) * FAST_MULTIPLE for label, size in bad},
                "kernel_alignment": None if chosen is None else f"align{chosen}",
                "calls": 0,
                "gpu_ns": 0,
                "kernels": set(),
            },
        )
        bad_rows.extend(r[ROW])
        group["calls"] += int(r["_calls"])
        group["gpu_ns"] += int(r["_gpu_ns"])
        group["kernels"].update(k for k in r["_kernels"] if k)
    if not groups:
        return Hit(value=0, time_at_stake_ns=0)
    ordered = sorted(groups.values(), key=lambda g: (-g["gpu_ns"], g["op"], json.dumps(g["input_dims"])))
    total = sum(g["gpu_ns"] for g in ordered)
    evidence = tuple(
        {
            **{k: v for k, v in g.items() if k not in ("gpu_ns", "kernels")},
            "gpu_time_us": round(g["gpu_ns"] / 1e3, 3),
            "kernels": sorted(g["kernels"])[:3],
        }
        for g in ordered[:MAX_EVIDENCE]
    )
    sizes = sorted({s for g in ordered for s in g["misaligned"].values()})
    return Hit(
        value=total / ctx.gpu_total_ns,
        time_at_stake_ns=total,
        evidence=evidence,
        detail=f"{len(ordered)} shapes; sizes {', '.join(map(str, sizes[:6]))}{' ...' if len(sizes) > 6 else ''}",
        claims=ctx.kernels_under(pl.Series(bad_rows, dtype=pl.Int64)),
        estimate_ns=round(total * (1 - factor("aligned_gemm"))),
        model="aligned_gemm",
    )


def counts_as_fp32(name: str, facts: KernelFacts) -> bool:
    """An fp32 GEMM / convolution kernel that could run on the matrix unit in a reduced type: an fp32 A operand
    on CUDA cores / SIMT, or fp32 matrix instructions (AMD matrix cores run bf16 at 4-8x their fp32 rate).
    The type is the input's, never the accumulator's; a family that is not a GEMM (embedding, gather) never
    counts. Names no family knows fall back to their spelling (sgemm, scudnn, <float>)."""
    if facts.category is not None and facts.category not in (GEMM, CONVOLUTION):
        return False
    if facts.math == MATRIX_CORE:
        return facts.input == "fp32"
    if facts.on_matrix_unit:
        return False  # NVIDIA tensor cores take tf32, not fp32
    if facts.math in (CUDA_CORE, SIMT) and facts.input is not None:
        return facts.input == "fp32"
    if facts.family is None and MATRIX_KERNEL.search(name):
        return False
    return (
        facts.math in (CUDA_CORE, SIMT, None)
        and FP32_KERNEL.search(name) is not None
        and HALF_KERNEL.search(name) is None
        and LAYOUT_KERNEL.search(name) is None
    )


def fp32_gemms(ctx: RuleContext, threshold: float) -> Hit | Skipped | None:
    gpu = ctx.gpu
    cores = gpu.has_matrix_units
    if cores is None:
        return Skipped(
            "the GPU is not known (no device description in the trace, and no kernel name says the architecture)"
        )
    if not cores:
        return Skipped(f"the GPU ({gpu.label}) has no tensor cores")
    if ctx.gpu_total_ns == 0:
        return None
    gemms = ctx.kernels.filter(pl.col(CATEGORY).is_in([GEMM, CONVOLUTION]))
    if gemms.height == 0:
        return Hit(value=0, time_at_stake_ns=0)
    facts = facts_of(gemms[Col.NAME].unique().to_list())  # each distinct name once
    fp32_names = sorted(n for n, f in facts.items() if counts_as_fp32(n, f))
    matrix_names = sorted(n for n, f in facts.items() if f.on_matrix_unit and n not in fp32_names)
    fp32 = gemms.filter(pl.col(Col.NAME).is_in(fp32_names))
    tc_calls = gemms.filter(pl.col(Col.NAME).is_in(matrix_names)).height
    if fp32.height == 0:
        return Hit(value=0, time_at_stake_ns=0)
    groups = (
        fp32.with_columns((pl.col(E) - pl.col(S)).alias("_ns"))
        .group_by(Col.NAME)
        .agg(pl.len().alias("calls"), pl.col("_ns").sum())
        .sort(["_ns", Col.NAME], descending=[True, False])
    )
    total = int(groups["_ns"].sum())
    evidence = tuple(
        {
            "kernel": r[Col.NAME],
            "calls": r["calls"],
            "time_us": round(r["_ns"] / 1e3, 3),
            "unit": UNIT_TEXT.get(facts[r[Col.NAME]].math or "", "not known"),
        }
        for r in groups.head(MAX_EVIDENCE).iter_rows(named=True)
    )
    unit = "matrix-core" if gpu.vendor == AMD else "tensor-core"
    return Hit(
        value=total / ctx.gpu_total_ns,
        time_at_stake_ns=total,
        evidence=evidence,
        detail=f"{fp32.height:,} fp32 kernels on {gpu.label}; {tc_calls:,} {unit} GEMM/conv kernels",
        claims=fp32.select(S, E),
        # the change: every fp32 GEMM / conv kernel (each name is fp32 wherever it runs) at the factor's share
        what_if=(exact_names(fp32_names), factor("tensor_core_gemm")),
        estimate_ns=round(total * (1 - factor("tensor_core_gemm"))),
        model="tensor_core_gemm",
    )


UNIT_TEXT = {
    CUDA_CORE: "CUDA cores",
    SIMT: "SIMT (vector ALUs)",
    MATRIX_CORE: "fp32 matrix instructions",
}


RULES = (
    Rule(
        id="gemm_alignment",
        title="GEMM / convolution sizes not aligned for tensor cores",
        source="nvidia",
        metric="share of GPU time in misaligned GEMM/conv ops (K and N, channels)",
        threshold=0,
        direction=ABOVE,
        basis=GPU_TIME,
        advice="Pad K and N (channels for convolutions) to multiples of 8 for fp16/bf16, 16 for int8/fp8, 4 for "
        "tf32 (64 is better still for large sizes: a vocabulary of 50257 -> 50304); misaligned sizes fall "
        "back to slower kernels (align1 / align2 cutlass variants, or no tensor cores at all).",
        check=misaligned_gemms,
    ),
    Rule(
        id="tensor_cores_unused",
        title="fp32 GEMMs / convolutions on a GPU with tensor cores",
        source="nvidia",
        metric="share of GPU time in fp32 GEMM/conv kernels (CUDA cores / SIMT, or fp32 matrix instructions)",
        threshold=0,
        direction=ABOVE,
        basis=GPU_TIME,
        advice="Use automatic mixed precision (torch.autocast with a reduced type the GPU's matrix units take: "
        "fp16 on Volta / Turing, bf16 or fp16 from Ampere and CDNA 2 on) so GEMMs and convolutions run on tensor "
        "(matrix) cores; from Ampere on, allowing TF32 (torch.backends.cuda.matmul.allow_tf32 = True, "
        "torch.backends.cudnn.allow_tf32 = True, or torch.set_float32_matmul_precision('high')) does it without "
        "changing the model's dtype. The finding's advice names what the trace's GPU supports.",
        check=fp32_gemms,
    ),
)
