//! The scan behind a snapshot: the bytes on disk, whatever the index or the config claim.
//!
//! The scan runs in-process: it reads a copy of the user's index, walks the work tree
//! once on every core, and writes the blobs and trees itself. It uses the index only as
//! a stat cache, and trusts nothing in it that the agent could have bent:
//!
//! - an entry is taken as recorded only when its kind, executable bit, size, inode,
//!   owner, and modification and change times all match the file (whatever
//!   `core.checkStat`, `core.trustctime` or `core.ignoreStat` say), and it is not
//!   racily clean; no fsmonitor daemon or untracked cache is asked;
//! - entries flagged assume-unchanged or skip-worktree are hashed from disk
//!   whatever git would say of them, and reported ([`FlaggedPath`]);
//! - every changed or untracked path is hashed from its exact bytes, its mode
//!   taken from `lstat`, a symlink's target hashed as a blob, so a `clean`
//!   filter cannot make new bytes hash like old ones;
//! - when a filter driver is configured, every tracked file the driver
//!   applies to is hashed from disk, since a staged copy may hold the
//!   filter's output rather than the bytes.
//!
//! A lock check hashes every locked file from disk regardless (see
//! [`crate::run::Snapshot::revert_locked`]), so a forged stat cache can hide a change
//! from the tree but never from the locks.

use std::collections::BTreeSet;
use std::collections::HashMap;
use std::collections::HashSet;
use std::path::Path;
use std::path::PathBuf;

use gix_index::entry::Flags;
use serde::Serialize;

use super::safe_fs;
use crate::git::Git;
use crate::git::GitError;
use crate::repo_path;

mod head;
mod ignores;
mod index;
mod listed;
mod objects;
mod refs;
mod settings;
mod stage;
mod tree;
mod trees;
mod walk;

pub(crate) use head::HeadMove;
use ignores::Base;
use index::Index;
pub(crate) use listed::Listed;
pub(crate) use listed::TreeFile;
pub(crate) use listed::take_listed;
pub(crate) use objects::Checked;
pub(crate) use objects::Objects;
use objects::Recorded;

pub(crate) use refs::HeadRef;
pub(crate) use refs::RefRead;
use settings::read_settings;
pub(crate) use stage::Staged;
use tree::Item;
use walk::Found;
use walk::Walk;

/// Settings for every git call about a scan: strict stat checks, no daemon, no cache.
const STRICT: &[&str] = &[
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.ignoreStat=false",
    "-c",
    "core.checkStat=default",
    "-c",
    "core.trustctime=true",
    "-c",
    "core.untrackedCache=false",
    "-c",
    "core.fileMode=true",
    "-c",
    "core.symlinks=true",
];

/// Options that name every filter driver the config files give a program for empty,
/// to put before a git command that may hash work-tree files (`status`, a `reset` that
/// refreshes the index): a file whose stat git cannot trust is hashed through the
/// filter its attributes name, a program git would start with the engine's rights and
/// wait for. Filtered off, its bytes are hashed as they are. The drivers are those a
/// scan obeys ([`read_settings`]): git is asked only where a config file mentions one.
pub(crate) fn filters_off(git: &Git) -> Result<Vec<std::ffi::OsString>, GitError> {
    use std::os::unix::ffi::OsStrExt;
    let located = locate(git.dir())?;
    let drivers = read_settings(git, &located)?.drivers;
    let mut args = Vec::new();
    for name in &drivers {
        for what in [&b"clean"[..], b"process"] {
            let mut setting = b"filter.".to_vec();
            setting.extend_from_slice(name);
            setting.push(b'.');
            setting.extend_from_slice(what);
            setting.push(b'=');
            args.push(std::ffi::OsString::from("-c"));
            args.push(std::ffi::OsStr::from_bytes(&setting).to_os_string());
        }
    }
    Ok(args)
}

