//! Fuzz the batch splitter and the decoder together: the input, fed in chunks whose size the first byte
//! picks, goes through the scanner, and every batch it hands out is decoded. Nothing may panic, and the
//! same input fed in one piece must give the same elements. The hand-written event parser must agree with
//! serde on every element it accepts (and on the input as one element).
//!
//!     cd native/fuzz && cargo fuzz run scan_decode -- -max_total_time=60
#![no_main]

use libfuzzer_sys::fuzz_target;
use opscope_ingest::decode::decode_batch;
use opscope_ingest::event::{parse_event, RawEvent};
use opscope_ingest::fast::parse_event_fast;
use opscope_ingest::scan::Scanner;

/// When the fast parser accepts `bytes`, serde accepts them too and gives the same fields.
fn fast_agrees(bytes: &[u8]) {
    let Ok(text) = std::str::from_utf8(bytes) else { return };
    let mut ev = RawEvent::default();
    if parse_event_fast(text, &mut ev) {
        assert_eq!(Some(ev), parse_event(text).ok(), "{text}");
    }
}

fn elements(data: &[u8], chunk: usize) -> Vec<(Vec<u8>, u8)> {
    let mut scanner = Scanner::new(256);
    for piece in data.chunks(chunk.max(1)) {
        scanner.feed(piece);
    }
    scanner.finish();
    let mut out = Vec::new();
    for batch in scanner.take_batches() {
        let _ = decode_batch(&batch);
        for e in &batch.elements {
            fast_agrees(&batch.data[e.start..e.end]);
            out.push((batch.data[e.start..e.end].to_vec(), e.flags));
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    fast_agrees(data);
    let Some((&first, rest)) = data.split_first() else { return };
    let chunked = elements(rest, usize::from(first % 64) + 1);
    let whole = elements(rest, rest.len());
    assert_eq!(chunked, whole);
});
