//! Which version of its CLI a provider drives, whether that version was tested, and
//! whether credentials for it are present: what `tdd doctor` reports per provider and
//! what a leaf's response warns about.

use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;
use std::process::Command;
use std::process::Stdio;
use std::sync::Mutex;
use std::sync::OnceLock;

use serde::Serialize;

use crate::provider::Provider;

/// What is known of one provider's CLI on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CliCheck {
    /// The provider.
    pub provider: String,
    /// The executable found on `PATH`, if any.
    pub program: Option<PathBuf>,
    /// The version it printed (`x.y.z`), if it ran.
    pub version: Option<String>,
    /// The `major.minor` versions the provider was tested with.
    pub tested_versions: Vec<String>,
    /// Whether `version` is one of them (`None` when the version is unknown).
    pub tested: Option<bool>,
    /// Where its credentials come from (a variable or a login file), if anywhere.
    pub credentials: Option<String>,
}

impl CliCheck {
    /// A warning for an untested version, if it is one.
    pub fn warning(&self) -> Option<String> {
        match (&self.version, self.tested) {
            (Some(version), Some(false)) => Some(format!(
                "{} {version} is untested: tdd's {} provider was tested with {}",
                self.provider,
                self.provider,
                self.tested_versions.join(", ")
            )),
            _ => None,
        }
    }
}

/// The first `x.y` or `x.y.z` in `text`: `2.1.197 (Claude Code)`, `codex-cli 0.171.0`,
/// `aider 0.86.2`.
pub fn version_in(text: &str) -> Option<String> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map(|word| word.trim_matches('.'))
        .find(|word| {
            let parts: Vec<&str> = word.split('.').collect();
            parts.len() >= 2 && parts.iter().all(|p| !p.is_empty())
        })
        .map(str::to_string)
}

/// True when `version`'s `major.minor` is one of `tested`.
pub fn is_tested(version: &str, tested: &[&str]) -> bool {
    let mut parts = version.split('.');
    let major_minor = match (parts.next(), parts.next()) {
        (Some(major), Some(minor)) => format!("{major}.{minor}"),
        _ => return false,
    };
    tested.contains(&major_minor.as_str())
}

/// Where `provider`'s credentials come from in `env` (a variable name, or a login
/// file under `HOME`), if anywhere.
pub fn credentials(provider: &str, env: &BTreeMap<String, String>) -> Option<String> {
    let (variables, files): (&[&str], Vec<PathBuf>) = match provider {
        "claude" => (
            &[
                "ANTHROPIC_API_KEY",
                "ANTHROPIC_AUTH_TOKEN",
                "CLAUDE_CODE_USE_BEDROCK",
                "CLAUDE_CODE_USE_VERTEX",
            ],
            vec![
                env.get("CLAUDE_CONFIG_DIR")
                    .map(PathBuf::from)
                    .or_else(|| env.get("HOME").map(|h| Path::new(h).join(".claude")))
                    .unwrap_or_default()
                    .join(".credentials.json"),
            ],
        ),
        "codex" => (
            &["CODEX_API_KEY", "OPENAI_API_KEY"],
            vec![
                env.get("CODEX_HOME")
                    .map(PathBuf::from)
                    .or_else(|| env.get("HOME").map(|h| Path::new(h).join(".codex")))
                    .unwrap_or_default()
                    .join("auth.json"),
            ],
        ),
        "aider" => (
            &[
                "OPENAI_API_KEY",
                "ANTHROPIC_API_KEY",
                "OPENROUTER_API_KEY",
                "GEMINI_API_KEY",
                "DEEPSEEK_API_KEY",
            ],
            Vec::new(),
        ),
        _ => return None,
    };
    variables
        .iter()
        .find(|v| env.get(**v).is_some_and(|value| !value.is_empty()))
        .map(|v| v.to_string())
        .or_else(|| {
            files
                .into_iter()
                .find(|f| f.is_file())
                .map(|f| f.display().to_string())
        })
}

