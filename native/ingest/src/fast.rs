//! A hand-written parser for the usual event: the same `RawEvent` that `event.rs`'s serde visitors give (they
//! were a third of the decoder's time), or nothing when the text is anything but plain.
//!
//! It walks the element once, validating every value by JSON's grammar as it goes (strings without control
//! characters, numbers, literals, nesting), keeps the fields the table reads as borrowed slices and skips
//! the rest. Whatever it is not sure of it hands back to serde: any backslash (escapes in keys or texts), a
//! text field or `args` of an unusual type, a syntax error (so that serde, not this parser, decides what is
//! malformed and how), nesting deeper than serde's own limit. Hence the contract, checked by property tests
//! and the fuzz target: when `parse_event_fast` returns true, serde accepts the same text and gives an equal
//! `RawEvent`.

use std::borrow::Cow;

use crate::event::{arg_of, Args, ArgsKind, RawEvent, Text, N_ARGS};

/// Deeper than this, serde's recursion limit (128) could be reached: leave it to serde.
const MAX_NESTING: u32 = 100;

/// Bytes that end the plain part of a string: the quote, a backslash, a control character.
const STRING_STOP: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = true;
        b += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Eight bytes from `at` (little-endian), when there are eight.
#[inline]
fn word(bytes: &[u8], at: usize) -> Option<u64> {
    let eight: [u8; 8] = bytes.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(eight))
}

/// The high bit of each byte of `x` that is zero, exact for the lowest one (bytes above a zero byte may be
/// flagged too, which never matters to a search for the first).
#[inline]
fn zero_bytes(x: u64) -> u64 {
    x.wrapping_sub(ONES) & !x & HIGH
}

/// The high bit of each byte of `x` that is not zero (exact).
#[inline]
fn nonzero_bytes(x: u64) -> u64 {
    (((x & !HIGH).wrapping_add(!HIGH)) | x) & HIGH
}

/// The high bit of each byte below 0x20, exact for the lowest one (as `zero_bytes`).
#[inline]
fn control_bytes(x: u64) -> u64 {
    x.wrapping_sub(ONES * 0x20) & !x & HIGH
}

struct Cursor<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    /// Skip whitespace: runs of spaces eight at a time (pretty-printed traces indent every line).
    #[inline]
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes.get(self.at) {
            self.at += 1;
            while let Some(w) = word(self.bytes, self.at) {
                let other = nonzero_bytes(w ^ (ONES * u64::from(b' ')));
                if other != 0 {
                    self.at += (other.trailing_zeros() / 8) as usize;
                    break;
                }
                self.at += 8;
            }
        }
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    #[inline]
    fn eat(&mut self, b: u8) -> Option<()> {
        (self.peek()? == b).then(|| self.at += 1)
    }

    /// A string without escapes (the cursor on its opening quote): its contents.
    #[inline]
    fn string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.at;
        let mut at = start;
        // eight bytes at a time up to the first quote, backslash or control character
        while let Some(w) = word(self.bytes, at) {
            let stop = zero_bytes(w ^ (ONES * u64::from(b'"')))
                | zero_bytes(w ^ (ONES * u64::from(b'\\')))
                | control_bytes(w);
            if stop != 0 {
                at += (stop.trailing_zeros() / 8) as usize;
                break;
            }
            at += 8;
        }
        while !STRING_STOP[*self.bytes.get(at)? as usize] {
            at += 1;
        }
        if self.bytes[at] != b'"' {
            return None;
        }
        self.at = at + 1;
        self.text.get(start..at)
    }

    #[inline]
    fn digits(&mut self) -> usize {
        let start = self.at;
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
        self.at - start
    }

    /// A number by JSON's grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.peek()? {
            b'0' => self.at += 1,
            b'1'..=b'9' => {
                self.digits();
            }
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            (self.digits() > 0).then_some(())?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            (self.digits() > 0).then_some(())?;
        }
        Some(())
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.bytes.get(self.at..end)? == word).then(|| self.at = end)
    }

    /// The members of an object or the items of an array, the cursor just past its opening bracket: `item`
    /// reads each (with its key, in an object), separated by commas, up to `close`; no trailing comma.
    #[inline]
    fn members(&mut self, close: u8, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.ws();
        if self.eat(close).is_some() {
            return Some(());
        }
        loop {
            item(self)?;
            self.ws();
            match self.peek()? {
                b',' => {
                    self.at += 1;
                    self.ws();
                }
                b if b == close => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// An object member's key and its colon; the cursor is left on the value.
    #[inline]
    fn key(&mut self) -> Option<&'a str> {
        let key = self.string()?;
        self.ws();
        self.eat(b':')?;
        self.ws();
        Some(key)
    }

    /// Skip one value (the cursor on its first byte), validating it.
    fn value(&mut self, depth: u32) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            open @ (b'{' | b'[') => {
                (depth < MAX_NESTING).then_some(())?;
                self.at += 1;
                if open == b'{' {
                    self.members(b'}', |c| {
                        c.key()?;
                        c.value(depth + 1)
                    })
                } else {
                    self.members(b']', |c| c.value(depth + 1))
                }
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number(),
        }
    }

    /// One value as its raw text (what serde's `RawValue` holds).
    #[inline]
    fn raw(&mut self, depth: u32) -> Option<&'a str> {
        let start = self.at;
        self.value(depth)?;
        self.text.get(start..self.at)
    }

    /// A text field: a plain string or null; anything else goes to serde.
    #[inline]
    fn text_field(&mut self) -> Option<Text<'a>> {
        match self.peek()? {
            b'"' => Some(Text::Str(Cow::Borrowed(self.string()?))),
            b'n' => self.literal(b"null").map(|()| Text::Null),
            _ => None,
        }
    }

    /// `args`: an object (the known keys' raw values into `args`) or null; anything else goes to serde.
    fn args(&mut self, args: &mut Args<'a>) -> Option<ArgsKind> {
        match self.peek()? {
            b'n' => return self.literal(b"null").map(|()| ArgsKind::Absent),
            b'{' => self.at += 1,
            _ => return None,
        }
        args.values = [None; N_ARGS];
        self.members(b'}', |c| {
            match arg_of(c.key()?) {
                Some(arg) => args.values[arg as usize] = Some(c.raw(2)?),
                None => c.value(2)?,
            }
            Some(())
        })?;
        Some(ArgsKind::Object)
    }

    fn event(&mut self, ev: &mut RawEvent<'a>) -> Option<()> {
        self.ws();
        self.eat(b'{')?;
        self.members(b'}', |c| {
            match c.key()? {
                "ph" => ev.ph = c.text_field()?,
                "cat" => ev.cat = c.text_field()?,
                "name" => ev.name = c.text_field()?,
                "pid" => ev.pid = Some(c.raw(1)?),
                "tid" => ev.tid = Some(c.raw(1)?),
                "ts" => ev.ts = Some(c.raw(1)?),
                "dur" => ev.dur = Some(c.raw(1)?),
                "id" => ev.id = Some(c.raw(1)?),
                "args" => ev.args.kind = c.args(&mut ev.args)?,
                _ => c.value(1)?,
            }
            Some(())
        })?;
        self.ws();
        (self.at == self.bytes.len()).then_some(())
    }
}

