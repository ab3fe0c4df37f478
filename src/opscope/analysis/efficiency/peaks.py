"""The peak table: dense TFLOP/s per dtype and memory bandwidth per GPU, kept as data in
opscope/data/gpu_peaks.json (every entry names its source), matched on the deviceProperties name."""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from importlib import resources

# dtype of the op -> the peak column that applies (fp64 and integer types other than int8 have none)
PEAK_COLUMN = {
    "fp32": "fp32",
    "tf32": "tf32",
    "fp16": "fp16",
    "bf16": "bf16",
    "fp8": "fp8",
    "int8": "int8",
    "uint8": "int8",
}
DTYPE_COLUMNS = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8")


@dataclass(frozen=True)
class GpuPeaks:
    name: str
    match: tuple[str, ...]
    tflops: dict[str, float | None]  # dtype column -> dense TFLOP/s (TOPS for int8); None = unsupported
    bandwidth_tbps: float | None
    source: str

    def tflops_for(self, dtype: str) -> float | None:
        column = PEAK_COLUMN.get(dtype)
        return self.tflops.get(column) if column else None


@functools.cache
def peak_table() -> tuple[GpuPeaks, ...]:
    """Every entry of the shipped table, in match order."""
    text = resources.files("opscope.data").joinpath("gpu_peaks.json").read_text(encoding="utf-8")
    return tuple(
        GpuPeaks(
            name=g["name"],
            match=tuple(g["match"]),
            tflops={c: (float(g[c]) if g.get(c) is not None else None) for c in DTYPE_COLUMNS},
            bandwidth_tbps=float(g["bandwidth_tbps"]) if g.get("bandwidth_tbps") else None,
            source=g["source"],
        )
        for g in json.loads(text)["gpus"]
    )


def match_peaks(device_name: str | None) -> GpuPeaks | None:
    """The first entry with a `match` text found in `device_name` as a whole word (case-insensitive): "A10"
    matches "NVIDIA A10" but not "A100", "L4" not "L40S". None for an unknown or missing name."""
    if not device_name:
        return None
    for entry in peak_table():
        for text in entry.match:
            if re.search(rf"(?<![A-Za-z0-9]){re.escape(text)}(?![A-Za-z0-9])", device_name, re.IGNORECASE):
                return entry
    return None
