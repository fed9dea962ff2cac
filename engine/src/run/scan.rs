//! The scan behind a snapshot: the bytes on disk, whatever the index or the config claim.
//!
//! The scan starts from a copy of the user's index, so only files whose stat
//! data changed need hashing, but it trusts nothing in that copy that the
//! agent could have bent:
//!
//! - stat comparison is forced strict (`core.checkStat=default`,
//!   `core.trustctime=true`, `core.ignoreStat=false`, `core.fileMode=true`),
//!   and no fsmonitor daemon or untracked cache is asked;
//! - entries flagged assume-unchanged or skip-worktree are hashed from disk
//!   whatever git would say of them, and reported ([`FlaggedPath`]);
//! - every changed or untracked path is hashed with `--no-filters`, its mode
//!   taken from `lstat`, a symlink's target hashed as a blob, so a `clean`
//!   filter cannot make new bytes hash like old ones;
//! - when a filter driver is configured, every tracked file the driver
//!   applies to is hashed from disk, since a staged copy may hold the
//!   filter's output rather than the bytes.

use std::collections::BTreeSet;
use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::path::PathBuf;

use serde::Serialize;

use super::safe_fs;
use crate::git::Git;
use crate::git::GitError;
use crate::repo_path;

/// Settings for every git call of a scan: strict stat checks, no daemon, no cache.
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

struct TempIndex {
    path: PathBuf,
}

