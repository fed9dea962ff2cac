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

#[test]
fn tracked_files_in_ignored_directories_are_found_whatever_their_siblings_names() {
    // Names that sort around `a/` in byte order (`-` and `.` before `/`, `0` right after),
    // all ignored and tracked by force: a directory whose tracked entries the walk failed
    // to find would be skipped as ignored, and its files would be missing from the tree.
    let repo = Repo::new();
    repo.write(".gitignore", "*\n!.gitignore\n");
    let tracked = [
        "a-b/x", "a.c", "a/b/c", "a/b.c", "a/b-c/g", "a/b/d/e", "a/d", "a0/e", "ab/f",
    ];
    for path in tracked {
        repo.write(path, path);
        repo.git(&["add", "-f", path]);
    }
    repo.git(&["add", ".gitignore"]);
    repo.git(&["commit", "-qm", "ignored but tracked"]);
    for path in ["a/b/c", "a0/e", "a/b/d/e"] {
        repo.write(path, "changed, and longer than before");
    }
    repo.write("a/b/new", "untracked and ignored");
    let scanned = scan(&repo.root()).expect("scan");
    let listing = ls_tree(&repo, &scanned.tree);
    for path in tracked {
        assert!(
            listing.contains(&format!("\t{path}\n")),
            "{path} in {listing}"
        );
    }
    assert_eq!(
        listing,
        ls_tree(&repo, &git_tree(&repo)),
        "the scan's tree against git's"
    );
}

#[test]
fn an_index_that_is_not_a_regular_file_is_an_error_not_a_hang() {
    let repo = Repo::new();
    let index = repo.root().join(".git/index");
    std::fs::remove_file(&index).expect("remove the index");
    nix::unistd::mkfifo(&index, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let root = repo.root();
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(scan(&root).map(|s| s.tree));
    });
    let outcome = receive
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("the scan returns instead of waiting for a writer");
    let error = outcome.expect_err("a FIFO is no index").to_string();
    assert!(error.contains(".git/index"), "{error}");
}

/// What `git update-index --index-info` then `git write-tree` make of `base` and `info`
/// (records of `MODE SP ID TAB PATH NUL`), in a scratch index.
fn git_edit(repo: &Repo, base: &str, info: &[u8]) -> String {
    let index = repo.outside.path().join("edit-index");
    let run = |args: &[&str], stdin: Option<&[u8]>| {
        let mut cmd = std::process::Command::new("git");
        cmd.args(args)
            .current_dir(repo.root())
            .env("GIT_INDEX_FILE", &index);
        crate::git::run_piped(cmd, stdin, "edit", &[]).expect("git edits")
    };
    run(&["read-tree", base], None);
    run(&["update-index", "-z", "--index-info"], Some(info));
    String::from_utf8_lossy(&run(&["write-tree"], None))
        .trim()
        .to_string()
}

