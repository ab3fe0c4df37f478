"""What makes two traces (or two ranks) not comparable, and compact rank lists.

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


def ranges(values: Iterable[int]) -> str:
    """Sorted integers as ranges: 0, 2-127, 130."""
    parts: list[str] = []
    ordered = sorted(set(values))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ", ".join(parts)


__all__ = ["model_mismatch", "models", "ranges"]