/// A path whose entry in the user's index tells git to look away from the work tree.
///
/// The scan hashes such a path from disk anyway; the flag is reported so the caller can
/// record it and clear it with [`clear_index_flags`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct FlaggedPath {
    /// The path, in the lossless form of [`crate::repo_path::encode`].
    pub path: String,
    /// `git update-index --assume-unchanged` was set.
    pub assume_unchanged: bool,
    /// `git update-index --skip-worktree` was set.
    pub skip_worktree: bool,
}

/// What a scan found: the tree of the bytes on disk and the flagged index entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Scanned {
    pub tree: String,
    pub flagged: Vec<FlaggedPath>,
}

/// Where a repository keeps what a scan reads and writes.
pub(crate) struct Located {
    /// The work tree's root.
    pub(crate) root: PathBuf,
    /// The work tree's own git directory (its index).
    pub(crate) git_dir: PathBuf,
    /// The directory shared by all work trees (objects, `info/exclude`, config).
    pub(crate) common_dir: PathBuf,
}

/// Finds the repository of `work_tree`, reading `.git` directly where it can.
pub(crate) fn locate(work_tree: &Path) -> Result<Located, GitError> {
    if let Some(found) = crate::git::discover(work_tree) {
        return Ok(Located {
            root: found.toplevel,
            git_dir: found.git_dir,
            common_dir: found.common_dir,
        });
    }
    let git = Git::new(work_tree);
    let out = git.output([
        "rev-parse",
        "--show-toplevel",
        "--absolute-git-dir",
        "--git-common-dir",
    ])?;
    let mut lines = out.stdout.split(|b| *b == b'\n');
    let mut next = || repo_path::os(lines.next().unwrap_or_default()).to_path_buf();
    let (root, git_dir, common) = (next(), next(), next());
    let common_dir = if common.is_absolute() {
        common
    } else {
        work_tree.join(common)
    };
    Ok(Located {
        root,
        git_dir,
        common_dir,
    })
}

impl Located {
    /// The repository's object database, with the id kind its config declares.
    pub(crate) fn objects(&self) -> Objects {
        Objects::at(
            &self.common_dir.join("objects"),
            object_format(&self.common_dir),
        )
    }
}

/// The value of `extensions.<key>` in the repository's own config file, if set.
fn extension(common_dir: &Path, key: &[u8]) -> Option<Vec<u8>> {
    // Never a wait: a named pipe at the config is no config here (git, asked later, is
    // stopped on it and the call refused).
    let text = crate::read::regular(&common_dir.join("config")).ok()?;
    let mut in_extensions = false;
    for line in text.split(|b| *b == b'\n') {
        let line = line.trim_ascii();
        if line.starts_with(b"[") {
            in_extensions = line.eq_ignore_ascii_case(b"[extensions]");
            continue;
        }
        let mut kv = line.splitn(2, |b| *b == b'=');
        let name = kv.next().unwrap_or_default().trim_ascii();
        if in_extensions && name.eq_ignore_ascii_case(key) {
            return Some(kv.next().unwrap_or_default().trim_ascii().to_vec());
        }
    }
    None
}

/// The object format `extensions.objectFormat` names.
fn object_format(common_dir: &Path) -> gix_hash::Kind {
    match extension(common_dir, b"objectformat") {
        Some(value) if value.eq_ignore_ascii_case(b"sha256") => gix_hash::Kind::Sha256,
        _ => gix_hash::Kind::Sha1,
    }
}

/// Whether the repository keeps its refs as files (no `extensions.refStorage`, or
/// `files`).
fn refs_are_files(common_dir: &Path) -> bool {
    extension(common_dir, b"refstorage").is_none_or(|v| v.eq_ignore_ascii_case(b"files"))
}