#[test]
fn trees_edited_listed_and_diffed_in_process_agree_with_git() {
    let repo = Repo::new();
    repo.write("docs/a/b.md", "b");
    repo.write("docs/c.md", "c");
    repo.write("x", "a file that becomes a directory");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-qm", "more"]);
    let base = repo.git(&["rev-parse", "HEAD^{tree}"]).trim().to_string();
    let blob = repo
        .git(&["hash-object", "-w", "--stdin"])
        .trim()
        .to_string();
    let id = |hex: &str| gix_hash::ObjectId::from_hex(hex.as_bytes()).expect("id");
    let edits: Vec<trees::Edit<'_>> = vec![
        (b"calc.py", None),
        (b"docs/a/b.md", None),
        (b"docs/new/deep/e.md", Some((0o100755, id(&blob)))),
        (b"tests/test_a.py", Some((0o120000, id(&blob)))),
        (b"x", None),
        (b"x/inside.md", Some((0o100644, id(&blob)))),
    ];
    let mut info = Vec::new();
    for (path, side) in &edits {
        let record = match side {
            Some((mode, oid)) => format!("{mode:o} {oid}\t"),
            None => format!("0 {}\t", "0".repeat(40)),
        };
        info.extend_from_slice(record.as_bytes());
        info.extend_from_slice(path);
        info.push(0);
    }
    let objects = locate(&repo.root()).expect("locate").objects();
    let edited = objects.edit_tree(&base, &edits).expect("edit").to_string();
    assert_eq!(edited, git_edit(&repo, &base, &info), "the edited tree");

    let listed: String = objects
        .list_tree(&edited)
        .expect("list")
        .iter()
        .map(|(path, (mode, oid))| {
            let kind = if *mode == 0o160000 { "commit" } else { "blob" };
            format!(
                "{mode:06o} {kind} {oid}\t{}\n",
                String::from_utf8_lossy(path)
            )
        })
        .collect();
    assert_eq!(listed, ls_tree(&repo, &edited), "the listing");

    let diffed: String = objects
        .diff_trees(&base, &edited)
        .expect("diff")
        .iter()
        .map(|c| format!("{} {}\n", c.status, String::from_utf8_lossy(&c.path)))
        .collect();
    let by_git: String = repo
        .git(&[
            "diff-tree",
            "-r",
            "--no-renames",
            "--name-status",
            &base,
            &edited,
        ])
        .lines()
        .map(|l| l.replacen('\t', " ", 1) + "\n")
        .collect();
    assert_eq!(diffed, by_git, "the diff");
    let at = objects
        .entry_at(&edited, b"docs/new/deep/e.md")
        .expect("entry");
    assert_eq!(at, Some((0o100755, id(&blob))));
    assert_eq!(
        objects.entry_at(&edited, b"docs/a/b.md").expect("entry"),
        None
    );
}

#[test]
fn head_and_kept_trees_read_and_write_refs_as_git_does() {
    let repo = Repo::new();
    let located = locate(&repo.root()).expect("locate");
    let objects = located.objects();
    let by_git = |rev: &str| repo.git(&["rev-parse", rev]).trim().to_string();
    let head = |located: &Located| {
        located
            .head(&located.objects())
            .expect("a readable HEAD")
            .map(|(commit, tree)| (commit.to_string(), tree.to_string()))
    };
    let expected = || Some((by_git("HEAD"), by_git("HEAD^{tree}")));
    assert_eq!(head(&located), expected(), "a loose branch ref");
    repo.git(&["pack-refs", "--all"]);
    assert_eq!(head(&located), expected(), "a packed branch ref");
    repo.git(&["checkout", "-q", "--detach"]);
    assert_eq!(head(&located), expected(), "a detached HEAD");
    let wt = repo.outside.path().join("wt");
    let wt_arg = wt.to_str().expect("utf-8 path");
    repo.git(&["worktree", "add", "-q", "-b", "side", wt_arg]);
    std::fs::write(wt.join("side.txt"), "side").expect("write");
    let commit = |dir: &std::path::Path| {
        let out = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qam",
                "side",
            ])
            .current_dir(dir)
            .output()
            .expect("git");
        assert!(out.status.success());
    };
    repo.git(&["-C", wt_arg, "add", "side.txt"]);
    commit(&wt);
    let in_wt = locate(&wt).expect("locate the worktree");
    let wt_head = repo
        .git(&["-C", wt_arg, "rev-parse", "HEAD"])
        .trim()
        .to_string();
    assert_eq!(
        in_wt
            .head(&in_wt.objects())
            .expect("a readable HEAD")
            .map(|h| h.0.to_string()),
        Some(wt_head)
    );

    let tree = by_git("HEAD^{tree}");
    assert!(
        located
            .keep_tree(&objects, "run-1/cycle-2", &tree, "tdd snapshot x")
            .expect("keep")
    );
    assert_eq!(by_git("refs/tdd/run-1/cycle-2^{tree}"), tree);
    repo.git(&["fsck", "--strict", "--no-dangling"]);
    assert!(
        !located
            .keep_tree(&objects, "../escape", &tree, "x")
            .expect("refused")
    );
    let unborn = tempfile::tempdir().expect("dir");
    let out = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(unborn.path())
        .output()
        .expect("git init");
    assert!(out.status.success());
    let unborn = locate(unborn.path()).expect("locate");
    assert_eq!(
        unborn
            .head(&unborn.objects())
            .expect("an unborn HEAD reads"),
        None,
        "an unborn branch"
    );
}

