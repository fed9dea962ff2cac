//! Reading output while a leaf runs: the last bytes of a file, or a follower that
//! copies what was appended since its last call.
//!
//! Output files only grow while the leaf runs, so both work on any file at any time
//! without coordination with the supervisor.

use std::fs::File;
use std::io;
use std::io::Read;
use std::io::Seek;
use std::io::SeekFrom;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;

/// The last `max_bytes` bytes of `path` (possibly starting mid-line). A missing file
/// reads as empty.
pub fn tail_bytes(path: &Path, max_bytes: u64) -> io::Result<Vec<u8>> {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error),
    };
    let length = file.metadata()?.len();
    file.seek(SeekFrom::Start(length.saturating_sub(max_bytes)))?;
    let mut bytes = Vec::new();
    file.take(max_bytes).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Follows a growing file: each [`Follower::pump`] copies the bytes appended since
/// the previous one. Memory use is one fixed buffer, whatever the file size.
#[derive(Debug)]
pub struct Follower {
    path: PathBuf,
    file: Option<File>,
    offset: u64,
}

impl Follower {
    /// A follower that starts at the beginning of `path` (which need not exist yet).
    pub fn new(path: impl Into<PathBuf>) -> Follower {
        Follower {
            path: path.into(),
            file: None,
            offset: 0,
        }
    }

    /// The followed file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Copies everything appended since the last call into `sink`; returns how many
    /// bytes. A file that does not exist yet yields nothing; a file that shrank (it
    /// was recreated) is followed again from its start.
    pub fn pump(&mut self, sink: &mut dyn Write) -> io::Result<u64> {
        if self.file.is_none() {
            match File::open(&self.path) {
                Ok(file) => self.file = Some(file),
                Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(0),
                Err(error) => return Err(error),
            }
        }
        let Some(file) = self.file.as_mut() else {
            return Ok(0);
        };
        if file.metadata()?.len() < self.offset {
            self.offset = 0;
        }
        file.seek(SeekFrom::Start(self.offset))?;
        let mut buffer = [0u8; 16 * 1024];
        let mut copied = 0;
        loop {
            let n = file.read(&mut buffer)?;
            if n == 0 {
                break;
            }
            sink.write_all(&buffer[..n])?;
            copied += n as u64;
        }
        self.offset += copied;
        if copied > 0 {
            sink.flush()?;
        }
        Ok(copied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_returns_the_last_bytes_and_missing_is_empty() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("out.log");
        assert!(tail_bytes(&path, 10).expect("missing is fine").is_empty());
        std::fs::write(&path, b"0123456789abc").expect("writes");
        assert_eq!(tail_bytes(&path, 3).expect("reads"), b"abc");
        assert_eq!(tail_bytes(&path, 100).expect("reads"), b"0123456789abc");
    }

    #[test]
    fn follower_copies_only_what_was_appended() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("out.log");
        let mut follower = Follower::new(&path);
        let mut sink = Vec::new();
        assert_eq!(follower.pump(&mut sink).expect("missing is fine"), 0);
        let mut file = File::create(&path).expect("creates");
        file.write_all(b"one\n").expect("writes");
        assert_eq!(follower.pump(&mut sink).expect("reads"), 4);
        file.write_all(b"two\n").expect("writes");
        assert_eq!(follower.pump(&mut sink).expect("reads"), 4);
        assert_eq!(sink, b"one\ntwo\n");
    }
}
