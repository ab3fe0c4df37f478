"""What a kernel's name says about it, from the family table (kernel_families.py): `kernel_facts(name)`.

The rules read these facts instead of matching names themselves: `tensor_cores_unused` (is the kernel on the
matrix unit, and in which input type), `low_occupancy` and `opscope kernels`' flags (warp-specialised /
persistent and communication kernels are exempt) and the GPU inference (gpu_arch.py: the architecture a kernel
was built for). Each distinct name is classified once (an LRU cache): the cost follows the number of distinct
names, never of events.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from opscope.analysis.kernels.category_rules import COMMUNICATION
from opscope.analysis.kernels.kernel_families import (
    CUDA_CORE,
    FAMILIES,
    MATRIX_UNITS,
    NVIDIA,
    KernelFamily,
)

# Spellings of data types in kernel names -> one canonical name.
DTYPES: Final[dict[str, str]] = {
    "fp32": "fp32",
    "f32": "fp32",
    "float": "fp32",
    "fp16": "fp16",
    "f16": "fp16",
    "half": "fp16",
    "half_t": "fp16",
    "bf16": "bf16",
    "bfloat16": "bf16",
    "bfloat16_t": "bf16",
    "tf32": "tf32",
    "fp64": "fp64",
    "f64": "fp64",
    "fp8": "fp8",
    "e4m3": "fp8",
    "e5m2": "fp8",
    "float_e4m3_t": "fp8",
    "e2m1": "fp4",
    "e2m3": "fp6",
    "e3m2": "fp6",
    "mxe4m3": "mxfp8",
    "mxe5m2": "mxfp8",
    "mxfp8": "mxfp8",
    "mxe2m3": "mxfp6",
    "mxe3m2": "mxfp6",
    "mxe2m1": "mxfp4",
    "mxfp4": "mxfp4",
    "nvfp4": "nvfp4",
    "s8": "int8",
    "i8": "int8",
    "u8": "int8",
    "int8": "int8",
    "s32": "int32",
    "i32": "int32",
    "int32": "int32",
    "complex32": "complex32",
    "complex64": "complex64",
    "complex128": "complex128",
}
BLOCK_SCALED: Final = frozenset({"mxfp8", "mxfp6", "mxfp4", "nvfp4"})
# the dtypes an fp32-input kernel could run in instead, on a matrix unit
REDUCED: Final = frozenset({"tf32", "fp16", "bf16", "fp8", "fp6", "fp4", "int8", *BLOCK_SCALED})

# Occupancy exemptions (why a low occupancy or a small grid is by design)
TENSOR_CORE_KERNEL_EXEMPT: Final = "tensor-core kernel"
PERSISTENT_EXEMPT: Final = "warp-specialised / persistent kernel"
COMMUNICATION_EXEMPT: Final = "communication kernel"


@dataclass(frozen=True)
class KernelFacts:
    family: str | None  # the matching row's id (None: no row matches)
    vendor: str | None
    library: str | None
    math: str | None  # one of kernel_families.MATH_UNITS; None: not known from the name
    category: str | None
    input: str | None  # canonical dtype of the A operand
    input_b: str | None
    acc: str | None
    arch: (
        str | None
    )  # the architecture the kernel was built for ("sm80", "gfx942"): a lower bound of the GPU's
    persistent: bool
    block_scaled: bool

    @property
    def on_matrix_unit(self) -> bool:
        return self.math in MATRIX_UNITS

    @property
    def occupancy_exempt(self) -> str | None:
        """Why occupancy figures do not apply to this kernel (None: they do)."""
        if self.category == COMMUNICATION:
            return COMMUNICATION_EXEMPT
        if self.persistent:
            return PERSISTENT_EXEMPT
        if self.on_matrix_unit:
            return TENSOR_CORE_KERNEL_EXEMPT
        return None


UNKNOWN = KernelFacts(None, None, None, None, None, None, None, None, None, False, False)

_ARCH_WORDS: Final = {
    "maxwell": "sm50",
    "pascal": "sm60",
    "volta": "sm70",
    "turing": "sm75",
    "ampere": "sm80",
    "hopper": "sm90",
    "blackwell": "sm100",
}


@functools.cache
def _compiled() -> tuple[tuple[KernelFamily, re.Pattern[str]], ...]:
    return tuple((f, re.compile(f.pattern, re.IGNORECASE if f.ignore_case else 0)) for f in FAMILIES)


def _dtype(family: KernelFamily, text: str | None) -> str | None:
    if not text:
        return None
    text = family.letters.get(text, text)
    return DTYPES.get(text.lower(), text.lower() if text.lower() in DTYPES.values() else None)


def _arch(family: KernelFamily, text: str | None) -> str | None:
    if not text:
        return family.arch
    text = text.lower()
    if text in _ARCH_WORDS:
        return _ARCH_WORDS[text]
    return family.arch_format.format(text)


@functools.lru_cache(maxsize=1 << 16)
def kernel_facts(name: str) -> KernelFacts:
    """The facts of the first family whose pattern is found in `name` (UNKNOWN when none is)."""
    for family, pattern in _compiled():
        match = pattern.search(name)
        if match is None:
            continue
        groups = {k: v for k, v in match.groupdict().items() if v}
        input_ = _dtype(family, groups.get("input")) or _dtype(family, groups.get("input2")) or family.input
        input_b = _dtype(family, groups.get("input_b"))
        acc = _dtype(family, groups.get("acc")) or family.acc
        math = family.math
        if family.fp32_means_cuda_core and family.vendor == NVIDIA and input_ == "fp32":
            math = CUDA_CORE  # tensor cores take tf32, not fp32: an fp32 A operand is an FFMA kernel
        return KernelFacts(
            family=family.id,
            vendor=family.vendor,
            library=family.library,
            math=math,
            category=family.category,
            input=input_,
            input_b=input_b,
            acc=acc,
            arch=_arch(family, groups.get("arch")),
            persistent=family.persistent,
            block_scaled=family.block_scaled or bool({input_, input_b} & BLOCK_SCALED),
        )
    return UNKNOWN


def facts_of(names: Iterable[str | None]) -> dict[str, KernelFacts]:
    """The facts of each distinct name."""
    return {n: kernel_facts(n) for n in set(names) if n}


def is_tensor_core_kernel(name: str) -> bool:
    """The kernel runs on the GPU's matrix unit (tensor cores / matrix cores), as far as its name says."""
    return kernel_facts(name).on_matrix_unit


def occupancy_exemption(name: str) -> str | None:
    """Why occupancy rules do not apply to the kernel `name` (None: they do): communication kernels (a small
    grid is by design), warp-specialised / persistent kernels (one CTA per SM by design) and tensor-core
    kernels (large tiles in registers and shared memory)."""
    return kernel_facts(name).occupancy_exempt
