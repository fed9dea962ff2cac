//! Random agents against the lock check: whatever sequence of file operations they run,
//! a revert leaves every locked file as the snapshot had it and writes nothing outside
//! the work tree.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use proptest::prelude::*;

use super::tests::Repo;
use super::*;

const FILES: &[&str] = &[
    "calc.py",
    "lib/util.py",
    "tests/test_a.py",
    "tests/test_b.py",
    "tests/data/fixture.txt",
];
const DIRS: &[&str] = &["tests", "lib", "tests/data"];

fn locked(path: &str) -> bool {
    path.starts_with("tests/")
}

/// One thing an agent does to the work tree.
#[derive(Debug, Clone)]
enum Op {
    Edit(usize, u8),
    Delete(usize),
    Rename(usize, usize),
    SymlinkInside(usize, usize),
    SymlinkOutside(usize),
    HardLink(usize, usize),
    HardLinkOutside(usize),
    Chmod(usize, bool),
    DirectoryInstead(usize),
    ParentSymlink(usize),
    AssumeUnchanged(usize),
    SkipWorktree(usize),
    OddName(usize),
    Stage,
}

fn op() -> impl Strategy<Value = Op> {
    let f = 0..FILES.len();
    let d = 0..DIRS.len();
    prop_oneof![
        (f.clone(), any::<u8>()).prop_map(|(i, b)| Op::Edit(i, b)),
        f.clone().prop_map(Op::Delete),
        (f.clone(), f.clone()).prop_map(|(a, b)| Op::Rename(a, b)),
        (f.clone(), f.clone()).prop_map(|(a, b)| Op::SymlinkInside(a, b)),
        f.clone().prop_map(Op::SymlinkOutside),
        (f.clone(), f.clone()).prop_map(|(a, b)| Op::HardLink(a, b)),
        f.clone().prop_map(Op::HardLinkOutside),
        (f.clone(), any::<bool>()).prop_map(|(i, x)| Op::Chmod(i, x)),
        f.clone().prop_map(Op::DirectoryInstead),
        d.clone().prop_map(Op::ParentSymlink),
        f.clone().prop_map(Op::AssumeUnchanged),
        f.clone().prop_map(Op::SkipWorktree),
        d.prop_map(Op::OddName),
        Just(Op::Stage),
    ]
}

/// Runs `op`; an operation that does not apply (its file is gone, say) simply fails.
fn apply(repo: &Repo, op: &Op) {
    let p = |i: usize| repo.path(FILES[i]);
    let sentinel = repo.outside.path().join("sentinel.py");
    let _ = match op {
        Op::Edit(i, b) => std::fs::write(p(*i), [b"weakened ".as_slice(), &[*b]].concat()),
        Op::Delete(i) => std::fs::remove_file(p(*i)),
        Op::Rename(a, b) => std::fs::rename(p(*a), p(*b)),
        Op::SymlinkInside(a, b) => {
            std::fs::remove_file(p(*a)).and_then(|()| std::os::unix::fs::symlink(p(*b), p(*a)))
        }
        Op::SymlinkOutside(a) => {
            std::fs::remove_file(p(*a)).and_then(|()| std::os::unix::fs::symlink(&sentinel, p(*a)))
        }
        Op::HardLink(a, b) => {
            std::fs::remove_file(p(*b)).and_then(|()| std::fs::hard_link(p(*a), p(*b)))
        }
        Op::HardLinkOutside(a) => {
            std::fs::remove_file(p(*a)).and_then(|()| std::fs::hard_link(&sentinel, p(*a)))
        }
        Op::Chmod(i, exec) => {
            let mode = if *exec { 0o755 } else { 0o644 };
            std::fs::set_permissions(p(*i), std::fs::Permissions::from_mode(mode))
        }
        Op::DirectoryInstead(i) => std::fs::remove_file(p(*i))
            .and_then(|()| std::fs::create_dir(p(*i)))
            .and_then(|()| std::fs::write(p(*i).join("inner.py"), "planted")),
        Op::ParentSymlink(d) => std::fs::remove_dir_all(repo.path(DIRS[*d]))
            .and_then(|()| std::os::unix::fs::symlink(repo.outside.path(), repo.path(DIRS[*d]))),
        Op::AssumeUnchanged(i) => flag(repo, "--assume-unchanged", FILES[*i]),
        Op::SkipWorktree(i) => flag(repo, "--skip-worktree", FILES[*i]),
        Op::OddName(d) => {
            let name = [DIRS[*d].as_bytes(), b"/odd-\xff.py"].concat();
            std::fs::write(repo.root().join(std::ffi::OsStr::from_bytes(&name)), "odd")
        }
        Op::Stage => flag(repo, "--add", "."),
    };
}

