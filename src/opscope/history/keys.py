"""Series keys: kernel names normalised so that the same kernel compares across runs (docs/history.md)."""

from __future__ import annotations

import hashlib
import re

MAX_KEY_CHARS = (
    200  # longer names are stored as a shortened key with a hash; the full name goes to the names table
)
_TRITON_SUFFIX = re.compile(r"_\d+$")


def normalise(name: str) -> str:
    """Whitespace runs become one space (ends stripped); a Triton kernel (`triton_...`) loses its trailing `_<n>`,
    the counter Inductor appends that changes from one compilation to the next."""
    text = " ".join(name.split())
    if text.startswith("triton_"):
        text = _TRITON_SUFFIX.sub("", text)
    return text


def series_key(name: str, *, kernel: bool = True) -> tuple[str, str | None]:
    """(key, full name when the key is not the name itself). Names longer than MAX_KEY_CHARS become their first
    120 characters, an ellipsis and the first 16 hex digits of the sha256 of the whole (normalised) name."""
    text = normalise(name) if kernel else " ".join(name.split())
    if len(text) <= MAX_KEY_CHARS:
        return text, None
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{text[:120]}…#{digest}", text
