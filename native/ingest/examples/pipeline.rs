//! The threaded reader alone, end to end, with its page faults and CPU time:
//! `perf stat cargo run --release --example pipeline -- FILE`
use std::time::Instant;

use opscope_ingest::{KinetoReader, Options};

fn main() {
    let path = std::path::PathBuf::from(std::env::args().nth(1).expect("FILE"));
    let t = Instant::now();
    let mut reader = KinetoReader::open(path, Options::default()).unwrap();
    let mut rows = 0usize;
    while let Some(batch) = reader.next_batch() {
        rows += batch.num_rows();
    }
    reader.finish().unwrap();
    println!(
        "pipeline {:.3} s wall, {rows} rows",
        t.elapsed().as_secs_f64()
    );
}
