//! CPU time per event of the parse step alone (`event::parse_event`, serde_json) and of the whole decoder
//! (`decode::decode_batch`: parse, conversions, Arrow builders), over the elements of the first 40 batches
//! of FILE, in this thread's CPU time (not wall time: the machine may be shared).
//! `cargo run --release --example parsers -- FILE` (DECODE_ONLY=1: the decoder alone, for profiling).
//! The sonic-rs comparison of docs/ingest.md was this example at commit 582f48f.
use std::sync::Arc;

use opscope_ingest::{decode, event, scan, source};

fn thread_cpu_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").expect("Linux schedstat");
    s.split_whitespace()
        .next()
        .and_then(|t| t.parse().ok())
        .expect("schedstat run time")
}

fn main() {
    let path = std::path::PathBuf::from(std::env::args().nth(1).expect("FILE"));
    let mut scanner = scan::Scanner::new(4 << 20);
    let mut batches = Vec::new();
    source::read_chunks(&path, 4 << 20, Arc::default(), &mut |c| {
        scanner.feed(c);
        batches.extend(scanner.take_batches());
        batches.len() < 40
    })
    .unwrap();
    let texts: Vec<&str> = batches
        .iter()
        .flat_map(|b| {
            b.elements
                .iter()
                .filter(|e| e.flags == 0)
                .filter_map(|e| std::str::from_utf8(&b.data[e.start..e.end]).ok())
        })
        .collect();
    println!("{} elements", texts.len());
    let per_event = |ns: u64| ns as f64 / texts.len().max(1) as f64;
    for _ in 0..3 {
        if std::env::var("DECODE_ONLY").is_err() {
            let t = thread_cpu_ns();
            let parsed = texts
                .iter()
                .filter(|s| event::parse_event(s).is_ok())
                .count();
            let c = thread_cpu_ns() - t;
            println!(
                "parse_event  {:6.1} ns/event ({parsed} parsed)",
                per_event(c)
            );
        }
        let t = thread_cpu_ns();
        let rows: usize = batches
            .iter()
            .map(|b| decode::decode_batch(b).unwrap().0.num_rows())
            .sum();
        let c = thread_cpu_ns() - t;
        println!("decode_batch {:6.1} ns/event ({rows} rows)", per_event(c));
    }
}