impl Drop for TempIndex {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn unique() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// Runs `git STRICT ARGS` with `GIT_INDEX_FILE=index`, feeding `stdin`; exit codes in
/// `ok` (besides 0) count as success. Returns stdout.
fn run(
    git: &Git,
    index: &Path,
    args: &[&str],
    stdin: Option<&[u8]>,
    ok: &[i32],
) -> Result<Vec<u8>, GitError> {
    let mut cmd = git.command(STRICT.iter().chain(args));
    cmd.env("GIT_INDEX_FILE", index)
        .env_remove("GIT_CONFIG_PARAMETERS")
        .env_remove("GIT_CONFIG_COUNT");
    crate::git::run_piped(cmd, stdin, &args.join(" "), ok)
}

/// A temporary copy of the user's index (or of HEAD's tree when there is none).
fn temp_index(work_tree: &Path, git: &Git) -> Result<TempIndex, GitError> {
    let (git_dir, real_index) = match crate::git::discover(work_tree) {
        Some(found) => (found.git_dir.clone(), found.git_dir.join("index")),
        None => {
            let out = git.output(["rev-parse", "--absolute-git-dir", "--git-path", "index"])?;
            let mut lines = out.stdout.split(|b| *b == b'\n');
            let git_dir = PathBuf::from(repo_path::os(lines.next().unwrap_or_default()));
            let index = repo_path::os(lines.next().unwrap_or_default()).to_path_buf();
            let index = if index.is_absolute() {
                index
            } else {
                work_tree.join(index)
            };
            (git_dir, index)
        }
    };
    let index = TempIndex {
        path: git_dir.join(format!("tdd-index-{}-{}", std::process::id(), unique())),
    };
    if real_index.exists() {
        std::fs::copy(&real_index, &index.path)
            .map_err(|e| safe_fs::io_error("copy the index to", &index.path, e))?;
    } else if git
        .text(["rev-parse", "--verify", "--quiet", "HEAD"])
        .is_ok()
    {
        run(git, &index.path, &["read-tree", "HEAD"], None, &[])?;
    }
    Ok(index)
}

/// The tree of the work tree's bytes, and the index entries that carried flags.
pub(crate) fn scan(work_tree: &Path) -> Result<Scanned, GitError> {
    let git = Git::new(work_tree);
    let index = temp_index(work_tree, &git)?;
    let at = index.path.as_path();
    let [changed, listed, config] = read_state(&git, at)?;
    let listing = Listing::parse(&listed);
    let settings = Settings::parse(&config);
    let mut paths: BTreeSet<&[u8]> = split_nul(&changed).collect();
    paths.extend(listing.untracked.iter().copied());
    paths.extend(listing.flagged.iter().map(|(p, _, _)| *p));
    let filtered;
    if !settings.drivers.is_empty() {
        filtered = filtered_paths(&git, at, &listing.tracked, &settings.drivers)?;
        paths.extend(filtered.iter().map(Vec::as_slice));
    }
    let mut recorded = HashMap::new();
    if !paths.is_empty() {
        recorded = record(&git, at, work_tree, &paths, &settings.null_oid())?;
    }
    let tree = run(&git, at, &["write-tree"], None, &[])?;
    let tree = String::from_utf8_lossy(&tree).trim_end().to_string();
    let flagged: Vec<FlaggedPath> = listing
        .flagged
        .iter()
        .map(|(path, assume_unchanged, skip_worktree)| FlaggedPath {
            path: repo_path::encode(path),
            assume_unchanged: *assume_unchanged,
            skip_worktree: *skip_worktree,
        })
        .collect();
    drop(paths);
    drop(listing);
    let listed = Listed {
        tree: tree.clone(),
        listing: listed,
        recorded,
    };
    listed::keep(listed);
    Ok(Scanned { tree, flagged })
}

/// The paths whose stat data changed, the index listing with its flags and the
/// untracked files, and the filter and object-format settings.
///
/// The three reads are independent; on a large tree the first two are each a walk of
/// every directory, so they run in parallel.
fn read_state(git: &Git, at: &Path) -> Result<[Vec<u8>; 3], GitError> {
    let (changed, listed, config) = std::thread::scope(|scope| {
        let changed = scope.spawn(|| run(git, at, &["diff-files", "-z", "--name-only"], None, &[]));
        let config = scope.spawn(|| {
            let pattern = "^(filter\\..+\\.(clean|process)|extensions\\.objectformat)$";
            run(
                git,
                at,
                &["config", "-z", "--get-regexp", pattern],
                None,
                &[1],
            )
        });
        let listed = run(
            git,
            at,
            &[
                "ls-files",
                "-v",
                "-s",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ],
            None,
            &[],
        );
        let panicked = || GitError::Failed {
            args: "scan".into(),
            stderr: "a scanning thread panicked".into(),
        };
        (
            changed.join().unwrap_or_else(|_| Err(panicked())),
            listed,
            config.join().unwrap_or_else(|_| Err(panicked())),
        )
    });
    Ok([changed?, listed?, config?])
}

fn split_nul(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split(|b| *b == 0).filter(|p| !p.is_empty())
}

/// `git ls-files -v --cached --others`, sorted by what each entry is.
struct Listing<'a> {
    tracked: Vec<&'a [u8]>,
    untracked: Vec<&'a [u8]>,
    /// Path, assume-unchanged, skip-worktree.
    flagged: Vec<(&'a [u8], bool, bool)>,
}

impl<'a> Listing<'a> {
    fn parse(out: &'a [u8]) -> Listing<'a> {
        let mut listing = Listing {
            tracked: Vec::new(),
            untracked: Vec::new(),
            flagged: Vec::new(),
        };
        for entry in split_nul(out) {
            let (Some(&tag), Some(path)) = (entry.first(), entry.get(2..)) else {
                continue;
            };
            if tag == b'?' {
                // A nested repository is listed as `dir/`.
                listing
                    .untracked
                    .push(path.strip_suffix(b"/").unwrap_or(path));
                continue;
            }
            // `MODE SP OID SP STAGE TAB PATH`.
            let Some(tab) = path.iter().position(|b| *b == b'\t') else {
                continue;
            };
            let path = &path[tab + 1..];
            // A lowercase tag is assume-unchanged; `S` (or `s`) is skip-worktree.
            let assume_unchanged = tag.is_ascii_lowercase();
            let skip_worktree = tag.eq_ignore_ascii_case(&b'S');
            if assume_unchanged || skip_worktree {
                listing
                    .flagged
                    .push((path, assume_unchanged, skip_worktree));
            }
            if listing.tracked.last() != Some(&path) {
                listing.tracked.push(path);
            }
        }
        listing
    }
}

/// The configured filter drivers and the object format.
struct Settings {
    drivers: BTreeSet<Vec<u8>>,
    sha256: bool,
}

impl Settings {
    fn parse(out: &[u8]) -> Settings {
        let mut settings = Settings {
            drivers: BTreeSet::new(),
            sha256: false,
        };
        for entry in split_nul(out) {
            let mut kv = entry.splitn(2, |b| *b == b'\n');
            let key = kv.next().unwrap_or_default();
            let value = kv.next().unwrap_or_default();
            if key == b"extensions.objectformat" {
                settings.sha256 = value.eq_ignore_ascii_case(b"sha256");
            } else if let Some(rest) = key.strip_prefix(b"filter.") {
                let name = rest
                    .strip_suffix(b".clean")
                    .or_else(|| rest.strip_suffix(b".process"));
                if let (Some(name), false) = (name, value.is_empty()) {
                    settings.drivers.insert(name.to_vec());
                }
            }
        }
        settings
    }

