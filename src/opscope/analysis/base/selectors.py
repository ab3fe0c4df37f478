"""What-if selectors of exact names: the regular expression a finding's change states (`exact_names`), and the
names read back from it (`names_in`) for the JSON, where a list of names can be paged and a long expression
cannot."""

from __future__ import annotations

META = set("\\.+*?()|[]{}^$#&-~")  # escaped the same way by Python's re and Rust's regex (polars)


def exact_names(names: list[str]) -> str:
    """A regular expression matching exactly these names (for a what-if selector)."""
    escaped = ("".join("\\" + c if c in META else c for c in name) for name in sorted(set(names)))
    return "^(" + "|".join(escaped) + ")$"


def names_in(selector: str) -> list[str] | None:
    """The names an `exact_names` selector matches, read back (None for any other regular expression)."""
    if not (selector.startswith("^(") and selector.endswith(")$")):
        return None
    names, current, escaped = [], [], False
    for c in selector[2:-2]:
        if escaped:
            current.append(c)
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == "|":
            names.append("".join(current))
            current = []
        elif c in META:
            return None  # a regular expression of another form
        else:
            current.append(c)
    if escaped:
        return None
    names.append("".join(current))
    return names


__all__ = ["META", "exact_names", "names_in"]
