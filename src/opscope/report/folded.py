"""Folded stacks (`frame1;frame2;...;kernel weight`, one line per distinct stack) for flamegraph.pl, speedscope,
inferno and other flame-graph tools, from `analysis.stacks.GpuStacks`.

Weights are integers: GPU nanoseconds by default, or microseconds (rounded; lines that round to 0 are
dropped, flamegraph.pl ignores them anyway). Frame names are written as recorded except that `;` (the frame
separator) becomes `:` and line breaks become spaces, so every line parses. Lines are sorted heaviest first.
"""

from __future__ import annotations

from collections.abc import Iterable

UNITS = {"ns": 1, "us": 1000}


def _frame(name: str) -> str:
    return name.replace(";", ":").replace("\r", " ").replace("\n", " ") or "(unnamed)"


def folded_text(stacks: Iterable[tuple[tuple[str, ...], str, int]], unit: str = "ns") -> str:
    """`stacks`: (frames outermost first, GPU event name, weight ns), as `GpuStacks.folded()` returns them."""
    divisor = UNITS[unit]
    merged: dict[str, int] = {}
    for frames, name, weight_ns in stacks:
        line = ";".join(_frame(f) for f in (*frames, name))
        merged[line] = merged.get(line, 0) + weight_ns
    lines = []
    for line, weight_ns in sorted(merged.items(), key=lambda kv: (-kv[1], kv[0])):
        weight = weight_ns if divisor == 1 else round(weight_ns / divisor)
        if weight > 0:
            lines.append(f"{line} {weight}")
    return "\n".join(lines) + ("\n" if lines else "")
