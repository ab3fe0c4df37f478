"""How each output format writes untrusted text (names from traces, paths), so that none of it becomes code in
the place the output ends up: a terminal, a pull-request comment, a spreadsheet, a flame-graph tool.

- terminal tables: `opscope.untrusted.visible` (control characters as `\\x1b`), and never Rich markup: the
  renderer hands Rich `Text` objects only, so `kernel[/x]` or `[link=...]` are shown as typed;
- Markdown (GitHub-flavoured): `md_text` backslash-escapes every character that could start markup (emphasis,
  links, autolinks, HTML, math, a cell border `|`); `md_code` puts names in a code span where that is exact;
- CSV: `csv_cell` neutralises cells that a spreadsheet would run as a formula (OWASP: a leading `=`, `+`, `-`,
  `@`, TAB or CR gets a `'` in front), after `visible`;
- JSON: exact text; `json_text` only writes C1 controls, DEL, U+2028/U+2029 and bidi controls as `\\uXXXX`
  escapes (which JSON parsers turn back into the same characters), so a JSON document printed to a terminal
  is as inert as a table. JSON's own rules already escape C0 controls.
"""

from __future__ import annotations

import re

from opscope.untrusted import visible

# What can make GFM markup of inline text, escaped with a backslash (any ASCII punctuation may be): code spans,
# emphasis, strikethrough, links and images, raw HTML and autolinks, table cell borders, math, escapes; `&` only
# where it would start an entity; `_` only where it can open or close emphasis (not inside a word); the `:` of
# `scheme://` and the `.` of `www.` (GFM links bare URLs).
_MD_INLINE = re.compile(r"[\\`*\[\]<>|$~@]|&(?=#?\w+;)|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|:(?=//)|(?<=www)\.")
# At the start of a line also what would make a heading, a list item or a thematic break.
_MD_LINE = re.compile(_MD_INLINE.pattern + r"|^[#+\-=]|^\d{1,9}[.)]")
# Characters a spreadsheet treats as the start of a formula (OWASP "CSV Injection").
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# What JSON encoders leave raw of `untrusted.UNSAFE`: DEL, C1, the separators and bidi controls (C0 controls are
# always escaped by JSON itself; newlines between tokens are the formatting's own).
_JSON_RAW = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def md_text(text: str, line_start: bool = False) -> str:
    """Plain text for a GFM table cell or inside a line: nothing in it is markup, links, HTML or a cell border.
    `line_start`: the text begins a line of its own, where `#`, `-`, `+`, `=` or `1.` would start a block."""
    return (_MD_LINE if line_start else _MD_INLINE).sub(_md_escape, visible(text))


def _md_escape(match: re.Match[str]) -> str:
    found = match.group(0)
    return found[:-1] + "\\" + found[-1]  # the backslash goes before the last character (`12.` -> `12\\.`)


def md_code(text: str) -> str:
    """A name as a GFM code span inside a table cell (monospace, no markup inside). A code span cannot hold
    `\\|` exactly in a table (the table parser eats the backslash), so such names are written as `md_text`."""
    shown = visible(text)
    if not shown:
        return ""
    if "\\|" in shown:
        return md_text(text)
    longest = max((len(run) for run in re.findall(r"`+", shown)), default=0)
    fence = "`" * (longest + 1)
    # CommonMark strips one space from each end when both ends have one, and a backtick at an end would join the
    # fence: pad with a space on each side exactly then.
    both_spaces = shown.startswith(" ") and shown.endswith(" ") and shown.strip(" ")
    pad = " " if shown.startswith("`") or shown.endswith("`") or both_spaces else ""
    return f"{fence}{pad}{shown.replace('|', chr(92) + '|')}{pad}{fence}"


def csv_cell(value: object) -> object:
    """A CSV cell: numbers as they are; text through `visible`, with a `'` in front when a spreadsheet would
    read it as a formula. (`visible` has already turned a leading TAB or CR into `\\t` or `\\r`.)"""
    if not isinstance(value, str):
        return value
    text = visible(value)
    return "'" + text if text.startswith(FORMULA_START) else text


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group(0)):04x}"


def json_text(text: str) -> str:
    """Encoded JSON with the unsafe characters JSON leaves raw written as `\\uXXXX`. Outside strings JSON is
    ASCII, so this changes only string contents, and only their spelling."""
    return _JSON_RAW.sub(_json_escape, text)
