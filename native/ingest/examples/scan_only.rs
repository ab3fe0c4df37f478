//! Times the scanner alone on a decompressed file held in memory, in this thread's CPU time:
//! `cargo run --release --example scan_only -- FILE.json[.gz]`
use std::sync::Arc;
use std::time::Instant;

use opscope_ingest::{scan, source};

fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

fn main() {
    let path = std::path::PathBuf::from(std::env::args().nth(1).expect("FILE"));
    let mut data = Vec::new();
    source::read_chunks(&path, 4 << 20, Arc::default(), &mut |c| {
        data.extend_from_slice(c);
        true
    })
    .unwrap();
    for round in 0..4 {
        let recycle = round % 2 == 1;
        let (cpu, wall) = (thread_cpu_ns(), Instant::now());
        let mut scanner = scan::Scanner::new(4 << 20);
        let mut elements = 0usize;
        for chunk in data.chunks(4 << 20) {
            scanner.feed(chunk);
            for batch in scanner.take_batches() {
                elements += batch.elements.len();
                if recycle {
                    scanner.recycle(batch);
                }
            }
        }
        scanner.finish();
        elements += scanner
            .take_batches()
            .iter()
            .map(|b| b.elements.len())
            .sum::<usize>();
        println!(
            "round {round} (recycle {recycle}): scan {:.3} s CPU ({:.3} s wall) for {:.0} MB, {elements} elements",
            (thread_cpu_ns() - cpu) as f64 / 1e9,
            wall.elapsed().as_secs_f64(),
            data.len() as f64 / 1e6
        );
    }
}
