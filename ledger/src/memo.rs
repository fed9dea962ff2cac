//! Memos: what a caller computed from the chain up to a point (a run's projected state),
//! kept beside the database so that the next command starts from it and reads only the
//! events after that point, rather than every event from the first.
//!
//! A memo names the point it was computed at (its event count and the hash of its last
//! event) and is given back only while this chain holds that point, so a memo of
//! another chain, or of a chain since rewritten at or before the point, is never read.
//! It is trusted as the seal is ([`crate::seal`]): a file the ledger's owner can write,
//! in the ledger's directory, which no conducted leaf reaches; docs/security.md says
//! what that means by hand. `tdd ledger verify` never reads one.

use std::path::Path;
use std::path::PathBuf;

use crate::Anchor;
use crate::Ledger;
use crate::LedgerError;

/// The largest memo read; a larger file is taken for no memo.
const MAX_MEMO: u64 = 16 * 1024 * 1024;

impl Ledger {
    /// The memo `name` kept for this ledger and the point it was computed at, when there
    /// is one that reads and this chain holds its point (the event at its count has its
    /// hash). `name` must be a plain file-name part (letters, digits, `-`, `_`).
    pub fn memo(&self, name: &str) -> Result<Option<(Anchor, Vec<u8>)>, LedgerError> {
        let Some(path) = memo_path(&self.path, name) else {
            return Ok(None);
        };
        let Some(bytes) = crate::seal::read_regular(&path, MAX_MEMO) else {
            return Ok(None);
        };
        let Some((at, body)) = split(&bytes) else {
            return Ok(None);
        };
        if self.hash_at(at.count)?.as_deref() != Some(at.hash.as_str()) {
            return Ok(None);
        }
        Ok(Some((at, body.to_vec())))
    }

    /// Keeps `body` as memo `name`, computed at point `at` of this chain, replacing the
    /// one kept before, whole or not at all. A memo that cannot be written is not kept:
    /// the next reader computes from the events, as with none.
    pub fn keep_memo(&self, name: &str, at: &Anchor, body: &[u8]) {
        let Some(path) = memo_path(&self.path, name) else {
            return;
        };
        let mut bytes = format!("{at}\n").into_bytes();
        bytes.extend_from_slice(body);
        crate::seal::keep_whole(&path, &bytes);
    }
}

/// The file of memo `name` beside `database`; none for a name that is not a plain
/// file-name part.
fn memo_path(database: &Path, name: &str) -> Option<PathBuf> {
    let plain = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !plain {
        return None;
    }
    let mut path = database.as_os_str().to_os_string();
    path.push(format!("-memo-{name}"));
    Some(PathBuf::from(path))
}

/// A memo file's point (its first line) and body (the rest).
fn split(bytes: &[u8]) -> Option<(Anchor, &[u8])> {
    let end = bytes.iter().position(|&b| b == b'\n')?;
    let line = std::str::from_utf8(&bytes[..end]).ok()?;
    let at = Anchor::parse(line).ok()?;
    Some((at, &bytes[end + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger_with(events: usize) -> (tempfile::TempDir, Ledger) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut ledger = Ledger::open(&dir.path().join("ledger.sqlite3")).expect("open");
        for i in 0..events {
            ledger
                .append(Some("r"), "note", &serde_json::json!({ "i": i }))
                .expect("append");
        }
        (dir, ledger)
    }

    #[test]
    fn a_memo_is_given_back_at_the_point_it_was_kept_for() {
        let (_dir, mut ledger) = ledger_with(3);
        let at = ledger.anchor().expect("anchor");
        ledger.keep_memo("state-x", &at, b"{\"k\":1}");
        let (point, body) = ledger.memo("state-x").expect("memo").expect("kept");
        assert_eq!(point, at);
        assert_eq!(body, b"{\"k\":1}");
        // Events after the point leave the memo valid: its point is still in the chain.
        ledger
            .append(Some("r"), "note", &serde_json::json!({ "i": 9 }))
            .expect("append");
        let (point, _) = ledger.memo("state-x").expect("memo").expect("kept");
        assert_eq!(point, at);
        assert!(ledger.memo("state-y").expect("memo").is_none());
    }

    #[test]
    fn a_memo_of_a_point_this_chain_does_not_hold_is_not_read() {
        let (_dir, ledger) = ledger_with(3);
        let at = ledger.anchor().expect("anchor");
        // Another chain's point at the same count.
        let other = Anchor {
            count: at.count,
            hash: "0".repeat(64),
        };
        ledger.keep_memo("state-x", &other, b"{}");
        assert!(ledger.memo("state-x").expect("memo").is_none());
        // A point past this chain's head.
        let ahead = Anchor {
            count: at.count + 1,
            hash: at.hash.clone(),
        };
        ledger.keep_memo("state-x", &ahead, b"{}");
        assert!(ledger.memo("state-x").expect("memo").is_none());
    }

    #[test]
    fn a_memo_that_is_not_a_file_or_not_one_is_no_memo() {
        let (dir, ledger) = ledger_with(1);
        let path = memo_path(&ledger.path, "state-x").expect("path");
        std::fs::write(&path, b"garbage without a point").expect("write");
        assert!(ledger.memo("state-x").expect("memo").is_none());
        std::fs::remove_file(&path).expect("rm");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).expect("fifo");
        assert!(
            ledger.memo("state-x").expect("memo").is_none(),
            "a pipe was read"
        );
        std::fs::remove_file(&path).expect("rm");
        let target = dir.path().join("elsewhere");
        std::os::unix::fs::symlink(&target, &path).expect("link");
        let at = ledger.anchor().expect("anchor");
        std::fs::write(&target, format!("{at}\n{{}}")).expect("write");
        assert!(
            ledger.memo("state-x").expect("memo").is_none(),
            "a link was followed"
        );
        // A name that is not a plain part names no file.
        ledger.keep_memo("../escape", &at, b"{}");
        assert!(!dir.path().join("escape").exists());
        assert!(ledger.memo("../escape").expect("memo").is_none());
    }
}
