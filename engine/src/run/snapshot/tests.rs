//! Snapshots and lock reverts against a real repository and an agent that cheats.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use super::*;

pub(crate) const TEST: &str =
    "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n";
pub(crate) const CALC: &str = "def add(a, b):\n    return a + b\n";

/// A committed repository with `calc.py` and `tests/test_a.py`, and a directory outside it.
pub(crate) struct Repo {
    pub dir: tempfile::TempDir,
    pub outside: tempfile::TempDir,
}

impl Repo {
    pub fn new() -> Repo {
        let repo = Repo {
            dir: tempfile::tempdir().expect("repo"),
            outside: tempfile::tempdir().expect("outside"),
        };
        repo.git(&["init", "-q"]);
        repo.write("calc.py", CALC);
        repo.write("tests/test_a.py", TEST);
        repo.git(&["add", "-A"]);
        repo.git(&["commit", "-qm", "base"]);
        repo
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().canonicalize().expect("canonical")
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    pub fn write(&self, rel: &str, text: &str) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).expect("read")
    }

    pub fn git(&self, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(self.dir.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", self.outside.path())
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A file outside the work tree that nothing may write.
    pub fn sentinel(&self) -> PathBuf {
        let path = self.outside.path().join("sentinel.py");
        std::fs::write(&path, "outside\n").expect("sentinel");
        path
    }
}

/// A lock check against `base` restores `tests/test_a.py`, and only it, to its bytes.
fn assert_the_test_alone_restored(repo: &Repo, base: &Snapshot) {
    let report = base
        .check_and_revert(&repo.root(), tests_locked)
        .expect("revert");
    assert_eq!(report.restored, vec!["tests/test_a.py"]);
    assert_eq!(repo.read("tests/test_a.py"), TEST);
}

fn tests_locked(path: &str) -> bool {
    path.starts_with("tests/")
}

#[test]
fn a_locked_test_replaced_by_a_symlink_is_restored_and_its_targets_are_untouched() {
    let repo = Repo::new();
    let base = Snapshot::take(&repo.root(), "t").expect("base");
    let sentinel = repo.sentinel();
    repo.write("tests/test_b.py", TEST);
    repo.git(&["add", "tests/test_b.py"]);
    repo.git(&["commit", "-qm", "b"]);
    let base_b = Snapshot::scan(&repo.root()).expect("base b");
    std::fs::remove_file(repo.path("tests/test_a.py")).expect("rm");
    std::fs::remove_file(repo.path("tests/test_b.py")).expect("rm");
    std::os::unix::fs::symlink(repo.path("calc.py"), repo.path("tests/test_a.py")).expect("ln");
    std::os::unix::fs::symlink(&sentinel, repo.path("tests/test_b.py")).expect("ln");
    let report = base_b
        .check_and_revert(&repo.root(), tests_locked)
        .expect("revert");
    assert_eq!(report.restored, vec!["tests/test_a.py", "tests/test_b.py"]);
    assert_eq!(repo.read("calc.py"), CALC);
    assert_eq!(
        std::fs::read_to_string(&sentinel).expect("sentinel"),
        "outside\n"
    );
    for test in ["tests/test_a.py", "tests/test_b.py"] {
        assert!(repo.path(test).symlink_metadata().expect("lstat").is_file());
        assert_eq!(repo.read(test), TEST);
    }
    assert_ne!(base.tree, base_b.tree);
}

#[test]
fn a_hard_link_to_a_locked_file_counts_as_a_change_and_is_broken() {
    let repo = Repo::new();
    let base = Snapshot::scan(&repo.root()).expect("base");
    std::fs::hard_link(repo.path("tests/test_a.py"), repo.path("helper.py")).expect("link");
    let report = base
        .check_and_revert(&repo.root(), tests_locked)
        .expect("revert");
    assert_eq!(report.restored, vec!["tests/test_a.py"]);
    assert_eq!(report.kept, vec!["helper.py"]);
    std::fs::write(repo.path("helper.py"), "weakened").expect("write in place");
    assert_eq!(repo.read("tests/test_a.py"), TEST);
    assert_eq!(
        repo.path("tests/test_a.py")
            .metadata()
            .expect("stat")
            .nlink(),
        1
    );
}

#[test]
fn a_parent_directory_turned_symlink_is_replaced_and_the_outside_is_untouched() {
    let repo = Repo::new();
    let base = Snapshot::scan(&repo.root()).expect("base");
    let elsewhere = repo.outside.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).expect("mkdir");
    std::fs::write(elsewhere.join("test_a.py"), "outside test\n").expect("write");
    std::fs::remove_dir_all(repo.path("tests")).expect("rm");
    std::os::unix::fs::symlink(&elsewhere, repo.path("tests")).expect("ln");
    let report = base
        .check_and_revert(&repo.root(), tests_locked)
        .expect("revert");
    assert_eq!(report.restored, vec!["tests/test_a.py"]);
    let outside = std::fs::read_to_string(elsewhere.join("test_a.py")).expect("read");
    assert_eq!(outside, "outside test\n");
    assert!(
        repo.path("tests")
            .symlink_metadata()
            .expect("lstat")
            .is_dir()
    );
    assert_eq!(repo.read("tests/test_a.py"), TEST);
}

