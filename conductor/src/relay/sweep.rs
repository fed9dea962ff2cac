//! What a conductor that was killed left of its relay: a directory `tdd-relay-*` in the
//! temporary directory holding a socket nobody listens on any more (a relay removes its
//! own when it ends; a killed process cannot). The next relay sweeps them.

use std::io::ErrorKind;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::Path;

/// The name of the socket in a relay's directory.
pub(super) const SOCKET: &str = "engine.sock";

/// The prefix of a relay's directory.
pub(super) const PREFIX: &str = "tdd-relay-";

/// Removes, in `temp`, every relay directory of this user whose socket refuses a
/// connection: nobody serves it. Only a directory that holds that one socket and
/// nothing else is touched, the socket and the directory removed one by one (never a
/// walk, never through a link); anything else is left as it is. Returns how many were
/// removed. Best effort: what cannot be read or removed stays.
pub(super) fn sweep(temp: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(temp) else {
        return 0;
    };
    let uid = nix::unistd::getuid().as_raw();
    let mut removed = 0;
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(PREFIX) {
            continue;
        }
        let dir = entry.path();
        if is_stale(&dir, uid) {
            let socket = dir.join(SOCKET);
            if std::fs::remove_file(&socket).is_ok() && std::fs::remove_dir(&dir).is_ok() {
                removed += 1;
            }
        }
    }
    removed
}

/// Whether `dir` is a relay directory of `uid` whose only entry is a socket that
/// refuses a connection.
fn is_stale(dir: &Path, uid: u32) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return false;
    };
    if !meta.is_dir() || meta.uid() != uid {
        return false;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let names: Vec<_> = entries.flatten().map(|e| e.file_name()).collect();
    if names.len() != 1 || names[0] != SOCKET {
        return false;
    }
    let socket = dir.join(SOCKET);
    let is_socket = std::fs::symlink_metadata(&socket)
        .is_ok_and(|m| m.file_type().is_socket() && m.uid() == uid);
    is_socket
        && matches!(
            UnixStream::connect(&socket),
            Err(e) if e.kind() == ErrorKind::ConnectionRefused
        )
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixListener;

    use super::*;

    #[test]
    fn a_dead_relays_directory_goes_and_a_live_one_or_anything_else_stays() {
        let temp = tempfile::tempdir().expect("temp");
        // A relay whose conductor was killed: its socket is there, nobody listens.
        let dead = temp.path().join(format!("{PREFIX}dead"));
        std::fs::create_dir(&dead).expect("dir");
        drop(UnixListener::bind(dead.join(SOCKET)).expect("bind"));
        // A live relay.
        let live = temp.path().join(format!("{PREFIX}live"));
        std::fs::create_dir(&live).expect("dir");
        let _listener = UnixListener::bind(live.join(SOCKET)).expect("bind");
        // A directory of that name with something else in it, and one with a file
        // where the socket would be.
        let other = temp.path().join(format!("{PREFIX}other"));
        std::fs::create_dir(&other).expect("dir");
        drop(UnixListener::bind(other.join(SOCKET)).expect("bind"));
        std::fs::write(other.join("keep"), "x").expect("file");
        let plain = temp.path().join(format!("{PREFIX}plain"));
        std::fs::create_dir(&plain).expect("dir");
        std::fs::write(plain.join(SOCKET), "not a socket").expect("file");
        // A link to a dead relay's directory is not followed.
        let target = tempfile::tempdir().expect("target");
        drop(UnixListener::bind(target.path().join(SOCKET)).expect("bind"));
        std::os::unix::fs::symlink(target.path(), temp.path().join(format!("{PREFIX}link")))
            .expect("link");
        assert_eq!(sweep(temp.path()), 1);
        assert!(!dead.exists());
        for kept in [&live, &other, &plain] {
            assert!(kept.join(SOCKET).exists(), "{}", kept.display());
        }
        assert!(target.path().join(SOCKET).exists());
    }
}
