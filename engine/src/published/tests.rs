use std::path::Path;
use std::process::Command;

use super::*;
use crate::ledger::Ledger;
use gix_object::tree::EntryKind;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `git ARGS` in `dir` with `input` on its stdin; its output, trimmed.
fn git_with_input(dir: &Path, args: &[&str], input: &str) -> String {
    use std::io::Write as _;
    let mut child = Command::new("git")
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("git runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("input written");
    let out = child.wait_with_output().expect("git ends");
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A repository on branch `work` and a ledger of `n` events beside it.
fn repo_with(n: usize) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).expect("repo dir");
    git(&repo, &["init", "-q", "-b", "work"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "init"]);
    let database = dir.path().join("ledger/ledger.sqlite3");
    let mut ledger = Ledger::open(&database).expect("ledger");
    for i in 0..n {
        ledger
            .append(
                Some("run-1"),
                "note",
                &serde_json::json!({ "text": format!("event {i}") }),
            )
            .expect("append");
    }
    (dir, database)
}

fn append(database: &Path, n: usize) {
    let mut ledger = Ledger::open(database).expect("ledger");
    for i in 0..n {
        ledger
            .append(None, "note", &serde_json::json!({ "more": i }))
            .expect("append");
    }
}

#[test]
fn the_events_after_the_full_chunks_are_kept_in_pieces_that_follow_on() {
    assert_eq!(export::layout(0), Vec::<(u64, u64)>::new());
    assert_eq!(export::layout(5), vec![(1, 5)]);
    let p = export::PIECE;
    assert_eq!(
        export::layout(2 * p + 3),
        vec![(1, p), (p + 1, 2 * p), (2 * p + 1, 2 * p + 3)]
    );
    let full = export::CHUNK;
    assert_eq!(export::layout(full), vec![(1, full)]);
    assert_eq!(
        export::layout(full + p + 1),
        vec![
            (1, full),
            (full + 1, full + p),
            (full + p + 1, full + p + 1)
        ]
    );
    for count in [1, p - 1, p, p + 1, 1023, 1024, 1025, 2047, 2048, 2100] {
        let spans = export::layout(count);
        let mut next = 1;
        for (first, last) in &spans {
            assert_eq!(*first, next, "{count}: {spans:?}");
            assert!(last >= first && last - first < export::CHUNK);
            next = last + 1;
        }
        assert_eq!(next, count + 1, "{count}: {spans:?}");
    }
}

#[test]
fn a_publication_writes_again_only_the_piece_its_events_fall_in() {
    let (full, p) = (export::CHUNK, export::PIECE);
    let (dir, database) = repo_with(usize::try_from(full + p + 3).expect("fits"));
    let repo = dir.path().join("repo");
    let first = publish(&database, &repo, &[])
        .expect("publishes")
        .expect("a branch");
    append(&database, 3);
    let second = publish(&database, &repo, &[])
        .expect("publishes")
        .expect("a branch");
    let blob = |commit: &str, first: u64| {
        let name = export::chunk_name(first);
        git(&repo, &["rev-parse", &format!("{commit}:events/{name}")])
    };
    assert_eq!(second.events, full + p + 6);
    // The full chunk and the full piece are the same blobs; the last piece grew.
    assert_eq!(blob(&first.commit, 1), blob(&second.commit, 1));
    assert_eq!(
        blob(&first.commit, full + 1),
        blob(&second.commit, full + 1)
    );
    assert_ne!(
        blob(&first.commit, full + p + 1),
        blob(&second.commit, full + p + 1)
    );
    // Filled, the stretch becomes one chunk, and the chain reads back whole.
    append(&database, usize::try_from(full - p - 6).expect("fits"));
    let third = publish(&database, &repo, &[])
        .expect("publishes")
        .expect("a branch");
    assert_eq!(third.events, 2 * full);
    let names = git(
        &repo,
        &[
            "ls-tree",
            "--name-only",
            &format!("{}:events", third.commit),
        ],
    );
    assert_eq!(
        names.lines().collect::<Vec<_>>(),
        ["0000000001.jsonl", "0000001025.jsonl"]
    );
    let other = dir.path().join("other/ledger.sqlite3");
    let adoption =
        adopt(&repo, false, |events| Ledger::open(&other)?.import(events)).expect("adopts");
    assert!(matches!(adoption, Adoption::Imported { appended, .. } if appended == 2 * full));
}