/// A git call that may fail (the path may be gone); its failure is not the test's.
fn flag(repo: &Repo, option: &str, path: &str) -> std::io::Result<()> {
    let mut cmd = std::process::Command::new("git");
    cmd.current_dir(repo.root()).env("GIT_CONFIG_NOSYSTEM", "1");
    if option == "--add" {
        cmd.args(["add", "-A"]);
    } else {
        cmd.args(["update-index", option, "--", path]);
    }
    cmd.output().map(|_| ())
}

/// Every file under `dir` with its bytes and mtime, not following symlinks.
fn inventory(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>, i64, i64)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let meta = entry.path().symlink_metadata().expect("lstat");
        if meta.is_file() {
            let bytes = std::fs::read(entry.path()).expect("read");
            out.push((entry.path(), bytes, meta.mtime(), meta.mtime_nsec()));
        }
    }
    out.sort();
    out
}

/// The regular files of `tree` as `git ls-tree -r` lists them: an oracle independent of
/// the engine's own tree reading.
fn git_tree_files(repo: &Repo, tree: &str) -> Vec<TreeFile> {
    let out = Git::new(repo.root())
        .output(["ls-tree", "-r", "-z", tree])
        .expect("ls-tree");
    let mut files = Vec::new();
    for entry in out.stdout.split(|b| *b == 0).filter(|e| !e.is_empty()) {
        let tab = entry.iter().position(|b| *b == b'\t').expect("a tab");
        let meta = String::from_utf8_lossy(&entry[..tab]).into_owned();
        let fields: Vec<&str> = meta.split(' ').collect();
        let mode = u32::from_str_radix(fields[0], 8).expect("mode");
        if mode == 0o100644 || mode == safe_fs::MODE_EXECUTABLE {
            files.push((entry[tab + 1..].to_vec(), mode, fields[2].to_string()));
        }
    }
    files
}

/// Every locked file of `base` is at its path as a regular, unshared file with the
/// snapshot's bytes and mode.
fn assert_locked_files_intact(repo: &Repo, base: &Snapshot) {
    for (path, mode, oid) in git_tree_files(repo, &base.tree) {
        if !locked(&repo_path::display(&path)) {
            continue;
        }
        let meta = safe_fs::lstat_in_tree(&repo.root(), &path)
            .expect("lstat")
            .unwrap_or_else(|| panic!("{} is gone", repo_path::display(&path)));
        assert!(
            meta.is_file(),
            "{} is not a regular file",
            repo_path::display(&path)
        );
        assert_eq!(meta.nlink(), 1, "{} is shared", repo_path::display(&path));
        let exec = meta.mode() & 0o100 != 0;
        assert_eq!(exec, mode == safe_fs::MODE_EXECUTABLE);
        let objects = scan::locate(&repo.root()).expect("locate").objects();
        let blob = objects.read_blobs(&[oid.as_str()]).expect("blob");
        let bytes = std::fs::read(repo.root().join(repo_path::os(&path))).expect("read");
        assert_eq!(bytes, blob[0], "{}", repo_path::display(&path));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn a_revert_puts_every_locked_file_back_and_writes_nothing_outside(
        ops in proptest::collection::vec(op(), 1..8),
    ) {
        let repo = Repo::new();
        repo.write("lib/util.py", "UTIL = 1\n");
        repo.write("tests/test_b.py", "def test_b():\n    assert True\n");
        repo.write("tests/data/fixture.txt", "fixture\n");
        repo.git(&["add", "-A"]);
        repo.git(&["commit", "-qm", "more"]);
        repo.sentinel();
        let base = Snapshot::scan(&repo.root()).expect("base");
        for op in &ops {
            apply(&repo, op);
        }
        // The agent may write outside through its own links; the revert may not.
        let outside = inventory(repo.outside.path());
        let report = base.check_and_revert(&repo.root(), locked);
        prop_assert!(report.is_ok(), "{report:?}");
        prop_assert_eq!(inventory(repo.outside.path()), outside);
        assert_locked_files_intact(&repo, &base);
        let now = Snapshot::scan(&repo.root()).expect("scan");
        // The scan's own listing of its tree is the tree's listing.
        let listed = scan::take_listed(&now.tree).expect("the scan's listing");
        let mut from_scan = listed.files(|_| true);
        from_scan.sort();
        let mut from_git = git_tree_files(&repo, &now.tree);
        from_git.sort();
        prop_assert_eq!(from_scan, from_git);
        let left: Vec<String> = base
            .changes_to(&repo.root(), &now)
            .expect("changes")
            .into_iter()
            .map(|c| c.path)
            .filter(|p| locked(&repo_path::display(&repo_path::decode(p))))
            .collect();
        prop_assert!(left.is_empty(), "locked changes left: {left:?}");
    }
}
