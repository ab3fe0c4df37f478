"""Readable kernel names: demangled C++ names can be 500+ characters of templates and parameters.

`shorten` works by structure, in steps, stopping as soon as the name fits: drop the parameter list, `void ` and
`(anonymous namespace)::` (Nsight Compute: `<unnamed>::`); drop namespaces (`at::native::foo` -> `foo`); compact lambdas (`{lambda(float)#1}`
-> `λ1`, without the `::operator()() const` between them) and the parameter lists of the functions that
enclose them (`launch_clamp_scalar(TensorIteratorBase&)::λ1` -> `launch_clamp_scalar::λ1`), which keeps the
argument that tells `elementwise_kernel` instances apart; fold template arguments nested deeper than two, then
one level; only then cut the middle, keeping the start (the template head) and the end.

`shorten_all` shortens a column of names and keeps them distinct: when different names would be shown the
same, each of them is shortened a little more and gets ` #` and the first 4 hex digits of the BLAKE2b hash of
the full name (6, then 8 digits in the unlikely case that 4 still collide), so the rows stay told apart and
the suffix is stable across runs and traces.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Sequence

ELLIPSIS = "…"
_NAMESPACE = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]*::)+(?!λ)")  # not the function a lambda lives in


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


_NEAR = 5  # a fragment this short between two ellipses is too short to read: the cut takes it


def middle(text: str, width: int) -> str:
    """Cut the middle out, keeping the start and the end. One cut, one ellipsis: an ellipsis that an earlier
    step left within four characters of the cut (`_fold`, `_drop_params`) is taken into it, so the result never
    reads `a……b` or `a…ray…c` (the name may then be a few characters shorter than `width`)."""
    if len(text) <= width or width < 5:
        return text
    keep = width - 1
    head = text[: (keep + 1) // 2]
    tail = text[len(text) - (keep - len(head)) :]
    near = head.rfind(ELLIPSIS, max(0, len(head) - _NEAR))
    if near >= 0:
        head = head[:near]
    near = tail.find(ELLIPSIS, 0, _NEAR)
    if near >= 0:
        tail = tail[near + 1 :]
    return head + ELLIPSIS + tail


# a lambda as GCC/Kineto print it (`{lambda(float)#1}`) and as Nsight Compute does (`[lambda(float) (instance 1)]`)
_LAMBDA = re.compile(r"\{lambda\([^{}]*?\)#(\d+)\}|\[lambda\([^\[\]]*?\) \(instance (\d+)\)\]")
_CALL_OPERATOR = re.compile(r"::operator ?\(\)\(\)(?: const)?")
_ENCLOSING_PARAMS = re.compile(r"\([^()]*\)(?=::)")


def _compact_lambdas(text: str) -> str:
    """`f(TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda(float)#2}` -> `f::λ1::λ2`."""
    text = _CALL_OPERATOR.sub("", text)
    text = _LAMBDA.sub(lambda m: "λ" + (m.group(1) or m.group(2)), text)
    previous = None
    while previous != text:
        previous, text = text, _ENCLOSING_PARAMS.sub("", text)
    return text


def shorten(name: str, width: int = 80) -> str:
    if len(name) <= width:
        return name
    # anonymous namespaces as GCC/Kineto and as Nsight Compute print them
    text = _drop_params(name).replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    if text.endswith("(" + ELLIPSIS + ")"):
        text = text[:-3]
    if text.startswith("void "):
        text = text[5:]
    if (
        len(text) > width
    ):  # `at::native::foo` -> `foo`: the function, not its address; lambdas compacted first
        text = _NAMESPACE.sub("", _compact_lambdas(text))
    if len(text) > width:
        text = _fold(text, "<", ">", 2)  # keep template arguments, which tell variants apart
    if len(text) > width:
        text = _fold(text, "<", ">", 1)
    return middle(text, width)


def tag(name: str, digits: int = 4) -> str:
    """The short hash shown after names that would otherwise look the same: ` #` + BLAKE2b hex digits."""
    return " #" + hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()[:digits]


def shorten_all(full: Sequence[str], width: int) -> list[str]:
    """`shorten` over a column, with colliding results told apart by `tag` (see the module doc)."""
    shown = [shorten(n, width) for n in full]
    for digits in (4, 6, 8):
        groups: defaultdict[str, set[str]] = defaultdict(set)
        for raw, text in zip(full, shown, strict=True):
            groups[text].add(raw)
        clashing = {text for text, raws in groups.items() if len(raws) > 1}
        if not clashing:
            break
        suffix = 2 + digits
        shown = [
            shorten(raw, max(width - suffix, 8)) + tag(raw, digits) if text in clashing else text
            for raw, text in zip(full, shown, strict=True)
        ]
    return shown