/// The executable `program` resolves to on `path` (a `PATH` value).
pub fn which(program: &str, path: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Path::new(program).is_file().then(|| PathBuf::from(program));
    }
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// `program --version`, once per program per process (a leaf launch asks again and
/// again).
fn version_of(program: &Path) -> Option<String> {
    static SEEN: OnceLock<Mutex<BTreeMap<PathBuf, Option<String>>>> = OnceLock::new();
    let seen = SEEN.get_or_init(|| Mutex::new(BTreeMap::new()));
    if let Some(known) = seen.lock().ok().and_then(|s| s.get(program).cloned()) {
        return known;
    }
    let version = run_version(program);
    if let Ok(mut seen) = seen.lock() {
        seen.insert(program.to_path_buf(), version.clone());
    }
    version
}

/// How long `--version` may take; a CLI that hangs on it is treated as unknown.
pub const VERSION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs `program --version` and reads the version, killing it after
/// [`VERSION_TIMEOUT`].
fn run_version(program: &Path) -> Option<String> {
    let child = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .env("DISABLE_AUTOUPDATER", "1")
        .spawn()
        .ok()?;
    let pid = child.id();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(child.wait_with_output());
    });
    match receiver.recv_timeout(VERSION_TIMEOUT) {
        Ok(Ok(out)) if out.status.success() => version_in(&String::from_utf8_lossy(&out.stdout)),
        Ok(_) => None,
        Err(_) => {
            // The waiting thread still owns the child; it reaps it once killed.
            if let Ok(pid) = i32::try_from(pid) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            None
        }
    }
}

/// Checks `provider`'s CLI with the environment `env`. `None` for a provider that
/// wraps no versioned CLI.
pub fn check<P: Provider + ?Sized>(
    provider: &P,
    env: &BTreeMap<String, String>,
) -> Option<CliCheck> {
    let program = provider.program()?;
    let tested = provider.tested_versions();
    let found = which(program, env.get("PATH").map_or("", String::as_str));
    let version = found.as_deref().and_then(version_of);
    Some(CliCheck {
        provider: provider.name().to_string(),
        tested: version.as_deref().map(|v| is_tested(v, tested)),
        tested_versions: tested.iter().map(|t| t.to_string()).collect(),
        credentials: credentials(provider.name(), env),
        program: found,
        version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_what_each_cli_prints() {
        assert_eq!(
            version_in("2.1.197 (Claude Code)").as_deref(),
            Some("2.1.197")
        );
        assert_eq!(version_in("codex-cli 0.171.0").as_deref(), Some("0.171.0"));
        assert_eq!(version_in("aider 0.86.2\n").as_deref(), Some("0.86.2"));
        assert_eq!(version_in("no version here"), None);
    }

    #[test]
    fn only_a_tested_major_minor_is_tested() {
        assert!(is_tested("2.1.197", &["2.1"]));
        assert!(is_tested("2.1.300", &["2.1"]));
        assert!(!is_tested("2.2.0", &["2.1"]));
        assert!(!is_tested("12.1.0", &["2.1"]));
        assert!(!is_tested("0.172.0", &["0.171"]));
    }

    #[test]
    fn credentials_come_from_a_variable_or_a_login_file() {
        let home = tempfile::tempdir().expect("home");
        let mut env = BTreeMap::from([("HOME".to_string(), home.path().display().to_string())]);
        assert_eq!(credentials("codex", &env), None);
        std::fs::create_dir_all(home.path().join(".codex")).expect("dir");
        std::fs::write(home.path().join(".codex/auth.json"), "{}").expect("login");
        assert!(credentials("codex", &env).is_some_and(|c| c.ends_with("auth.json")));
        env.insert("CODEX_API_KEY".into(), "k".into());
        assert_eq!(credentials("codex", &env).as_deref(), Some("CODEX_API_KEY"));
        assert_eq!(credentials("claude", &env), None);
    }
}
