//! The seal: a check rehashes only what came after the point verified, and only while
//! nothing but tdd's own appends touched the files.

use std::path::Path;
use std::time::Duration;
use std::time::Instant;

use serde_json::json;

use super::*;

/// A ledger of `n` events, closed.
fn ledger_of(n: usize) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let database = dir.path().join(DATABASE_FILE);
    let mut ledger = Ledger::open(&database).expect("open");
    append(&mut ledger, 0, n);
    (dir, database)
}

/// Appends events `from..from + n`, each with a payload of about 200 bytes, so the
/// early events sit on pages of their own.
fn append(ledger: &mut Ledger, from: usize, n: usize) {
    for i in from..from + n {
        ledger
            .append(
                Some("run"),
                "note",
                &json!({ "i": format!("{i:04}"), "pad": "x".repeat(200) }),
            )
            .expect("append");
    }
}

/// The key of the files once the kernel's clock has passed their change time: what a
/// check that can keep a seal starts from (waits on the clock, not a fixed time).
fn settled(database: &Path) -> seal::Taken {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let taken = seal::Taken::now(database);
        if taken.is_settled() {
            return taken;
        }
        assert!(
            Instant::now() < deadline,
            "the clock never passed the ledger's change time"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The check a command makes: the key, then the ledger opened read-only and verified.
fn check(database: &Path) -> Verification {
    let taken = settled(database);
    let ledger = Ledger::open_read_only(database)
        .expect("open")
        .expect("exists");
    ledger.verify_sealed(&taken).expect("verify")
}

/// Rewrites, in the database file itself, event `i`'s payload (`i` counted from 0) to
/// another of the same length, and puts the file's modification time back.
fn edit_in_place(database: &Path, i: usize) {
    let modified = std::fs::metadata(database)
        .and_then(|m| m.modified())
        .expect("mtime");
    let mut bytes = std::fs::read(database).expect("read");
    // Every copy: a page freed when the table grew may still hold an old one.
    let from = format!("\"i\":\"{i:04}\"");
    let copies: Vec<usize> = bytes
        .windows(from.len())
        .enumerate()
        .filter(|(_, w)| *w == from.as_bytes())
        .map(|(at, _)| at)
        .collect();
    assert!(!copies.is_empty(), "the payload is in the database file");
    for at in copies {
        bytes[at + 5] = b'9';
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(database)
        .expect("open for writing");
    std::io::Write::write_all(&mut &file, &bytes).expect("write");
    file.set_times(std::fs::FileTimes::new().set_modified(modified))
        .expect("mtime put back");
}

#[test]
fn a_check_of_files_unchanged_since_the_last_rehashes_nothing() {
    let (_dir, database) = ledger_of(40);
    let first = check(&database);
    assert_eq!((first.events, first.rehashed), (40, 40));
    assert!(first.broken.is_none());
    let second = check(&database);
    assert_eq!((second.events, second.rehashed), (40, 0));
    assert!(second.broken.is_none());
    // `verify` never reads the seal.
    let full = Ledger::open_read_only(&database)
        .expect("open")
        .expect("exists")
        .verify()
        .expect("verify");
    assert_eq!(full.rehashed, 40);
}

#[test]
fn an_event_edited_in_place_after_the_seal_is_found_though_its_length_and_mtime_are_kept() {
    let (_dir, database) = ledger_of(40);
    check(&database);
    assert_eq!(check(&database).rehashed, 0, "sealed");
    edit_in_place(&database, 2);
    let found = check(&database);
    let broken = found.broken.expect("the edit is found");
    assert_eq!(broken.event_id, Some(3));
    assert!(broken.reason.contains("edited"), "{}", broken.reason);
}

#[test]
fn tdds_own_appends_keep_the_seal_and_only_they_are_rehashed() {
    let (_dir, database) = ledger_of(40);
    check(&database);
    let mut ledger = Ledger::open(&database).expect("open");
    append(&mut ledger, 40, 3);
    drop(ledger);
    let after = check(&database);
    assert_eq!((after.events, after.rehashed), (43, 3));
    assert!(after.broken.is_none());
    assert_eq!(check(&database).rehashed, 0);
}

#[test]
fn a_write_by_anything_else_while_tdd_writes_is_never_taken_into_the_seal() {
    // Between two of tdd's appends, and after its last one.
    for after_the_last in [false, true] {
        let (_dir, database) = ledger_of(40);
        check(&database);
        let mut ledger = Ledger::open(&database).expect("open");
        append(&mut ledger, 40, 1);
        edit_in_place(&database, 2);
        if !after_the_last {
            append(&mut ledger, 41, 1);
        }
        drop(ledger);
        let found = check(&database);
        assert_eq!(
            found.broken.map(|b| b.event_id),
            Some(Some(3)),
            "after the last append: {after_the_last}"
        );
    }
}

#[test]
fn a_seal_that_names_a_point_the_chain_does_not_have_is_not_trusted() {
    let (_dir, database) = ledger_of(40);
    check(&database);
    let mut seal_file = database.as_os_str().to_os_string();
    seal_file.push("-seal.json");
    let taken = settled(&database);
    let forged = json!({
        "key": taken.key(),
        "point": { "events": 40, "last_id": 40, "head": "f".repeat(64) },
    });
    std::fs::write(&seal_file, forged.to_string()).expect("forge");
    let checked = check(&database);
    assert_eq!(checked.rehashed, 40);
    assert!(checked.broken.is_none());
}

#[test]
fn a_log_too_large_to_key_is_never_read_and_seals_nothing() {
    let (_dir, database) = ledger_of(40);
    let mut wal = database.as_os_str().to_os_string();
    wal.push("-wal");
    // Sparse: it claims a terabyte and holds nothing.
    let file = std::fs::File::create(&wal).expect("log");
    file.set_len(1 << 40).expect("length");
    drop(file);
    assert!(seal::files_key(&database).is_empty());
    for _ in 0..2 {
        let taken = seal::Taken::now(&database);
        assert!(!taken.is_settled());
        let ledger = Ledger::open_read_only(&database)
            .expect("open")
            .expect("exists");
        let checked = ledger.verify_sealed(&taken).expect("verify");
        assert_eq!((checked.events, checked.rehashed), (40, 40));
    }
    // One byte over the bound is refused as well.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&wal)
        .expect("log");
    file.set_len(seal::MAX_WAL + 1).expect("length");
    drop(file);
    assert!(seal::files_key(&database).is_empty());
}

#[test]
fn a_change_time_on_a_whole_second_settles_only_two_seconds_later() {
    let key = |ctime: i64| vec![Some([1, 2, 3, 4, ctime]), None];
    let second = 5_000_000_000;
    assert!(!seal::settled(&key(second), second + 1));
    assert!(!seal::settled(&key(second), second + 1_999_999_999));
    assert!(seal::settled(&key(second), second + 2_000_000_000));
    // A time with nanoseconds settles once the clock has passed it.
    assert!(!seal::settled(&key(second + 4_000_000), second + 4_000_000));
    assert!(seal::settled(&key(second + 4_000_000), second + 4_000_001));
    assert!(!seal::settled(&[], i64::MAX), "an empty key never settles");
}

#[test]
fn a_link_or_a_pipe_at_the_seal_is_never_followed_waited_on_or_written_through() {
    let (dir, database) = ledger_of(40);
    let mut seal_file = database.as_os_str().to_os_string();
    seal_file.push("-seal.json");
    let seal_file = PathBuf::from(seal_file);
    // A link to a file outside, holding a seal that would match.
    check(&database);
    let outside = tempfile::tempdir().expect("outside");
    let planted = outside.path().join("seal.json");
    std::fs::rename(&seal_file, &planted).expect("moved out");
    let before = std::fs::read(&planted).expect("planted");
    std::os::unix::fs::symlink(&planted, &seal_file).expect("link");
    let checked = check(&database);
    assert_eq!(checked.rehashed, 40, "the link was followed");
    assert_eq!(
        std::fs::read(&planted).expect("planted"),
        before,
        "written through"
    );
    assert!(
        seal_file.symlink_metadata().is_ok_and(|m| m.is_file()),
        "the link is replaced by a seal of tdd's own"
    );
    // A named pipe: read without waiting, replaced.
    std::fs::remove_file(&seal_file).expect("remove");
    let made = std::process::Command::new("mkfifo")
        .arg(&seal_file)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    assert_eq!(check(&database).rehashed, 40);
    drop(dir);
}
