//! Pushing the work branch with the git CLI. The token reaches git only through the
//! environment of that one git process: a credential helper, configured by
//! `GIT_CONFIG_*` variables, prints it from `TDD_GIT_TOKEN`. It is never in an argument
//! or a URL, and no leaf ever sees that variable.

use std::path::Path;
use std::process::Command;

use super::token::Redactor;
use super::token::Token;

/// The variable the credential helper reads the token from.
pub const TOKEN_VAR: &str = "TDD_GIT_TOKEN";

/// The helper: answers `get` with the token from the environment, ignores `store` and
/// `erase`. `printf` is a shell builtin, so the token is in no process's arguments.
const HELPER: &str = "!f() { test \"$1\" = get && printf 'username=x-access-token\\npassword=%s\\n' \"$TDD_GIT_TOKEN\"; }; f";

/// Why a push failed.
#[derive(Debug, thiserror::Error)]
#[error("git push {remote} {branch} failed: {detail}")]
pub struct PushError {
    /// The remote.
    pub remote: String,
    /// The branch.
    pub branch: String,
    /// git's message, redacted.
    pub detail: String,
}

/// `git push <remote> refs/heads/<branch>` from `work_tree`, fast-forward only, with the
/// branch's published ledger (`refs/tdd/ledger/<branch>`) when there is one, atomically:
/// the remote gets both or neither, so a clone never finds a branch ahead of its ledger.
pub fn push(work_tree: &Path, remote: &str, branch: &str, token: &Token) -> Result<(), PushError> {
    let failed = |detail: String| PushError {
        remote: remote.to_string(),
        branch: branch.to_string(),
        detail,
    };
    let mut refspecs = vec![format!("refs/heads/{branch}:refs/heads/{branch}")];
    let ledger = tdd_engine::published::ledger_ref(branch);
    let published = Command::new("git")
        .arg("-C")
        .arg(work_tree)
        .args(["rev-parse", "-q", "--verify", &ledger])
        .stdin(std::process::Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    if published {
        refspecs.push(format!("{ledger}:{ledger}"));
    }
    let _span = tracing::info_span!("git_push", remote, branch).entered();
    let began = std::time::Instant::now();
    // The token is in this git's environment: no program the repository's
    // configuration names (a hook, a receive-pack, a remote helper) may start from it.
    let out = Command::new("git")
        .arg("-C")
        .arg(work_tree)
        .args(["-c", "core.hooksPath=/dev/null"])
        .args(
            tdd_engine::git::TRUSTED_TRANSPORTS
                .iter()
                .flat_map(|setting| ["-c", setting]),
        )
        .args([
            "push",
            "--quiet",
            "--atomic",
            "--no-verify",
            "--receive-pack=git-receive-pack",
            remote,
        ])
        .args(&refspecs)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_PROTOCOL_FROM_USER", "0")
        .env("GIT_CONFIG_COUNT", "2")
        // An empty helper first: no helper configured elsewhere is asked or told.
        .env("GIT_CONFIG_KEY_0", "credential.helper")
        .env("GIT_CONFIG_VALUE_0", "")
        .env("GIT_CONFIG_KEY_1", "credential.helper")
        .env("GIT_CONFIG_VALUE_1", HELPER)
        .env(TOKEN_VAR, token.expose())
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| failed(e.to_string()))?;
    let wall_ms = u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX);
    tracing::info!(wall_ms, ok = out.status.success(), "git push ended");
    if out.status.success() {
        return Ok(());
    }
    let redactor = Redactor::new(token);
    Err(failed(
        redactor.redact(String::from_utf8_lossy(&out.stderr).trim()),
    ))
}
