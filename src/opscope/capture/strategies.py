"""Strategies for `compare_strategies` / `opscope bench`: named ways to run the same model (torch.compile, autocast
bf16/fp16, channels_last, or any user transform), and the dtype-dependent tolerances their outputs must meet.

A `Strategy` changes a private copy of the model (`transform`), the example inputs (`inputs`), and/or runs the
forward pass under `torch.autocast` (`autocast`). Output check: every element must satisfy
`|variant - baseline| <= atol * max|baseline| + rtol * |baseline|`, with (rtol, atol) chosen by the dtype the
variant computes in (the autocast dtype, else the variant's output dtype) unless the strategy sets them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opscope.capture._torch import require_torch
from opscope.errors import UsageError

# dtype -> (rtol, atol as a fraction of the baseline output's largest magnitude). Whole networks accumulate
# rounding error over many layers, so these are looser than torch.testing's per-op defaults.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-9),
    "float32": (1e-4, 1e-5),
    # fp32 tensors computed in TF32 on an NVIDIA GPU (cuDNN convolutions do by default): fp16's 10-bit mantissa,
    # so fp16's tolerance. Two TF32 runs with different algorithms (channels_last) differ by ~5e-4 of the
    # output's scale on an H200, 50x fp32's atol (bench/gpu_check.py).
    "tf32": (1e-2, 2e-3),
    "float16": (1e-2, 2e-3),
    "bfloat16": (5e-2, 1e-2),
}
BASELINE = "baseline"


@dataclass(frozen=True)
class Strategy:
    name: str
    transform: Callable[[Any], Any] | None = None  # model -> model or callable (applied to a copy)
    inputs: Callable[[Any], Any] | None = None  # one input tensor -> converted tensor
    autocast: str | None = None  # "bfloat16" or "float16": forward pass under torch.autocast
    rtol: float | None = None
    atol: float | None = None
    description: str = ""


def _compile(model: Any) -> Any:
    return require_torch().compile(model)


def _channels_last_model(model: Any) -> Any:
    return model.to(memory_format=require_torch().channels_last)


def _channels_last_input(tensor: Any) -> Any:
    torch = require_torch()
    return tensor.contiguous(memory_format=torch.channels_last) if tensor.dim() == 4 else tensor


BUILTIN: dict[str, Strategy] = {
    "compile": Strategy("compile", transform=_compile, description="torch.compile (default mode)"),
    "bf16": Strategy("bf16", autocast="bfloat16", description="torch.autocast to bfloat16"),
    "fp16": Strategy("fp16", autocast="float16", description="torch.autocast to float16"),
    "channels_last": Strategy(
        "channels_last",
        transform=_channels_last_model,
        inputs=_channels_last_input,
        description="model and 4-D inputs in channels_last memory format",
    ),
}


def default_variants(device_type: str) -> tuple[str, ...]:
    """compile is left out on the CPU: inductor compiles C++ there, which takes tens of seconds per shape."""
    return ("compile", "bf16", "channels_last") if device_type == "cuda" else ("bf16", "channels_last")


def _builtin(name: str, rename: str | None = None) -> Strategy:
    if name not in BUILTIN:
        raise UsageError(f"unknown strategy {name!r} (built-in: {', '.join(BUILTIN)})")
    chosen = BUILTIN[name]
    return (
        chosen
        if rename is None
        else Strategy(
            rename,
            chosen.transform,
            chosen.inputs,
            chosen.autocast,
            chosen.rtol,
            chosen.atol,
            chosen.description,
        )
    )


def resolve(variants: Mapping[str, Any] | Sequence[Any]) -> tuple[Strategy, ...]:
    """Built-in names, `Strategy` objects, or `{name: transform | Strategy | built-in name}`."""
    chosen: list[Strategy] = []
    if isinstance(variants, Mapping):
        for name, value in variants.items():
            if isinstance(value, Strategy):
                chosen.append(
                    value
                    if value.name == name
                    else Strategy(
                        name,
                        value.transform,
                        value.inputs,
                        value.autocast,
                        value.rtol,
                        value.atol,
                        value.description,
                    )
                )
            elif isinstance(value, str):
                chosen.append(_builtin(value, rename=str(name)))
            elif callable(value):
                chosen.append(Strategy(str(name), transform=value, description="user transform"))
            else:
                raise UsageError(f"strategy {name!r}: expected a callable, a Strategy or a built-in name")
    else:
        for value in variants:
            chosen.append(value if isinstance(value, Strategy) else _builtin(str(value)))
    names = [s.name for s in chosen]
    duplicated = sorted({n for n in names if names.count(n) > 1} | ({BASELINE} & set(names)))
    if duplicated:
        raise UsageError(f"strategy names must be unique and not {BASELINE!r}: {', '.join(duplicated)}")
    return tuple(chosen)


def tf32_enabled(torch: Any) -> bool:
    """Whether fp32 convolutions or matmuls may run in TF32 on this CUDA build (cuDNN's default for
    convolutions: `torch.backends.cudnn.conv.fp32_precision == "tf32"`, `allow_tf32` before torch 2.9)."""
    if getattr(torch.version, "hip", None) or not getattr(torch.version, "cuda", None):
        return False
    conv = getattr(getattr(torch.backends.cudnn, "conv", None), "fp32_precision", None)
    conv_tf32 = conv == "tf32" if isinstance(conv, str) else bool(torch.backends.cudnn.allow_tf32)
    return conv_tf32 or torch.get_float32_matmul_precision() != "highest"


def compute_dtype(output_dtype: str, autocast: str | None, on_cuda: bool, tf32: bool) -> str:
    """The dtype a variant computed in, which picks its tolerance: the autocast dtype, else the output's; fp32
    output on a CUDA device where TF32 is enabled is "tf32"."""
    if autocast:
        return autocast
    return "tf32" if output_dtype == "float32" and on_cuda and tf32 else output_dtype


def tolerance(strategy: Strategy, compute_dtype: str) -> tuple[float, float]:
    rtol, atol = TOLERANCES.get(compute_dtype, TOLERANCES["float32"])
    return (
        strategy.rtol if strategy.rtol is not None else rtol,
        strategy.atol if strategy.atol is not None else atol,
    )


def map_tensors(value: Any, fn: Callable[[Any], Any]) -> Any:
    """Apply `fn` to every tensor in a nest of tuples, lists and dicts."""
    torch = require_torch()
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (tuple, list)):
        return type(value)(map_tensors(v, fn) for v in value)
    if isinstance(value, Mapping):
        return {k: map_tensors(v, fn) for k, v in value.items()}
    return value


def tensors(value: Any) -> list[Any]:
    """Every tensor in a nest of tuples, lists, dicts (and objects with `to_tuple()`, like HF outputs)."""
    torch = require_torch()
    if isinstance(value, torch.Tensor):
        return [value]
    if hasattr(value, "to_tuple"):
        value = value.to_tuple()
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in tensors(v)]
    if isinstance(value, Mapping):
        return [t for v in value.values() for t in tensors(v)]
    return []