#[test]
fn a_published_chain_is_read_back_byte_for_byte_and_moves_the_ref_forward() {
    let (dir, database) = repo_with(export::CHUNK as usize + 5);
    let repo = dir.path().join("repo");
    let first = publish(&database, &repo, &[])
        .expect("publishes")
        .expect("a branch");
    assert_eq!(first.reference, "refs/tdd/ledger/work");
    assert!(first.written);
    // Nothing new: the ref stays.
    let again = publish(&database, &repo, &[])
        .expect("publishes")
        .expect("a branch");
    assert!(!again.written);
    assert_eq!(again.commit, first.commit);
    append(&database, 3);
    let second = publish(&database, &repo, &[])
        .expect("publishes")
        .expect("a branch");
    assert_eq!(second.events, export::CHUNK + 8);
    // Each export is the child of the one before, and the full chunk is the same blob.
    assert_eq!(
        git(&repo, &["rev-parse", &format!("{}^", second.commit)]),
        first.commit
    );
    let chunk = |commit: &str| {
        git(
            &repo,
            &["rev-parse", &format!("{commit}:events/0000000001.jsonl")],
        )
    };
    assert_eq!(chunk(&first.commit), chunk(&second.commit));
    // Taken into an empty ledger, the chain is the same, event for event.
    let other = dir.path().join("other/ledger.sqlite3");
    let adoption =
        adopt(&repo, false, |events| Ledger::open(&other)?.import(events)).expect("adopts");
    assert!(
        matches!(adoption, Adoption::Imported { appended, .. } if appended == export::CHUNK + 8)
    );
    let ours = Ledger::open(&database)
        .expect("ours")
        .stored_events_after(0)
        .expect("read");
    let theirs = Ledger::open(&other)
        .expect("theirs")
        .stored_events_after(0)
        .expect("read");
    assert_eq!(ours, theirs);
}

