//! The scan's tree against the bytes on disk, and its parsing of git's answers.

use std::os::unix::ffi::OsStrExt;

use super::*;
use crate::run::snapshot::tests::Repo;

fn ls_tree(repo: &Repo, tree: &str) -> String {
    repo.git(&["ls-tree", "-r", tree])
}

#[test]
fn the_tree_records_symlinks_modes_and_odd_names_as_they_are_on_disk() {
    let repo = Repo::new();
    std::os::unix::fs::symlink("calc.py", repo.path("link.py")).expect("ln");
    let exec = repo.path("tests/test_a.py");
    std::fs::set_permissions(&exec, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let odd = repo
        .root()
        .join(std::ffi::OsStr::from_bytes(b"odd-\xff.py"));
    std::fs::write(&odd, "odd").expect("odd");
    let scanned = scan(&repo.root()).expect("scan");
    let listing = ls_tree(&repo, &scanned.tree);
    assert!(listing.contains("120000 blob"), "{listing}");
    assert!(listing.contains("100755 blob"), "{listing}");
    assert!(listing.contains("\"odd-\\377.py\""), "{listing}");
    assert!(scanned.flagged.is_empty());
    let target = repo.git(&["cat-file", "-p", &format!("{}:link.py", scanned.tree)]);
    assert_eq!(target, "calc.py");
}

#[test]
fn a_nested_repository_is_left_to_itself_and_the_index_is_untouched() {
    let repo = Repo::new();
    let index_before = std::fs::read(repo.root().join(".git/index")).expect("index");
    std::fs::create_dir(repo.path("inner")).expect("mkdir");
    let out = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(repo.path("inner"))
        .output()
        .expect("git init");
    assert!(out.status.success());
    let scanned = scan(&repo.root()).expect("scan");
    let listing = ls_tree(&repo, &scanned.tree);
    assert!(!listing.contains("inner/"), "{listing}");
    let index_after = std::fs::read(repo.root().join(".git/index")).expect("index");
    assert_eq!(index_before, index_after, "the user's index is not written");
}

#[test]
fn settings_name_configured_filter_drivers_and_the_ignore_file() {
    let out = b"filter.lfs.clean\ngit-lfs clean -- %f\0filter.odd.name.process\nx\0core.excludesfile\n/etc/ignore\0filter.empty.clean\n\0";
    let settings = Settings::parse(out);
    let drivers: Vec<&[u8]> = settings.drivers.iter().map(Vec::as_slice).collect();
    assert_eq!(drivers, vec![b"lfs".as_slice(), b"odd.name".as_slice()]);
    assert_eq!(settings.excludes_file, Some(PathBuf::from("/etc/ignore")));
}

/// The tree git itself writes for the work tree: the index copied, `git add -A`, then
/// `git write-tree`, so the user's index is untouched.
fn git_tree(repo: &Repo) -> String {
    let index = repo.outside.path().join("git-index");
    std::fs::copy(repo.root().join(".git/index"), &index).expect("copy the index");
    for args in [&["add", "-A"][..], &["write-tree"][..]] {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(repo.root())
            .env("GIT_INDEX_FILE", &index)
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        if args[0] == "write-tree" {
            return String::from_utf8_lossy(&out.stdout).trim().to_string();
        }
    }
    unreachable!("write-tree returns")
}

#[test]
fn the_tree_is_the_one_git_writes_whatever_the_ignore_rules() {
    let repo = Repo::new();
    let outside_ignore = repo.outside.path().join("ignore");
    std::fs::write(&outside_ignore, "*.bak\n").expect("excludes file");
    let excludes = outside_ignore.to_str().expect("utf-8 path");
    repo.git(&["config", "core.excludesFile", excludes]);
    repo.write(
        ".gitignore",
        "*.log\nbuild/\n!keep.log\n/root_only.txt\ndocs/**/*.tmp\n",
    );
    repo.write("sub/.gitignore", "*.dat\n!important.dat\n/local.txt\n");
    repo.write(".git/info/exclude", "secret*\n");
    repo.write("build/tracked.txt", "tracked though ignored\n");
    repo.git(&["add", "-f", "build/tracked.txt"]);
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-qm", "rules"]);
    for (path, text) in [
        ("a.log", "ignored"),
        ("keep.log", "kept by a negation"),
        ("root_only.txt", "ignored at the root"),
        ("sub/root_only.txt", "kept below it"),
        ("sub/x.dat", "ignored"),
        ("sub/important.dat", "kept by a negation"),
        ("sub/local.txt", "ignored"),
        ("sub/deeper/local.txt", "kept: the rule is anchored"),
        ("docs/a/b/c.tmp", "ignored"),
        ("docs/c.tmp", "ignored"),
        ("docs/c.txt", "kept"),
        ("secret.txt", "ignored by info/exclude"),
        ("notes.bak", "ignored by core.excludesFile"),
        ("build/new.txt", "ignored with its directory"),
        ("build/tracked.txt", "tracked, changed"),
        ("odd name\twith tab.txt", "kept"),
        ("tests/test_a.py", "changed"),
    ] {
        repo.write(path, text);
    }
    std::fs::remove_file(repo.path("calc.py")).expect("delete");
    std::fs::create_dir(repo.path("calc.py")).expect("a directory where a file was");
    repo.write("calc.py/inner.py", "inside");
    std::fs::write(
        repo.root().join(std::ffi::OsStr::from_bytes(b"bytes-\xfe")),
        "odd",
    )
    .expect("non-UTF-8 name");
    std::os::unix::fs::symlink("../outside", repo.path("sub/link")).expect("ln");
    std::fs::set_permissions(
        repo.path("keep.log"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let expected = git_tree(&repo);
    let scanned = scan(&repo.root()).expect("scan");
    assert_eq!(
        ls_tree(&repo, &scanned.tree),
        ls_tree(&repo, &expected),
        "the scan's tree against git's"
    );
}
