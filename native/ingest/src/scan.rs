//! The document scanner: cuts a Chrome-trace JSON byte stream into whole events, never holding the document.
//!
//! It is fed the decompressed bytes chunk by chunk and keeps its state between chunks (inside a string,
//! after a backslash, bracket depth), so it reads every byte once, in linear time and bounded memory:
//! - the document is `{"traceEvents": [...], other keys}` or a bare `[...]` list, after an optional BOM;
//! - top-level values other than the events array are kept as JSON text (at most `MAX_META_BYTES` each) for
//!   the metadata (`deviceProperties`, `distributedInfo`, ...), larger ones are skipped and counted;
//! - the events array is cut at its top-level commas into elements; each complete element is handed on with
//!   flags saying whether it can be an event (an object, not nested deeper than `MAX_DEPTH`, not larger than
//!   `MAX_EVENT_BYTES`, nothing after its closing brace).
//!
//! The rules are written in `docs/ingest.md`; the Python reference reader (`opscope.ingest.pyreader`)
//! implements the same ones, and a differential test holds the two to identical results.
use crate::skip;

/// Deepest nesting inside an event (the event object itself is level 1).
pub const MAX_DEPTH: u32 = 64;
/// Largest event kept; larger ones are scanned over and counted.
pub const MAX_EVENT_BYTES: usize = 64 << 20;
/// Largest top-level metadata value kept.
pub const MAX_META_BYTES: usize = 16 << 20;
/// Emptied batches kept for reuse (`Scanner::recycle`).
const MAX_SPARE: usize = 4;
/// Longest top-level key kept (longer keys are still scanned, their values skipped).
const MAX_KEY_BYTES: usize = 256;

/// Why an element of the events array cannot be an event.
pub mod flag {
    pub const NOT_OBJECT: u8 = 1;
    pub const TOO_DEEP: u8 = 2;
    pub const TOO_LARGE: u8 = 4;
    pub const JUNK: u8 = 8;
}

/// Where one element lies in a batch buffer, and its flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Element {
    pub start: usize,
    pub end: usize,
    pub flags: u8,
}

/// A group of whole elements, copied out of the stream.
#[derive(Debug, Default)]
pub struct Batch {
    pub data: Vec<u8>,
    pub elements: Vec<Element>,
}

/// A problem with the document's structure outside the events array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fatal {
    Empty,
    NotJson(Vec<u8>),
    NoEvents,
    Malformed(u64),
}

/// What the scanner learnt besides the events.
#[derive(Debug, Default, Clone)]
pub struct Outline {
    pub bare_list: bool,
    pub events_found: bool,
    /// the events array's closing bracket was seen
    pub closed: bool,
    /// the whole document ended properly (closing brace of the object, or of the bare list)
    pub document_closed: bool,
    /// decompressed bytes fed
    pub bytes_total: u64,
    /// offset just past the last complete element of the events array
    pub salvaged_up_to: u64,
    /// top-level keys (raw JSON string text, quotes excluded) and their values' JSON text, in order
    pub members: Vec<(Vec<u8>, Vec<u8>)>,
    pub skipped_meta_values: u64,
    pub skipped_deep_meta_values: u64,
    /// offset of the first non-whitespace byte after the document, if any
    pub trailing_data_at: Option<u64>,
    /// offset where the structure after the events array stopped making sense
    pub malformed_after_events_at: Option<u64>,
    pub fatal: Option<Fatal>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Start,
    ObjKey,
    InKey,
    ObjColon,
    ObjValue,
    Value,
    ObjAfterValue,
    Events,
    AfterDoc,
    Done,
}