/// The tree of the work tree's bytes, and the index entries that carried flags.
pub(crate) fn scan(work_tree: &Path) -> Result<Scanned, GitError> {
    let located = locate(work_tree)?;
    let git = Git::new(&located.root);
    let objects = located.objects();
    let (settings, index) = std::thread::scope(|scope| {
        let settings = scope.spawn(|| read_settings(&git, &located));
        let index = Index::load(&git, &located.git_dir, objects.kind());
        let settings = settings.join().unwrap_or_else(|_| Err(panicked()));
        (settings, index)
    });
    let (settings, index) = (settings?, index?);
    let base = Base::new(
        &located.root,
        &located.common_dir,
        settings.excludes_file.as_deref(),
    );
    let walk = Walk {
        root: &located.root,
        index: &index,
        base: &base,
        objects: &objects,
        left: std::sync::atomic::AtomicU64::new(objects::RECORD_ALL_AT_MOST),
    };
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
    let mut found = walk.run(threads)?;
    keep_sparse_directories(&index, &mut found);
    if !settings.drivers.is_empty() {
        record_filtered(
            &git,
            &located.root,
            &index,
            &objects,
            &settings.drivers,
            &mut found,
        )?;
    }
    let recorded: HashMap<Vec<u8>, Recorded> = found.recorded.into_iter().collect();
    let tree = write_tree(&index, &objects, &found.unchanged, &recorded)?.to_string();
    let flagged = flagged(&index);
    listed::keep(Listed {
        tree: tree.clone(),
        index,
        unchanged: found.unchanged,
        recorded,
    });
    Ok(Scanned { tree, flagged })
}

fn panicked() -> GitError {
    GitError::Failed {
        args: "scan".into(),
        stderr: "a scanning thread panicked".into(),
    }
}

/// Keeps the directories a sparse index records as one entry each: they are not checked
/// out, so the walk never meets them, and they are not removed.
fn keep_sparse_directories(index: &Index, found: &mut Found) {
    if !index.file.is_sparse() {
        return;
    }
    let seen: HashSet<usize> = found.unchanged.iter().copied().collect();
    let before = found.unchanged.len();
    for (at, entry) in index.entries().iter().enumerate() {
        if entry.mode == gix_index::entry::Mode::DIR && !seen.contains(&at) {
            found.unchanged.push(at);
        }
    }
    if found.unchanged.len() != before {
        found.unchanged.sort_unstable();
    }
}

/// The index entries flagged assume-unchanged or skip-worktree.
fn flagged(index: &Index) -> Vec<FlaggedPath> {
    let mut flagged: Vec<FlaggedPath> = Vec::new();
    for entry in index.entries() {
        let assume_unchanged = entry.flags.contains(Flags::ASSUME_VALID);
        let skip_worktree = entry.flags.contains(Flags::SKIP_WORKTREE);
        if !(assume_unchanged || skip_worktree) {
            continue;
        }
        let path = repo_path::encode(index.path(entry));
        if flagged.last().is_some_and(|last| last.path == path) {
            continue;
        }
        flagged.push(FlaggedPath {
            path,
            assume_unchanged,
            skip_worktree,
        });
    }
    flagged
}

/// Writes the tree of the index entries taken as they are (`unchanged`) and the paths
/// recorded from disk, reusing the index's cached tree ids where nothing changed.
fn write_tree(
    index: &Index,
    objects: &Objects,
    unchanged: &[usize],
    recorded: &HashMap<Vec<u8>, Recorded>,
) -> Result<gix_hash::ObjectId, GitError> {
    let entries = index.entries();
    let mut kept = vec![false; entries.len()];
    for &at in unchanged {
        kept[at] = true;
    }
    let mut touched: HashSet<&[u8]> = HashSet::new();
    for (at, entry) in entries.iter().enumerate() {
        if kept[at] {
            continue;
        }
        let path = index.path(entry);
        let same = recorded.get(path).is_some_and(|(mode, id)| {
            entry.stage_raw() == 0 && *mode == entry.mode.bits() && *id == entry.id
        });
        if !same {
            touched.extend(tree::parents(path));
        }
    }
    let mut from_disk: Vec<Item<'_>> = Vec::with_capacity(recorded.len());
    for (path, (mode, id)) in recorded {
        if !index.tracks(path) {
            touched.extend(tree::parents(path));
        }
        from_disk.push(Item {
            path,
            mode: *mode,
            id: *id,
        });
    }
    from_disk.sort_unstable_by(|a, b| a.path.cmp(b.path));
    // Both lists are in path order, and no path is in both: merge them.
    let from_index = unchanged.iter().map(|&at| {
        let entry = &entries[at];
        Item {
            path: index.path(entry),
            mode: entry.mode.bits(),
            id: entry.id,
        }
    });
    let items = tree::merge(from_index, from_disk);
    let builder = tree::Builder { objects, touched };
    match builder.build(b"", 0, &items, index.file.tree())? {
        Some(id) => Ok(id),
        None => objects.write_tree(&gix_object::Tree::empty()),
    }
}

