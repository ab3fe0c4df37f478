"""record_shapes text -> tensors: the `Input Dims` / `Input type` JSON of one op instance, read into the
tensor arguments the op families size (shape and element size), non-tensor arguments kept as None."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

# Input type text (c10 scalar type names as the profiler writes them) -> (bytes per element, dtype label).
DTYPES: dict[str, tuple[int, str]] = {
    "float": (4, "fp32"),
    "double": (8, "fp64"),
    "c10::Half": (2, "fp16"),
    "c10::BFloat16": (2, "bf16"),
    "c10::Float8_e4m3fn": (1, "fp8"),
    "c10::Float8_e5m2": (1, "fp8"),
    "c10::Float8_e4m3fnuz": (1, "fp8"),
    "c10::Float8_e5m2fnuz": (1, "fp8"),
    "c10::Float8_e8m0fnu": (1, "fp8"),
    "signed char": (1, "int8"),
    "unsigned char": (1, "uint8"),
    "bool": (1, "bool"),
    "short int": (2, "int16"),
    "short": (2, "int16"),
    "int": (4, "int32"),
    "long int": (8, "int64"),
    "long": (8, "int64"),
    "c10::complex<float>": (8, "complex64"),
    "c10::complex<double>": (16, "complex128"),
    "c10::complex<c10::Half>": (4, "complex32"),
}


@dataclass(frozen=True)
class Tensor:
    shape: tuple[int, ...]
    itemsize: int
    dtype: str  # "bf16", "fp32", ... (DTYPES labels)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize


def parse_json_list(text: str | None) -> list[object] | None:
    """A JSON list from the trace, or None when absent or not a list (untrusted text: never raises)."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, list) else None


def _shape(dims: object) -> tuple[int, ...] | None:
    if isinstance(dims, list) and all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims
    ):
        return tuple(dims)
    return None


def tensors(dims_text: str | None, types_text: str | None) -> list[Tensor | None] | None:
    """One entry per argument: a Tensor where the type is a known tensor dtype and the dims a valid shape, else
    None (scalars, lists, undefined optional tensors, TensorList). None overall when dims or types are missing.
    A recorded `[]` with a tensor dtype is a 0-d tensor (one element)."""
    dims, types = parse_json_list(dims_text), parse_json_list(types_text)
    if dims is None or types is None:
        return None
    out: list[Tensor | None] = []
    for i, d in enumerate(dims):
        kind = types[i] if i < len(types) else None
        dtype = DTYPES.get(kind) if isinstance(kind, str) else None
        shape = _shape(d)
        out.append(Tensor(shape, dtype[0], dtype[1]) if dtype and shape is not None else None)
    return out


def concrete_values(text: str | None) -> list[object] | None:
    """The Concrete Inputs of one call, one entry per argument: "" (a tensor or nothing) -> None, "True" /
    "False" -> bool, JSON numbers and lists ("[16, 16]", "1", "0.") -> their value, other text kept as text."""
    items = parse_json_list(text)
    if items is None:
        return None
    out: list[object] = []
    for item in items:
        if not isinstance(item, str) or item == "":
            out.append(None)
        elif item in ("True", "False"):
            out.append(item == "True")
        else:
            text = item[:-1] + ".0" if item.endswith(".") else item
            if text.startswith("["):  # Python bool lists ("[True, False]"), as the profiler writes them
                text = text.replace("True", "true").replace("False", "false")
            try:
                out.append(json.loads(text))
            except (ValueError, RecursionError):
                out.append(item)
    return out


def broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    """numpy / torch broadcasting of shapes; None when they do not broadcast."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(-ndim, 0):
        sizes = {s[axis] for s in shapes if len(s) >= -axis} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)
