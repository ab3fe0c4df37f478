"""Untrusted text: every string a trace carries (kernel, operator, device and file names, annotations) and every
path a user passes comes from whoever wrote the trace or named the file, and may hold terminal control sequences.

`visible` is the one rule for text meant for a terminal or a text file: control characters (C0, DEL, C1), the
line and paragraph separators and the bidirectional-text controls become visible escapes (`\\x1b`, `\\u202e`),
so nothing a trace contains can move the cursor, clear the screen, set the clipboard (OSC 52), open a hyperlink
(OSC 8) or reorder what is shown. The renderers (`report/escape.py`) build the format-specific rules on top of
it; JSON keeps the exact text. Error messages (`OpscopeError.__str__`) and the package's log records
(`VisibleLogText`) go through it too, since both quote paths and names.
"""

from __future__ import annotations

import logging
import re

# C0 controls, DEL, C1 controls; U+2028/U+2029 (line breaks to some terminals and editors); the bidi embedding,
# override and isolate controls (U+202A-U+202E, U+2066-U+2069) and marks (U+200E, U+200F, U+061C), which can make
# a name read differently from what it is ("Trojan Source").
UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """`text` with every unsafe character written as a visible escape: ESC -> `\\x1b`, newline -> `\\n`,
    U+202E -> `\\u202e`. Text without such characters comes back unchanged (the common case, checked first)."""
    if UNSAFE.search(text) is None:
        return text
    return UNSAFE.sub(_escape, text)


class VisibleLogText(logging.Filter):
    """Makes the package's log records safe for a terminal: the message, with its arguments, through `visible`.
    Attached to the `opscope` logger, so whatever handler an application or the CLI installs gets safe text."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        safe = visible(message)
        if safe is not message:
            record.msg, record.args = safe, None
        return True


def install_log_filter(logger: logging.Logger) -> None:
    if not any(isinstance(f, VisibleLogText) for f in logger.filters):
        logger.addFilter(VisibleLogText())