/// Parse one element into `ev` (which must be `RawEvent::default()`). True when done; false when the text is
/// not plain (see the module's comment): then `ev` holds partial fields, and the caller resets it and asks
/// serde.
pub fn parse_event_fast<'a>(text: &'a str, ev: &mut RawEvent<'a>) -> bool {
    let mut cursor = Cursor {
        text,
        bytes: text.as_bytes(),
        at: 0,
    };
    cursor.event(ev).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::parse_event;

    fn fast(text: &str) -> Option<RawEvent<'_>> {
        let mut ev = RawEvent::default();
        parse_event_fast(text, &mut ev).then_some(ev)
    }

    #[test]
    fn plain_events_are_parsed_as_serde_parses_them() {
        for text in [
            r#"{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1712192699123456.789,"dur":2.5,
               "args":{"stream":7,"device":0,"grid":[2,1,1],"block":[128,1,1],"correlation":99,"x":[{"y":1}]}}"#,
            "{}",
            " { \"ph\" : null , \"args\" : null } ",
            r#"{"args":{"a":1},"args":{"stream":3}}"#,
            r#"{"args":{"stream":1e5,"device":-0.5E-3,"Input Dims":[[],[1,2]],"t":true,"f":false,"n":null}}"#,
            r#"{"pid":"str","tid":-1,"ts":"12.5","id":{"a":[]}}"#,
        ] {
            let got = fast(text).unwrap_or_else(|| panic!("not plain: {text}"));
            assert_eq!(got, parse_event(text).unwrap(), "{text}");
        }
    }

    /// The word-at-a-time searches find the same first byte as a byte loop: every byte value at every
    /// position of a word of one filler byte.
    #[test]
    fn word_searches_find_the_first_byte() {
        let first = |w: [u8; 8], f: fn(u64) -> u64| {
            let m = f(u64::from_le_bytes(w));
            (m != 0).then(|| (m.trailing_zeros() / 8) as usize)
        };
        for fill in [b'5', b' ', b'a', 0xFF, 0x00, b'"', 0x1F, 0x20] {
            for at in 0..8 {
                for b in 0..=255u8 {
                    let mut w = [fill; 8];
                    w[at] = b;
                    let expect = |p: fn(u8) -> bool| w.iter().position(|&x| p(x));
                    assert_eq!(
                        first(w, |x| nonzero_bytes(x ^ (ONES * 0x20))),
                        expect(|x| x != b' ')
                    );
                    assert_eq!(first(w, control_bytes), expect(|x| x < 0x20), "{w:?}");
                    assert_eq!(
                        first(w, |x| zero_bytes(x ^ (ONES * 0x22))),
                        expect(|x| x == b'"')
                    );
                }
            }
        }
    }

    #[test]
    fn anything_unusual_goes_to_serde() {
        for text in [
            r#"{"name":"a\"b"}"#,
            r#"{"na\u006de":"x"}"#,
            r#"{"ph":1}"#,
            r#"{"args":[1]}"#,
            r#"{"a":01}"#,
            r#"{"a":1.}"#,
            r#"{"a":1e}"#,
            r#"{"a":-}"#,
            r#"{"a":tru}"#,
            r#"{"a":[1,]}"#,
            r#"{"a":1,}"#,
            r#"{"a":1} x"#,
            "{\"a\":\"\t\"}",
            r#"{"a" 1}"#,
            r#"{"a":{"b":1,}}"#,
            r#"{"a":1"#,
            "[]",
        ] {
            assert!(fast(text).is_none(), "{text}");
        }
    }
}
