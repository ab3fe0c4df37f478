"""What makes two traces (or two ranks) not comparable.

A device is known by its model name (Kineto `deviceProperties`, nsys `TARGET_INFO_GPU`). A trace without a
description names its devices `device N` (the index): that says nothing about the model, so two traces differ in
device only when both name a model and the models differ (A100 vs V100, NVIDIA vs AMD). Device indexes never
count: rank 0 on device 0 and rank 1 on device 1 ran on the same kind of GPU."""

from __future__ import annotations

import re
from collections.abc import Iterable

_PLACEHOLDER = re.compile(r"device -?\d+")


def models(devices: Iterable[str]) -> set[str]:
    """The device model names among `devices`, without the `device N` placeholders of undescribed devices."""
    return {d for d in devices if d and not _PLACEHOLDER.fullmatch(d)}


def model_mismatch(*sides: Iterable[str]) -> list[str] | None:
    """The distinct model names when at least two sides name a model and they differ, else None."""
    named = [models(s) for s in sides]
    named = [m for m in named if m]
    if len(named) < 2 or all(m == named[0] for m in named):
        return None
    return sorted(set().union(*named))


__all__ = ["model_mismatch", "models"]
