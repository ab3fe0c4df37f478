"""Bounded answers: a command's JSON payload cut into pages of whole rows, each under a size limit.

An agent's client refuses (or silently cuts) a tool answer past its token limit, so every answer of
`opscope mcp` stays under `max_chars` characters of JSON. A payload that fits is returned exactly as
`--format json` has it. One that does not is cut into pages: every page keeps every field of the payload, and
its lists (the "row lists": every list reachable from the top through objects only, in the payload's order)
hold a consecutive run of the rows, counted over all the row lists one after the other. The page says so:

    "truncated": true, "next_cursor": "..." (null on the last page),
    "page": [{"path": ["findings"], "offset": 0, "count": 3, "total": 10}, ...]

for every non-empty row list (`count` rows from `offset` of `total` are in this page). A row is never split:
when a single row does not fit the room left, its own nested lists (a finding's evidence, a fusion run's
kernels) are cut, the same number of items kept in each, and the object holding a cut list says how many
items it left out (`"evidence_left_out": 7`). Pure and deterministic: the same payload, limit and offset give
the same bytes (msgspec keeps the payload's key order).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from opscope.errors import UsageError
from opscope.report.escape import json_text

MIN_CHARS = 1_000  # below this not even the fields of a small payload fit
LEFT_OUT = "_left_out"  # suffix of the key saying how many items of a cut nested list were left out

Path = tuple[str, ...]


def encode(value: Any) -> str:
    """Compact JSON, written like `--format json` (`escape.json_text`: trace text stays inert on a terminal)."""
    return json_text(msgspec.json.encode(value).decode())


# Top-level lists that are not rows: the validity banners (docs/validity.md: a few lines, no names from the
# trace), kept whole on every page; the `validity` checks themselves, with their examples, are rows
WHOLE = frozenset({"validity_banners"})


def row_lists(payload: dict[str, Any]) -> list[tuple[Path, list[Any]]]:
    """Every list reachable from the top through objects only, with its path of keys, in payload order (but
    the top-level lists in WHOLE)."""
    found: list[tuple[Path, list[Any]]] = []

    def walk(node: dict[str, Any], path: Path) -> None:
        for key, value in node.items():
            if not path and key in WHOLE:
                continue
            if isinstance(value, list):
                found.append(((*path, key), value))
            elif isinstance(value, dict):
                walk(value, (*path, key))

    walk(payload, ())
    return found


def _filled(node: dict[str, Any], path: Path, chosen: dict[Path, list[Any]]) -> dict[str, Any]:
    """`node` with each row list replaced by its rows in `chosen` (empty when absent)."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        here = (*path, key)
        if not path and key in WHOLE:
            out[key] = value
        elif isinstance(value, list):
            out[key] = chosen.get(here, [])
        elif isinstance(value, dict):
            out[key] = _filled(value, here, chosen)
        else:
            out[key] = value
    return out


def _capped(node: Any, keep: int) -> Any:
    """`node` with every nested list cut to its first `keep` items; an object says what its lists left out."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            out[key] = _capped(value, keep)
            if isinstance(value, list) and len(value) > keep:
                out[key + LEFT_OUT] = len(value) - keep
        return out
    if isinstance(node, list):
        return [_capped(item, keep) for item in node[:keep]]
    return node


def _longest_list(node: Any) -> int:
    if isinstance(node, dict):
        return max((_longest_list(v) for v in node.values()), default=0)
    if isinstance(node, list):
        return max([len(node), *(_longest_list(v) for v in node)])
    return 0


def _fit_row(row: Any, room: int) -> tuple[Any, int] | None:
    """The row with its nested lists cut to the most items that fit `room` characters, and its size; None when
    not even the row without any nested item fits."""
    lo, hi = 0, _longest_list(row)
    best = None
    while lo <= hi:  # the size grows with the items kept: binary search for the most that fit
        keep = (lo + hi) // 2
        candidate = _capped(row, keep)
        size = len(encode(candidate))
        if size <= room:
            best, lo = (candidate, size), keep + 1
        else:
            hi = keep - 1
    return best


def _with_page(page: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """The page with `truncated`, `next_cursor` and `page` first (after `schema` and the validity banners),
    where a reader looks."""
    head: dict[str, Any] = {k: page[k] for k in ("schema", "validity_banners") if k in page}
    return {**head, **meta, **{k: v for k, v in page.items() if k not in head}}


def bounded(
    payload: dict[str, Any], max_chars: int, offset: int, cursor: Callable[[int], str]
) -> tuple[str, int | None]:
    """The answer for `payload` under `max_chars` characters, starting at row `offset` (over all row lists in
    order), and the offset of the next page (None on the last). `cursor(offset)` spells the `next_cursor`."""
    if max_chars < MIN_CHARS:
        raise UsageError(f"max_chars must be at least {MIN_CHARS}, got {max_chars}")
    lists = row_lists(payload)
    total = sum(len(rows) for _, rows in lists)
    if offset < 0 or (offset > 0 and offset >= total):
        raise UsageError(f"cursor: row {offset} is past the end of this answer ({total} rows)")
    whole = encode(payload)
    if offset == 0 and len(whole) <= max_chars:
        return whole, None
    # The rows in order, each with its list and its size; the page's own fields are written with the widest
    # numbers they can hold (every count and offset at most `total`), so the page only shrinks when filled in.
    flat = [(path, row) for path, rows in lists for row in rows]
    widest = [{"path": list(p), "offset": total, "count": total, "total": total} for p, rows in lists if rows]
    skeleton = _with_page(
        _filled(payload, (), {}), {"truncated": True, "next_cursor": cursor(total), "page": widest}
    )
    room = max_chars - len(encode(skeleton))
    if room < 0:
        raise UsageError(
            f"max_chars {max_chars} is too small for the fields of this answer alone ({max_chars - room} "
            "characters); raise it"
        )
    chosen: dict[Path, list[Any]] = {}
    index = offset
    while index < total:
        path, row = flat[index]
        comma = 1 if chosen.get(path) else 0
        size = len(encode(row)) + comma
        if size > room:
            if chosen:
                break  # on the next page, whole if it fits one
            # a row larger than a page: its nested lists are cut to what fits
            fitted = _fit_row(row, room)
            if fitted is None:
                raise UsageError(
                    f"max_chars {max_chars} is too small for one row of {'.'.join(path)} "
                    f"(about {max_chars - room + size} characters needed); raise it"
                )
            row, size = fitted
        chosen.setdefault(path, []).append(row)
        room -= size
        index += 1
    next_offset = index if index < total else None
    # each list's offset: where the page starts in it (0 for a list after that point, its length before it)
    starts = {}
    position = 0
    for path, rows in lists:
        starts[path] = position
        position += len(rows)
    page_rows = [
        {
            "path": list(path),
            "offset": min(max(offset - starts[path], 0), len(rows)),
            "count": len(chosen.get(path, [])),
            "total": len(rows),
        }
        for path, rows in lists
        if rows
    ]
    meta = {
        "truncated": True,
        "next_cursor": None if next_offset is None else cursor(next_offset),
        "page": page_rows,
    }
    return encode(_with_page(_filled(payload, (), chosen), meta)), next_offset
