//! The config a scan obeys: which filter drivers are configured, and the user's ignore
//! file.
//!
//! git's own answer (`git config`) is exact but costs a process. Most repositories
//! configure neither, so the config files git may read are looked at first: when none of
//! them mentions a filter, an ignore file or an include, the answer is known (no driver,
//! git's default ignore file) and git is not asked. Any mention, or a file that cannot
//! be read, sends the question to git.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::Path;
use std::path::PathBuf;

use super::Located;
use super::STRICT;
use crate::git::Git;
use crate::git::GitError;
use crate::repo_path;

/// The configured filter drivers and the user's ignore file.
pub(super) struct Settings {
    pub(super) drivers: BTreeSet<Vec<u8>>,
    pub(super) excludes_file: Option<PathBuf>,
}

/// The filter and ignore settings from every config file git reads.
pub(super) fn read_settings(git: &Git, located: &Located) -> Result<Settings, GitError> {
    let env = |name: &str| std::env::var_os(name);
    let mut settings = if mentions_nothing(&config_files(located, env)) {
        Settings {
            drivers: BTreeSet::new(),
            excludes_file: None,
        }
    } else {
        ask_git(git)?
    };
    if settings.excludes_file.is_none() {
        // git's default when `core.excludesFile` is unset.
        let config_home = env("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".config")));
        settings.excludes_file = config_home.map(|c| c.join("git/ignore"));
    }
    Ok(settings)
}

/// The settings as `git config` gives them.
fn ask_git(git: &Git) -> Result<Settings, GitError> {
    let pattern = "^(filter\\..+\\.(clean|process)|core\\.excludesfile)$";
    let mut cmd = git.command(
        STRICT
            .iter()
            .chain(&["config", "-z", "--get-regexp", pattern]),
    );
    // The files git reads for every command, not one a variable substitutes for them.
    cmd.env_remove("GIT_CONFIG_PARAMETERS")
        .env_remove("GIT_CONFIG_COUNT")
        .env_remove("GIT_CONFIG");
    let out = crate::git::run_piped(cmd, None, "config --get-regexp", &[1])?;
    Ok(Settings::parse(&out))
}

/// Words whose presence in a config file means git must be asked (compared in lower
/// case, as git compares section and key names).
const MENTIONS: [&[u8]; 3] = [b"filter", b"excludesfile", b"include"];

/// Whether none of `files` that exists mentions a filter, an ignore file or an include.
/// A file that exists but cannot be read counts as a mention.
fn mentions_nothing(files: &[PathBuf]) -> bool {
    mentions_none_of(files, &MENTIONS)
}

/// Whether none of `files` that exists mentions any of `words` (lower case), compared
/// in lower case. A file that exists but cannot be read counts as a mention.
pub(super) fn mentions_none_of(files: &[PathBuf], words: &[&[u8]]) -> bool {
    files.iter().all(|file| match crate::read::regular(file) {
        Ok(text) => {
            let lower = text.to_ascii_lowercase();
            !words
                .iter()
                .any(|word| lower.windows(word.len()).any(|w| w == *word))
        }
        Err(e) => matches!(
            e.kind(),
            std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
        ),
    })
}

/// Every config file git may read for a command in `located`, given the environment
/// `env`: system, global, the repository's and the work tree's. Where the system file's
/// place depends on how git was built, every usual place is listed: reading one git
/// does not read can only send the question to git.
pub(super) fn config_files(
    located: &Located,
    env: impl Fn(&str) -> Option<OsString>,
) -> Vec<PathBuf> {
    let set = |name: &str| env(name).filter(|v| !v.is_empty());
    let mut files = Vec::new();
    let no_system = set("GIT_CONFIG_NOSYSTEM").is_some_and(|v| {
        let v = v.to_string_lossy().to_ascii_lowercase();
        !matches!(v.as_str(), "0" | "false" | "no" | "off")
    });
    if !no_system {
        match set("GIT_CONFIG_SYSTEM") {
            Some(file) => files.push(PathBuf::from(file)),
            None => files.extend(system_candidates(set("PATH"))),
        }
    }
    match set("GIT_CONFIG_GLOBAL") {
        Some(file) => files.push(PathBuf::from(file)),
        None => {
            let home = set("HOME").map(PathBuf::from);
            let config_home = set("XDG_CONFIG_HOME")
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join(".config")));
            files.extend(config_home.map(|c| c.join("git/config")));
            files.extend(home.map(|h| h.join(".gitconfig")));
        }
    }
    files.push(located.common_dir.join("config"));
    files.push(located.git_dir.join("config.worktree"));
    files
}

