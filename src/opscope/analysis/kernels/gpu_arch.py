"""The GPU a trace ran on: from its device metadata, else inferred from its kernel names (`gpu_identity`).

The architecture table says what each architecture's matrix units take (fp16, bf16, tf32, fp8, the MX
block-scaled formats) and, where an architecture is one product line, which peak-table entry stands for it.
When `deviceProperties` (or nsys / rocprof agent info) is absent or nameless, the architecture is read from
kernel names: libraries name kernels for the architecture they were built for (`volta_sgemm_*`,
`sm90_xmma_*`, `cutlass_80_*`, Tensile's `_ISA942_`, rocPRIM's `target_arch)942`). A kernel built for an
architecture runs on that one and on later ones, so the newest architecture named is a lower bound of the GPU:
an RTX 2080 Ti (Turing) runs cuBLAS's `volta_*` kernels. Every output that uses an inferred GPU says so
("GPU: inferred Volta (sm70) from kernel names"). Definitions and sources: docs/advice.md ("The GPU").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

import polars as pl

from opscope.model.meta import DeviceInfo
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace

NVIDIA: Final = "nvidia"
AMD: Final = "amd"

# Matrix-unit input types, as feature names: "mx" = the block-scaled formats (MXFP8 / MXFP6 / MXFP4, NVFP4).
FP16, BF16, TF32, FP8, MX, INT8 = "fp16", "bf16", "tf32", "fp8", "mx", "int8"

_PTX = "NVIDIA PTX ISA, 'Matrix multiply-accumulate operation using mma' (types per target sm_XX)"
_ROCM = "ROCm documentation, 'Data types and precision support' (per CDNA generation)"


@dataclass(frozen=True)
class Architecture:
    key: str  # "sm70", "gfx942"
    vendor: str
    name: str  # "Volta", "CDNA 3"
    gpus: str  # the products built on it
    matrix: frozenset[str]  # input types its matrix units take (empty: no tensor / matrix cores)
    source: str
    peaks: str | None = (
        None  # a device name the peak table matches, when the architecture is one product line
    )

    @property
    def label(self) -> str:
        return f"{self.name} ({self.key})"


def _nv(key: str, name: str, gpus: str, matrix: set[str], peaks: str | None = None) -> Architecture:
    return Architecture(key, NVIDIA, name, gpus, frozenset(matrix), _PTX, peaks)


def _amd(key: str, name: str, gpus: str, matrix: set[str], source: str = _ROCM) -> Architecture:
    return Architecture(key, AMD, name, gpus, frozenset(matrix), source)


ARCHITECTURES: Final[dict[str, Architecture]] = {
    a.key: a
    for a in (
        _nv("sm50", "Maxwell", "GTX 900, Tesla M40", set()),
        _nv("sm60", "Pascal", "Tesla P100, GTX 10", set()),
        # Volta: HMMA on fp16 only; no bf16, no tf32 (those need Ampere)
        _nv("sm70", "Volta", "V100, TITAN V", {FP16}, peaks="Tesla V100-SXM2"),
        _nv("sm72", "Volta (Xavier)", "Jetson AGX Xavier", {FP16, INT8}),
        _nv("sm75", "Turing", "T4, RTX 20", {FP16, INT8}),
        _nv("sm80", "Ampere", "A100, A30", {FP16, BF16, TF32, INT8}),
        _nv("sm86", "Ampere (GA10x)", "A10, A40, RTX 30", {FP16, BF16, TF32, INT8}),
        _nv("sm87", "Ampere (Orin)", "Jetson AGX Orin", {FP16, BF16, TF32, INT8}),
        _nv("sm89", "Ada Lovelace", "L4, L40S, RTX 40", {FP16, BF16, TF32, FP8, INT8}),
        _nv("sm90", "Hopper", "H100, H200, H800, H20, GH200", {FP16, BF16, TF32, FP8, INT8}),
        _nv("sm100", "Blackwell", "B200, GB200", {FP16, BF16, TF32, FP8, MX, INT8}),
        _nv("sm103", "Blackwell Ultra", "B300, GB300", {FP16, BF16, TF32, FP8, MX, INT8}),
        _nv("sm110", "Blackwell (Thor)", "Jetson Thor", {FP16, BF16, TF32, FP8, MX, INT8}),
        _nv(
            "sm120", "Blackwell (GB20x)", "RTX 50, RTX PRO 6000 Blackwell", {FP16, BF16, TF32, FP8, MX, INT8}
        ),
        _nv("sm121", "Blackwell (GB10)", "DGX Spark", {FP16, BF16, TF32, FP8, MX, INT8}),
        _amd("gfx906", "GCN 5 (Vega 20)", "MI50, MI60", set()),
        # CDNA 1 has bf16 MFMA at half its fp16 rate: bf16 is advised from CDNA 2 on
        _amd("gfx908", "CDNA", "MI100", {FP16, INT8}),
        _amd("gfx90a", "CDNA 2", "MI200 series (MI210, MI250, MI250X)", {FP16, BF16, INT8}),
        _amd("gfx940", "CDNA 3", "MI300 series", {FP16, BF16, TF32, FP8, INT8}),
        _amd("gfx941", "CDNA 3", "MI300 series", {FP16, BF16, TF32, FP8, INT8}),
        _amd(
            "gfx942", "CDNA 3", "MI300 series (MI300X, MI300A, MI308X, MI325X)", {FP16, BF16, TF32, FP8, INT8}
        ),
        # CDNA 4: OCP fp8 and the MX formats (MXFP8 / MXFP6 / MXFP4); no xf32
        _amd(
            "gfx950",
            "CDNA 4",
            "MI350 series (MI350X, MI355X)",
            {FP16, BF16, FP8, MX, INT8},
            "AMD CDNA 4 instruction set architecture reference guide (V_MFMA_SCALE_F32_* for MXFP4 / MXFP6 / MXFP8)",
        ),
        _amd("gfx1030", "RDNA 2", "RX 6000, PRO W6800", set()),
        _amd("gfx1100", "RDNA 3", "RX 7900, PRO W7900", {FP16, BF16, INT8}),
        _amd("gfx1200", "RDNA 4", "RX 9060", {FP16, BF16, FP8, INT8}),
        _amd("gfx1201", "RDNA 4", "RX 9070", {FP16, BF16, FP8, INT8}),
    )
}

_WORDS: Final = {
    "maxwell": "sm50",
    "pascal": "sm60",
    "volta": "sm70",
    "turing": "sm75",
    "ampere": "sm80",
    "hopper": "sm90",
}
_ROCPRIM: Final = {"910": "gfx90a"}  # rocPRIM's target_arch enum: gfx90a is 910, the others their number
# AMD product names -> architecture (when the trace names the product but not the chip)
_AMD_PRODUCTS: Final = (
    (r"MI35\d", "gfx950"),
    (r"MI3[0-2]\d", "gfx942"),
    (r"MI2\d\d", "gfx90a"),
    (r"MI100", "gfx908"),
    (r"MI50|MI60", "gfx906"),
)
_AMD_NAME = re.compile(r"\bAMD\b|Radeon|Instinct|\bMI\d{2,3}", re.IGNORECASE)
_NVIDIA_NAME = re.compile(r"NVIDIA|Tesla|GeForce|Quadro|TITAN|\bRTX\b|\b[ABGHLTV]\d{2,3}\b|\bGB\d{3}\b")
# names that say nothing of the model: what ROCm reports without a marketing name, and empty ones
_GENERIC_NAME = re.compile(
    r"^\s*(?:AMD\s+)?(?:Radeon\s+)?(?:Graphics|GPU|Device)?\s*$|^unknown$", re.IGNORECASE
)

# The inference rules (docs/advice.md): (regular expression with one group, how its value becomes a key).
# Rust regex syntax (polars): no look-around, so "sm80_to_sm89" ranges are removed before matching.
INFERENCE_RULES: Final = (
    (r"(?i)(?:^|_)(maxwell|pascal|volta|turing|ampere|hopper)_", "word"),
    (r"(?i)(?:^|[^a-z0-9])sm_?(\d{2,3})[a-z]?(?:[^0-9]|$)", "sm"),
    (r"Sm(\d{2,3})[a-z]?(?:[^0-9]|$)", "sm"),
    (r"(?i)cutlass_(\d{2,3})_", "sm"),
    (r"(?i)^(nvjet)_", "nvjet"),
    (r"_ISA([0-9a-f]{3,4})_", "gfx"),
    (r"(?i)gfx(\d{3,4}[a-z]?)", "gfx"),
    (r"target_arch\)(\d{3,4})", "rocprim"),
)
EVIDENCE = 3  # kernel names kept as evidence of an inference


def architecture(key: str | None) -> Architecture | None:
    """The table entry for `key`; an NVIDIA key the table lacks takes the nearest lower one of its major
    version ("sm87" would take "sm86")."""
    if not key:
        return None
    if key in ARCHITECTURES:
        return ARCHITECTURES[key]
    if key.startswith("sm") and key[2:].isdigit():
        number = int(key[2:])
        same = [
            a for k, a in ARCHITECTURES.items() if k.startswith("sm") and number // 10 == int(k[2:]) // 10
        ]
        lower = [a for a in same if int(a.key[2:]) <= number]
        return max(lower, key=lambda a: int(a.key[2:])) if lower else None
    return None


_ORDER: Final = {key: i for i, key in enumerate(ARCHITECTURES)}  # the table is oldest first per vendor


def _key(value: str, kind: str) -> str | None:
    value = value.lower()
    if not value:
        return None
    if kind == "word":
        return _WORDS.get(value)
    if kind == "sm":
        return f"sm{value}"
    if kind == "nvjet":
        return "sm90"  # cuBLASLt's nvjet kernels exist for Hopper and later
    if kind == "gfx":
        return f"gfx{value}"
    if kind == "rocprim":
        return _ROCPRIM.get(value, f"gfx{value}")
    return None


def infer_from_names(names: pl.Series) -> tuple[Architecture | None, tuple[str, ...]]:
    """The newest architecture kernel `names` were built for (a lower bound of the GPU), and up to EVIDENCE of
    the names that say it. Vectorised: one polars pass per rule over the distinct names."""
    frame = pl.DataFrame({"name": names.cast(pl.String)}).drop_nulls().unique()
    if frame.height == 0:
        return None, ()
    text = pl.col("name").str.replace_all(r"(?i)_to_sm\d+", "")
    found: dict[str, list[str]] = {}
    for pattern, kind in INFERENCE_RULES:
        hits = frame.select(pl.col("name"), text.str.extract(pattern, 1).alias("v")).drop_nulls("v")
        for name, value in hits.sort("name").iter_rows():
            arch = architecture(_key(value, kind))
            if arch is not None:
                found.setdefault(arch.key, []).append(name)
    if not found:
        return None, ()
    # one vendor: AMD names (Tensile ISA, gfx, rocPRIM) never appear on NVIDIA GPUs
    amd = [k for k in found if ARCHITECTURES[k].vendor == AMD]
    best = max(amd or list(found), key=_ORDER.__getitem__)
    return ARCHITECTURES[best], tuple(sorted(set(found[best]))[:EVIDENCE])


def device_vendor(device: DeviceInfo) -> str | None:
    """NVIDIA or AMD from what the trace says of the device (None: it does not say)."""
    if (device.arch or "").lower().startswith("gfx") or _AMD_NAME.search(device.name or ""):
        return AMD
    if device.compute_capability in ("9.4", "9.5") or device.warp_size == 64:
        return AMD  # HIP reports gfx94x as 9.4 and gfx950 as 9.5; NVIDIA has neither; AMD waves are 64 wide
    if _NVIDIA_NAME.search(device.name or ""):
        return NVIDIA
    return None


def device_architecture(device: DeviceInfo, vendor: str | None) -> Architecture | None:
    """The architecture the trace's device description names (None when it does not)."""
    if (device.arch or "").lower().startswith("gfx"):
        return architecture(device.arch.lower() if device.arch else None)
    if vendor == AMD:
        for pattern, key in _AMD_PRODUCTS:
            if re.search(pattern, device.name or "", re.IGNORECASE):
                return ARCHITECTURES[key]
        return {"9.4": ARCHITECTURES["gfx942"], "9.5": ARCHITECTURES["gfx950"]}.get(
            device.compute_capability or ""
        )
    if device.compute_capability and vendor in (NVIDIA, None):
        try:
            major, minor = (int(p) for p in device.compute_capability.split(".")[:2])
        except ValueError:
            return None
        return architecture(f"sm{major}{minor}")
    return None