#[test]
fn an_export_that_is_not_as_tdd_writes_it_is_refused_naming_what() {
    let (dir, database) = repo_with(4);
    let repo = dir.path().join("repo");
    let published = publish(&database, &repo, &[])
        .expect("publishes")
        .expect("a branch");
    // The head declares more events than the chunks hold.
    let tree = git(
        &repo,
        &["rev-parse", &format!("{}^{{tree}}", published.commit)],
    );
    let listing = git(&repo, &["ls-tree", &tree]);
    let head = git_with_input(
        &repo,
        &["hash-object", "-w", "--stdin"],
        &format!("9:{}\n", "a".repeat(64)),
    );
    let forged: String = listing
        .lines()
        .map(|l| {
            if l.ends_with("\thead") {
                format!("100644 blob {head}\thead\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let tree = git_with_input(&repo, &["mktree"], &forged);
    let commit = git(&repo, &["commit-tree", &tree, "-m", "forged"]);
    git(&repo, &["update-ref", &published.reference, &commit]);
    let other = dir.path().join("other/ledger.sqlite3");
    let refused =
        adopt(&repo, false, |events| Ledger::open(&other)?.import(events)).expect_err("refused");
    assert!(
        matches!(&refused, PublishError::Malformed { what, .. } if what.contains("declares 9 events")),
        "{refused}"
    );
}

/// The published ledger's root entries with the one named `name` made to name `id` under
/// `kind`, whatever the object is: a tree git's own `mktree` would refuse to write.
fn forge_entry(repo: &Path, commit: &str, name: &str, kind: EntryKind, id: &str) -> String {
    let objects = crate::run::scan::locate(repo).expect("locate").objects();
    let tree = git(repo, &["rev-parse", &format!("{commit}^{{tree}}")]);
    let entries = git(repo, &["ls-tree", &tree])
        .lines()
        .map(|line| {
            let (meta, filename) = line.split_once('\t').expect("an entry");
            let (mode, oid) = meta
                .split_once(' ')
                .and_then(|(mode, rest)| Some((mode, rest.split_once(' ')?.1)))
                .expect("mode and id");
            let (mode, oid) = if filename == name {
                (kind.into(), id)
            } else if mode == "040000" {
                (EntryKind::Tree.into(), oid)
            } else {
                (EntryKind::Blob.into(), oid)
            };
            gix_object::tree::Entry {
                mode,
                filename: filename.into(),
                oid: ObjectId::from_hex(oid.as_bytes()).expect("an id"),
            }
        })
        .collect();
    let tree = objects
        .write_tree(&gix_object::Tree { entries })
        .expect("written");
    git(repo, &["commit-tree", &tree.to_string(), "-m", "forged"])
}

#[test]
fn an_entry_naming_an_object_of_another_kind_is_a_malformed_export() {
    let (dir, database) = repo_with(4);
    let repo = dir.path().join("repo");
    let published = publish(&database, &repo, &[])
        .expect("publishes")
        .expect("a branch");
    let events = git(
        &repo,
        &["rev-parse", &format!("{}:events", published.commit)],
    );
    let head = git(&repo, &["rev-parse", &format!("{}:head", published.commit)]);
    let other = dir.path().join("other/ledger.sqlite3");
    for (name, kind, id, said) in [
        ("head", EntryKind::Blob, &events, "is a tree, not a file"),
        (
            "events",
            EntryKind::Tree,
            &head,
            "is a blob, not a directory",
        ),
    ] {
        let forged = forge_entry(&repo, &published.commit, name, kind, id);
        git(&repo, &["update-ref", &published.reference, &forged]);
        let refused = adopt(&repo, false, |events| Ledger::open(&other)?.import(events))
            .expect_err("refused");
        assert!(
            matches!(&refused, PublishError::Malformed { what, .. } if what.contains(said)),
            "{name}: {refused}"
        );
        // A publication writes over it.
        let again = publish(&database, &repo, &[])
            .expect("publishes over it")
            .expect("a branch");
        assert_eq!(again.events, 4, "{name}");
    }
}

#[test]
fn a_detached_head_or_no_ref_is_unpublished() {
    let (dir, database) = repo_with(2);
    let repo = dir.path().join("repo");
    let none = adopt(&repo, false, |_| unreachable!("nothing to take in")).expect("asks");
    assert_eq!(
        none,
        Adoption::Unpublished {
            branch: Some("work".into()),
            remote: None
        }
    );
    git(&repo, &["checkout", "-q", "--detach"]);
    assert_eq!(publish(&database, &repo, &[]).expect("runs"), None);
}

/// The trees of `refs/tdd/<run>/` as git lists them.
fn trees_by_git(repo: &Path, run: &str) -> Vec<String> {
    git(
        repo,
        &[
            "for-each-ref",
            "--format=%(tree)",
            &format!("refs/tdd/{run}/"),
        ],
    )
    .lines()
    .map(str::to_string)
    .collect()
}

#[test]
fn the_refs_read_in_process_are_those_git_reads_loose_or_packed() {
    let (dir, database) = repo_with(3);
    let repo = dir.path().join("repo");
    let tree = |text: &str| {
        let blob = git_with_input(&repo, &["hash-object", "-w", "--stdin"], text);
        let tree = git_with_input(&repo, &["mktree"], &format!("100644 blob {blob}\tf\n"));
        git(&repo, &["commit-tree", &tree, "-m", text])
    };
    let (a, b, c) = (tree("a"), tree("b"), tree("c"));
    git(&repo, &["update-ref", "refs/tdd/run-1/cycle-1-red", &a]);
    git(
        &repo,
        &["update-ref", "refs/tdd/run-1/deep/cycle-2-green", &b],
    );
    git(&repo, &["update-ref", "refs/tdd/run-2/cycle-1-red", &c]);
    assert_eq!(
        snapshot_trees(&repo, "run-1").expect("read"),
        trees_by_git(&repo, "run-1")
    );
    assert_eq!(snapshot_trees(&repo, "run-1").expect("read").len(), 2);
    // Packed, then one of them moved again as a loose file over its packed line.
    git(&repo, &["pack-refs", "--all"]);
    assert_eq!(
        snapshot_trees(&repo, "run-1").expect("read"),
        trees_by_git(&repo, "run-1")
    );
    git(&repo, &["update-ref", "refs/tdd/run-1/cycle-1-red", &c]);
    assert_eq!(
        snapshot_trees(&repo, "run-1").expect("read"),
        trees_by_git(&repo, "run-1")
    );
    assert!(snapshot_trees(&repo, "run-3").expect("read").is_empty());

    // The ledger ref, once packed, is still the previous export the next one follows.
    let first = publish(&database, &repo, &[])
        .expect("publishes")
        .expect("some");
    git(&repo, &["pack-refs", "--all"]);
    append(&database, 2);
    let second = publish(&database, &repo, &[])
        .expect("publishes")
        .expect("some");
    let parent = git(&repo, &["rev-parse", &format!("{}^", second.commit)]);
    assert_eq!(parent, first.commit);

    assert_eq!(
        current_branch(&repo).expect("read"),
        Some("work".to_string())
    );
    git(&repo, &["checkout", "-q", "-b", "feature/x"]);
    assert_eq!(
        current_branch(&repo).expect("read"),
        Some("feature/x".to_string())
    );
    git(&repo, &["checkout", "-q", "--detach"]);
    assert_eq!(current_branch(&repo).expect("read"), None);
}
