//! Output capture: a pipe drained into a file in fixed-size reads, with a byte cap.
//!
//! The supervisor's memory stays flat whatever the leaf writes: one buffer, reused,
//! and nothing kept after it is written. Past the cap, bytes are read and counted
//! but dropped, so the leaf never blocks on a full pipe while it is being killed.

use std::fs::File;
use std::fs::OpenOptions;
use std::io;
use std::io::ErrorKind;
use std::io::Read;
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::path::PathBuf;

/// The size of the one read buffer the supervisor uses for all output.
pub(super) const BUFFER_BYTES: usize = 64 * 1024;

/// At most this many reads per stream per wake-up, so one flooding stream cannot
/// starve the other, the timers or the wake-ups.
const READS_PER_WAKE: usize = 16;

/// The line appended to an output file cut at `cap` bytes.
pub(crate) fn cut_marker(cap: u64) -> String {
    format!("[tdd-supervisor] output cut at {cap} bytes; the leaf was killed (output_limit)\n")
}

/// One captured stream.
pub(super) struct Stream {
    reader: Option<io::PipeReader>,
    file: File,
    path: PathBuf,
    cap: Option<u64>,
    /// Bytes read from the pipe, including those dropped past the cap.
    pub seen: u64,
    /// Bytes stored in the file (never more than the cap).
    stored: u64,
    /// True once bytes were dropped; the marker is then written by `finish`.
    pub cut: bool,
    ends_with_newline: bool,
    /// Set after the first failed write; later writes are skipped.
    write_failed: bool,
}

/// What one drain found.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Drained {
    pub bytes: u64,
    /// True when this drain pushed the stream past its cap.
    pub newly_cut: bool,
}

impl Stream {
    /// Creates (truncating) the output file for a pipe whose reader is non-blocking.
    pub fn new(reader: io::PipeReader, path: &Path, cap: Option<u64>) -> io::Result<Stream> {
        // O_NOCTTY: should the output be a terminal, the supervisor (a session
        // leader without one) must not acquire it as its controlling terminal.
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_NOCTTY)
            .open(path)?;
        Ok(Stream {
            reader: Some(reader),
            file,
            path: path.to_path_buf(),
            cap,
            seen: 0,
            stored: 0,
            cut: false,
            ends_with_newline: true,
            write_failed: false,
        })
    }

    /// The pipe, while it is open.
    pub fn fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.reader.as_ref().map(|reader| reader.as_fd())
    }

    /// True once the pipe reached end-of-file (every writer closed it).
    pub fn is_closed(&self) -> bool {
        self.reader.is_none()
    }

    /// Reads what the pipe holds now, up to a bounded number of reads.
    pub fn drain(&mut self, buffer: &mut [u8]) -> Drained {
        let mut drained = Drained::default();
        for _ in 0..READS_PER_WAKE {
            let Some(reader) = self.reader.as_mut() else {
                break;
            };
            match reader.read(buffer) {
                Ok(0) => self.reader = None,
                Ok(n) => {
                    drained.bytes += n as u64;
                    drained.newly_cut |= self.store(&buffer[..n]);
                }
                Err(error) if error.kind() == ErrorKind::Interrupted => continue,
                Err(error) if error.kind() == ErrorKind::WouldBlock => break,
                Err(error) => {
                    super::supervise::log(format_args!("reading output failed: {error}"));
                    self.reader = None;
                }
            }
        }
        drained
    }

    /// Stores bytes up to the cap. Returns true when these bytes crossed it.
    fn store(&mut self, data: &[u8]) -> bool {
        self.seen += data.len() as u64;
        if self.cut {
            return false;
        }
        let room = self.cap.map_or(u64::MAX, |cap| cap - self.stored);
        let keep = usize::try_from(room).map_or(data.len(), |room| room.min(data.len()));
        self.write(&data[..keep]);
        if keep < data.len() {
            self.cut = true;
            return true;
        }
        false
    }

    fn write(&mut self, data: &[u8]) {
        if data.is_empty() || self.write_failed {
            return;
        }
        match self.file.write_all(data) {
            Ok(()) => {
                self.stored += data.len() as u64;
                self.ends_with_newline = data.last() == Some(&b'\n');
            }
            Err(error) => {
                self.write_failed = true;
                let path = self.path.display();
                super::supervise::log(format_args!("writing {path} failed: {error}"));
            }
        }
    }

    /// Appends the cut marker, on a line of its own, if bytes were dropped.
    pub fn finish(&mut self) {
        if let (true, Some(cap)) = (self.cut, self.cap) {
            let mut marker = String::new();
            if !self.ends_with_newline {
                marker.push('\n');
            }
            marker.push_str(&cut_marker(cap));
            if !self.write_failed
                && let Err(error) = self.file.write_all(marker.as_bytes())
            {
                super::supervise::log(format_args!("writing the cut marker failed: {error}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(cap: Option<u64>) -> (tempfile::TempDir, Stream, io::PipeWriter) {
        let dir = tempfile::tempdir().expect("temp dir");
        let (reader, writer) = io::pipe().expect("pipe");
        let stream = Stream::new(reader, &dir.path().join("out.log"), cap).expect("creates");
        (dir, stream, writer)
    }

    #[test]
    fn the_cap_cuts_and_marks_on_a_line_of_its_own() {
        let (dir, mut stream, _writer) = stream(Some(10));
        assert!(!stream.store(b"0123456789"), "exactly the cap is not cut");
        assert!(stream.store(b"x"));
        assert!(!stream.store(b"more"), "only the first crossing reports");
        stream.finish();
        let text = std::fs::read_to_string(dir.path().join("out.log")).expect("reads");
        assert_eq!(text, format!("0123456789\n{}", cut_marker(10)));
        assert_eq!(stream.seen, 15);
    }

    #[test]
    fn uncapped_streams_keep_everything() {
        let (dir, mut stream, mut writer) = stream(None);
        writer.write_all(b"hello\n").expect("writes");
        drop(writer);
        let mut buffer = vec![0u8; BUFFER_BYTES];
        let drained = stream.drain(&mut buffer);
        assert_eq!(drained.bytes, 6);
        assert!(stream.is_closed(), "end-of-file closes the stream");
        stream.finish();
        let text = std::fs::read_to_string(dir.path().join("out.log")).expect("reads");
        assert_eq!(text, "hello\n");
    }
}
