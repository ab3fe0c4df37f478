"""The one door to torch for the capture package: a lazy import with a one-line hint, and device helpers.

torch is an optional extra (`opscope[torch]`). Nothing outside `opscope.capture` imports it, and
capture modules import it only through `require_torch()` inside functions, so `import opscope` works without it.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from opscope.errors import MissingDependency, UsageError
from opscope.extras import install_command


def require_torch() -> ModuleType:
    """`torch`, or a `MissingDependency` error with the install hint."""
    try:
        return importlib.import_module("torch")
    except ImportError:
        raise MissingDependency(f"torch is not installed: {install_command('torch')}") from None


def pick_device(device: str | None = None) -> Any:
    """`torch.device`: "auto"/None = CUDA (also ROCm builds) when available, else CPU."""
    torch = require_torch()
    if device in (None, "", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        chosen = torch.device(device)
    except (RuntimeError, TypeError):
        raise UsageError(f"--device: not a device: {device!r} (use auto, cpu or cuda)") from None
    if chosen.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"--device {device}: no CUDA/ROCm device is available here")
    return chosen


def describe_device(device: Any) -> str:
    """`cpu`, or `cuda:0 (NVIDIA H100 80GB HBM3)`; ROCm builds say `cuda:0 (ROCm, AMD Instinct MI300X)`."""
    torch = require_torch()
    if device.type != "cuda":
        return "cpu"
    index = device.index if device.index is not None else torch.cuda.current_device()
    name = torch.cuda.get_device_name(index)
    runtime = "ROCm, " if getattr(torch.version, "hip", None) else ""
    return f"cuda:{index} ({runtime}{name})"


def synchronize(device: Any) -> None:
    """Wait for queued GPU work, so that a host timer brackets the device work too (no-op on CPU)."""
    if device.type == "cuda":
        require_torch().cuda.synchronize(device)
