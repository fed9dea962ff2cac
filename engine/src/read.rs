//! Reading a file the engine did not write (a repository's files, `.git`'s, its own
//! state that anyone with the user's rights can replace) without ever waiting on it.

use std::path::Path;

/// The bytes of the regular file at `path` (a link to one is followed), opened without
/// blocking: a named pipe, a device, a socket or a directory there is an
/// `InvalidData` error, never a wait or an endless read.
pub fn regular(path: &Path) -> std::io::Result<Vec<u8>> {
    regular_with_meta(path).map(|(bytes, _)| bytes)
}

/// The same, with the metadata of the one file opened and read (a rename over `path`
/// midway changes neither).
pub fn regular_with_meta(path: &Path) -> std::io::Result<(Vec<u8>, std::fs::Metadata)> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{} is not a regular file", path.display()),
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(meta.len()).read_to_end(&mut bytes)?;
    Ok((bytes, meta))
}

/// The same, as UTF-8 text (`InvalidData` when it is not).
pub fn regular_text(path: &Path) -> std::io::Result<String> {
    String::from_utf8(regular(path)?)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipe_or_a_directory_is_an_error_and_never_a_wait() {
        let dir = tempfile::tempdir().expect("dir");
        let pipe = dir.path().join("pipe");
        nix::unistd::mkfifo(&pipe, nix::sys::stat::Mode::from_bits_truncate(0o644)).expect("fifo");
        for path in [pipe.as_path(), dir.path()] {
            let err = regular(path).expect_err("not a regular file");
            assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "{path:?}");
        }
        let file = dir.path().join("file");
        std::fs::write(&file, "text").expect("write");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).expect("ln");
        assert_eq!(regular_text(&link).expect("read"), "text");
    }
}
