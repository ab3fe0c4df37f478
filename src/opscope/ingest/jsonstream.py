"""Split a Chrome-trace JSON byte stream into batches of whole events, never building the whole document.

The events array (`{"traceEvents": [...]}` or a bare top-level list) is cut into batches of a few MB at
event boundaries. A boundary is first guessed cheaply (the last `}` `,` `{` with only whitespace between,
found with `bytes.rfind`), and the guess is *verified* by decoding the batch: a cut anywhere but between
two top-level events leaves an unclosed string or bracket, which the decoder rejects. Only then does a
tokenising scanner find the exact boundaries. Everything outside the array (metadata such as
`deviceProperties`, which Kineto writes both before and after the events) is kept and decoded separately.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from opscope.errors import InputError

T = TypeVar("T")

# A JSON string (possibly unterminated at the end of the buffer) or one structural bracket.
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*(?:"|\Z)|[\[\]{}]', re.S)
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_WS = b" \t\r\n"
BATCH_BYTES = 4 << 20


class SyntaxProblem(Exception):
    """Raised by a batch decoder when the bytes are not well-formed JSON (as opposed to bad values)."""


def scan_elements(buf: bytes, start: int = 0) -> tuple[list[int], int | None]:
    """Scan array content from `start` (depth 0, outside strings).

    Returns the offsets just past each complete top-level element and the offset of the array's closing
    `]` (None when the buffer ends first).
    """
    depth = 0
    ends: list[int] = []
    for match in _TOKEN.finditer(buf, start):
        first = buf[match.start()]
        if first == 0x22:  # a string: nothing inside counts
            continue
        if first in (0x7B, 0x5B):
            depth += 1
            continue
        depth -= 1
        if depth == 0:
            ends.append(match.end())
        elif depth < 0:
            return ends, match.start()
    return ends, None


def _depth_at(buf: bytes, position: int) -> int | None:
    """Bracket depth at `position`, or None when `position` lies inside a string."""
    depth = 0
    for match in _TOKEN.finditer(buf, 0, position):
        if buf[match.start()] == 0x22:
            if match.end() > position or (match.end() == position and buf[match.end() - 1] != 0x22):
                return None
            continue
        depth += 1 if buf[match.start()] in (0x7B, 0x5B) else -1
    return depth


def _candidate_cut(body: bytes) -> tuple[int, int] | None:
    """The last `}`, `,`, `{` with only whitespace between: (end of batch, start of next event)."""
    limit = len(body)
    for _ in range(256):
        brace = body.rfind(b"{", 0, limit)
        if brace <= 0:
            return None
        k = brace - 1
        while k >= 0 and body[k] in _WS:
            k -= 1
        if k > 0 and body[k] == 0x2C:
            k -= 1
            while k >= 0 and body[k] in _WS:
                k -= 1
            if k >= 0 and body[k] == 0x7D:
                return k + 1, brace
        limit = brace
    return None


@dataclass
class StreamReport:
    """What the splitter saw besides the events."""

    header: bytes = b""  # document text before the events array (b"" for a bare list)
    trailer: bytes = b""  # document text after the array's closing bracket
    bare_list: bool = False
    closed: bool = False  # the events array's closing bracket was seen
    bytes_total: int = 0  # decompressed bytes consumed
    salvaged_up_to: int = 0  # offset just past the last complete event
    skipped_elements: int = 0  # elements that could not be decoded even one by one
    problems: list[str] = field(default_factory=list)


class EventSplitter(Generic[T]):
    """Feeds whole-event batches (`b"[ev, ev, ...]"`) to `decode` and yields what it returns."""

    def __init__(self, chunks: Iterable[bytes], decode: Callable[[bytes], T], name: str,
                 batch_bytes: int | None = None) -> None:
        self._chunks = iter(chunks)
        self._decode = decode
        self._name = name
        self._batch_bytes = batch_bytes or BATCH_BYTES
        self._eof = False
        self.report = StreamReport()

    def _read(self) -> bytes:
        if self._eof:
            return b""
        for chunk in self._chunks:
            self.report.bytes_total += len(chunk)
            return chunk
        self._eof = True
        return b""

    def _locate_array(self) -> tuple[bytes, int]:
        """Read until the events array opens; return the buffer and the offset of its first content byte."""
        buf = b""
        while True:
            more = self._read()
            buf += more
            stripped = buf.lstrip()
            if not stripped:
                if self._eof:
                    raise InputError(f"{self._name}: the file is empty")
                continue
            lead = stripped[:1]
            offset = len(buf) - len(stripped)
            if lead == b"[":
                self.report.bare_list = True
                return buf, offset + 1
            if lead != b"{":
                raise InputError(f"{self._name}: not JSON (starts with {stripped[:16]!r})")
            for match in _EVENTS_KEY.finditer(buf):
                if _depth_at(buf, match.start()) == 1:
                    self.report.header = buf[: match.end() - 1]
                    return buf, match.end()
            if self._eof:
                raise InputError(f"{self._name}: JSON, but not a trace (no \"traceEvents\" array)")

    def _decode_exact(self, body: bytes, ends: list[int]) -> Iterator[T]:
        """Decode elements whose boundaries are known; isolate elements that fail on their own."""
        if not ends:
            return
        first = len(body) - len(body.lstrip())
        try:
            yield self._decode(b"[" + body[first : ends[-1]] + b"]")
            return
        except SyntaxProblem:
            pass
        start = first
        for end in ends:
            piece = body[start:end].lstrip(b" \t\r\n,")
            start = end
            try:
                yield self._decode(b"[" + piece + b"]")
            except SyntaxProblem:
                self.report.skipped_elements += 1

    def _fast_close(self, body: bytes) -> tuple[int, T | None, int] | None:
        """At the end of the stream: find the array's closing bracket from the end, verified by decoding.

        The bracket that closes the events array follows an event's `}` (or the opening `[` when empty),
        which rules out the brackets of lists and strings in the trailing metadata without decoding.
        """
        limit = len(body)
        tries = 0
        for _ in range(4096):
            close = body.rfind(b"]", 0, limit)
            if close < 0:
                return None
            limit = close
            after = body[close + 1 :].lstrip()
            if after[:1] not in (b"", b",", b"}"):
                continue
            first = len(body) - len(body.lstrip())
            content = body[first:close].rstrip()
            if not content:
                return close, None, first
            if content[-1:] != b"}":
                continue
            tries += 1
            try:
                return close, self._decode(b"[" + content + b"]"), first + len(content)
            except SyntaxProblem:
                if tries >= 4:
                    return None
        return None

    def __iter__(self) -> Iterator[T]:
        buf, begin = self._locate_array()
        body = buf[begin:]
        consumed = begin  # absolute offset of body[0]
        while True:
            parts = [body]
            size = len(body)
            while size < self._batch_bytes and not self._eof:
                more = self._read()
                parts.append(more)
                size += len(more)
            body = b"".join(parts)
            cut = None if self._eof else _candidate_cut(body)
            if cut is not None:
                end, nxt = cut
                first = len(body) - len(body.lstrip())
                try:
                    result = self._decode(b"[" + body[first:end] + b"]")
                except SyntaxProblem:
                    result = None
                if result is not None:
                    yield result
                    self.report.salvaged_up_to = consumed + end
                    consumed += nxt
                    body = body[nxt:]
                    continue
            elif not self._eof:
                continue  # no boundary yet: one very large event; read on
            if self._eof:
                closing = self._fast_close(body)
                if closing is not None:
                    close, result, last = closing
                    if result is not None:
                        yield result
                    self.report.salvaged_up_to = consumed + last
                    self.report.closed = True
                    self.report.trailer = body[close + 1 :]
                    return
            # Exact path: the guess failed, or the stream has ended without a clean close.
            ends, array_close = scan_elements(body)
            if array_close is None and not self._eof:
                keep = ends[-1] if ends else 0
                if keep == 0:
                    continue
                yield from self._decode_exact(body, ends)
                self.report.salvaged_up_to = consumed + keep
                rest = body[keep:]
                stripped = rest.lstrip(b" \t\r\n,")
                consumed += keep + (len(rest) - len(stripped))
                body = stripped
                continue
            usable = [e for e in ends if array_close is None or e <= array_close]
            yield from self._decode_exact(body, usable)
            if usable:
                self.report.salvaged_up_to = consumed + usable[-1]
            if array_close is not None:
                self.report.closed = True
                trailer = [body[array_close + 1 :]]
                while not self._eof:
                    trailer.append(self._read())
                self.report.trailer = b"".join(trailer)
            return