def named_model(device: DeviceInfo) -> str | None:
    """The device's name when it names a model ("Tesla V100-SXM2-32GB"), None for empty or generic ones
    ("AMD Radeon Graphics", "")."""
    name = (device.name or "").strip()
    return None if _GENERIC_NAME.match(name) else name


@dataclass(frozen=True)
class GpuIdentity:
    """Which GPU the trace ran on, and how opscope knows."""

    vendor: str | None
    arch: Architecture | None
    name: str | None  # the device's model name from the trace (None: absent or generic)
    source: str | None  # "trace" (device metadata), "kernel names" (inferred), None (unknown)
    evidence: tuple[str, ...] = ()  # kernel names the inference read

    @property
    def inferred(self) -> bool:
        return self.source == "kernel names"

    @property
    def label(self) -> str:
        """ "Tesla V100-SXM2-32GB (Volta, sm70)", "Volta (sm70)", or "unknown GPU"."""
        if self.name and self.arch:
            return f"{self.name} ({self.arch.name}, {self.arch.key})"
        if self.arch:
            return self.arch.label
        return self.name or "unknown GPU"

    @property
    def note(self) -> str | None:
        """ "GPU: inferred Volta (sm70) from kernel names", for every output that uses an inferred GPU."""
        if not self.inferred or self.arch is None:
            return None
        return f"GPU: inferred {self.arch.label} from kernel names ({self.arch.gpus}; a lower bound)"

    @property
    def has_matrix_units(self) -> bool | None:
        """True / False when the architecture is known, else None."""
        return bool(self.arch.matrix) if self.arch else None

    def supports(self, feature: str) -> bool | None:
        """Whether the matrix units take `feature` (FP16, BF16, TF32, FP8, MX, INT8); None when unknown."""
        return feature in self.arch.matrix if self.arch else None

    def data(self) -> dict[str, Any]:
        """The JSON form (`gpu` in advise / analyze / efficiency)."""
        return {
            "name": self.name,
            "vendor": self.vendor,
            "arch": self.arch.key if self.arch else None,
            "architecture": self.arch.name if self.arch else None,
            "source": self.source,
            "inferred": self.inferred,
            "evidence": list(self.evidence),
            "note": self.note,
        }


