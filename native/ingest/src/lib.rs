//! opscope's native ingest core: Kineto / Chrome-trace JSON (plain or gzip) to Arrow record batches.
//!
//! It only reads and decodes; every analysis lives in Python. The pipeline:
//! one thread decompresses (`source`) and cuts the stream into batches of whole events (`scan`), worker
//! threads turn batches into record batches (`decode`), and the consumer (`KinetoReader::next_batch`)
//! receives them in file order. Channels are bounded, so memory stays bounded whatever the input.

pub mod decode;
pub mod dict;
pub mod event;
pub mod fast;
pub mod number;
pub mod scan;
pub mod schema;
pub mod skip;
pub mod source;
pub mod sparse;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use arrow_array::RecordBatch;
use crossbeam_channel::{bounded, Receiver};

pub use decode::Stats;
pub use scan::{Fatal, Outline};
pub use source::GzipProblem;

/// Decoded batches that may wait for the consumer: enough to keep the threads busy while Python imports
/// before asking for the first one (`ingest/headstart.py`: ~0.3 s, ~20 batches of 4 MB on one core), at
/// ~2.5 MB of Arrow memory each.
const RESULTS_AHEAD: usize = 24;

/// Reading options.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// bytes of event text per batch
    pub batch_bytes: usize,
    /// decoding threads
    pub workers: usize,
    /// decompressed bytes per read
    pub chunk_bytes: usize,
}

impl Default for Options {
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Options {
            batch_bytes: 4 << 20,
            workers: cpus.clamp(1, 8),
            chunk_bytes: 4 << 20,
        }
    }
}

/// Everything known once the whole file has been read.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub outline: Outline,
    pub stats: Stats,
    pub gzip: bool,
    pub gzip_problem: Option<GzipProblem>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot open: {0}")]
    Open(std::io::Error),
    #[error("read error: {0}")]
    Io(std::io::Error),
    #[error("internal error while decoding: {0}")]
    Internal(String),
}

type Decoded = Result<(RecordBatch, Stats), String>;
/// What the reading thread returns: the outline, whether the file was gzip, and its problem.
type SplitOutcome = Result<(Outline, bool, Option<GzipProblem>), ReadError>;

/// A trace being read: batches come out in file order, then `finish` gives the report.
pub struct KinetoReader {
    results: Receiver<(u64, Decoded)>,
    pending: BTreeMap<u64, Decoded>,
    next: u64,
    stats: Stats,
    splitter: Option<JoinHandle<SplitOutcome>>,
    workers: Vec<JoinHandle<()>>,
    error: Option<ReadError>,
    position: Arc<AtomicU64>,
}

impl KinetoReader {
    pub fn open(path: PathBuf, options: Options) -> Result<Self, ReadError> {
        // Fail early and clearly when the file cannot be opened.
        std::fs::File::open(&path).map_err(ReadError::Open)?;
        let workers = options.workers.max(1);
        let (work_tx, work_rx) = bounded::<(u64, scan::Batch)>(workers * 2);
        let (out_tx, out_rx) = bounded::<(u64, Decoded)>(RESULTS_AHEAD.max(workers * 2));
        // decoded batches go back to the scanner for reuse (never blocking: a full channel drops them)
        let (spare_tx, spare_rx) = bounded::<scan::Batch>(workers * 2);
        let mut handles = Vec::with_capacity(workers);
        for _ in 0..workers {
            let rx = work_rx.clone();
            let tx = out_tx.clone();
            let spare = spare_tx.clone();
            handles.push(std::thread::spawn(move || {
                for (seq, batch) in rx.iter() {
                    let result = std::panic::catch_unwind(|| decode::decode_batch(&batch))
                        .map_err(|_| "a decoder thread panicked".to_string())
                        .and_then(|r| r.map_err(|e| e.to_string()));
                    let _ = spare.try_send(batch);
                    if tx.send((seq, result)).is_err() {
                        return;
                    }
                }
            }));
        }
        drop(spare_tx);
        drop(out_tx);
        let position = Arc::new(AtomicU64::new(0));
        let counter = position.clone();
        let splitter = std::thread::spawn(move || -> SplitOutcome {
            let mut scanner = scan::Scanner::new(options.batch_bytes);
            let mut seq = 0u64;
            let send_ready = |scanner: &mut scan::Scanner, seq: &mut u64| -> bool {
                for batch in scanner.take_batches() {
                    if work_tx.send((*seq, batch)).is_err() {
                        return false;
                    }
                    *seq += 1;
                }
                true
            };
            let (gzip, problem) =
                source::read_chunks(&path, options.chunk_bytes, counter, &mut |chunk| {
                    while let Ok(batch) = spare_rx.try_recv() {
                        scanner.recycle(batch);
                    }
                    scanner.feed(chunk);
                    send_ready(&mut scanner, &mut seq) && !scanner.done()
                })
                .map_err(ReadError::Io)?;
            scanner.finish();
            send_ready(&mut scanner, &mut seq);
            Ok((scanner.outline, gzip, problem))
        });
        Ok(KinetoReader {
            results: out_rx,
            pending: BTreeMap::new(),
            next: 0,
            stats: Stats::default(),
            splitter: Some(splitter),
            workers: handles,
            error: None,
            position,
        })
    }

    /// Bytes of the file on disk read so far (compressed bytes for gzip; read-ahead included).
    pub fn position(&self) -> u64 {
        self.position.load(Ordering::Relaxed)
    }

    /// The next record batch in file order; None at the end (or after an error, kept for `finish`).
    pub fn next_batch(&mut self) -> Option<RecordBatch> {
        loop {
            if let Some(result) = self.pending.remove(&self.next) {
                self.next += 1;
                match result {
                    Ok((batch, stats)) => {
                        self.stats.add(&stats);
                        return Some(batch);
                    }
                    Err(e) => {
                        self.error.get_or_insert(ReadError::Internal(e));
                        continue;
                    }
                }
            }
            match self.results.recv() {
                Ok((seq, result)) => {
                    self.pending.insert(seq, result);
                }
                Err(_) => {
                    // Every worker is done: whatever is pending is out of order only if something failed.
                    if let Some((&seq, _)) = self.pending.iter().next() {
                        self.next = seq;
                        continue;
                    }
                    return None;
                }
            }
        }
    }

    /// Wait for the threads and return the report (call after `next_batch` returned None).
    pub fn finish(mut self) -> Result<Report, ReadError> {
        while self.next_batch().is_some() {}
        let outcome = match self.splitter.take() {
            Some(handle) => handle
                .join()
                .map_err(|_| ReadError::Internal("the reading thread panicked".into()))?,
            None => return Err(ReadError::Internal("finished twice".into())),
        };
        for handle in self.workers.drain(..) {
            let _ = handle.join();
        }
        if let Some(err) = self.error.take() {
            return Err(err);
        }
        let (outline, gzip, gzip_problem) = outcome?;
        Ok(Report {
            outline,
            stats: self.stats,
            gzip,
            gzip_problem,
        })
    }
}
