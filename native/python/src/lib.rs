//! `opscope._native`: the Python face of the ingest core. A thin layer: open a reader, hand record batches
//! to pyarrow through the Arrow C interfaces (no copy), and give the final report as plain Python data.
//!
//! Waiting for the next batch releases the GIL, so Python can write the cache while Rust threads decode.
//! No panic crosses into Python: every call runs under `catch_unwind`, and a panic becomes a RuntimeError.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

mod sink;

use arrow_pyarrow::ToPyArrow;
use opscope_ingest::{schema, Fatal, GzipProblem, KinetoReader, Options, Report};
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyStopIteration};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

fn panic_to_err<T>(result: std::thread::Result<PyResult<T>>) -> PyResult<T> {
    result.unwrap_or_else(|_| {
        Err(PyRuntimeError::new_err(
            "internal error in the native reader (panic)",
        ))
    })
}

/// Reads one Kineto / Chrome-trace JSON file (plain or gzip): iterate for `pyarrow.RecordBatch`es, then
/// call `finish()` for the report (metadata members, counts, gzip problems, structure).
#[pyclass(module = "opscope._native")]
struct Reader {
    inner: Option<KinetoReader>,
    report: Option<Report>,
}

#[pymethods]
impl Reader {
    #[new]
    #[pyo3(signature = (path, batch_bytes = None, workers = None))]
    fn new(path: PathBuf, batch_bytes: Option<usize>, workers: Option<usize>) -> PyResult<Self> {
        let mut options = Options::default();
        if let Some(b) = batch_bytes {
            options.batch_bytes = b.max(1);
        }
        if let Some(w) = workers {
            options.workers = w.max(1);
        }
        let reader = panic_to_err(catch_unwind(|| {
            KinetoReader::open(path, options).map_err(|e| match e {
                opscope_ingest::ReadError::Open(io) => PyOSError::new_err(io.to_string()),
                other => PyRuntimeError::new_err(other.to_string()),
            })
        }))?;
        Ok(Reader {
            inner: Some(reader),
            report: None,
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let Some(reader) = self.inner.as_mut() else {
            return Err(PyStopIteration::new_err(()));
        };
        let next = py.detach(|| catch_unwind(AssertUnwindSafe(|| reader.next_batch())));
        match next {
            Ok(Some(batch)) => batch.to_pyarrow(py),
            Ok(None) => Err(PyStopIteration::new_err(())),
            Err(_) => Err(PyRuntimeError::new_err(
                "internal error in the native reader (panic)",
            )),
        }
    }

    /// Bytes of the file read so far (compressed bytes for gzip), for progress reports.
    fn position(&self) -> u64 {
        self.inner.as_ref().map_or(0, KinetoReader::position)
    }

    /// The report, once every batch has been taken (remaining batches are read and dropped).
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        if self.report.is_none() {
            let Some(reader) = self.inner.take() else {
                return Err(PyRuntimeError::new_err("the reader was already finished"));
            };
            let report = py.detach(|| catch_unwind(AssertUnwindSafe(|| reader.finish())));
            match report {
                Ok(Ok(report)) => self.report = Some(report),
                Ok(Err(e)) => return Err(PyRuntimeError::new_err(e.to_string())),
                Err(_) => {
                    return Err(PyRuntimeError::new_err(
                        "internal error in the native reader (panic)",
                    ))
                }
            }
        }
        let report = self.report.as_ref().expect("set above");
        report_dict(py, report)
    }
}

fn report_dict<'py>(py: Python<'py>, report: &Report) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let o = &report.outline;
    d.set_item("bare_list", o.bare_list)?;
    d.set_item("events_found", o.events_found)?;
    d.set_item("closed", o.closed)?;
    d.set_item("document_closed", o.document_closed)?;
    d.set_item("bytes_total", o.bytes_total)?;
    d.set_item("salvaged_up_to", o.salvaged_up_to)?;
    let members = PyList::empty(py);
    for (k, v) in &o.members {
        members.append(PyTuple::new(
            py,
            [PyBytes::new(py, k), PyBytes::new(py, v)],
        )?)?;
    }
    d.set_item("members", members)?;
    d.set_item("skipped_meta_values", o.skipped_meta_values)?;
    d.set_item("skipped_deep_meta_values", o.skipped_deep_meta_values)?;
    d.set_item("trailing_data_at", o.trailing_data_at)?;
    d.set_item("malformed_after_events_at", o.malformed_after_events_at)?;
    let fatal: Option<Bound<'py, PyTuple>> = match &o.fatal {
        None => None,
        Some(Fatal::Empty) => Some(PyTuple::new(py, ["empty".into_pyobject(py)?.into_any()])?),
        Some(Fatal::NoEvents) => Some(PyTuple::new(
            py,
            ["no_events".into_pyobject(py)?.into_any()],
        )?),
        Some(Fatal::NotJson(b)) => Some(PyTuple::new(
            py,
            [
                "not_json".into_pyobject(py)?.into_any(),
                PyBytes::new(py, b).into_any(),
            ],
        )?),
        Some(Fatal::Malformed(at)) => Some(PyTuple::new(
            py,
            [
                "malformed".into_pyobject(py)?.into_any(),
                at.into_pyobject(py)?.into_any(),
            ],
        )?),
    };
    d.set_item("fatal", fatal)?;
    d.set_item("gzip", report.gzip)?;
    d.set_item(
        "gzip_problem",
        report.gzip_problem.map(|p| match p {
            GzipProblem::Truncated => "truncated",
            GzipProblem::Corrupt => "corrupt",
            GzipProblem::BadChecksum => "bad_checksum",
            GzipProblem::TrailingJunk => "trailing_junk",
        }),
    )?;
    let s = &report.stats;
    let stats = PyDict::new(py);
    for (k, v) in [
        ("events", s.events),
        ("not_objects", s.not_objects),
        ("too_deep", s.too_deep),
        ("too_large", s.too_large),
        ("malformed", s.malformed),
        ("bad_utf8", s.bad_utf8),
        ("wrong_type", s.wrong_type),
        ("out_of_range", s.out_of_range),
        ("negative_durations", s.negative_durations),
    ] {
        stats.set_item(k, v)?;
    }
    d.set_item("stats", stats)?;
    Ok(d)
}

