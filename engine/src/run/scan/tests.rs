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
fn settings_name_configured_filter_drivers_and_the_object_format() {
    let out = b"filter.lfs.clean\ngit-lfs clean -- %f\0filter.odd.name.process\nx\0extensions.objectformat\nsha256\0filter.empty.clean\n\0";
    let settings = Settings::parse(out);
    let drivers: Vec<&[u8]> = settings.drivers.iter().map(Vec::as_slice).collect();
    assert_eq!(drivers, vec![b"lfs".as_slice(), b"odd.name".as_slice()]);
    assert_eq!(settings.null_oid().len(), 64);
}