#[test]
fn directories_modes_and_created_files_come_back_to_the_snapshot() {
    let repo = Repo::new();
    let sentinel = repo.sentinel();
    let base = Snapshot::scan(&repo.root()).expect("base");
    std::fs::remove_file(repo.path("tests/test_a.py")).expect("rm");
    repo.write("tests/test_a.py/inner.py", "planted");
    std::os::unix::fs::symlink(&sentinel, repo.path("tests/new.py")).expect("ln");
    let odd = repo
        .root()
        .join(std::ffi::OsStr::from_bytes(b"tests/\xff.py"));
    std::fs::write(&odd, "odd").expect("odd name");
    let report = base
        .check_and_revert(&repo.root(), tests_locked)
        .expect("revert");
    assert_eq!(report.restored, vec!["tests/test_a.py"]);
    let mut removed = report.removed.clone();
    removed.sort();
    assert_eq!(
        removed,
        vec![
            "\"tests/\\377.py\"",
            "tests/new.py",
            "tests/test_a.py/inner.py"
        ]
    );
    assert_eq!(repo.read("tests/test_a.py"), TEST);
    assert!(odd.symlink_metadata().is_err());
    assert_eq!(
        std::fs::read_to_string(&sentinel).expect("sentinel"),
        "outside\n"
    );
    let test = repo.path("tests/test_a.py");
    std::fs::set_permissions(&test, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let report = base
        .check_and_revert(&repo.root(), tests_locked)
        .expect("revert");
    assert_eq!(report.restored, vec!["tests/test_a.py"]);
    assert_eq!(
        test.metadata().expect("stat").permissions().mode() & 0o111,
        0
    );
    assert_eq!(Snapshot::scan(&repo.root()).expect("scan"), base);
}

#[test]
fn index_flags_do_not_hide_an_edit_and_are_reported_and_cleared() {
    let repo = Repo::new();
    let base = Snapshot::scan(&repo.root()).expect("base");
    repo.write("tests/test_a.py", "def test_add():\n    pass\n");
    repo.git(&["update-index", "--assume-unchanged", "tests/test_a.py"]);
    repo.write("calc.py", "def add(a, b):\n    return 5\n");
    repo.git(&["update-index", "--skip-worktree", "calc.py"]);
    assert_eq!(
        repo.git(&["status", "--porcelain"]),
        "",
        "git itself looks away"
    );
    let (now, flagged) = Snapshot::scan_flagged(&repo.root()).expect("scan");
    assert_ne!(now, base);
    let names: Vec<(&str, bool, bool)> = flagged
        .iter()
        .map(|f| (f.path.as_str(), f.assume_unchanged, f.skip_worktree))
        .collect();
    assert_eq!(
        names,
        vec![("calc.py", false, true), ("tests/test_a.py", true, false)]
    );
    let report = base
        .revert_locked(&repo.root(), &now, tests_locked)
        .expect("revert");
    assert_eq!(report.restored, vec!["tests/test_a.py"]);
    assert_eq!(repo.read("tests/test_a.py"), TEST);
    crate::run::clear_index_flags(&repo.root(), &flagged).expect("clear");
    assert_eq!(
        repo.git(&["ls-files", "-v"]),
        "H calc.py\nH tests/test_a.py\n"
    );
    assert_eq!(repo.git(&["status", "--porcelain"]), " M calc.py\n");
}

#[test]
fn a_clean_filter_cannot_make_a_weakened_test_hash_like_the_original() {
    let repo = Repo::new();
    let base = Snapshot::scan(&repo.root()).expect("base");
    let info = repo.root().join(".git/info");
    std::fs::create_dir_all(&info).expect("mkdir");
    std::fs::write(info.join("attributes"), "tests/* filter=x\n").expect("attributes");
    repo.git(&["config", "filter.x.clean", "sed -e 's/or True/== 5/'"]);
    let weakened = TEST.replace("== 5", "or True");
    repo.write("tests/test_a.py", &weakened);
    assert_ne!(
        Snapshot::scan(&repo.root()).expect("scan"),
        base,
        "before staging"
    );
    repo.git(&["add", "tests/test_a.py"]);
    assert_eq!(
        repo.git(&["status", "--porcelain"]),
        "",
        "git sees the original"
    );
    assert_the_test_alone_restored(&repo, &base);
}

#[test]
fn a_filter_driver_from_an_included_config_file_does_not_hide_the_bytes_from_the_scan() {
    let repo = Repo::new();
    let info = repo.root().join(".git/info");
    std::fs::create_dir_all(&info).expect("mkdir");
    std::fs::write(info.join("attributes"), "tests/* filter=x\n").expect("attributes");
    let included = repo.outside.path().join("included");
    std::fs::write(
        &included,
        "[filter \"x\"]\n\tclean = sed -e 's/or True/== 5/'\n",
    )
    .expect("included config");
    repo.git(&["config", "include.path", &included.display().to_string()]);
    let weakened = TEST.replace("== 5", "or True");
    repo.write("tests/test_a.py", &weakened);
    repo.git(&["add", "tests/test_a.py"]);
    assert_eq!(
        repo.git(&["status", "--porcelain"]),
        "",
        "git sees the original"
    );
    let scanned = Snapshot::scan(&repo.root()).expect("scan");
    let blob = repo.git(&["rev-parse", &format!("{}:tests/test_a.py", scanned.tree)]);
    let on_disk = repo.git(&["hash-object", "--no-filters", "tests/test_a.py"]);
    assert_eq!(blob, on_disk, "the scan holds the bytes on disk");
}

#[test]
fn relaxed_stat_settings_do_not_hide_a_same_size_edit() {
    let repo = Repo::new();
    let test = repo.path("tests/test_a.py");
    // An old mtime, so the refreshed index entry is not racily clean.
    let mtime = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_600_000_000);
    let file = std::fs::File::options()
        .write(true)
        .open(&test)
        .expect("open");
    file.set_modified(mtime).expect("set mtime");
    repo.git(&["config", "core.checkStat", "minimal"]);
    repo.git(&["config", "core.trustctime", "false"]);
    repo.git(&["status", "--porcelain"]);
    let base = Snapshot::scan(&repo.root()).expect("base");
    // The edit must land in a later second than the refresh, or even full stat data at
    // git's one-second resolution cannot tell them apart.
    // The file system's clock is the one that counts: touch a probe until it ticks.
    let refreshed = test.metadata().expect("stat").ctime();
    let probe = repo.outside.path().join("probe");
    while {
        std::fs::write(&probe, "").expect("probe");
        probe.metadata().expect("stat").ctime() <= refreshed
    } {
        std::hint::spin_loop();
    }
    let same_size = TEST.replace("== 5", "!= 5");
    std::fs::write(&test, &same_size).expect("write");
    let file = std::fs::File::options()
        .write(true)
        .open(&test)
        .expect("open");
    file.set_modified(mtime).expect("set mtime");
    assert_eq!(
        repo.git(&["diff-files", "--name-only"]),
        "",
        "git looks away"
    );
    assert_the_test_alone_restored(&repo, &base);
}

