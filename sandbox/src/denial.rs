//! Telling a write the sandbox stopped from any other failure, by what a tool printed.
//!
//! Landlock refuses a write with the same `EACCES` a file's own permissions give, and
//! tells nobody. A tool says it in its own words (`touch: cannot touch '/p':
//! Permission denied`, `PermissionError: [Errno 13] Permission denied: '/p'`,
//! `EACCES: permission denied, open '/p'`, `open /p: permission denied`, cargo's
//! `failed to open: /p` followed by `Permission denied (os error 13)`), so the paths
//! such lines name are candidates, and a candidate counts only where the policy is the
//! reason: it lies outside every grant, the policy does not deny it on purpose, and
//! the user running `tdd` may write it.

use std::path::Path;
use std::path::PathBuf;

use crate::Policy;

/// How many lines above a "permission denied" line may name its path (cargo prints
/// the path, a blank line, `Caused by:`, then the denial).
const LOOK_BACK: usize = 4;

/// At most this many denials are reported from one text.
const MAX_DENIALS: usize = 8;

impl Policy {
    /// The paths `text` says a write was refused at that this policy, and not the
    /// file's own permissions, refused: each lies outside every `write` grant and
    /// outside what the policy denies on purpose (`deny_write`, `deny_read`), and the
    /// user may write it (or the nearest directory above it that exists). In the order
    /// first named, each once, at most eight. Only meaningful where the policy was
    /// enforced; on a machine without Landlock every such line has another cause.
    pub fn denials_in(&self, text: &str) -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = Vec::new();
        for path in candidates(text) {
            if found.len() >= MAX_DENIALS {
                break;
            }
            if !found.contains(&path) && self.refused_by_policy(&path) {
                found.push(path);
            }
        }
        found
    }

    /// Whether a write at `path` is one this policy refuses and the user could make.
    fn refused_by_policy(&self, path: &Path) -> bool {
        let under = |roots: &[PathBuf]| roots.iter().any(|root| path.starts_with(root));
        if under(&self.write) || under(&self.deny_write) || under(&self.deny_read) {
            return false;
        }
        if self.write_files.iter().any(|file| file == path) {
            return false;
        }
        // The kernel's own file systems refuse by rules of their own.
        if ["/proc", "/sys", "/dev"]
            .iter()
            .any(|k| path.starts_with(k))
        {
            return false;
        }
        user_may_write(path)
    }
}

/// Whether the calling process (unconfined) may write `path`, or create it in the
/// nearest directory above it that exists.
fn user_may_write(path: &Path) -> bool {
    let existing = path.ancestors().find(|p| p.symlink_metadata().is_ok());
    existing.is_some_and(|p| {
        p != Path::new("/") && nix::unistd::access(p, nix::unistd::AccessFlags::W_OK).is_ok()
    })
}

/// The absolute paths named on or just above the lines of `text` that report a
/// refused permission. A JSON stream's escaped newlines and quotes count as the
/// characters they stand for, so an agent CLI's event log reads like a terminal.
fn candidates(text: &str) -> Vec<PathBuf> {
    let text = text
        .replace("\\n", "\n")
        .replace("\\\"", "\"")
        .replace("\\t", " ");
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let lower = line.to_ascii_lowercase();
        if !(lower.contains("permission denied") || lower.contains("eacces")) {
            continue;
        }
        let here = paths_in(line);
        if !here.is_empty() {
            out.extend(here);
            continue;
        }
        let from = i.saturating_sub(LOOK_BACK);
        if let Some(above) = lines[from..i]
            .iter()
            .rev()
            .map(|l| paths_in(l))
            .find(|p| !p.is_empty())
        {
            out.extend(above);
        }
    }
    out
}

/// The absolute paths a line names: words that start with `/`, cut at quotes,
/// brackets and spaces, without the punctuation a message puts after them.
fn paths_in(line: &str) -> Vec<PathBuf> {
    line.split(|c: char| {
        c.is_whitespace()
            || matches!(
                c,
                '\'' | '"' | '`' | '‘' | '’' | '(' | ')' | '[' | ']' | ',' | '=' | '<' | '>'
            )
    })
    .map(|word| word.trim_end_matches([':', '.', ';', '\\']))
    .filter(|word| word.starts_with('/') && word.len() > 1 && !word.starts_with("//"))
    .map(PathBuf::from)
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(write: &Path) -> Policy {
        Policy {
            write: vec![write.to_path_buf()],
            deny_write: vec![write.join(".git")],
            ..Policy::default()
        }
    }

    #[test]
    fn each_tools_words_name_the_path() {
        let text = "touch: cannot touch '/a/b': Permission denied\n\
            PermissionError: [Errno 13] Permission denied: '/c/d'\n\
            Error: EACCES: permission denied, open '/e/f'\n\
            open /g/h: permission denied\n\
            error: failed to open: /i/.cargo-lock\n\nCaused by:\n  Permission denied (os error 13)\n\
            mkdir: cannot create directory ‘/j’: Permission denied\n\
            {\"type\":\"user\",\"content\":\"touch: cannot touch '/k': Permission denied\\nexit 1\"}\n\
            /not/a/denial: No such file or directory\n";
        let paths: Vec<String> = candidates(text)
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        assert_eq!(
            paths,
            ["/a/b", "/c/d", "/e/f", "/g/h", "/i/.cargo-lock", "/j", "/k"]
        );
    }

    #[test]
    fn only_writes_the_policy_refused_and_the_user_could_make_count() {
        let dir = tempfile::tempdir().expect("tempdir");
        let granted = dir.path().join("granted");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&granted).expect("mkdir");
        std::fs::create_dir_all(&outside).expect("mkdir");
        let locked = dir.path().join("locked");
        std::fs::create_dir_all(&locked).expect("mkdir");
        let mut policy = policy(&granted);
        policy.deny_read.push(dir.path().join("secret"));
        let line = |p: &Path| format!("touch: cannot touch '{}': Permission denied\n", p.display());
        let text = [
            line(&outside.join("new/deeper")),
            line(&outside.join("new/deeper")),
            line(&granted.join("file")),
            line(&granted.join(".git/config")),
            line(&dir.path().join("secret/key")),
            line(Path::new("/proc/1/mem")),
        ]
        .concat();
        assert_eq!(policy.denials_in(&text), vec![outside.join("new/deeper")]);
        // A directory the user may not write either: its mode, not the policy, refused.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o500)).expect("chmod");
        let mine = nix::unistd::access(&locked, nix::unistd::AccessFlags::W_OK).is_ok();
        if !mine {
            assert!(policy.denials_in(&line(&locked.join("f"))).is_empty());
        }
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    }
}
