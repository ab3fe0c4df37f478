//! Times each stage of the reader on one file: decompression alone, + scanning, + decoding (one thread),
//! and the whole threaded pipeline. `cargo run --release --example stages -- FILE`; `STAGES_ONLY=pipeline`
//! runs only the threaded reader (for `perf stat`), `STAGES_ONLY=decode` times decoding alone.
use std::sync::Arc;

use std::time::Instant;

use opscope_ingest::{decode, scan, source, KinetoReader, Options};

fn main() {
    let path = std::path::PathBuf::from(std::env::args().nth(1).expect("FILE"));
    if std::env::var("STAGES_ONLY").as_deref() == Ok("pipeline") {
        // The threaded reader alone, default options (for `perf stat`: its CPU time and page faults).
        pipeline(&path, Options::default());
        return;
    }
    if std::env::var("STAGES_ONLY").as_deref() == Ok("decode") {
        // Scan once, then time decoding alone (for profiling the decoder).
        let mut scanner = scan::Scanner::new(4 << 20);
        let mut batches = Vec::new();
        source::read_chunks(&path, 4 << 20, Arc::default(), &mut |c| {
            scanner.feed(c);
            batches.extend(scanner.take_batches());
            batches.len() < 60
        })
        .unwrap();
        let rounds: usize = std::env::var("STAGES_ROUNDS")
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(1);
        for _ in 0..rounds {
            let t = Instant::now();
            let rows: usize = batches
                .iter()
                .map(|b| decode::decode_batch(b).unwrap().0.num_rows())
                .sum();
            println!(
                "decode only     {:6.3} s  {} rows",
                t.elapsed().as_secs_f64(),
                rows
            );
        }
        return;
    }
    let t = Instant::now();
    let mut total = 0usize;
    source::read_chunks(&path, 4 << 20, Arc::default(), &mut |c| {
        total += c.len();
        true
    })
    .unwrap();
    println!(
        "decompress      {:6.3} s  {} MB",
        t.elapsed().as_secs_f64(),
        total >> 20
    );

    let t = Instant::now();
    let mut scanner = scan::Scanner::new(4 << 20);
    let mut elements = 0usize;
    source::read_chunks(&path, 4 << 20, Arc::default(), &mut |c| {
        scanner.feed(c);
        for b in scanner.take_batches() {
            elements += b.elements.len();
        }
        true
    })
    .unwrap();
    println!(
        "+ scan          {:6.3} s  {} elements",
        t.elapsed().as_secs_f64(),
        elements
    );

    let t = Instant::now();
    let mut scanner = scan::Scanner::new(4 << 20);
    let mut rows = 0usize;
    source::read_chunks(&path, 4 << 20, Arc::default(), &mut |c| {
        scanner.feed(c);
        for b in scanner.take_batches() {
            rows += decode::decode_batch(&b).unwrap().0.num_rows();
        }
        true
    })
    .unwrap();
    println!(
        "+ decode (1 th) {:6.3} s  {} rows",
        t.elapsed().as_secs_f64(),
        rows
    );

    for workers in [1, 2, 4] {
        pipeline(
            &path,
            Options {
                workers,
                ..Options::default()
            },
        );
    }
}

/// The threaded reader end to end with these options, timed.
fn pipeline(path: &std::path::Path, options: Options) {
    let t = Instant::now();
    let mut r = KinetoReader::open(path.to_path_buf(), options).unwrap();
    let mut rows = 0usize;
    while let Some(b) = r.next_batch() {
        rows += b.num_rows();
    }
    r.finish().unwrap();
    println!(
        "pipeline w={}    {:6.3} s  {} rows",
        options.workers,
        t.elapsed().as_secs_f64(),
        rows
    );
}
