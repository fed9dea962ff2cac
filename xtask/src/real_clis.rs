//! The real agent CLIs the e2e tests drive (`tests/e2e/real_clis.rs`), pinned and
//! installed into a cache directory outside the work tree: Claude Code and codex with
//! npm, aider in a Python virtual environment. Nothing is installed when the pinned
//! version is already there. The tests find the directory through `TDD_REAL_CLIS`,
//! which `cargo xtask test` sets.

use std::path::PathBuf;
use std::process::Command;

use crate::setup::Missing;
use crate::setup::found;
use crate::setup::output;
use crate::setup::step;

/// The variable naming the directory, for the tests.
pub const ENV: &str = "TDD_REAL_CLIS";

/// `@anthropic-ai/claude-code`, pinned.
pub const CLAUDE_CODE: &str = "2.1.197";
/// `@openai/codex`, pinned.
pub const CODEX: &str = "0.171.0";
/// `aider-chat`, pinned.
pub const AIDER: &str = "0.86.2";

/// About how much installing the three CLIs downloads and writes.
pub const DOWNLOAD: &str = "1.4 GB";

/// Variables that keep the CLIs from phoning home while they are installed or probed.
pub const QUIET: &[(&str, &str)] = &[
    ("DISABLE_TELEMETRY", "1"),
    ("DISABLE_AUTOUPDATER", "1"),
    ("DISABLE_ERROR_REPORTING", "1"),
    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
    ("AIDER_ANALYTICS", "false"),
    ("AIDER_CHECK_UPDATE", "false"),
    ("npm_config_update_notifier", "false"),
    ("PIP_DISABLE_PIP_VERSION_CHECK", "1"),
];

/// `$TDD_REAL_CLIS`, else `$XDG_CACHE_HOME/tdd/real-clis`, else `~/.cache/tdd/real-clis`.
pub fn dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"))
        .join("tdd/real-clis")
}

/// Installs what is missing; returns what could not be installed.
pub fn install() -> Result<(), Vec<Missing>> {
    let dir = dir();
    let npm = dir.join("npm/node_modules/.bin");
    let present = has_version(&npm.join("claude"), CLAUDE_CODE).is_some()
        && has_version(&npm.join("codex"), CODEX).is_some()
        && has_version(&dir.join("aider-venv/bin/aider"), AIDER).is_some();
    if !present {
        step(&format!(
            "the agent CLIs the e2e tests drive are missing: downloading Claude Code, codex \
             and aider, about {DOWNLOAD} in all, into {} (once; `cargo xtask test \
             --no-real-clis` runs everything else without them)",
            dir.display()
        ));
    }
    let mut missing = Vec::new();
    missing.extend(npm_clis(&dir).err());
    missing.extend(aider(&dir).err());
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing)
    }
}

/// The version `program --version` prints, when it contains `version`.
fn has_version(program: &std::path::Path, version: &str) -> Option<String> {
    let program = program.to_str()?;
    output(&[program, "--version"]).filter(|v| v.contains(version))
}

fn npm_clis(dir: &std::path::Path) -> Result<(), Missing> {
    let prefix = dir.join("npm");
    let bin = prefix.join("node_modules/.bin");
    let pins = [("claude", CLAUDE_CODE), ("codex", CODEX)];
    let present = pins
        .iter()
        .map(|(name, version)| has_version(&bin.join(name), version))
        .collect::<Option<Vec<String>>>();
    if let Some(versions) = present {
        for ((name, _), version) in pins.iter().zip(versions) {
            found(name, &version);
        }
        return Ok(());
    }
    let packages = [
        format!("@anthropic-ai/claude-code@{CLAUDE_CODE}"),
        format!("@openai/codex@{CODEX}"),
    ];
    step(&format!(
        "installing the agent CLIs: npm install --prefix {} {}",
        prefix.display(),
        packages.join(" ")
    ));
    let _ = std::fs::create_dir_all(&prefix);
    let ok = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(&prefix)
        .args(&packages)
        .envs(QUIET.iter().copied())
        .status()
        .is_ok_and(|s| s.success());
    for (name, version) in pins {
        match has_version(&bin.join(name), version) {
            Some(printed) if ok => found(name, &printed),
            _ => {
                return Err(Missing {
                    name: "agent CLIs",
                    how: format!(
                        "`npm install {}` did not give {name} {version} in {} (see above)",
                        packages.join(" "),
                        prefix.display()
                    ),
                });
            }
        }
    }
    Ok(())
}

fn aider(dir: &std::path::Path) -> Result<(), Missing> {
    let venv = dir.join("aider-venv");
    let program = venv.join("bin/aider");
    if let Some(version) = has_version(&program, AIDER) {
        found("aider", &version);
        return Ok(());
    }
    step(&format!(
        "installing aider: python3 -m venv {0} && {0}/bin/pip install aider-chat=={AIDER}",
        venv.display()
    ));
    // A venv is not relocatable: one left by an older layout is made anew.
    let _ = std::fs::remove_dir_all(&venv);
    let python = venv.join("bin/python");
    let ok = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .is_ok_and(|s| s.success())
        && Command::new(&python)
            .args(["-m", "pip", "install", "--quiet"])
            .arg(format!("aider-chat=={AIDER}"))
            .envs(QUIET.iter().copied())
            .status()
            .is_ok_and(|s| s.success());
    match has_version(&program, AIDER) {
        Some(version) if ok => {
            found("aider", &version);
            Ok(())
        }
        _ => Err(Missing {
            name: "aider",
            how: format!(
                "`pip install aider-chat=={AIDER}` failed in {} (see above); python3-venv may be missing",
                venv.display()
            ),
        }),
    }
}
