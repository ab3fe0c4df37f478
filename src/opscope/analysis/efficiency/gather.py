"""Memory-bound sizers of ops whose arguments the plain tensor sizers cannot read: `aten::index_select`
(a gather: the index and the gathered rows), `aten::arange` (no tensor input: its length comes from the
Concrete Inputs) and `aten::cat` (a TensorList, recorded without element dtype). Formulas:
docs/efficiency.md ("Gathers, concatenation, arange")."""

from __future__ import annotations

import math

from opscope.analysis.efficiency.cost import Args, Concrete, Cost, Unsized, arg, need
from opscope.analysis.efficiency.shapes import parse_json_list

# c10::ScalarType enum values (as Concrete Inputs record a `dtype=` argument) -> (bytes per element, label)
SCALAR_TYPES: dict[int, tuple[int, str]] = {
    0: (1, "uint8"),
    1: (1, "int8"),
    2: (2, "int16"),
    3: (4, "int32"),
    4: (8, "int64"),
    5: (2, "fp16"),
    6: (4, "fp32"),
    7: (8, "fp64"),
    11: (1, "bool"),
    15: (2, "bf16"),
}
# arange overloads without an `out` tensor, by argument count: how many leading scalars (end | start, end |
# start, end, step); the dtype argument follows them.
_ARANGE_SCALARS = {5: 1, 6: 2, 7: 3}


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def index_select(args: Args, c: Concrete) -> Cost | Unsized:
    """(self, dim, index): the index read, each selected slice read from the table and written to the output:
    bytes = index bytes + 2 x index.numel x (table elements per slice along dim) x itemsize."""
    t = need(args, 0, 2)
    if t is None:
        return Unsized("needs the table and index tensors")
    table, index = t
    dim = arg(c, 1)
    if not isinstance(dim, int) or isinstance(dim, bool) or not -len(table.shape) <= dim < len(table.shape):
        return Unsized("dim not recorded (Concrete Inputs)")
    per_slice = math.prod(s for i, s in enumerate(table.shape) if i != dim % len(table.shape))
    rows = index.numel * per_slice * table.itemsize
    return Cost("copy", None, index.nbytes + 2 * rows, table.dtype, "exact")


def arange(args: Args, c: Concrete) -> Cost | Unsized:
    """ceil((end - start) / step) elements written. dtype: the `out` tensor's, else the recorded `dtype`
    argument, else torch's documented default: int64 when start, end and step are integers; with a float
    among them torch.get_default_dtype(), assumed fp32 (an estimate)."""
    if c is None:
        return Unsized("start / end not recorded (Concrete Inputs)")
    out = args[-1] if args else None
    count = len(args) - 1 if out is not None else _ARANGE_SCALARS.get(len(args))
    if count is None or count not in (1, 2, 3):
        return Unsized("unknown arange overload")
    recorded_scalars = [arg(c, i) for i in range(count)]
    scalars: list[float] = [v for v in recorded_scalars if _number(v)]  # type: ignore[misc]
    if len(scalars) != count:
        return Unsized("start / end not recorded (Concrete Inputs)")
    start: float
    end: float
    step: float
    if count == 1:
        start, end, step = 0, scalars[0], 1
    elif count == 2:
        start, end, step = scalars[0], scalars[1], 1
    else:
        start, end, step = scalars
    if not step:
        return Unsized("step is 0")
    numel = max(0, math.ceil((end - start) / step))
    if out is not None:
        return Cost("elementwise", None, numel * out.itemsize, out.dtype, "exact")
    recorded = arg(c, count)
    if isinstance(recorded, int) and not isinstance(recorded, bool):
        if recorded not in SCALAR_TYPES:
            return Unsized("unknown dtype argument")
        size, label = SCALAR_TYPES[recorded]
        return Cost("elementwise", None, numel * size, label, "exact")
    if all(isinstance(v, int) for v in scalars):
        return Cost(
            "elementwise", None, numel * 8, "int64", "exact", "dtype not recorded: int64, torch's default"
        )
    return Cost(
        "elementwise",
        None,
        numel * 4,
        "fp32",
        "estimate",
        "dtype not recorded: fp32 assumed (torch.get_default_dtype())",
    )


def tensor_list(dims_text: str | None, types_text: str | None, i: int) -> list[tuple[int, ...]] | None:
    """The shapes of the TensorList argument at position i, None when it is not one."""
    dims, types = parse_json_list(dims_text), parse_json_list(types_text)
    if dims is None or types is None or i >= min(len(dims), len(types)) or types[i] != "TensorList":
        return None
    shapes = dims[i]
    if not isinstance(shapes, list) or not shapes:
        return None
    out = []
    for s in shapes:
        if not isinstance(s, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in s
        ):
            return None
        out.append(tuple(s))
    return out


def numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def cat(shapes: list[tuple[int, ...]], dtype: tuple[int, str] | None) -> Cost:
    """Every input read once and the output (as many elements) written: 2 x sum of input elements x itemsize.
    `dtype`: the output's when recorded, else that of the op that produced the inputs (sizing.cat_dtypes);
    unknown: fp32 assumed, an estimate."""
    numel = sum(math.prod(s) for s in shapes)
    if dtype is None:
        return Cost(
            "copy", None, 2 * numel * 4, "fp32", "estimate", "TensorList dtype not recorded: fp32 assumed"
        )
    return Cost("copy", None, 2 * numel * dtype[0], dtype[1], "exact")


__all__ = ["SCALAR_TYPES", "arange", "cat", "index_select", "numel", "tensor_list"]
