//! The index staged in-process against `git reset`, and what is left to git.

use super::*;

/// A path's mode and blob in the commit, `None` when removed.
type Change = Option<(u32, ObjectId)>;

fn git(root: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(root)
        .output()
        .expect("git");
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The machine's own config left out: only the repository's.
fn env(dir: &Path) -> impl Fn(&str) -> Option<std::ffi::OsString> + use<> {
    let global = dir.join("no-global-config");
    move |var: &str| match var {
        "GIT_CONFIG_NOSYSTEM" => Some("1".into()),
        "GIT_CONFIG_GLOBAL" => Some(global.clone().into_os_string()),
        _ => None,
    }
}

/// A committed repository under `dir`, then changed: the tree of the change (files
/// edited, removed, added, a mode and a link changed) and its paths, with one file
/// written again after the tree was taken.
fn changed_repo(dir: &Path) -> (std::path::PathBuf, String, Vec<String>) {
    let root = dir.join("repo");
    std::fs::create_dir_all(root.join("dir/sub")).expect("mkdir");
    git(&root, &["init", "-q"]);
    git(&root, &["config", "user.name", "t"]);
    git(&root, &["config", "user.email", "t@t"]);
    for (path, text) in [
        ("a.py", "a\n"),
        ("dir/b.py", "b\n"),
        ("dir/sub/c.py", "c\n"),
        ("run.sh", "echo\n"),
        ("same.py", "same\n"),
        ("later.py", "one\n"),
    ] {
        std::fs::write(root.join(path), text).expect("write");
    }
    std::os::unix::fs::symlink("a.py", root.join("link")).expect("ln");
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-qm", "base"]);
    std::fs::write(root.join("a.py"), "a2\n").expect("write");
    std::fs::remove_file(root.join("dir/b.py")).expect("rm");
    std::fs::write(root.join("dir/new.py"), "new\n").expect("write");
    std::fs::write(root.join("n.py"), "n\n").expect("write");
    std::fs::write(root.join("later.py"), "two\n").expect("write");
    let exec = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(root.join("run.sh"), exec).expect("chmod");
    std::fs::remove_file(root.join("link")).expect("rm");
    std::os::unix::fs::symlink("n.py", root.join("link")).expect("ln");
    let paths: Vec<String> = [
        "a.py",
        "dir/b.py",
        "dir/new.py",
        "n.py",
        "later.py",
        "run.sh",
        "link",
    ]
    .map(String::from)
    .to_vec();
    // The tree as scanned, taken through an index of its own.
    let scratch = dir.join("scratch-index");
    let out = std::process::Command::new("git")
        .args(["add", "-A"])
        .env("GIT_INDEX_FILE", &scratch)
        .current_dir(&root)
        .output()
        .expect("git add");
    assert!(out.status.success());
    let out = std::process::Command::new("git")
        .arg("write-tree")
        .env("GIT_INDEX_FILE", &scratch)
        .current_dir(&root)
        .output()
        .expect("git write-tree");
    let tree = String::from_utf8_lossy(&out.stdout).trim().to_string();
    // Written again after the scan: its entry takes the tree's blob, not its stat.
    std::fs::write(root.join("later.py"), "three\n").expect("write");
    // Long before the index is written, so only its content tells it changed.
    let past = filetime::FileTime::from_unix_time(1_600_000_000, 0);
    filetime::set_symlink_file_times(root.join("later.py"), past, past).expect("touch");
    (root, tree, paths)
}

fn staged(root: &Path, tree: &str, paths: &[String]) -> Vec<(Vec<u8>, Change)> {
    paths
        .iter()
        .map(|path| {
            let line = git(root, &["ls-tree", tree, "--", path]);
            let new = line.split_whitespace().collect::<Vec<_>>();
            let new = (!new.is_empty()).then(|| {
                let mode = u32::from_str_radix(new[0], 8).expect("mode");
                (mode, ObjectId::from_hex(new[2].as_bytes()).expect("id"))
            });
            (path.as_bytes().to_vec(), new)
        })
        .collect()
}

#[test]
fn the_committed_entries_are_staged_as_git_reset_stages_them() {
    let dir = tempfile::tempdir().expect("dir");
    let (root, tree, paths) = changed_repo(dir.path());
    let twin = dir.path().join("twin");
    let copied = std::process::Command::new("cp")
        .args([
            "-a",
            &root.display().to_string(),
            &twin.display().to_string(),
        ])
        .status()
        .expect("cp");
    assert!(copied.success());
    let mut reset = vec!["--literal-pathspecs", "reset", "-q", &tree, "--"];
    reset.extend(paths.iter().map(String::as_str));
    git(&twin, &reset);
    let located = super::super::locate(&root).expect("located");
    let entries = staged(&root, &tree, &paths);
    let entries: Vec<Staged<'_>> = entries.iter().map(|(p, n)| (p.as_slice(), *n)).collect();
    assert!(
        located
            .stage_in(&entries, &env(dir.path()))
            .expect("staged")
    );
    assert!(!located.git_dir.join("index.lock").exists());
    // Same entries, same files clean by their stat data alone, same trees built.
    for args in [
        &["ls-files", "-s"][..],
        &["diff-files", "--name-status"],
        &["write-tree"],
        &["status", "--porcelain"],
    ] {
        assert_eq!(git(&root, args), git(&twin, args), "{args:?}");
    }
    assert_eq!(git(&root, &["diff-files", "--name-only"]), "later.py\n");
    assert_eq!(git(&root, &["write-tree"]).trim(), tree);
}

#[test]
fn an_index_git_would_write_otherwise_is_left_to_git() {
    let dir = tempfile::tempdir().expect("dir");
    let (root, tree, paths) = changed_repo(dir.path());
    let located = super::super::locate(&root).expect("located");
    let entries = staged(&root, &tree, &paths);
    let entries: Vec<Staged<'_>> = entries.iter().map(|(p, n)| (p.as_slice(), *n)).collect();
    let index = located.git_dir.join("index");
    let left_to_git = |why: &str, env: &dyn Fn(&str) -> Option<std::ffi::OsString>| {
        let before = std::fs::read(&index).expect("index");
        assert!(!located.stage_in(&entries, env).expect(why), "{why}");
        assert_eq!(std::fs::read(&index).expect("index"), before, "{why}");
    };
    let env = env(dir.path());
    // A lock held by another: theirs stays.
    std::fs::write(located.git_dir.join("index.lock"), "").expect("lock");
    left_to_git("a held lock", &env);
    assert!(located.git_dir.join("index.lock").exists());
    std::fs::remove_file(located.git_dir.join("index.lock")).expect("unlock");
    let hook = located.common_dir.join("hooks/post-index-change");
    std::fs::write(&hook, "#!/bin/sh\n").expect("hook");
    left_to_git("a post-index-change hook", &env);
    std::fs::remove_file(&hook).expect("rm hook");
    git(&root, &["config", "core.fsync", "index"]);
    left_to_git("the index synced to disk", &env);
    git(&root, &["config", "--unset", "core.fsync"]);
    let with_parameters = |var: &str| match var {
        "GIT_CONFIG_PARAMETERS" => Some("'core.fsync'='index'".into()),
        other => env(other),
    };
    left_to_git("configuration in the environment", &with_parameters);
    // Flags git obeys, and indexes this does not write back as read.
    for (why, set, unset) in [
        (
            "skip-worktree",
            &["update-index", "--skip-worktree", "a.py"][..],
            &["update-index", "--no-skip-worktree", "a.py"][..],
        ),
        (
            "assume-unchanged",
            &["update-index", "--assume-unchanged", "a.py"],
            &["update-index", "--no-assume-unchanged", "a.py"],
        ),
        (
            "version 4",
            &["update-index", "--index-version", "4"],
            &["update-index", "--index-version", "2"],
        ),
        (
            "a split index",
            &["update-index", "--split-index"],
            &["update-index", "--no-split-index"],
        ),
        (
            "an untracked cache",
            &["update-index", "--untracked-cache"],
            &["update-index", "--no-untracked-cache"],
        ),
    ] {
        git(&root, set);
        git(&root, &["status", "--porcelain"]);
        left_to_git(why, &env);
        git(&root, unset);
    }
    // A file staged where a directory of entries stands.
    let over: Vec<Staged<'_>> = vec![(b"dir", entries[0].1)];
    let before = std::fs::read(&index).expect("index");
    assert!(!located.stage_in(&over, &env).expect("over a directory"));
    assert_eq!(std::fs::read(&index).expect("index"), before);
    // With none of those, it is staged.
    assert!(located.stage_in(&entries, &env).expect("staged"));
    assert_eq!(git(&root, &["write-tree"]).trim(), tree);
}