#[test]
fn staged_deletions_renames_and_odd_names_scan_without_error() {
    let repo = Repo::new();
    let odd = repo.root().join(std::ffi::OsStr::from_bytes(b"\xff.txt"));
    std::fs::write(&odd, "odd").expect("odd");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-qm", "odd"]);
    let base = Snapshot::scan(&repo.root()).expect("base");
    repo.git(&["rm", "-q", "calc.py"]);
    repo.git(&["mv", "tests/test_a.py", "tests/test_moved.py"]);
    std::fs::write(&odd, "changed").expect("odd");
    let now = Snapshot::scan(&repo.root()).expect("scan");
    let mut changes: Vec<(char, String)> = base
        .changes_to(&repo.root(), &now)
        .expect("changes")
        .into_iter()
        .map(|c| (c.status, c.path))
        .collect();
    changes.sort();
    assert_eq!(
        changes,
        vec![
            ('A', "tests/test_moved.py".to_string()),
            ('D', "calc.py".to_string()),
            ('D', "tests/test_a.py".to_string()),
            ('M', "\"\\377.txt\"".to_string()),
        ]
    );
    let report = base
        .revert_locked(&repo.root(), &now, |_| true)
        .expect("revert");
    assert_eq!(report.reverted().len(), 4);
    assert_eq!(std::fs::read(&odd).expect("odd"), b"odd");
    assert_eq!(Snapshot::scan(&repo.root()).expect("scan"), base);
}

