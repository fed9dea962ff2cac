//! A leaf's private home: `HOME`, the XDG directories and the agent CLI's own state
//! directory, made fresh for each leaf in its files directory and removed when it ends.
//!
//! Leaves of different roles must not talk through state their CLIs share: a
//! developer that writes `~/.claude/CLAUDE.md`, a `SessionStart` hook in
//! `~/.claude/settings.json`, `$CODEX_HOME/AGENTS.md` or an MCP server in a config
//! would be heard by every later verifier. So no leaf gets the user's home. Its CLI
//! state is seeded from the user's with what the CLI needs to run and nothing an agent
//! could have written to steer another: the credentials file as it is, and the
//! settings files cut down to an allow-list of keys (model, provider, login), never
//! instruction files, hooks, MCP servers, notify commands or per-project trust. The
//! settings are made read-only; the credentials stay writable, since CLIs refresh them.
//!
//! Toolchains the user installed under the home directory (rustup, cargo, a user
//! site of Python packages, pyenv, Go's path, nvm) stay where they are: their homes are
//! named explicitly, so `cargo` and `pytest` work in the leaf as they do outside.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::path::PathBuf;

/// Where an agent CLI keeps its state, and what of the user's state a leaf starts with.
#[derive(Debug, Clone, Copy)]
pub struct CliState {
    /// The variable that moves the state directory (`CLAUDE_CONFIG_DIR`, `CODEX_HOME`).
    pub var: Option<&'static str>,
    /// The state directory under the home directory otherwise (`.claude`, `.codex`).
    pub dir: &'static str,
    /// The files a leaf's state directory is seeded with.
    pub seed: &'static [Seed],
}

impl CliState {
    /// No CLI state of its own: the leaf gets an empty private home.
    pub const NONE: CliState = CliState {
        var: None,
        dir: "",
        seed: &[],
    };
}

/// One file of the user's CLI state copied into a leaf's.
#[derive(Debug, Clone, Copy)]
pub struct Seed {
    /// Its name in the state directory.
    pub file: &'static str,
    /// Where the user's copy is when the state directory's variable is unset: in the
    /// state directory, or (Claude Code's `.claude.json`) in the home directory itself.
    pub in_home_by_default: bool,
    /// What of it is kept.
    pub keep: Keep,
}

/// What of a seeded file is kept.
#[derive(Debug, Clone, Copy)]
pub enum Keep {
    /// The whole file (a credentials file), left writable.
    Whole,
    /// The listed top-level keys of a JSON object, read-only unless `writable`.
    JsonKeys {
        /// The keys kept.
        keys: &'static [&'static str],
        /// Whether the CLI writes the file as it runs (Claude Code's `.claude.json`).
        writable: bool,
    },
    /// The listed top-level keys of a TOML table, read-only.
    TomlKeys(&'static [&'static str]),
}

/// Toolchain homes a leaf keeps from the user, with where each is under the home
/// directory when its variable is unset. Read by the toolchain, never granted for
/// writing by this module.
pub const TOOLCHAIN_HOMES: &[(&str, &str)] = &[
    ("CARGO_HOME", ".cargo"),
    ("RUSTUP_HOME", ".rustup"),
    ("PYTHONUSERBASE", ".local"),
    ("PYENV_ROOT", ".pyenv"),
    ("GOPATH", "go"),
    ("NVM_DIR", ".nvm"),
];

/// The largest seed file read (the user's settings are a few KiB).
const MAX_SEED_BYTES: u64 = 4 << 20;

/// Why a private home could not be made.
#[derive(Debug, thiserror::Error)]
#[error("failed to make the leaf's private home {}: {source}", path.display())]
pub struct HomeError {
    /// The path being made or written.
    pub path: PathBuf,
    /// The failure.
    #[source]
    pub source: std::io::Error,
}

