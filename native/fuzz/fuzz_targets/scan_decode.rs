//! Fuzz the batch splitter and the decoder together: the input, fed in chunks whose size the first byte
//! picks, goes through the scanner, and every batch it hands out is decoded. Nothing may panic, and the
//! same input fed in one piece must give the same elements.
//!
//!     cd native/fuzz && cargo fuzz run scan_decode -- -max_total_time=60
#![no_main]

use libfuzzer_sys::fuzz_target;
use opscope_ingest::decode::decode_batch;
use opscope_ingest::scan::Scanner;

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
            out.push((batch.data[e.start..e.end].to_vec(), e.flags));
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else { return };
    let chunked = elements(rest, usize::from(first % 64) + 1);
    let whole = elements(rest, rest.len());
    assert_eq!(chunked, whole);
});
