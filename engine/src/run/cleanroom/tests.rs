//! Resets of the clean room against what runs and racing processes leave.
use super::*;
use crate::git::Git;

fn repo_with(files: &[(&str, &str)]) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("dir");
    let git = Git::new(dir.path());
    git.output(["init", "-q"]).expect("init");
    for (path, text) in files {
        let at = dir.path().join(path);
        std::fs::create_dir_all(at.parent().expect("parent")).expect("mkdir");
        std::fs::write(at, text).expect("write");
    }
    git.output(["add", "-A"]).expect("add");
    let tree = git.text(["write-tree"]).expect("tree");
    (dir, tree)
}

#[test]
fn a_reset_removes_what_runs_left_and_restores_what_they_changed() {
    let (live, tree) = repo_with(&[("a.py", "a\n"), ("pkg/b.py", "b\n"), ("pkg/c.pyc", "x")]);
    let state = tempfile::tempdir().expect("state");
    let room = CleanRoom::of(state.path(), live.path());
    room.materialize(live.path(), &tree, &[]).expect("first");
    assert!(
        !room.path().join("pkg/c.pyc").exists(),
        "bytecode is never written"
    );
    std::fs::write(room.path().join("a.py"), "changed\n").expect("edit");
    std::fs::create_dir_all(room.path().join("pkg/__pycache__")).expect("cache");
    std::fs::write(room.path().join("pkg/__pycache__/b.pyc"), "x").expect("pyc");
    std::fs::create_dir_all(room.path().join("locked")).expect("dir");
    std::fs::write(room.path().join("locked/f"), "x").expect("file");
    std::fs::set_permissions(
        room.path().join("locked"),
        std::fs::Permissions::from_mode(0o555),
    )
    .expect("chmod");
    room.materialize(live.path(), &tree, &[]).expect("second");
    assert_eq!(
        std::fs::read_to_string(room.path().join("a.py")).expect("a"),
        "a\n"
    );
    assert!(!room.path().join("pkg/__pycache__").exists());
    assert!(!room.path().join("locked").exists());
    assert_eq!(
        std::fs::read_to_string(room.path().join("pkg/b.py")).expect("b"),
        "b\n"
    );
}

/// A directory of the checkout swapped for a link to a directory outside while the
/// reset writes: the write fails, and nothing is written outside.
#[test]
fn a_link_swapped_in_on_the_way_is_never_written_through() {
    let room = tempfile::tempdir().expect("room");
    let outside = tempfile::tempdir().expect("outside");
    std::os::unix::fs::symlink(outside.path(), room.path().join("tests")).expect("link");
    let top = beneath::open_dir(room.path()).expect("top");
    for (path, mode) in [
        (&b"tests/test_add.py"[..], "100644"),
        (b"tests/deeper/x.py", "100644"),
        (b"tests/link", "120000"),
    ] {
        assert!(write_entry(&top, path, mode, b"x").is_err(), "{path:?}");
    }
    assert!(beneath::dir_of(&top, &[b"tests", b"sub"], Way::Make).is_err());
    assert_eq!(
        std::fs::read_dir(outside.path()).expect("outside").count(),
        0,
        "nothing written outside"
    );
    // The way through real directories is made and written as before.
    write_entry(&top, b"src/calc.py", "100755", b"print(1)\n").expect("written");
    let written = room.path().join("src/calc.py");
    assert_eq!(std::fs::read(&written).expect("read"), b"print(1)\n");
    assert_eq!(
        std::fs::metadata(&written)
            .expect("meta")
            .permissions()
            .mode()
            & 0o777,
        0o755
    );
}

/// A process left running swaps a directory of the checkout with a link to a
/// directory outside, over and over, while resets run: whatever the timing, the
/// reset never removes the file of the same name outside.
#[test]
fn a_directory_swapped_for_a_link_during_the_sweep_never_leads_a_removal_outside() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (live, tree) = repo_with(&[("a.py", "a\n")]);
    let state = tempfile::tempdir().expect("state");
    let outside = tempfile::tempdir().expect("outside");
    let victim = outside.path().join("victim.py");
    std::fs::write(&victim, "outside\n").expect("victim");
    let room = CleanRoom::of(state.path(), live.path());
    room.materialize(live.path(), &tree, &[]).expect("first");
    let root = room.path().to_path_buf();
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let fresh = root.with_file_name("fresh");
            while !stop.load(Ordering::Relaxed) {
                // A real `pkg/victim.py`, and `swap` linking outside, made afresh
                // whenever a reset took them away; then exchanged in one step.
                if std::fs::symlink_metadata(root.join("pkg")).is_err() {
                    let _ = std::fs::create_dir(&fresh);
                    let _ = std::fs::write(fresh.join("victim.py"), "inside\n");
                    let _ = std::fs::rename(&fresh, root.join("pkg"));
                }
                let _ = std::os::unix::fs::symlink(outside.path(), root.join("swap"));
                let _ = nix::fcntl::renameat2(
                    nix::fcntl::AT_FDCWD,
                    &root.join("pkg"),
                    nix::fcntl::AT_FDCWD,
                    &root.join("swap"),
                    nix::fcntl::RenameFlags::RENAME_EXCHANGE,
                );
            }
        });
        // A reset may fail when the swap lands between two of its steps; it must
        // never reach outside.
        let reached_outside = (0..300).any(|_| {
            let _ = room.materialize(live.path(), &tree, &[]);
            !victim.exists()
        });
        stop.store(true, Ordering::Relaxed);
        assert!(
            !reached_outside,
            "a reset removed a file outside the checkout"
        );
    });
    room.materialize(live.path(), &tree, &[]).expect("settled");
    assert!(!room.path().join("pkg").exists() && !room.path().join("swap").exists());
}

#[test]
fn a_planted_file_is_rewritten_whatever_record_stands_beside_it() {
    let stub = "def sub(a, b):\n    raise NotImplementedError\n";
    let (live, tree) = repo_with(&[("helpers.py", stub)]);
    let state = tempfile::tempdir().expect("state");
    let room = CleanRoom::of(state.path(), live.path());
    room.materialize(live.path(), &tree, &[]).expect("first");
    // A working helper planted in the checkout, and a record beside it (in the form
    // an earlier version trusted) vouching for the file as it is now.
    let helper = room.path().join("helpers.py");
    std::fs::write(&helper, "def sub(a, b):\n    return a - b\n").expect("plant");
    let id = Git::new(live.path())
        .text(["rev-parse", &format!("{tree}:helpers.py")])
        .expect("blob");
    let meta = std::fs::symlink_metadata(&helper).expect("meta");
    let ns = |s: i64, n: i64| s * 1_000_000_000 + n;
    use std::os::unix::fs::MetadataExt;
    let record = format!(
        "{id} 100644 {} {} {} {} {}\n",
        meta.ino(),
        meta.size(),
        ns(meta.mtime(), meta.mtime_nsec()),
        ns(meta.ctime(), meta.ctime_nsec()),
        hex::encode("helpers.py")
    );
    let beside = room.path().parent().expect("base");
    std::fs::write(beside.join("manifest"), record).expect("record");
    room.materialize(live.path(), &tree, &[]).expect("second");
    assert_eq!(std::fs::read_to_string(&helper).expect("helper"), stub);
}