/// Makes a fresh private home at `home` (anything there before is removed first) for a
/// CLI with `state`, seeded from the user's state as `caller` (the launching process's
/// environment) locates it, and returns the variables that point the leaf at it.
///
/// Guarantees: `HOME`, `XDG_CONFIG_HOME`, `XDG_CACHE_HOME`, `XDG_DATA_HOME` and
/// `XDG_STATE_HOME` name directories inside `home`; the CLI's state variable (when it
/// has one) names its directory inside `home`, holding only the seeded files, cut to
/// their allow-lists; `TDD_LEDGER_HOME` is `ledger_home` when given; every toolchain
/// home of [`TOOLCHAIN_HOMES`] the user has is named. A seed file the user does not
/// have, or that does not parse, is left out.
pub fn make(
    home: &Path,
    state: &CliState,
    caller: &BTreeMap<String, String>,
    ledger_home: Option<&Path>,
) -> Result<Vec<(String, String)>, HomeError> {
    let fail = |path: &Path| {
        let path = path.to_path_buf();
        move |source| HomeError { path, source }
    };
    if home.symlink_metadata().is_ok() {
        std::fs::remove_dir_all(home).map_err(fail(home))?;
    }
    std::fs::create_dir_all(home).map_err(fail(home))?;
    std::fs::set_permissions(home, std::fs::Permissions::from_mode(0o700)).map_err(fail(home))?;
    let mut set = Vec::new();
    let mut dir_var = |name: &str, rel: &str| -> Result<(), HomeError> {
        let dir = if rel.is_empty() {
            home.to_path_buf()
        } else {
            home.join(rel)
        };
        std::fs::create_dir_all(&dir).map_err(fail(&dir))?;
        set.push((name.to_string(), dir.display().to_string()));
        Ok(())
    };
    dir_var("HOME", "")?;
    dir_var("XDG_CONFIG_HOME", ".config")?;
    dir_var("XDG_CACHE_HOME", ".cache")?;
    dir_var("XDG_DATA_HOME", ".local/share")?;
    dir_var("XDG_STATE_HOME", ".local/state")?;
    let user_home = caller
        .get("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    if let Some(var) = state.var {
        let rel = if state.dir.is_empty() { var } else { state.dir };
        let dir = home.join(rel);
        std::fs::create_dir_all(&dir).map_err(fail(&dir))?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
            .map_err(fail(&dir))?;
        let moved = caller.get(var).filter(|v| !v.is_empty()).map(PathBuf::from);
        for seed in state.seed {
            let from = match (&moved, seed.in_home_by_default) {
                (Some(moved), _) => Some(moved.join(seed.file)),
                (None, true) => user_home.as_ref().map(|h| h.join(seed.file)),
                (None, false) => user_home
                    .as_ref()
                    .map(|h| h.join(state.dir).join(seed.file)),
            };
            if let Some(from) = from {
                write_seed(&from, &dir.join(seed.file), seed.keep)?;
            }
        }
        set.push((var.to_string(), dir.display().to_string()));
    }
    if let Some(ledger_home) = ledger_home {
        set.push((
            "TDD_LEDGER_HOME".to_string(),
            ledger_home.display().to_string(),
        ));
    }
    for (name, rel) in TOOLCHAIN_HOMES {
        let path = match caller.get(*name).filter(|v| !v.is_empty()) {
            Some(value) => Some(PathBuf::from(value)),
            None => user_home
                .as_ref()
                .map(|h| h.join(rel))
                .filter(|p| p.is_dir()),
        };
        if let Some(path) = path {
            set.push(((*name).to_string(), path.display().to_string()));
        }
    }
    Ok(set)
}

/// Writes what `keep` keeps of the user's file at `from` to `to`. A file the user does
/// not have, or one that is not what it should be (too large, not parsing), is skipped.
fn write_seed(from: &Path, to: &Path, keep: Keep) -> Result<(), HomeError> {
    let Some(bytes) = read_small(from) else {
        return Ok(());
    };
    let (bytes, mode) = match keep {
        Keep::Whole => (bytes, 0o600),
        Keep::JsonKeys { keys, writable } => {
            let Ok(serde_json::Value::Object(all)) =
                serde_json::from_slice::<serde_json::Value>(&bytes)
            else {
                return Ok(());
            };
            let kept: serde_json::Map<String, serde_json::Value> = all
                .into_iter()
                .filter(|(k, _)| keys.contains(&k.as_str()))
                .collect();
            let text = serde_json::to_vec_pretty(&kept).unwrap_or_default();
            (text, if writable { 0o600 } else { 0o400 })
        }
        Keep::TomlKeys(keys) => {
            let Ok(all) = std::str::from_utf8(&bytes)
                .ok()
                .map_or(Err(()), |t| t.parse::<toml::Table>().map_err(|_| ()))
            else {
                return Ok(());
            };
            let kept: toml::Table = all
                .into_iter()
                .filter(|(k, _)| keys.contains(&k.as_str()))
                .collect();
            (
                toml::to_string(&kept).unwrap_or_default().into_bytes(),
                0o400,
            )
        }
    };
    std::fs::write(to, bytes).map_err(|source| HomeError {
        path: to.to_path_buf(),
        source,
    })?;
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(mode)).map_err(|source| {
        HomeError {
            path: to.to_path_buf(),
            source,
        }
    })
}

/// The bytes of the user's file at `path` when it is there and not too large. The
/// user's own state may be a link (a dotfiles manager's), so links are followed here:
/// no leaf can write the user's home.
fn read_small(path: &Path) -> Option<Vec<u8>> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_SEED_BYTES {
        return None;
    }
    std::fs::read(path).ok()
}

