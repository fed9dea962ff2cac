//! Restores and removals against symlinks, hard links and directories planted by an agent.

use std::os::unix::fs::MetadataExt;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use super::*;

struct Tree {
    root: tempfile::TempDir,
    outside: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        Tree {
            root: tempfile::tempdir().expect("root"),
            outside: tempfile::tempdir().expect("outside"),
        }
    }

    fn root(&self) -> PathBuf {
        self.root.path().canonicalize().expect("canonical root")
    }

    fn write(&self, rel: &str, bytes: &str) -> PathBuf {
        let path = self.root().join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, bytes).expect("write");
        path
    }

    fn sentinel(&self) -> PathBuf {
        let path = self.outside.path().join("sentinel");
        std::fs::write(&path, "outside").expect("sentinel");
        path
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).expect("read")
}

#[test]
fn a_symlink_at_the_path_is_replaced_not_written_through() {
    let tree = Tree::new();
    let sentinel = tree.sentinel();
    let inside = tree.write("calc.py", "impl");
    std::fs::create_dir_all(tree.root().join("tests")).expect("mkdir");
    std::os::unix::fs::symlink(&sentinel, tree.root().join("tests/a.py")).expect("link");
    std::os::unix::fs::symlink(&inside, tree.root().join("tests/b.py")).expect("link");
    assert!(restore(&tree.root(), b"tests/a.py", 0o100644, b"test a").expect("restore"));
    assert!(restore(&tree.root(), b"tests/b.py", 0o100644, b"test b").expect("restore"));
    assert_eq!(read(&sentinel), "outside");
    assert_eq!(read(&inside), "impl");
    let meta = tree
        .root()
        .join("tests/a.py")
        .symlink_metadata()
        .expect("lstat");
    assert!(meta.is_file());
    assert_eq!(read(&tree.root().join("tests/b.py")), "test b");
}

#[test]
fn a_hard_link_is_broken_and_its_twin_keeps_its_bytes() {
    let tree = Tree::new();
    let twin = tree.write("calc.py", "impl");
    std::fs::create_dir_all(tree.root().join("tests")).expect("mkdir");
    std::fs::hard_link(&twin, tree.root().join("tests/a.py")).expect("hard link");
    restore(&tree.root(), b"tests/a.py", 0o100644, b"test a").expect("restore");
    assert_eq!(read(&twin), "impl");
    let meta = tree
        .root()
        .join("tests/a.py")
        .symlink_metadata()
        .expect("lstat");
    assert_eq!(meta.nlink(), 1);
    assert_eq!(twin.symlink_metadata().expect("lstat").nlink(), 1);
}

#[test]
fn a_symlinked_parent_directory_is_replaced_by_a_real_one() {
    let tree = Tree::new();
    let sentinel = tree.sentinel();
    std::os::unix::fs::symlink(tree.outside.path(), tree.root().join("tests")).expect("link");
    restore(&tree.root(), b"tests/sentinel", 0o100644, b"test").expect("restore");
    assert_eq!(read(&sentinel), "outside");
    assert!(
        tree.root()
            .join("tests")
            .symlink_metadata()
            .expect("lstat")
            .is_dir()
    );
    assert_eq!(read(&tree.root().join("tests/sentinel")), "test");
    // A file where a directory belongs is replaced too.
    tree.write("lib", "a file");
    restore(&tree.root(), b"lib/x.py", 0o100644, b"x").expect("restore");
    assert_eq!(read(&tree.root().join("lib/x.py")), "x");
}

#[test]
fn a_directory_at_the_path_is_removed_and_modes_and_links_come_back() {
    let tree = Tree::new();
    tree.write("tests/a.py/inner.py", "planted");
    restore(&tree.root(), b"tests/a.py", 0o100755, b"#!/bin/sh\n").expect("restore");
    let meta = tree
        .root()
        .join("tests/a.py")
        .symlink_metadata()
        .expect("lstat");
    assert!(meta.is_file());
    assert_eq!(meta.permissions().mode() & 0o777, 0o755);
    tree.write("link", "a file now");
    restore(&tree.root(), b"link", MODE_SYMLINK, b"tests/a.py").expect("restore");
    let target = std::fs::read_link(tree.root().join("link")).expect("a link again");
    assert_eq!(target, PathBuf::from("tests/a.py"));
}

