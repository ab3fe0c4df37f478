"""Python frame names for people: `transformers/models/vit/modeling_vit.py(407): forward` shown as
`modeling_vit.py(407): forward`, with as many parent folders as it takes to keep different frames apart. The
JSON outputs keep the full name; only the text views shorten it."""

from __future__ import annotations

import re
from collections.abc import Sequence

FRAME = re.compile(r"^(.*)\((\d+)\): (.*)$", re.DOTALL)


def short_frame(name: str, folders: int = 0) -> str:
    """`name` with its file cut to the last `folders` + 1 parts of its path (names that are not
    `file(line): function` unchanged)."""
    match = FRAME.match(name)
    if not match:
        return name
    parts = match.group(1).rstrip("/").split("/")
    return f"{'/'.join(parts[-(folders + 1) :])}({match.group(2)}): {match.group(3)}"


def short_frames(names: Sequence[str]) -> list[str]:
    """Each name shortened (`short_frame`), with more folders for names that would otherwise read the same."""
    out = [short_frame(n) for n in names]
    for folders in range(1, 64):
        seen: dict[str, set[str]] = {}
        for full, short in zip(names, out, strict=True):
            seen.setdefault(short, set()).add(full)
        clash = {s for s, fulls in seen.items() if len(fulls) > 1}
        if not clash:
            break
        out = [short_frame(n, folders) if s in clash else s for n, s in zip(names, out, strict=True)]
    return out