/// Streaming scanner. Feed chunks with `feed`, then call `finish`; complete batches come out of `take_batch`.
pub struct Scanner {
    state: State,
    offset: u64,
    bom_checked: bool,
    bom_pending: Vec<u8>,
    in_str: bool,
    escape: bool,
    depth: u32,
    // top-level member being read
    key: Vec<u8>,
    key_too_long: bool,
    value: Vec<u8>,
    value_too_large: bool,
    value_too_deep: bool,
    value_scalar: bool,
    // the events array
    elem_open: bool,
    elem_flags: u8,
    elem_first: u8,
    elem_closed: bool,
    elem_len: usize,
    elem_last_end: u64,
    batch: Batch,
    batch_bytes: usize,
    ready: Vec<Batch>,
    /// emptied batches handed back by the decoders (`recycle`): their buffers are already faulted in
    spare: Vec<Batch>,
    pub outline: Outline,
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

impl Scanner {
    pub fn new(batch_bytes: usize) -> Self {
        Scanner {
            state: State::Start,
            offset: 0,
            bom_checked: false,
            bom_pending: Vec::new(),
            in_str: false,
            escape: false,
            depth: 0,
            key: Vec::new(),
            key_too_long: false,
            value: Vec::new(),
            value_too_large: false,
            value_too_deep: false,
            value_scalar: false,
            elem_open: false,
            elem_flags: 0,
            elem_first: 0,
            elem_closed: false,
            elem_len: 0,
            elem_last_end: 0,
            batch: Batch::default(),
            batch_bytes: batch_bytes.max(1),
            ready: Vec::new(),
            spare: Vec::new(),
            outline: Outline::default(),
        }
    }

    /// Whether scanning has stopped (a fatal problem, or the document is over and only trailing data remains).
    pub fn done(&self) -> bool {
        self.state == State::Done
    }

    /// Batches completed so far.
    pub fn take_batches(&mut self) -> Vec<Batch> {
        std::mem::take(&mut self.ready)
    }

    /// Hand back a decoded batch so that its buffers hold the next one: fresh 5 MiB buffers cost a page fault
    /// per 4 KiB (~20% of the scanning thread's time). At most `MAX_SPARE` are kept.
    pub fn recycle(&mut self, mut batch: Batch) {
        if self.spare.len() < MAX_SPARE && batch.data.capacity() <= self.batch_bytes * 2 {
            batch.data.clear();
            batch.elements.clear();
            self.spare.push(batch);
        }
    }

    fn next_batch(&mut self) -> Batch {
        let fresh = self.spare.pop().unwrap_or_default();
        std::mem::replace(&mut self.batch, fresh)
    }

    pub fn feed(&mut self, chunk: &[u8]) {
        self.outline.bytes_total += chunk.len() as u64;
        if !self.bom_checked {
            // The first three bytes may arrive in more than one chunk: hold them until a BOM can be ruled out.
            self.bom_pending.extend_from_slice(chunk);
            if self.bom_pending.len() >= 3 {
                self.start_after_bom();
            }
            return;
        }
        self.scan(chunk);
    }

    fn start_after_bom(&mut self) {
        self.bom_checked = true;
        let pending = std::mem::take(&mut self.bom_pending);
        let skip = if pending.starts_with(b"\xEF\xBB\xBF") {
            3
        } else {
            0
        };
        self.offset = skip as u64;
        self.scan(&pending[skip..]);
    }

    fn scan(&mut self, chunk: &[u8]) {
        let mut i = 0;
        let n = chunk.len();
        while i < n {
            match self.state {
                State::Done => return,
                State::Events => {
                    i = self.scan_events(chunk, i);
                }
                State::Value => {
                    i = self.scan_value(chunk, i);
                }
                State::InKey => {
                    i = self.scan_key(chunk, i);
                }
                _ => {
                    let b = chunk[i];
                    let at = self.offset + i as u64;
                    i += 1;
                    if is_ws(b) {
                        continue;
                    }
                    self.structural(b, at);
                }
            }
        }
        self.offset += n as u64;
    }

