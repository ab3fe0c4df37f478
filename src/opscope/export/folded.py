"""Folded stacks (`frame1;frame2;...;kernel weight`, one line per distinct stack) for flamegraph.pl, speedscope,
inferno and other flame-graph tools, from the GPU-time hierarchy of `analysis.attribution.tree.op_tree`.

Each line is the path from the tree's root (left out) to one GPU leaf (kernel, memcpy, memset), so the weights
add up to the selection's GPU time. Weights are integers: GPU nanoseconds by default, or microseconds (rounded;
lines that round to 0 are dropped, flamegraph.pl ignores them anyway). Frame names are written as recorded
except that `;` (the frame separator) becomes `:` and control characters (line breaks included) are written
as visible escapes (`\\n`, `\\x1b`: `opscope.untrusted.visible`), so every line parses and none carries a
terminal control sequence. Lines are sorted heaviest first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opscope.untrusted import visible

if TYPE_CHECKING:
    from opscope.analysis.attribution.tree import TreeNode

UNITS = {"ns": 1, "us": 1000}
LEAF_KINDS = ("kernel", "memcpy", "memset")


def _frame(name: str) -> str:
    return visible(name.replace(";", ":")) or "(unnamed)"


def folded_stacks(root: TreeNode) -> list[tuple[tuple[str, ...], int]]:
    """(frames from below the root down to the GPU leaf, leaf GPU ns) for every leaf of the tree. Depth first
    with one shared path: a tuple is made for each leaf only (not for every node on the way down: a chain
    of thousands of frames made a path per level, the square of its depth)."""
    out: list[tuple[tuple[str, ...], int]] = []
    path: list[str] = []
    pending: list[tuple[TreeNode, int]] = [(child, 0) for child in reversed(root.children)]
    while pending:
        node, depth = pending.pop()
        del path[depth:]
        path.append(node.name)
        if node.kind in LEAF_KINDS or not node.children:
            out.append((tuple(path), node.gpu_ns))
        pending.extend((child, depth + 1) for child in reversed(node.children))
    return out


def folded_text(stacks: list[tuple[tuple[str, ...], int]], unit: str = "ns") -> str:
    divisor = UNITS[unit]
    merged: dict[str, int] = {}
    for frames, weight_ns in stacks:
        line = ";".join(_frame(f) for f in frames)
        merged[line] = merged.get(line, 0) + weight_ns
    lines = []
    for line, weight_ns in sorted(merged.items(), key=lambda kv: (-kv[1], kv[0])):
        weight = weight_ns if divisor == 1 else round(weight_ns / divisor)
        if weight > 0:
            lines.append(f"{line} {weight}")
    return "\n".join(lines) + ("\n" if lines else "")
