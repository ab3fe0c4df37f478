"""Readable kernel names: demangled C++ names can be 500+ characters of templates and parameters.

`shorten` first drops the parameter list and folds nested template arguments, then, if still too long, cuts
the middle and keeps the start (namespace and function) and the end (the most specific part).
"""

from __future__ import annotations

import re

ELLIPSIS = "…"
_NAMESPACE = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]*::)+")


def _fold(name: str, open_ch: str, close_ch: str, keep_depth: int) -> str:
    out = []
    depth = 0
    folded = False
    for ch in name:
        if ch == open_ch:
            depth += 1
            if depth <= keep_depth:
                out.append(ch)
            elif not folded:
                out.append(ELLIPSIS)
                folded = True
            continue
        if ch == close_ch and depth > 0:
            if depth <= keep_depth:
                out.append(ch)
            depth -= 1
            if depth < keep_depth + 1:
                folded = False
            continue
        if depth <= keep_depth:
            out.append(ch)
    return "".join(out)


def _drop_params(name: str) -> str:
    """Drop a trailing top-level parameter list: `f<int>(float*, int)` -> `f<int>(…)`."""
    if not name.endswith(")"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        ch = name[i]
        if ch == ")":
            depth += 1
        elif ch == "(":
            depth -= 1
            if depth == 0:
                head = name[:i]
                if not head or head.endswith(("operator", " ")) or i == 0:
                    return name
                return head + "(" + ELLIPSIS + ")" if i + 1 < len(name) - 1 else name
    return name


def middle(text: str, width: int) -> str:
    if len(text) <= width or width < 5:
        return text
    keep = width - 1
    head = (keep + 1) // 2
    tail = keep - head
    return text[:head] + ELLIPSIS + text[len(text) - tail :]


def shorten(name: str, width: int = 80) -> str:
    if len(name) <= width:
        return name
    text = _drop_params(name).replace("(anonymous namespace)::", "")
    if text.endswith("(" + ELLIPSIS + ")"):
        text = text[:-3]
    if text.startswith("void "):
        text = text[5:]
    if len(text) > width:
        text = _NAMESPACE.sub("", text)  # `at::native::foo` -> `foo`: the function, not its address
    if len(text) > width:
        text = _fold(text, "<", ">", 2)  # keep template arguments, which tell variants apart
    if len(text) > width:
        text = _fold(text, "<", ">", 1)
    return middle(text, width)