#[test]
fn a_split_index_and_index_version_4_scan_as_git_sees_them() {
    for setup in [
        &["update-index", "--split-index"][..],
        &["update-index", "--index-version", "4"][..],
    ] {
        let repo = Repo::new();
        repo.git(setup);
        repo.write("tests/test_b.py", "new");
        repo.git(&["add", "tests/test_b.py"]);
        repo.write("calc.py", "changed");
        repo.write("untracked.txt", "untracked");
        let scanned = scan(&repo.root()).expect("scan");
        assert_eq!(
            ls_tree(&repo, &scanned.tree),
            ls_tree(&repo, &git_tree(&repo)),
            "{setup:?}"
        );
    }
}

#[test]
fn a_sparse_index_keeps_the_directories_it_leaves_out() {
    let repo = Repo::new();
    repo.write("far/away/f.txt", "far");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-qm", "far"]);
    repo.git(&[
        "sparse-checkout",
        "set",
        "--cone",
        "--sparse-index",
        "tests",
    ]);
    assert!(!repo.path("far").exists(), "far/ is not checked out");
    repo.write("tests/test_b.py", "new");
    let scanned = scan(&repo.root()).expect("scan");
    let listing = ls_tree(&repo, &scanned.tree);
    assert!(listing.contains("\tfar/away/f.txt"), "{listing}");
    assert!(listing.contains("\ttests/test_b.py"), "{listing}");
}

#[test]
fn a_packed_refs_file_not_as_git_writes_it_is_left_to_git() {
    let dir = tempfile::tempdir().expect("dir");
    let git_dir = dir.path().join(".git");
    std::fs::create_dir_all(git_dir.join("refs/tdd")).expect("mkdir");
    let located = Located {
        root: dir.path().to_path_buf(),
        git_dir: git_dir.clone(),
        common_dir: git_dir.clone(),
    };
    let id = "1234567890123456789012345678901234567890";
    let name = "refs/tdd/ledger/main";
    let with = |text: &str| {
        std::fs::write(git_dir.join("packed-refs"), text).expect("write");
        located.read_ref(name)
    };
    let found = RefRead::Found(gix_hash::ObjectId::from_hex(id.as_bytes()).expect("id"));
    assert_eq!(
        with(&format!("# pack-refs with: peeled\n{id} {name}\n")),
        found
    );
    assert_eq!(with(&format!("{id} refs/tdd/other\n")), RefRead::Absent);
    // A carriage return, a tab, a last line unended, a name git refuses, a bad id:
    // git reads each otherwise, or not at all, so it is asked.
    for odd in [
        format!("{id} {name}\r\n"),
        format!("{id}\t{name}\n"),
        format!("{id} {name}"),
        format!("{id} refs/tdd/a b\n{id} {name}\n"),
        format!("xyz {name}\n"),
    ] {
        assert_eq!(with(&odd), RefRead::Unread, "{odd:?}");
        assert_eq!(located.refs_under("refs/tdd/ledger/"), None, "{odd:?}");
    }
    std::fs::remove_file(git_dir.join("packed-refs")).expect("rm");
    assert_eq!(located.read_ref(name), RefRead::Absent);
    std::os::unix::fs::symlink("/nonexistent", git_dir.join("packed-refs")).expect("ln");
    assert_eq!(located.read_ref(name), RefRead::Unread);
}

