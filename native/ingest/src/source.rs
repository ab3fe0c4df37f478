//! Byte sources: a file, plain or gzip (told apart by the magic bytes), read in chunks of decompressed bytes.
//!
//! Gzip is decoded member by member (a multi-member file is the concatenation of its members, as `gzip -d`
//! reads it), with flate2 on the zlib-rs backend. Nothing already decompressed is ever dropped: a stream cut
//! off mid-write, a damaged member, a checksum that does not match or bytes after the last member end the
//! reading with everything decoded so far delivered, and the problem recorded in `GzipProblem`.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use flate2::bufread::GzDecoder;

pub const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// What went wrong with a gzip file (all of it decoded up to the problem is delivered).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GzipProblem {
    /// the file ends inside a member
    Truncated,
    /// the compressed data is invalid
    Corrupt,
    /// a member's CRC-32 or length trailer does not match its data
    BadChecksum,
    /// bytes after the last member that are not another member
    TrailingJunk,
}

/// Reads a file's (decompressed) content and calls `sink` with each chunk; returns what went wrong with
/// the gzip stream, if anything. `sink` returns false to stop early.
/// `position` counts the bytes of the file read so far (for progress reports).
pub fn read_chunks(
    path: &Path,
    chunk_bytes: usize,
    position: Arc<AtomicU64>,
    sink: &mut dyn FnMut(&[u8]) -> bool,
) -> io::Result<(bool, Option<GzipProblem>)> {
    let file = Counting {
        inner: File::open(path)?,
        position,
    };
    let mut input = BufReader::with_capacity(1 << 20, file);
    let head = input.fill_buf()?;
    if !head.starts_with(&GZIP_MAGIC) {
        let mut buf = vec![0u8; chunk_bytes];
        loop {
            let (n, err) = read_full(&mut input, &mut buf);
            if n > 0 && !sink(&buf[..n]) {
                return Ok((false, None));
            }
            if let Some(err) = err {
                return Err(err);
            }
            if n == 0 {
                return Ok((false, None));
            }
        }
    }
    let mut buf = vec![0u8; chunk_bytes];
    loop {
        // One member.
        let mut decoder = GzDecoder::new(&mut input);
        let problem = loop {
            let (n, err) = read_full(&mut decoder, &mut buf);
            if n > 0 && !sink(&buf[..n]) {
                return Ok((true, None));
            }
            if let Some(err) = err {
                break Some(classify(&err));
            }
            if n == 0 {
                break None;
            }
        };
        if let Some(problem) = problem {
            return Ok((true, Some(problem)));
        }
        // After a member: the end of the file, another member, or junk.
        let rest = input.fill_buf()?;
        if rest.is_empty() {
            return Ok((true, None));
        }
        if !rest.starts_with(&GZIP_MAGIC[..rest.len().min(2)]) || rest.len() < 2 {
            return Ok((true, Some(GzipProblem::TrailingJunk)));
        }
    }
}

/// Fill `buf` as far as the reader allows: the bytes read, and the error that stopped it, if any (the
/// bytes decoded before an error are never lost).
fn read_full(reader: &mut dyn Read, buf: &mut [u8]) -> (usize, Option<io::Error>) {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return (filled, Some(err)),
        }
    }
    (filled, None)
}

/// A reader that counts what passes through it.
struct Counting<R> {
    inner: R,
    position: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.position.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

fn classify(err: &io::Error) -> GzipProblem {
    let text = err.to_string();
    if err.kind() == io::ErrorKind::UnexpectedEof {
        GzipProblem::Truncated
    } else if text.contains("checksum") || text.contains("length") {
        GzipProblem::BadChecksum
    } else {
        GzipProblem::Corrupt
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::GzEncoder;
    use flate2::Compression;
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut enc = GzEncoder::new(Vec::new(), Compression::default());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    fn read_all(bytes: &[u8]) -> (Vec<u8>, Option<GzipProblem>) {
        let dir = std::env::temp_dir().join(format!(
            "opscope-src-{}-{}",
            std::process::id(),
            bytes.len()
        ));
        std::fs::write(&dir, bytes).unwrap();
        let mut out = Vec::new();
        let (_, problem) = read_chunks(&dir, 1000, Arc::default(), &mut |c| {
            out.extend_from_slice(c);
            true
        })
        .unwrap();
        std::fs::remove_file(&dir).ok();
        (out, problem)
    }

    #[test]
    fn members_truncation_and_junk() {
        let a: Vec<u8> = (0..50_000u32)
            .flat_map(|i| format!("{i},").into_bytes())
            .collect();
        let mut two = gz(&a);
        two.extend(gz(b"tail"));
        let (out, problem) = read_all(&two);
        assert_eq!(problem, None);
        assert_eq!(out.len(), a.len() + 4);
        let one = gz(&a);
        let (out, problem) = read_all(&one[..one.len() - 20]);
        assert_eq!(problem, Some(GzipProblem::Truncated));
        assert!(out.len() > a.len() - 2000 && out.len() <= a.len());
        assert_eq!(&out[..], &a[..out.len()]);
        let mut junk = one.clone();
        junk.extend_from_slice(b"junk");
        let (out, problem) = read_all(&junk);
        assert_eq!(
            (out.len(), problem),
            (a.len(), Some(GzipProblem::TrailingJunk))
        );
        let mut bad = one.clone();
        let n = bad.len();
        bad[n - 6] ^= 0xff; // CRC
        let (out, problem) = read_all(&bad);
        assert_eq!(
            (out.len(), problem),
            (a.len(), Some(GzipProblem::BadChecksum))
        );
    }
}