    /// One significant byte outside strings, elements and values.
    fn structural(&mut self, b: u8, at: u64) {
        match self.state {
            State::Start => match b {
                b'{' => self.state = State::ObjKey,
                b'[' => {
                    self.outline.bare_list = true;
                    self.outline.events_found = true;
                    self.state = State::Events;
                }
                _ => self.fatal(Fatal::NotJson(vec![b])),
            },
            State::ObjKey => match b {
                b'"' => {
                    self.key.clear();
                    self.key_too_long = false;
                    self.in_str = true;
                    self.escape = false;
                    self.state = State::InKey;
                }
                b'}' if self.outline.members.is_empty() && !self.outline.events_found => {
                    self.document_end(at)
                }
                _ => self.malformed(at),
            },
            State::ObjColon => {
                if b == b':' {
                    self.state = State::ObjValue;
                } else {
                    self.malformed(at);
                }
            }
            State::ObjValue => {
                if b == b'[' && self.key == b"traceEvents" && !self.outline.events_found {
                    self.outline.events_found = true;
                    self.state = State::Events;
                    return;
                }
                self.value.clear();
                self.value_too_large = self.key_too_long;
                self.value_too_deep = false;
                self.value_scalar = false;
                self.depth = 0;
                match b {
                    b'{' | b'[' => self.depth = 1,
                    b'"' => {
                        self.in_str = true;
                        self.escape = false;
                    }
                    _ => self.value_scalar = true,
                }
                if !self.value_too_large {
                    self.value.push(b);
                }
                self.state = State::Value;
            }
            State::ObjAfterValue => match b {
                b',' => self.state = State::ObjKey,
                b'}' => self.document_end(at),
                _ => self.malformed(at),
            },
            State::AfterDoc => {
                self.outline.trailing_data_at = Some(at);
                self.state = State::Done;
            }
            _ => {}
        }
    }

    fn document_end(&mut self, _at: u64) {
        self.outline.document_closed = true;
        self.state = State::AfterDoc;
    }

    fn malformed(&mut self, at: u64) {
        if self.outline.events_found {
            self.outline.malformed_after_events_at = Some(at);
            self.state = State::Done;
        } else {
            self.fatal(Fatal::Malformed(at));
        }
    }

    fn fatal(&mut self, why: Fatal) {
        if self.outline.fatal.is_none() {
            self.outline.fatal = Some(why);
        }
        self.state = State::Done;
    }

    /// Inside a top-level key string.
    fn scan_key(&mut self, chunk: &[u8], mut i: usize) -> usize {
        while i < chunk.len() {
            let b = chunk[i];
            i += 1;
            if self.escape {
                self.escape = false;
            } else if b == b'\\' {
                self.escape = true;
            } else if b == b'"' {
                self.in_str = false;
                self.state = State::ObjColon;
                return i;
            }
            if self.key.len() < MAX_KEY_BYTES {
                self.key.push(b);
            } else {
                self.key_too_long = true;
            }
        }
        i
    }