#[test]
fn the_engine_moves_its_refs_as_git_update_ref_would_or_leaves_them_to_git() {
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().join("repo");
    std::fs::create_dir(&root).expect("mkdir");
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&root)
            .output()
            .expect("git");
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    git(&["init", "-q"]);
    let located = locate(&root).expect("located");
    // Only the repository's own config: none of the machine's.
    let global = dir.path().join("no-global-config");
    let env = move |var: &str| match var {
        "GIT_CONFIG_NOSYSTEM" => Some("1".into()),
        "GIT_CONFIG_GLOBAL" => Some(global.clone().into_os_string()),
        _ => None,
    };
    // Three commits, so git packs the refs that name them.
    let commit = |message: &str| {
        let argv = ["-c", "user.name=t", "-c", "user.email=t@t", "commit"];
        git(&[&argv[..], &["-q", "--allow-empty", "-m", message]].concat());
        gix_hash::ObjectId::from_hex(git(&["rev-parse", "HEAD"]).as_bytes()).expect("id")
    };
    let (a, b, c) = (commit("a"), commit("b"), commit("c"));
    let name = "refs/tdd/ledger/feature/x";
    let lock = located.common_dir.join(format!("{name}.lock"));
    // Made where there was none, moved from the value it holds.
    assert!(located.move_ref_in(name, &a, None, &env).expect("made"));
    assert!(
        located
            .move_ref_in(name, &b, Some(&a), &env)
            .expect("moved")
    );
    assert_eq!(located.read_ref(name), RefRead::Found(b));
    // From a value it does not hold, or made again: refused, unchanged, no lock left.
    for old in [Some(&a), None] {
        let err = located
            .move_ref_in(name, &c, old, &env)
            .expect_err("refused");
        assert!(err.to_string().contains("cannot lock ref"), "{err}");
        assert_eq!(located.read_ref(name), RefRead::Found(b));
        assert!(!lock.exists());
    }
    // Held by another: refused, and their lock is theirs.
    std::fs::write(&lock, "").expect("lock");
    let err = located
        .move_ref_in(name, &c, Some(&b), &env)
        .expect_err("locked");
    assert!(err.to_string().contains("another process"), "{err}");
    assert!(lock.exists());
    std::fs::remove_file(&lock).expect("unlock");
    // Packed, it is moved from its packed value: the loose file takes over.
    git(&["pack-refs", "--all"]);
    assert!(!located.common_dir.join(name).exists());
    assert!(
        located
            .move_ref_in(name, &c, Some(&b), &env)
            .expect("moved")
    );
    assert_eq!(git(&["rev-parse", name]), c.to_string());
    // A reflog, a hook or configuration that bears on it: left to git, untouched.
    let left_to_git = |why: &str| {
        assert!(
            !located.move_ref_in(name, &a, Some(&c), &env).expect(why),
            "{why}"
        );
        assert_eq!(located.read_ref(name), RefRead::Found(c), "{why}");
    };
    git(&["config", "core.logAllRefUpdates", "always"]);
    left_to_git("a config that keeps reflogs of every ref");
    git(&["config", "--unset", "core.logAllRefUpdates"]);
    let hook = located.common_dir.join("hooks/reference-transaction");
    std::fs::create_dir_all(hook.parent().expect("hooks")).expect("hooks");
    std::fs::write(&hook, "#!/bin/sh\n").expect("hook");
    left_to_git("a reference-transaction hook");
    std::fs::remove_file(&hook).expect("rm hook");
    let log = located.common_dir.join("logs").join(name);
    std::fs::create_dir_all(log.parent().expect("logs")).expect("logs");
    std::fs::write(&log, "").expect("log");
    left_to_git("a reflog kept for the ref");
    std::fs::remove_file(&log).expect("rm log");
    let with_parameters = |var: &str| match var {
        "GIT_CONFIG_PARAMETERS" => Some("'core.logallrefupdates'='always'".into()),
        other => env(other),
    };
    assert!(
        !located
            .move_ref_in(name, &a, Some(&c), &with_parameters)
            .expect("left")
    );
    // A directory of its path that is a link: nothing is written through it.
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).expect("outside");
    let linked = "refs/tdd/linked/main";
    std::os::unix::fs::symlink(&outside, located.common_dir.join("refs/tdd/linked")).expect("link");
    assert!(!located.move_ref_in(linked, &a, None, &env).expect("left"));
    assert_eq!(std::fs::read_dir(&outside).expect("ls").count(), 0);
    // With none of those, it moves again.
    assert!(
        located
            .move_ref_in(name, &a, Some(&c), &env)
            .expect("moved")
    );
    assert_eq!(git(&["rev-parse", name]), a.to_string());
}