#[test]
fn an_edit_behind_a_forged_stat_cache_is_still_reverted() {
    let repo = Repo::new();
    let base = Snapshot::scan(&repo.root()).expect("base");
    let strong = repo.git(&["rev-parse", "HEAD:tests/test_a.py"]);
    // Weaken the test and stage it, so the index holds the weak file's exact stat data;
    // then put the strong blob's id back into that entry, as an agent writing the index
    // file itself could: every stat field matches, the id is a lie.
    std::fs::write(repo.path("tests/test_a.py"), TEST.replace("== 5", "!= 5")).expect("weaken");
    repo.git(&["add", "tests/test_a.py"]);
    let index_path = repo.root().join(".git/index");
    let mut index =
        gix_index::File::at(&index_path, gix_hash::Kind::Sha1, false, Default::default())
            .expect("read the index");
    let oid = gix_hash::ObjectId::from_hex(strong.trim().as_bytes()).expect("oid");
    for (entry, path) in index.entries_mut_with_paths() {
        if path == "tests/test_a.py" {
            entry.id = oid;
        }
    }
    index.write(Default::default()).expect("write the index");
    assert_eq!(
        Snapshot::scan(&repo.root()).expect("scan"),
        base,
        "the forged stat cache hides the edit from the tree"
    );
    assert_the_test_alone_restored(&repo, &base);
}

#[test]
fn an_edit_within_the_second_of_a_refresh_is_seen() {
    let repo = Repo::new();
    let test = repo.path("tests/test_a.py");
    let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_600_000_000);
    let set_old_mtime = || {
        let file = std::fs::File::options()
            .write(true)
            .open(&test)
            .expect("open");
        file.set_modified(old).expect("set mtime");
    };
    let base = Snapshot::scan(&repo.root()).expect("base");
    let same_size = TEST.replace("== 5", "!= 5");
    // Refresh, then edit at once with the mtime put back: git's own stat check compares
    // times to the second and can miss such an edit; the scan compares the change time
    // to the nanosecond.
    for _ in 0..20 {
        std::fs::write(&test, TEST).expect("write");
        set_old_mtime();
        repo.git(&["status", "--porcelain"]);
        std::fs::write(&test, &same_size).expect("write");
        set_old_mtime();
        assert_ne!(Snapshot::scan(&repo.root()).expect("scan"), base);
    }
    assert_the_test_alone_restored(&repo, &base);
}

#[test]
fn a_fifo_in_place_of_a_locked_test_neither_hangs_the_scan_nor_survives_the_lock_check() {
    let repo = Repo::new();
    let base = Snapshot::scan(&repo.root()).expect("base");
    let test = repo.path("tests/test_a.py");
    std::fs::remove_file(&test).expect("remove");
    nix::unistd::mkfifo(&test, nix::sys::stat::Mode::from_bits_truncate(0o644)).expect("mkfifo");
    // A FIFO is nothing git records: to the scan the test is gone.
    let now = Snapshot::scan(&repo.root()).expect("scan");
    let changes: Vec<(char, String)> = base
        .changes_to(&repo.root(), &now)
        .expect("changes")
        .into_iter()
        .map(|c| (c.status, c.path))
        .collect();
    assert_eq!(changes, vec![('D', "tests/test_a.py".to_string())]);
    assert_the_test_alone_restored(&repo, &base);
    assert!(test.symlink_metadata().expect("stat").is_file());
}