    fn scan_value(&mut self, chunk: &[u8], mut i: usize) -> usize {
        let start = i;
        let n = chunk.len();
        let mut end_at: Option<usize> = None;
        while i < n {
            let b = chunk[i];
            if self.in_str {
                if self.escape {
                    self.escape = false;
                } else if b == b'\\' {
                    self.escape = true;
                } else if b == b'"' {
                    self.in_str = false;
                    if self.depth == 0 {
                        end_at = Some(i + 1);
                        break;
                    }
                }
                i += 1;
                continue;
            }
            if self.value_scalar {
                if is_ws(b) || b == b',' || b == b'}' || b == b']' {
                    end_at = Some(i);
                    break;
                }
                i += 1;
                continue;
            }
            match b {
                b'"' => self.in_str = true,
                b'{' | b'[' => {
                    self.depth += 1;
                    if self.depth > MAX_DEPTH {
                        self.value_too_deep = true;
                    }
                }
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        end_at = Some(i + 1);
                        break;
                    }
                }
                _ => {}
            }
            i += 1;
        }
        let stop = end_at.unwrap_or(n);
        if !self.value_too_large {
            let room = MAX_META_BYTES.saturating_sub(self.value.len());
            if stop - start > room {
                self.value_too_large = true;
                self.value = Vec::new();
            } else {
                self.value.extend_from_slice(&chunk[start..stop]);
            }
        }
        if end_at.is_some() {
            self.finish_value();
        }
        stop
    }

    fn finish_value(&mut self) {
        let value = std::mem::take(&mut self.value);
        if self.value_too_deep {
            self.outline.skipped_deep_meta_values += 1;
        } else if self.value_too_large {
            self.outline.skipped_meta_values += 1;
        } else {
            let key = std::mem::take(&mut self.key);
            self.outline.members.push((key, value));
        }
        self.depth = 0;
        self.state = State::ObjAfterValue;
    }

    // -- the events array ----------------------------------------------------------------------------------

    fn scan_events(&mut self, chunk: &[u8], mut i: usize) -> usize {
        let n = chunk.len();
        let base = self.offset;
        // Start of the part of this chunk that belongs to the open element (copied at the end).
        let mut copy_from = if self.elem_open { Some(i) } else { None };
        // The hot state lives in locals inside the loop and goes back into `self` around the rare calls.
        let (mut depth, mut in_str, mut escape) = (self.depth, self.in_str, self.escape);
        let (mut flags, mut closed, mut last_end) =
            (self.elem_flags, self.elem_closed, self.elem_last_end);
        while i < n {
            if in_str {
                if escape {
                    escape = false;
                    i += 1;
                    continue;
                }
                while i < n && !skip::IN_STRING[chunk[i] as usize] {
                    i += 1;
                }
                if i == n {
                    break;
                }
                if chunk[i] == b'\\' {
                    escape = true;
                } else {
                    in_str = false;
                    if depth == 0 {
                        last_end = base + i as u64 + 1;
                    }
                }
                i += 1;
                continue;
            }
            if depth > 0 {
                while i + 64 <= n {
                    // 64 bytes at a time while they hold no backslash (escapes: the byte loop below); outside
                    // a string here, so no escape is pending
                    let block: &[u8; 64] = chunk[i..i + 64].try_into().expect("64 bytes");
                    let m = skip::masks(block);
                    if m.backslash != 0 {
                        break;
                    }
                    let inside = skip::prefix_xor(m.quote) ^ if in_str { !0 } else { 0 };
                    let mut brackets = (m.open | m.close) & !inside;
                    let mut ended = None;
                    while brackets != 0 {
                        let k = brackets.trailing_zeros() as usize;
                        brackets &= brackets - 1;
                        if m.open >> k & 1 == 1 {
                            depth += 1;
                            if depth > MAX_DEPTH {
                                flags |= flag::TOO_DEEP;
                            }
                        } else {
                            depth -= 1;
                            if depth == 0 {
                                ended = Some(k);
                                break;
                            }
                        }
                    }
                    if let Some(k) = ended {
                        closed = true;
                        in_str = false;
                        last_end = base + (i + k) as u64 + 1;
                        i += k + 1;
                        break;
                    }
                    in_str = inside >> 63 == 1;
                    i += 64;
                }
                if depth == 0 || in_str {
                    continue;
                }
                while i < n && skip::OUTSIDE[chunk[i] as usize] == 0 {
                    i += 1;
                }
                if i == n {
                    break;
                }
                match skip::OUTSIDE[chunk[i] as usize] {
                    skip::QUOTE => in_str = true,
                    skip::OPEN => {
                        depth += 1;
                        if depth > MAX_DEPTH {
                            flags |= flag::TOO_DEEP;
                        }
                    }
                    _ => {
                        depth -= 1;
                        if depth == 0 {
                            closed = true;
                            last_end = base + i as u64 + 1;
                        }
                    }
                }
                i += 1;
                continue;
            }
            // depth 0: between elements, or in a scalar / after a closed container
            let b = chunk[i];
            match b {
                b' ' | b'\t' | b'\n' | b'\r' => {}
                b',' | b']' => {
                    (self.elem_flags, self.elem_closed, self.elem_last_end) =
                        (flags, closed, last_end);
                    if let Some(from) = copy_from.take() {
                        self.copy_element_bytes(&chunk[from..i]);
                    }
                    self.end_element();
                    if b == b']' {
                        self.outline.closed = true;
                        self.state = if self.outline.bare_list {
                            self.outline.document_closed = true;
                            State::AfterDoc
                        } else {
                            State::ObjAfterValue
                        };
                        (self.depth, self.in_str, self.escape) = (depth, in_str, escape);
                        return i + 1;
                    }
                    (flags, closed) = (self.elem_flags, self.elem_closed);
                }
                _ => {
                    last_end = base + i as u64 + 1;
                    if !self.elem_open {
                        self.open_element(b);
                        (flags, closed) = (self.elem_flags, self.elem_closed);
                        copy_from = Some(i);
                    } else if closed
                        || (self.elem_first != b'{'
                            && self.elem_first != b'['
                            && matches!(b, b'{' | b'[' | b'"' | b'}'))
                    {
                        // something after a closed container, or a second token in a scalar
                        flags |= flag::JUNK;
                    }
                    match b {
                        b'"' => in_str = true,
                        b'{' | b'[' => {
                            depth = 1;
                            closed = false;
                        }
                        b'}' => flags |= flag::JUNK,
                        _ => {}
                    }
                }
            }
            i += 1;
        }
        (self.depth, self.in_str, self.escape) = (depth, in_str, escape);
        (self.elem_flags, self.elem_closed, self.elem_last_end) = (flags, closed, last_end);
        if let Some(from) = copy_from {
            self.copy_element_bytes(&chunk[from..n]);
        }
        n
    }

    fn open_element(&mut self, first: u8) {
        self.elem_open = true;
        self.elem_flags = if first == b'{' { 0 } else { flag::NOT_OBJECT };
        self.elem_first = first;
        self.elem_closed = false;
        self.elem_len = 0;
        if self.batch.data.is_empty() {
            self.batch
                .data
                .reserve(self.batch_bytes + (self.batch_bytes >> 2));
        }
    }

    fn copy_element_bytes(&mut self, bytes: &[u8]) {
        if self.elem_flags & flag::TOO_LARGE != 0 {
            return;
        }
        if self.elem_len + bytes.len() > MAX_EVENT_BYTES {
            self.elem_flags |= flag::TOO_LARGE;
            let keep = self.batch.data.len() - self.elem_len;
            self.batch.data.truncate(keep);
            self.batch
                .data
                .shrink_to(self.batch_bytes + (self.batch_bytes >> 2));
            return;
        }
        self.batch.data.extend_from_slice(bytes);
        self.elem_len += bytes.len();
    }

    fn end_element(&mut self) {
        if !self.elem_open {
            return;
        }
        self.elem_open = false;
        let data = &mut self.batch.data;
        if self.elem_flags & flag::TOO_LARGE != 0 {
            let end = data.len();
            self.batch.elements.push(Element {
                start: end,
                end,
                flags: flag::TOO_LARGE,
            });
            self.outline.salvaged_up_to = self.elem_last_end;
        } else {
            let mut flags = self.elem_flags;
            if self.elem_first == b'{' && !self.elem_closed {
                flags |= flag::JUNK; // e.g. `{"a": 1` followed by a comma at its own depth: never closed
            }
            let end = data.len();
            let start = end - self.elem_len;
            // Whitespace before the comma is not part of the element.
            let mut trimmed = end;
            while trimmed > start && is_ws(data[trimmed - 1]) {
                trimmed -= 1;
            }
            data.truncate(trimmed);
            self.batch.elements.push(Element {
                start,
                end: trimmed,
                flags,
            });
            self.outline.salvaged_up_to = self.elem_last_end;
        }
        self.elem_len = 0;
        if self.batch.data.len() >= self.batch_bytes {
            let full = self.next_batch();
            self.ready.push(full);
        }
    }

    /// The stream has ended: close what can be closed and hand out the last batch.
    pub fn finish(&mut self) {
        if !self.bom_checked {
            self.start_after_bom();
        }
        match self.state {
            State::Events => {
                // Cut off inside the array: an element counts when it is an object whose closing brace was seen.
                if self.elem_open
                    && self.elem_first == b'{'
                    && self.elem_closed
                    && self.depth == 0
                    && !self.in_str
                {
                    self.end_element();
                } else if self.elem_open {
                    let keep = self.batch.data.len() - self.elem_len.min(self.batch.data.len());
                    if self.elem_flags & flag::TOO_LARGE == 0 {
                        self.batch.data.truncate(keep);
                    }
                    self.elem_open = false;
                }
            }
            State::Value if self.value_scalar && !self.in_str => self.finish_value(),
            _ => {}
        }
        if self.outline.fatal.is_none() && !self.outline.events_found {
            // nothing but whitespace (or a BOM) was seen: empty; anything else without an events array: not a trace
            self.outline.fatal = Some(if self.state == State::Start {
                Fatal::Empty
            } else {
                Fatal::NoEvents
            });
        }
        if !self.batch.elements.is_empty() {
            let last = self.next_batch();
            self.ready.push(last);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_all(doc: &[u8], chunk: usize) -> (Vec<(Vec<u8>, u8)>, Outline) {
        let mut s = Scanner::new(16);
        for piece in doc.chunks(chunk.max(1)) {
            s.feed(piece);
        }
        s.finish();
        let mut out = Vec::new();
        for batch in s.take_batches() {
            for e in batch.elements {
                out.push((batch.data[e.start..e.end].to_vec(), e.flags));
            }
        }
        (out, s.outline)
    }

    #[test]
    fn splits_every_chunking_the_same() {
        let doc = br#"{"a": {"x": [1, "]"]}, "traceEvents": [ {"ph": "X", "name": "k}\"" }, 5 , {"b": [{}]} ,
            {"c": 1} {"d": 2}, "s", null ], "deviceProperties": [{"id": 0}] , "n": 12}"#;
        let (reference, outline) = scan_all(doc, doc.len());
        for chunk in 1..doc.len() {
            let (got, o) = scan_all(doc, chunk);
            assert_eq!(got, reference, "chunk {chunk}");
            assert_eq!(o.members, outline.members);
        }
        let texts: Vec<&[u8]> = reference.iter().map(|(t, _)| t.as_slice()).collect();
        assert_eq!(texts[0], br#"{"ph": "X", "name": "k}\"" }"#);
        assert_eq!(reference[1].1, flag::NOT_OBJECT);
        assert_eq!(reference[2].1, 0);
        assert_eq!(reference[3].1, flag::JUNK);
        assert_eq!(reference[4].1, flag::NOT_OBJECT);
        assert_eq!(reference.len(), 6);
        assert!(outline.closed && outline.document_closed);
        let keys: Vec<&[u8]> = outline.members.iter().map(|(k, _)| k.as_slice()).collect();
        assert_eq!(keys, vec![&b"a"[..], b"deviceProperties", b"n"]);
        assert_eq!(outline.members[2].1, b"12");
    }

    #[test]
    fn bom_bare_list_and_truncation() {
        let (got, o) = scan_all(b"\xEF\xBB\xBF[{\"a\":1},{\"b\":2}", 1);
        assert_eq!(got.len(), 2);
        assert!(o.bare_list && !o.closed);
        assert_eq!(o.salvaged_up_to, 3 + 16);
        let (got, o) = scan_all(b"[{\"a\":1},{\"b\":", 4);
        assert_eq!(got.len(), 1);
        assert_eq!(o.salvaged_up_to, 8);
    }

    #[test]
    fn too_deep_and_fatal() {
        let deep = format!("[{}{}]", "[".repeat(70), "]".repeat(70));
        let doc = format!("{{\"traceEvents\": [{{\"a\": {deep}}}, {{\"ok\": 1}}]}}");
        let (got, _) = scan_all(doc.as_bytes(), 7);
        assert_eq!(got[0].1, flag::TOO_DEEP);
        assert_eq!(got[1].1, 0);
        let (_, o) = scan_all(b"   ", 2);
        assert_eq!(o.fatal, Some(Fatal::Empty));
        let (_, o) = scan_all(b"{\"a\": 1}", 2);
        assert_eq!(o.fatal, Some(Fatal::NoEvents));
        let (_, o) = scan_all(b"hello", 2);
        assert_eq!(o.fatal, Some(Fatal::NotJson(vec![b'h'])));
        let (_, o) = scan_all(b"{\"traceEvents\": []} x", 2);
        assert_eq!(o.trailing_data_at, Some(20));
    }
}