/// The places a system config file lives for the usual builds of git, and beside the
/// prefix of each `git` on `path`.
fn system_candidates(path: Option<OsString>) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = [
        "/etc/gitconfig",
        "/usr/local/etc/gitconfig",
        "/opt/homebrew/etc/gitconfig",
        "/Library/Developer/CommandLineTools/usr/share/git-core/gitconfig",
        "/Applications/Xcode.app/Contents/Developer/usr/share/git-core/gitconfig",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    for dir in std::env::split_paths(&path.unwrap_or_default()) {
        let git = dir.join("git");
        if git.is_file() {
            let real = git.canonicalize().unwrap_or(git);
            let prefix = real.parent().and_then(Path::parent);
            files.extend(prefix.map(|p| p.join("etc/gitconfig")));
        }
    }
    files
}

fn split_nul(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split(|b| *b == 0).filter(|p| !p.is_empty())
}

impl Settings {
    /// Reads `git config -z --get-regexp` output.
    pub(super) fn parse(out: &[u8]) -> Settings {
        let mut settings = Settings {
            drivers: BTreeSet::new(),
            excludes_file: None,
        };
        for entry in split_nul(out) {
            let mut kv = entry.splitn(2, |b| *b == b'\n');
            let key = kv.next().unwrap_or_default();
            let value = kv.next().unwrap_or_default();
            if key == b"core.excludesfile" {
                settings.excludes_file = Some(expand_home(value));
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
}

/// A config path with a leading `~/` read as git reads it: below `$HOME`.
fn expand_home(value: &[u8]) -> PathBuf {
    match (value.strip_prefix(b"~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(repo_path::os(rest)),
        _ => repo_path::os(value).to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn located(dir: &Path) -> Located {
        Located {
            root: dir.to_path_buf(),
            git_dir: dir.join(".git"),
            common_dir: dir.join(".git"),
        }
    }

    #[test]
    fn the_files_follow_the_variables_git_reads() {
        let here = located(Path::new("/r"));
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        let files = config_files(&here, env(&[("HOME", "/h"), ("PATH", "")]));
        for expected in ["/etc/gitconfig", "/h/.config/git/config", "/h/.gitconfig"] {
            assert!(files.contains(&PathBuf::from(expected)), "{files:?}");
        }
        assert!(files.ends_with(&[
            PathBuf::from("/r/.git/config"),
            PathBuf::from("/r/.git/config.worktree")
        ]));
        let files = config_files(
            &here,
            env(&[
                ("HOME", "/h"),
                ("XDG_CONFIG_HOME", "/x"),
                ("GIT_CONFIG_SYSTEM", "/s"),
            ]),
        );
        assert_eq!(
            files[..3],
            [
                PathBuf::from("/s"),
                "/x/git/config".into(),
                "/h/.gitconfig".into()
            ]
        );
        let files = config_files(
            &here,
            env(&[("GIT_CONFIG_NOSYSTEM", "1"), ("GIT_CONFIG_GLOBAL", "/g")]),
        );
        assert_eq!(files[0], PathBuf::from("/g"));
        assert_eq!(files.len(), 3);
        let files = config_files(&here, env(&[("GIT_CONFIG_NOSYSTEM", "false")]));
        assert!(files.contains(&PathBuf::from("/etc/gitconfig")));
    }

    #[test]
    fn a_mention_of_a_filter_an_ignore_file_or_an_include_sends_the_question_to_git() {
        let dir = tempfile::tempdir().expect("tempdir");
        let write = |name: &str, text: &str| {
            let file = dir.path().join(name);
            std::fs::write(&file, text).expect("write");
            file
        };
        let plain = write("plain", "[core]\n\tbare = false\n[user]\n\tname = x\n");
        let missing = dir.path().join("missing");
        assert!(mentions_nothing(&[plain.clone(), missing]));
        for text in [
            "[Filter \"x\"]\n\tclean = cat\n",
            "[core]\n\tExcludesFile = ~/.ignore\n",
            "[includeIf \"gitdir:/r/\"]\n\tpath = other\n",
            "[include]\n\tpath = other\n",
        ] {
            let mention = write("mention", text);
            assert!(!mentions_nothing(&[plain.clone(), mention]), "{text}");
        }
        let unreadable = dir.path().join("a-directory");
        std::fs::create_dir(&unreadable).expect("mkdir");
        assert!(!mentions_nothing(&[unreadable]));
    }

    #[test]
    fn settings_name_configured_filter_drivers_and_the_ignore_file() {
        let out = b"filter.lfs.clean\ngit-lfs clean -- %f\0filter.odd.name.process\nx\0core.excludesfile\n/etc/ignore\0filter.empty.clean\n\0";
        let settings = Settings::parse(out);
        let drivers: Vec<&[u8]> = settings.drivers.iter().map(Vec::as_slice).collect();
        assert_eq!(drivers, vec![b"lfs".as_slice(), b"odd.name".as_slice()]);
        assert_eq!(settings.excludes_file, Some(PathBuf::from("/etc/ignore")));
    }
}