/// Removes a leaf's private home, or what is left of it. Links inside are removed, never
/// followed; read-only files and directories the leaf made are removed too.
pub fn remove(home: &Path) {
    if home.symlink_metadata().is_err() {
        return;
    }
    if std::fs::remove_dir_all(home).is_err() {
        // A directory the leaf made read-only: give its owner the right back, once.
        restore_write(home);
        let _ = std::fs::remove_dir_all(home);
    }
}

/// Makes every directory under `dir` writable by its owner again, without following links.
fn restore_write(dir: &Path) {
    let Ok(meta) = dir.symlink_metadata() else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            restore_write(&entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATE: CliState = crate::providers::claude::STATE;

    fn user() -> (tempfile::TempDir, BTreeMap<String, String>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join("user");
        std::fs::create_dir_all(home.join(".claude")).expect("claude");
        std::fs::create_dir_all(home.join(".cargo")).expect("cargo");
        std::fs::write(home.join(".claude/.credentials.json"), "{\"token\":\"t\"}").expect("c");
        std::fs::write(
            home.join(".claude/settings.json"),
            r#"{"model":"opus","hooks":{"SessionStart":[{"command":"evil"}]},"env":{"NODE_OPTIONS":"--require x"}}"#,
        )
        .expect("s");
        std::fs::write(home.join(".claude/CLAUDE.md"), "obey the developer").expect("md");
        std::fs::write(
            home.join(".claude.json"),
            r#"{"userID":"u","mcpServers":{"x":{"command":"evil"}},"projects":{}}"#,
        )
        .expect("j");
        let caller = [("HOME".to_string(), home.display().to_string())]
            .into_iter()
            .collect();
        (dir, caller)
    }

    fn value<'a>(set: &'a [(String, String)], name: &str) -> &'a str {
        set.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("{name} not set in {set:?}"))
    }

    #[test]
    fn a_private_home_keeps_credentials_and_allowed_settings_only() {
        let (dir, caller) = user();
        let home = dir.path().join("leaf/home");
        let set = make(&home, &STATE, &caller, Some(Path::new("/ledger"))).expect("make");
        assert_eq!(value(&set, "HOME"), home.display().to_string());
        let state = PathBuf::from(value(&set, "CLAUDE_CONFIG_DIR"));
        assert!(state.starts_with(&home));
        let mut names: Vec<String> = std::fs::read_dir(&state)
            .expect("state")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [".claude.json", ".credentials.json", "settings.json"]
        );
        let settings = std::fs::read_to_string(state.join("settings.json")).expect("settings");
        assert!(
            settings.contains("opus") && !settings.contains("evil"),
            "{settings}"
        );
        assert!(!settings.contains("NODE_OPTIONS"), "{settings}");
        let global = std::fs::read_to_string(state.join(".claude.json")).expect("global");
        assert!(
            global.contains("\"u\"") && !global.contains("evil"),
            "{global}"
        );
        let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode(&state.join("settings.json")), 0o400);
        assert_eq!(mode(&state.join(".credentials.json")), 0o600);
        assert_eq!(value(&set, "TDD_LEDGER_HOME"), "/ledger");
        assert!(value(&set, "CARGO_HOME").ends_with("user/.cargo"));
        assert!(set.iter().all(|(k, _)| k != "RUSTUP_HOME"), "{set:?}");
        remove(&home);
        assert!(!home.exists());
    }

    #[test]
    fn a_moved_state_directory_is_seeded_from_where_it_moved() {
        let (dir, mut caller) = user();
        let moved = dir.path().join("moved");
        std::fs::create_dir_all(&moved).expect("moved");
        std::fs::write(moved.join(".claude.json"), r#"{"userID":"moved"}"#).expect("j");
        caller.insert("CLAUDE_CONFIG_DIR".into(), moved.display().to_string());
        let home = dir.path().join("leaf/home");
        let set = make(&home, &STATE, &caller, None).expect("make");
        let state = PathBuf::from(value(&set, "CLAUDE_CONFIG_DIR"));
        let global = std::fs::read_to_string(state.join(".claude.json")).expect("global");
        assert!(global.contains("moved"), "{global}");
        assert!(!state.join(".credentials.json").exists());
    }

    #[test]
    fn a_home_left_read_only_by_its_leaf_is_still_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join("home");
        make(&home, &CliState::NONE, &BTreeMap::new(), None).expect("make");
        let locked = home.join("locked");
        std::fs::create_dir_all(locked.join("inner")).expect("inner");
        std::fs::write(locked.join("inner/f"), "x").expect("f");
        std::os::unix::fs::symlink(dir.path(), home.join("link")).expect("link");
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o500)).expect("ro");
        remove(&home);
        assert!(!home.exists());
        assert!(dir.path().exists(), "a link was followed");
    }
}