UNKNOWN_GPU = GpuIdentity(None, None, None, None)


def _kernel_names(trace: Trace) -> pl.Series:
    return (
        trace.lazy()
        .filter(pl.col(Col.KIND) == Kind.KERNEL)
        .select(pl.col(Col.NAME).cast(pl.String))
        .unique()
        .collect()
        .to_series()
    )


def _identity(trace: Trace) -> GpuIdentity:
    devices = list(trace.meta.devices)
    vendor = next((v for v in map(device_vendor, devices) if v), None)
    name = next((n for n in map(named_model, devices) if n), None)
    arch = next((a for a in (device_architecture(d, vendor) for d in devices) if a), None)
    if arch is not None:
        return GpuIdentity(vendor or arch.vendor, arch, name, "trace")
    inferred, evidence = infer_from_names(_kernel_names(trace))
    if inferred is not None and vendor in (None, inferred.vendor):
        return GpuIdentity(inferred.vendor, inferred, name, "kernel names", evidence)
    return GpuIdentity(vendor, None, name, "trace" if (vendor or name) else None)


def gpu_identity(trace: Trace) -> GpuIdentity:
    """The GPU of `trace` (computed once per trace): the device metadata's architecture when it gives one,
    else the architecture its kernel names were built for (`inferred`)."""
    return trace.derived("gpu_identity", lambda: _identity(trace))