    fn null_oid(&self) -> String {
        "0".repeat(if self.sha256 { 64 } else { 40 })
    }
}

/// The tracked paths whose `filter` attribute names one of `drivers`.
fn filtered_paths(
    git: &Git,
    index: &Path,
    tracked: &[&[u8]],
    drivers: &BTreeSet<Vec<u8>>,
) -> Result<Vec<Vec<u8>>, GitError> {
    let mut input = Vec::new();
    for path in tracked {
        input.extend_from_slice(path);
        input.push(0);
    }
    let out = run(
        git,
        index,
        &["check-attr", "-z", "--stdin", "filter"],
        Some(&input),
        &[],
    )?;
    let fields: Vec<&[u8]> = out.split(|b| *b == 0).collect();
    Ok(fields
        .chunks_exact(3)
        .filter(|f| drivers.contains(f[2]))
        .map(|f| f[0].to_vec())
        .collect())
}

/// What `lstat` found at each path to record.
#[derive(Default)]
struct OnDisk<'a> {
    /// `--index-info` records removing paths that are not there as files.
    removals: Vec<u8>,
    /// Regular files and their git modes.
    files: Vec<(&'a [u8], u32)>,
    /// Symlinks and their targets.
    links: Vec<(&'a [u8], Vec<u8>)>,
}

impl<'a> OnDisk<'a> {
    fn inspect(root: &Path, paths: &BTreeSet<&'a [u8]>, null_oid: &str) -> Result<Self, GitError> {
        let mut found = OnDisk::default();
        for &path in paths {
            let full = root.join(repo_path::os(path));
            match safe_fs::lstat_in_tree(root, path)? {
                Some(meta) if meta.is_file() => {
                    let mode = if meta.mode() & 0o100 != 0 {
                        0o100755
                    } else {
                        0o100644
                    };
                    found.files.push((path, mode));
                }
                Some(meta) if meta.file_type().is_symlink() => {
                    let target = std::fs::read_link(&full)
                        .map_err(|e| safe_fs::io_error("read the link", &full, e))?;
                    found
                        .links
                        .push((path, target.as_os_str().as_bytes().to_vec()));
                }
                // A submodule or nested repository keeps the entry it has (none when it
                // is untracked): its files are another repository's to snapshot.
                Some(meta) if meta.is_dir() && full.join(".git").exists() => {}
                _ => entry_line(&mut found.removals, 0, null_oid, path),
            }
        }
        Ok(found)
    }
}

/// Writes the on-disk state of `paths` into the temporary index: blobs hashed without
/// filters, modes from `lstat`, removals for what is not there.
fn record(
    git: &Git,
    index: &Path,
    root: &Path,
    paths: &BTreeSet<&[u8]>,
    null_oid: &str,
) -> Result<Recorded, GitError> {
    let found = OnDisk::inspect(root, paths, null_oid)?;
    let mut recorded: Recorded = paths.iter().map(|p| (p.to_vec(), None)).collect();
    // Removals first, so a file that replaced a directory (or the reverse) never meets
    // the entries it replaces.
    let mut lines = found.removals;
    if !found.files.is_empty() {
        let quoted: String = found
            .files
            .iter()
            .map(|(path, _)| repo_path::c_quote(path) + "\n")
            .collect();
        let args = ["hash-object", "-w", "--no-filters", "--stdin-paths"];
        let out = run(git, index, &args, Some(quoted.as_bytes()), &[])?;
        let oids = std::str::from_utf8(&out)
            .map_err(|_| GitError::NotUtf8)?
            .lines();
        for ((path, mode), oid) in found.files.iter().zip(oids) {
            entry_line(&mut lines, *mode, oid, path);
            recorded.insert(path.to_vec(), Some((*mode, oid.to_string())));
        }
    }
    for (path, target) in &found.links {
        let args = ["hash-object", "-w", "--no-filters", "--stdin"];
        let out = run(git, index, &args, Some(target), &[])?;
        let oid = String::from_utf8_lossy(&out).trim().to_string();
        entry_line(&mut lines, safe_fs::MODE_SYMLINK, &oid, path);
    }
    if !lines.is_empty() {
        run(
            git,
            index,
            &["update-index", "-z", "--index-info"],
            Some(&lines),
            &[],
        )?;
    }
    Ok(recorded)
}

/// One `--index-info` record: `MODE SP OID TAB PATH NUL` (mode 0 removes the path).
fn entry_line(out: &mut Vec<u8>, mode: u32, oid: &str, path: &[u8]) {
    out.extend_from_slice(format!("{mode:o} {oid}\t").as_bytes());
    out.extend_from_slice(path);
    out.push(0);
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

mod listed;

pub(crate) use listed::Listed;
use listed::Recorded;
pub(crate) use listed::TreeFile;
pub(crate) use listed::take_listed;

#[cfg(test)]
mod tests;
