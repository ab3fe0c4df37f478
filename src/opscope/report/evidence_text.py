"""A finding's evidence item as short readable text for the terminal, Markdown and HTML tables: times in ms with
3-4 significant digits (start times relative to the analysed window's start, as the HTML timeline shows them),
sizes in KiB / MiB / GiB, shares in %, lists cut to their first names, no 16-digit floats. The JSON keeps the
items as they are (docs/advice.md)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opscope.report.frame_names import short_frame
from opscope.report.names import shorten

LIST_ITEMS = 3  # names shown of a list value; "+N" says how many more
NAME_WIDTH = 60  # kernel and op names are shortened to this (report/names.py), the full name is in the JSON
UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def number(value: float) -> str:
    """3-4 significant digits, thousands separators for large values."""
    if value == 0:
        return "0"
    size = abs(value)
    if size >= 1000:
        return f"{value:,.0f}"
    if size >= 100:
        return f"{value:.1f}"
    if size >= 1:
        return f"{value:.3g}" if size < 10 else f"{value:.2f}"
    return f"{value:.3g}"


def size(value: float) -> str:
    for unit, scale in UNITS:
        if abs(value) >= scale:
            return f"{number(value / scale)} {unit}"
    return f"{value:,.0f} B"


def _list(values: Iterable[Any]) -> str:
    items = [shorten(str(v), NAME_WIDTH) for v in values]
    shown = ", ".join(items[:LIST_ITEMS])
    return shown + (f" +{len(items) - LIST_ITEMS}" if len(items) > LIST_ITEMS else "")


def field(key: str, value: Any, origin_ns: int | None) -> tuple[str, str]:
    """(label, text) of one evidence field."""
    if value is None:
        return key, "-"
    if key == "frame" and isinstance(value, str):  # the user's code that launched it: "at file.py(12): fn"
        return "at", short_frame(value)
    if isinstance(value, bool):
        return key, "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return key, _list(value)
    if isinstance(value, dict):
        return key, ", ".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, (int, float)):
        if key == "start_us":
            base = (origin_ns or 0) / 1e3
            return "at", f"+{number((value - base) / 1e3)} ms"
        if key.endswith("_us"):
            return key[: -len("_us")], f"{number(value / 1e3)} ms"
        if key.endswith("bytes") or key == "shared_memory":
            return key.removesuffix("_bytes"), size(value)
        if key in ("busy", "fraction"):
            return key, f"{value * 100:.1f}%"
        if key.endswith("_pct") or key == "pct_of_peak":
            return key.removesuffix("_pct"), f"{number(value)}%"
        if isinstance(value, float):
            return key, number(value)
        return key, f"{value:,}"
    return key, shorten(str(value), NAME_WIDTH)


def evidence_text(item: dict[str, Any], origin_ns: int | None = None) -> str:
    """The fields as `key=value; ...`; where the item names the user's frame that launched it (`frame`, traces
    with Python stacks), " at file(line): function" at the end (the file shortened, `frame_names.short_frame`)."""
    text = "; ".join("=".join(field(k, v, origin_ns)) for k, v in item.items() if k != "frame")
    frame = item.get("frame")
    return f"{text} at {short_frame(frame)}" if isinstance(frame, str) else text


def distinct(items: Iterable[dict[str, Any]], origin_ns: int | None = None) -> list[str]:
    """The items' texts in order, each once."""
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(evidence_text(item, origin_ns))
    return list(seen)