/// The schema the native reader writes: (name, type) pairs, types as "text", "i64", "i32", "f32", "f64".
#[pyfunction]
fn columns() -> Vec<(&'static str, &'static str)> {
    schema::COLUMNS
        .iter()
        .map(|(n, t)| {
            let t = match t {
                schema::ColType::Text => "text",
                schema::ColType::I64 => "i64",
                schema::ColType::I32 => "i32",
                schema::ColType::F32 => "f32",
                schema::ColType::F64 => "f64",
            };
            (*n, t)
        })
        .collect()
}

/// Kinds, in code order, and the raw category -> kind map the native reader uses.
#[pyfunction]
fn kinds() -> (Vec<&'static str>, Vec<(&'static str, &'static str)>) {
    (schema::KINDS.to_vec(), schema::CATEGORY_KINDS.to_vec())
}

/// The `args` keys the decoder reads, in its order (checked against `opscope/model/args.py`).
#[pyfunction]
fn arg_keys() -> Vec<&'static str> {
    opscope_ingest::event::ARG_KEYS.to_vec()
}

/// The limits the scanner applies: (deepest nesting, largest event, largest metadata value).
#[pyfunction]
fn limits() -> (u32, usize, usize) {
    (
        opscope_ingest::scan::MAX_DEPTH,
        opscope_ingest::scan::MAX_EVENT_BYTES,
        opscope_ingest::scan::MAX_META_BYTES,
    )
}

/// CRC-32 (the zlib / gzip polynomial, equal to `zlib.crc32`) of a whole file, with the GIL released: the
/// cache's integrity check. Files over 16 MiB are cut into one range per core (at most 4), each read and
/// hashed by its own thread, and the CRCs combined in order (`crc32fast::Hasher::combine`): a warm run's
/// check of a 148 MB cache took 23-35 ms on one thread.
#[pyfunction]
fn file_crc32(py: Python<'_>, path: PathBuf) -> PyResult<u32> {
    py.detach(|| {
        let size = std::fs::metadata(&path)?.len();
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(4) as u64;
        let parts = if size > 16 << 20 { threads } else { 1 };
        let step = size.div_ceil(parts.max(1));
        let hashers = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..parts)
                .map(|k| {
                    let path = &path;
                    scope.spawn(move || crc_range(path, k * step, ((k + 1) * step).min(size)))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(std::io::Error::other("CRC thread panicked")))
                })
                .collect::<std::io::Result<Vec<_>>>()
        })?;
        let mut total = crc32fast::Hasher::new();
        for hasher in hashers {
            total.combine(&hasher);
        }
        Ok(total.finalize())
    })
    .map_err(|e: std::io::Error| PyOSError::new_err(e.to_string()))
}

/// The CRC state of bytes `start..end` of the file (a file that shrinks meanwhile is an error).
fn crc_range(path: &std::path::Path, start: u64, end: u64) -> std::io::Result<crc32fast::Hasher> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path)?;
    file.seek(SeekFrom::Start(start))?;
    let mut hasher = crc32fast::Hasher::new();
    let mut left = end.saturating_sub(start);
    let mut buf = vec![0u8; (8 << 20).min(left as usize)];
    while left > 0 {
        let want = buf.len().min(left as usize);
        let n = file.read(&mut buf[..want])?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the file shrank while read",
            ));
        }
        hasher.update(&buf[..n]);
        left -= n as u64;
    }
    Ok(hasher)
}

/// Itanium C++ demangling of kernel names (`_ZN7ck_tile6kentry...` -> `void ck_tile::kentry<...>(...)`) with the
/// `cpp_demangle` crate, one result per input: None where a name is not a mangled symbol, or does not parse.
/// Names that do not start with `_Z` are not tried. Runs with the GIL released; a panic inside the demangler
/// (never seen, but input is untrusted) gives None for that name.
#[pyfunction]
fn demangle(py: Python<'_>, names: Vec<String>) -> Vec<Option<String>> {
    py.detach(|| {
        names
            .iter()
            .map(|name| {
                if !name.starts_with("_Z") {
                    return None;
                }
                std::panic::catch_unwind(|| {
                    let symbol = cpp_demangle::Symbol::new(name.as_bytes()).ok()?;
                    symbol
                        .demangle_with_options(&cpp_demangle::DemangleOptions::default())
                        .ok()
                })
                .ok()
                .flatten()
            })
            .collect()
    })
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(file_crc32, m)?)?;
    m.add_class::<Reader>()?;
    m.add_class::<sink::ParquetSink>()?;
    m.add_function(wrap_pyfunction!(columns, m)?)?;
    m.add_function(wrap_pyfunction!(kinds, m)?)?;
    m.add_function(wrap_pyfunction!(arg_keys, m)?)?;
    m.add_function(wrap_pyfunction!(limits, m)?)?;
    m.add_function(wrap_pyfunction!(demangle, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