#[test]
fn removal_takes_the_link_and_never_its_target() {
    let tree = Tree::new();
    let sentinel = tree.sentinel();
    std::os::unix::fs::symlink(&sentinel, tree.root().join("new.py")).expect("link");
    assert!(remove(&tree.root(), b"new.py").expect("remove"));
    assert_eq!(read(&sentinel), "outside");
    assert!(tree.root().join("new.py").symlink_metadata().is_err());
    // Behind a symlinked directory the path is not in the tree: nothing is removed.
    std::os::unix::fs::symlink(tree.outside.path(), tree.root().join("d")).expect("link");
    assert!(!remove(&tree.root(), b"d/sentinel").expect("remove"));
    assert_eq!(read(&sentinel), "outside");
}

#[test]
fn paths_that_climb_out_are_refused() {
    let tree = Tree::new();
    assert!(!restore(&tree.root(), b"../escape", 0o100644, b"x").expect("refused"));
    assert!(!restore(&tree.root(), b".git/config", 0o100644, b"x").expect("refused"));
    assert!(!tree.root().join("../escape").exists());
}

#[test]
fn a_read_only_directory_does_not_block_a_restore() {
    let tree = Tree::new();
    tree.write("tests/a.py", "weakened");
    let dir = tree.root().join("tests");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).expect("chmod");
    restore(&tree.root(), b"tests/a.py", 0o100644, b"test").expect("restore");
    assert_eq!(read(&dir.join("a.py")), "test");
}

/// A process left running exchanges a directory of the work tree with a link to a
/// directory outside, over and over, while restores and removals run: whatever the
/// timing, nothing is written or removed outside.
#[test]
fn a_directory_swapped_for_a_link_midway_never_leads_a_write_or_removal_outside() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let tree = Tree::new();
    let sentinel = tree.sentinel();
    let twin = tree.outside.path().join("b.py");
    std::fs::write(&twin, "outside").expect("twin");
    let root = tree.root();
    let stop = AtomicBool::new(false);
    let reached_outside = std::thread::scope(|scope| {
        scope.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                // A real `tests/b.py`, made where no link can lead it astray, and `swap`
                // a link outside; then the two exchanged in one step.
                let _ = std::fs::remove_dir_all(root.join("swap"));
                let _ = std::fs::remove_file(root.join("swap"));
                let _ = std::os::unix::fs::symlink(tree.outside.path(), root.join("swap"));
                if !std::fs::symlink_metadata(root.join("tests")).is_ok_and(|m| m.is_dir()) {
                    let _ = std::fs::remove_file(root.join("tests"));
                    let fresh = root.join("fresh");
                    let _ = std::fs::create_dir(&fresh);
                    let _ = std::fs::write(fresh.join("b.py"), "inside");
                    let _ = std::fs::rename(&fresh, root.join("tests"));
                }
                let _ = nix::fcntl::renameat2(
                    nix::fcntl::AT_FDCWD,
                    &root.join("tests"),
                    nix::fcntl::AT_FDCWD,
                    &root.join("swap"),
                    nix::fcntl::RenameFlags::RENAME_EXCHANGE,
                );
            }
        });
        // A restore or a removal may fail when the swap lands between two of its
        // steps; it must never reach outside.
        let reached = (0..1000).any(|_| {
            let _ = restore(&root, b"tests/a.py", 0o100644, b"test a");
            let _ = remove(&root, b"tests/b.py");
            let mut names: Vec<_> = std::fs::read_dir(tree.outside.path())
                .expect("outside")
                .map(|e| e.expect("entry").file_name())
                .collect();
            names.sort();
            names != ["b.py", "sentinel"]
        });
        stop.store(true, Ordering::Relaxed);
        reached
    });
    assert!(!reached_outside, "a restore or a removal reached outside");
    assert_eq!(read(&sentinel), "outside");
    assert_eq!(read(&twin), "outside");
}
