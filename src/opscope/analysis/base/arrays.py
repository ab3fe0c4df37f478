"""Gathering by an index where a negative index means "none": the one spelling of a step every analysis takes
(a parent, an owner, a launch found or not), so that none of them indexes an array at -1 by mistake."""

from __future__ import annotations

from typing import Any

import numpy as np


def take_or(values: np.ndarray, index: np.ndarray, missing: Any) -> np.ndarray:
    """`values[index]` where the index is >= 0, `missing` where it is negative (-1: none); `missing` everywhere
    when there are no values. The dtype is that of `np.where` over `values` and `missing`."""
    if not len(values):
        return np.full(len(index), missing)
    return np.where(index >= 0, values[np.maximum(index, 0)], missing)