/// Records from disk the tracked files a configured filter driver applies to, which the
/// walk took as the index has them: a staged copy may hold the filter's output.
fn record_filtered(
    git: &Git,
    root: &Path,
    index: &Index,
    objects: &Objects,
    drivers: &BTreeSet<Vec<u8>>,
    found: &mut Found,
) -> Result<(), GitError> {
    let entries = index.entries();
    let tracked: Vec<&[u8]> = found
        .unchanged
        .iter()
        .map(|&at| index.path(&entries[at]))
        .collect();
    let filtered: HashSet<Vec<u8>> = filtered_paths(git, &tracked, drivers)?
        .into_iter()
        .collect();
    if filtered.is_empty() {
        return Ok(());
    }
    let mut keep = Vec::with_capacity(found.unchanged.len());
    for &at in &found.unchanged {
        let path = index.path(&entries[at]);
        if !filtered.contains(path) {
            keep.push(at);
            continue;
        }
        let Some(meta) = safe_fs::lstat_in_tree(root, path)? else {
            continue;
        };
        let full = root.join(repo_path::os(path));
        if let Some(recorded) = objects.record(&full, meta.file_type().is_symlink(), true)? {
            found.recorded.push((path.to_vec(), recorded));
        }
    }
    found.unchanged = keep;
    Ok(())
}

/// The tracked paths whose `filter` attribute names one of `drivers`.
fn filtered_paths(
    git: &Git,
    tracked: &[&[u8]],
    drivers: &BTreeSet<Vec<u8>>,
) -> Result<Vec<Vec<u8>>, GitError> {
    let mut input = Vec::new();
    for path in tracked {
        input.extend_from_slice(path);
        input.push(0);
    }
    let cmd = git.command(
        STRICT
            .iter()
            .chain(&["check-attr", "-z", "--stdin", "filter"]),
    );
    let out = crate::git::run_piped(cmd, Some(&input), "check-attr --stdin filter", &[])?;
    let fields: Vec<&[u8]> = out.split(|b| *b == 0).collect();
    Ok(fields
        .chunks_exact(3)
        .filter(|f| drivers.contains(f[2]))
        .map(|f| f[0].to_vec())
        .collect())
}

/// Clears assume-unchanged and skip-worktree on `paths` in the user's real index, so that
/// plain git commands see the work tree again. Nothing else in the index changes.
///
/// Paths that carry no such flag (or are no longer in the index) are skipped.
pub fn clear_index_flags(work_tree: &Path, paths: &[FlaggedPath]) -> Result<(), GitError> {
    let git = Git::new(work_tree);
    for (flag, option) in [
        (true, "--no-assume-unchanged"),
        (false, "--no-skip-worktree"),
    ] {
        let mut input = Vec::new();
        for entry in paths {
            if (flag && entry.assume_unchanged) || (!flag && entry.skip_worktree) {
                input.extend_from_slice(&repo_path::decode(&entry.path));
                input.push(0);
            }
        }
        if input.is_empty() {
            continue;
        }
        git.output_with_stdin(["update-index", option, "-z", "--stdin"], &input)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
