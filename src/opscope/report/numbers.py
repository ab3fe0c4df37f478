"""Numbers for people, one way in every view (issue 28): durations in ms with thousands separators, or in µs
(written "us", as the column labels) under 1 ms; counts as integers with separators and the noun in the right
number ("1 call", "2 calls", "1 byte"). Renderers call these; the JSON keeps its raw numbers."""

from __future__ import annotations

_IRREGULAR = {"copy": "copies", "was": "were", "is": "are", "has": "have"}


def plural(count: int, noun: str, many: str | None = None) -> str:
    """`count` with separators and `noun`, plural unless the count is 1: plural(1, "call") == "1 call"."""
    word = noun if count == 1 else (many or _IRREGULAR.get(noun, noun + "s"))
    return f"{count:,} {word}"


def duration(ns: float | None) -> str:
    """A duration read by a person: "70.373 ms", "615,120.000 ms", "12.787 us" (under 1 ms), "—" for None."""
    if ns is None:
        return "—"
    if abs(ns) >= 1e6:
        return f"{ns / 1e6:,.3f} ms"
    return f"{ns / 1e3:,.3f} us"


def shape_text(dims: str | None) -> str | None:
    """`Input Dims` text laid out to wrap between tensors, never inside a number or a tensor's dims:
    "[[4,197,768],[3072,768],[]]" -> "[[4,197,768], [3072,768], []]" (a table wraps at the spaces)."""
    return None if dims is None else dims.replace("],[", "], [")
