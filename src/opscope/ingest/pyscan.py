"""The reference document scanner: the Python twin of the native `scan.rs`, rule for rule.

It cuts a Chrome-trace JSON byte stream, fed chunk by chunk, into the elements of the events array, keeps
the other top-level values as JSON text, and records where the document ended and how. State carries over
between chunks (inside a string, after a backslash, bracket depth), so each byte is read once and memory
stays bounded. The rules (BOM, bare lists, element flags, size and depth limits, salvage offsets) are those
of `docs/ingest.md`; `tests/test_native_reader.py` holds the two scanners to identical results.

Speed: inside the events array a whole object is usually found in one step, by guessing its end (a `}`
followed by `,` or `]`) and checking the guess with msgspec (a valid JSON object that starts at the element
start ends exactly where its depth first returns to zero, so a verified guess is the element the byte-wise
rules would find). Everything else goes byte-wise, with regular expressions to jump over strings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import msgspec

MAX_DEPTH = 64
MAX_EVENT_BYTES = 64 << 20
MAX_META_BYTES = 16 << 20
MAX_KEY_BYTES = 256
BOM = b"\xef\xbb\xbf"

NOT_OBJECT, TOO_DEEP, TOO_LARGE, JUNK = 1, 2, 4, 8

_WS = b" \t\r\n"
_STRING_REST = re.compile(rb'(?:[^"\\]|\\.)*"', re.S)  # the rest of a string, closing quote included
_SIGNIFICANT = re.compile(rb"[^ \t\r\n]")
_EVENTS_SPECIAL = re.compile(rb'["{}\[\],]')
_CANDIDATE_END = re.compile(rb"\}[ \t\r\n]*[,\]]")
_RAW = msgspec.json.Decoder(msgspec.Raw)
_OPEN = frozenset(b"{[")
_CLOSE = frozenset(b"}]")


@dataclass
class Outline:
    bare_list: bool = False
    events_found: bool = False
    closed: bool = False
    document_closed: bool = False
    bytes_total: int = 0
    salvaged_up_to: int = 0
    members: list[tuple[bytes, bytes]] = field(default_factory=list)
    skipped_meta_values: int = 0
    skipped_deep_meta_values: int = 0
    trailing_data_at: int | None = None
    malformed_after_events_at: int | None = None
    fatal: tuple[object, ...] | None = None


@dataclass
class Batch:
    """Whole elements: their text and flags."""

    elements: list[tuple[bytes, int]] = field(default_factory=list)
    size: int = 0


# states
START, OBJ_KEY, IN_KEY, OBJ_COLON, OBJ_VALUE, VALUE, OBJ_AFTER, EVENTS, AFTER_DOC, DONE = range(10)


class Scanner:
    def __init__(self, batch_bytes: int) -> None:
        self.state = START
        self.offset = 0
        self.bom_checked = False
        self.bom_pending = b""
        self.in_str = False
        self.escape = False
        self.depth = 0
        self.key = bytearray()
        self.key_too_long = False
        self.value = bytearray()
        self.value_too_large = False
        self.value_too_deep = False
        self.value_scalar = False
        self.elem_open = False
        self.elem_parts: list[bytes] = []
        self.elem_len = 0
        self.elem_flags = 0
        self.elem_first = 0
        self.elem_closed = False
        self.elem_last_end = 0
        self.batch = Batch()
        self.batch_bytes = max(batch_bytes, 1)
        self.ready: list[Batch] = []
        self.outline = Outline()

    def done(self) -> bool:
        return self.state == DONE

    def take_batches(self) -> list[Batch]:
        ready, self.ready = self.ready, []
        return ready

    def feed(self, chunk: bytes) -> None:
        self.outline.bytes_total += len(chunk)
        if not self.bom_checked:
            self.bom_pending += chunk
            if len(self.bom_pending) >= 3:
                self._start_after_bom()
            return
        self._scan(chunk)

    def _start_after_bom(self) -> None:
        self.bom_checked = True
        pending, self.bom_pending = self.bom_pending, b""
        skip = 3 if pending.startswith(BOM) else 0
        self.offset = skip
        self._scan(pending[skip:])

    def _scan(self, chunk: bytes) -> None:
        i, n = 0, len(chunk)
        while i < n:
            state = self.state
            if state == DONE:
                return
            if state == EVENTS:
                i = self._scan_events(chunk, i)
            elif state == VALUE:
                i = self._scan_value(chunk, i)
            elif state == IN_KEY:
                i = self._scan_key(chunk, i)
            else:
                m = _SIGNIFICANT.search(chunk, i)
                if m is None:
                    break
                i = m.start()
                self._structural(chunk[i], self.offset + i)
                i += 1
        self.offset += n

    def _structural(self, b: int, at: int) -> None:
        state = self.state
        if state == START:
            if b == 0x7B:
                self.state = OBJ_KEY
            elif b == 0x5B:
                self.outline.bare_list = True
                self.outline.events_found = True
                self.state = EVENTS
            else:
                self._fatal(("not_json", bytes([b])))
        elif state == OBJ_KEY:
            if b == 0x22:
                self.key = bytearray()
                self.key_too_long = False
                self.in_str = True
                self.escape = False
                self.state = IN_KEY
            elif b == 0x7D and not self.outline.members and not self.outline.events_found:
                self._document_end()
            else:
                self._malformed(at)
        elif state == OBJ_COLON:
            if b == 0x3A:
                self.state = OBJ_VALUE
            else:
                self._malformed(at)
        elif state == OBJ_VALUE:
            if b == 0x5B and bytes(self.key) == b"traceEvents" and not self.outline.events_found:
                self.outline.events_found = True
                self.state = EVENTS
                return
            self.value = bytearray()
            self.value_too_large = self.key_too_long
            self.value_too_deep = False
            self.value_scalar = False
            self.depth = 0
            if b in _OPEN:
                self.depth = 1
            elif b == 0x22:
                self.in_str = True
                self.escape = False
            else:
                self.value_scalar = True
            if not self.value_too_large:
                self.value.append(b)
            self.state = VALUE
        elif state == OBJ_AFTER:
            if b == 0x2C:
                self.state = OBJ_KEY
            elif b == 0x7D:
                self._document_end()
            else:
                self._malformed(at)
        elif state == AFTER_DOC:
            self.outline.trailing_data_at = at
            self.state = DONE

    def _document_end(self) -> None:
        self.outline.document_closed = True
        self.state = AFTER_DOC

    def _malformed(self, at: int) -> None:
        if self.outline.events_found:
            self.outline.malformed_after_events_at = at
            self.state = DONE
        else:
            self._fatal(("malformed", at))

    def _fatal(self, why: tuple[object, ...]) -> None:
        if self.outline.fatal is None:
            self.outline.fatal = why
        self.state = DONE

    def _scan_key(self, chunk: bytes, i: int) -> int:
        n = len(chunk)
        while i < n:
            b = chunk[i]
            i += 1
            if self.escape:
                self.escape = False
            elif b == 0x5C:
                self.escape = True
            elif b == 0x22:
                self.in_str = False
                self.state = OBJ_COLON
                return i
            if len(self.key) < MAX_KEY_BYTES:
                self.key.append(b)
            else:
                self.key_too_long = True
        return i

    def _string_end(self, chunk: bytes, i: int) -> int | None:
        """Inside a string at `i`: the offset just past its closing quote, or None when the chunk ends first
        (then `self.escape` says whether the chunk ended on a backslash that escapes the next byte)."""
        if self.escape:
            self.escape = False
            i += 1
        m = _STRING_REST.match(chunk, i)
        if m is not None:
            return m.end()
        body = _STRING_BODY.match(chunk, i)
        self.escape = body is not None and body.end() == len(chunk) - 1
        return None

    def _scan_value(self, chunk: bytes, i: int) -> int:
        start, n = i, len(chunk)
        end_at: int | None = None
        while i < n:
            if self.in_str:
                end = self._string_end(chunk, i)
                if end is None:
                    i = n
                    break
                self.in_str = False
                i = end
                if self.depth == 0:
                    end_at = i
                    break
                continue
            b = chunk[i]
            if self.value_scalar:
                if b in _WS or b in (0x2C, 0x7D, 0x5D):
                    end_at = i
                    break
                i += 1
                continue
            if b == 0x22:
                self.in_str = True
            elif b in _OPEN:
                self.depth += 1
                if self.depth > MAX_DEPTH:
                    self.value_too_deep = True
            elif b in _CLOSE:
                self.depth = max(self.depth - 1, 0)
                if self.depth == 0:
                    end_at = i + 1
                    break
            i += 1
        stop = end_at if end_at is not None else n
        if not self.value_too_large:
            if len(self.value) + (stop - start) > MAX_META_BYTES:
                self.value_too_large = True
                self.value = bytearray()
            else:
                self.value += chunk[start:stop]
        if end_at is not None:
            self._finish_value()
        return stop

    def _finish_value(self) -> None:
        value, self.value = bytes(self.value), bytearray()
        if self.value_too_deep:
            self.outline.skipped_deep_meta_values += 1
        elif self.value_too_large:
            self.outline.skipped_meta_values += 1
        else:
            self.outline.members.append((bytes(self.key), value))
        self.key = bytearray()
        self.depth = 0
        self.state = OBJ_AFTER

    # -- the events array --------------------------------------------------------------------------------

    def _scan_events(self, chunk: bytes, i: int) -> int:
        n = len(chunk)
        copy_from = i if self.elem_open else None
        while i < n:
            if self.in_str:
                end = self._string_end(chunk, i)
                if end is None:
                    i = n
                    break
                self.in_str = False
                i = end
                if self.depth == 0:
                    self.elem_last_end = self.offset + i
                continue
            if self.depth > 0:
                m = _EVENTS_SPECIAL.search(chunk, i)
                if m is None:
                    i = n
                    break
                i = m.start()
                b = chunk[i]
                if b == 0x22:
                    self.in_str = True
                elif b in _OPEN:
                    self.depth += 1
                    if self.depth > MAX_DEPTH:
                        self.elem_flags |= TOO_DEEP
                elif b in _CLOSE:
                    self.depth -= 1
                    if self.depth == 0:
                        self.elem_closed = True
                        self.elem_last_end = self.offset + i + 1
                i += 1
                continue
            b = chunk[i]
            if b in _WS:
                i += 1
                continue
            if b == 0x2C or b == 0x5D:
                if copy_from is not None:
                    self._copy(chunk[copy_from:i])
                    copy_from = None
                self._end_element()
                if b == 0x5D:
                    self.outline.closed = True
                    if self.outline.bare_list:
                        self.outline.document_closed = True
                        self.state = AFTER_DOC
                    else:
                        self.state = OBJ_AFTER
                    return i + 1
                i += 1
                continue
            self.elem_last_end = self.offset + i + 1
            if not self.elem_open:
                if b == 0x7B:
                    fast = self._whole_object(chunk, i)
                    if fast is not None:
                        i = fast
                        continue
                self._open_element(b)
                copy_from = i
            elif self.elem_closed or (self.elem_first not in _OPEN and b in (0x7B, 0x5B, 0x22, 0x7D)):
                self.elem_flags |= JUNK
            if b == 0x22:
                self.in_str = True
            elif b in _OPEN:
                self.depth = 1
                self.elem_closed = False
            elif b == 0x7D:
                self.elem_flags |= JUNK
            i += 1
        if copy_from is not None:
            self._copy(chunk[copy_from:n])
        return n

    def _whole_object(self, chunk: bytes, i: int) -> int | None:
        """An object starting at `i` found in one step: returns the offset of the `,` or `]` after it."""
        pos = i
        for _ in range(4):
            m = _CANDIDATE_END.search(chunk, pos)
            if m is None:
                return None
            text = chunk[i : m.start() + 1]
            pos = m.start() + 1
            if len(text) > MAX_EVENT_BYTES:
                return None
            try:
                _RAW.decode(text)
            except (msgspec.DecodeError, RecursionError):
                continue
            if text.count(b"{") + text.count(b"[") > MAX_DEPTH and _depth(text) > MAX_DEPTH:
                return None  # the byte-wise path flags it
            self.elem_open = True
            self.elem_first = 0x7B
            self.elem_flags = 0
            self.elem_closed = True
            self.elem_parts = [text]
            self.elem_len = len(text)
            self.elem_last_end = self.offset + m.start() + 1
            return m.end() - 1
        return None

    def _open_element(self, first: int) -> None:
        self.elem_open = True
        self.elem_flags = 0 if first == 0x7B else NOT_OBJECT
        self.elem_first = first
        self.elem_closed = False
        self.elem_parts = []
        self.elem_len = 0

    def _copy(self, data: bytes) -> None:
        if self.elem_flags & TOO_LARGE:
            return
        if self.elem_len + len(data) > MAX_EVENT_BYTES:
            self.elem_flags |= TOO_LARGE
            self.elem_parts = []
            return
        self.elem_parts.append(data)
        self.elem_len += len(data)

    def _end_element(self) -> None:
        if not self.elem_open:
            return
        self.elem_open = False
        if self.elem_flags & TOO_LARGE:
            self.batch.elements.append((b"", TOO_LARGE))
        else:
            flags = self.elem_flags
            if self.elem_first == 0x7B and not self.elem_closed:
                flags |= JUNK
            text = b"".join(self.elem_parts).rstrip(_WS)
            self.batch.elements.append((text, flags))
            self.batch.size += len(text)
        self.outline.salvaged_up_to = self.elem_last_end
        self.elem_parts = []
        self.elem_len = 0
        if self.batch.size >= self.batch_bytes:
            self.ready.append(self.batch)
            self.batch = Batch()

    def finish(self) -> None:
        if not self.bom_checked:
            self._start_after_bom()
        if self.state == EVENTS:
            if (
                self.elem_open
                and self.elem_first == 0x7B
                and self.elem_closed
                and self.depth == 0
                and not self.in_str
            ):
                self._end_element()
            else:
                self.elem_open = False
                self.elem_parts = []
        elif self.state == VALUE and self.value_scalar and not self.in_str:
            self._finish_value()
        if self.outline.fatal is None and not self.outline.events_found:
            self.outline.fatal = ("empty",) if self.state == START else ("no_events",)
        if self.batch.elements:
            self.ready.append(self.batch)
            self.batch = Batch()


_STRING_BODY = re.compile(rb'(?:[^"\\]|\\.)*', re.S)


def _depth(text: bytes) -> int:
    """Deepest bracket nesting of a valid JSON text (strings skipped)."""
    deepest = depth = 0
    for m in re.finditer(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', text, re.S):
        b = text[m.start()]
        if b == 0x22:
            continue
        if b in _OPEN:
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest
