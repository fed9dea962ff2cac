//! The self-test's second half: the harness's own CLI, found on `PATH`, run for one
//! session with the hooks `tdd init --hooks` writes and a scripted model on loopback
//! whose one tool call writes into git's internals. It proves what the wiring check
//! cannot: that this CLI, in the mode tdd runs it (`claude -p`, `codex exec`),
//! dispatches its hook and blocks the write, and that the model is told why.
//!
//! Everything it runs lives in a scratch directory of its own (a repository, a home,
//! the CLI's configuration, a ledger home): the user's repository, login and history
//! are never read or written, and the CLI is given a placeholder key for the loopback
//! model only. A CLI that does not end within [`TIMEOUT`] is killed with its process
//! group. Claude Code and Codex only: Gemini CLI and Copilot CLI have no scripted
//! model here, so their wiring alone is checked.

mod model;

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::path::PathBuf;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;
use std::time::Instant;

use serde::Serialize;
use serde_json::json;
use tdd_leaves::hook::Harness;

use model::Api;
use model::Model;

/// How long the CLI may take to make its two requests and end.
const TIMEOUT: Duration = Duration::from_secs(120);

/// The file the scripted tool call writes, inside the scratch repository's `.git`.
const TARGET: &str = ".git/tdd-selftest";

/// What the CLI did with a write its hook must block.
#[derive(Debug, Clone, Serialize)]
pub struct CliCheck {
    /// The CLI's program.
    pub cli: &'static str,
    /// Where it was found on `PATH`; none when it is not installed.
    pub found: Option<PathBuf>,
    /// What `--version` said.
    pub version: Option<String>,
    /// Whether the write was blocked: the file is not there and the model was told
    /// why in the CLI's next request.
    pub blocked: bool,
    /// What happened, in words.
    pub detail: String,
}

impl CliCheck {
    /// The CLI, its version and what happened, in one line: `claude (2.1.197): ...`.
    pub fn summary(&self) -> String {
        let version = self
            .version
            .as_deref()
            .map(|v| format!(" ({v})"))
            .unwrap_or_default();
        format!("{}{version}: {}", self.cli, self.detail)
    }
}

/// Runs `harness`'s CLI against the hook; `None` for a harness with no scripted model
/// here (Gemini CLI, Copilot CLI).
pub fn check(harness: Harness) -> Option<CliCheck> {
    let (cli, api) = match harness {
        Harness::Claude => ("claude", Api::Anthropic),
        Harness::Codex => ("codex", Api::Responses),
        Harness::Gemini | Harness::Copilot => return None,
    };
    let mut check = CliCheck {
        cli,
        found: on_path(cli),
        version: None,
        blocked: false,
        detail: String::new(),
    };
    let Some(program) = check.found.clone() else {
        check.detail = format!("`{cli}` is not on PATH: only the wiring was checked");
        return Some(check);
    };
    check.version = version(&program);
    match run(harness, api, &program) {
        Ok((blocked, detail)) => {
            check.blocked = blocked;
            check.detail = detail;
        }
        Err(detail) => check.detail = detail,
    }
    Some(check)
}

/// Runs the CLI once in a scratch repository: whether the write was blocked, and what
/// happened.
fn run(harness: Harness, api: Api, program: &Path) -> Result<(bool, String), String> {
    let scratch = tempfile::Builder::new()
        .prefix("tdd-hook-cli-selftest-")
        .tempdir()
        .map_err(|e| format!("no scratch directory: {e}"))?;
    let repo = scratch.path().join("repo");
    let home = scratch.path().join("home");
    for dir in [&repo, &home] {
        std::fs::create_dir(dir).map_err(|e| format!("no scratch directory: {e}"))?;
    }
    super::hook_selftest::scratch_repository(&repo)?;
    let target = repo.join(TARGET);
    let (tool, input) = match harness {
        Harness::Codex => (
            "exec_command",
            json!({ "cmd": format!("echo x > {TARGET}") }),
        ),
        _ => (
            "Write",
            json!({ "file_path": target.display().to_string(), "content": "x" }),
        ),
    };
    let model = Model::start(api, tool, input)
        .map_err(|e| format!("the loopback model could not start: {e}"))?;
    // Nothing of the caller's environment but `PATH` (where the CLI finds `tdd`).
    let mut command = Command::new(program);
    command
        .current_dir(&repo)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("LANG", "C.UTF-8")
        .env("TDD_LEDGER_HOME", scratch.path().join("ledgers"));
    match harness {
        Harness::Codex => codex(&mut command, &repo, &home, &model.url)?,
        _ => claude(&mut command, &repo, &model.url)?,
    }
    let (status, output) = run_bounded(command, TIMEOUT)?;
    let told = model
        .requests()
        .iter()
        .flat_map(|body| model::tool_outputs(api, body))
        .any(|said| said.contains("git's own state"));
    let written = target.symlink_metadata().is_ok();
    let outcome = Outcome {
        written,
        told,
        requests: model.requests().len(),
        status,
        output,
    };
    Ok(outcome.judged(program, tool))
}

/// What one run of the CLI left behind.
struct Outcome {
    /// Whether the scripted write happened.
    written: bool,
    /// Whether a later request told the model the hook's reason.
    told: bool,
    /// How many requests the model served.
    requests: usize,
    /// How the CLI ended, in words.
    status: String,
    /// What it printed.
    output: String,
}

impl Outcome {
    /// Whether the write was blocked, and what happened in words.
    fn judged(&self, program: &Path, tool: &str) -> (bool, String) {
        let cli = program.display();
        let status = &self.status;
        match (self.written, self.told) {
            (false, true) => (
                true,
                format!(
                    "{cli} ran the hook before its {tool} tool: the write to {TARGET} was blocked and the model told why"
                ),
            ),
            (true, _) => (
                false,
                format!(
                    "{cli} let its {tool} tool write {TARGET}: the hook did not block it ({status}){}",
                    tail(&self.output)
                ),
            ),
            (false, false) => (
                false,
                format!(
                    "{cli} made {} request(s) and never told the model of a blocked write ({status}){}",
                    self.requests,
                    tail(&self.output)
                ),
            ),
        }
    }
}

/// `claude -p` with the hooks as its settings for this session only, as a conducted
/// leaf gets them.
fn claude(command: &mut Command, repo: &Path, url: &str) -> Result<(), String> {
    let hooks = tdd_leaves::providers::claude::session_hooks()
        .map_err(|e| format!("the hooks could not be written: {e}"))?;
    command
        .args([
            "-p",
            "Run the tdd hook self-test.",
            "--output-format",
            "stream-json",
        ])
        .args(["--verbose", "--permission-mode", "acceptEdits"])
        .args(hooks)
        .args(["--allowedTools", "Write"])
        .arg("--add-dir")
        .arg(repo)
        .env("ANTHROPIC_BASE_URL", url)
        .env("ANTHROPIC_API_KEY", "sk-ant-tdd-selftest")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    Ok(())
}

/// `codex exec` with the hooks in a private `CODEX_HOME`, as a conducted leaf gets them,
/// and the loopback model as its provider.
fn codex(command: &mut Command, repo: &Path, home: &Path, url: &str) -> Result<(), String> {
    let codex_home = home.join("codex-home");
    std::fs::create_dir_all(&codex_home).map_err(|e| format!("no CODEX_HOME: {e}"))?;
    let trust = tdd_leaves::providers::codex::wire_session_hooks(&codex_home)
        .map_err(|e| format!("the hooks could not be written: {e}"))?;
    command
        .args(["exec", "--json", "--skip-git-repo-check"])
        .args(["--sandbox", "danger-full-access"])
        .arg(trust)
        .arg("-C")
        .arg(repo)
        .args(["-m", "gpt-5-codex"])
        .args(["-c", "model_provider=\"tdd_selftest\""])
        .args(["-c", "model_providers.tdd_selftest.name=\"tdd_selftest\""])
        .arg("-c")
        .arg(format!(
            "model_providers.tdd_selftest.base_url=\"{url}/v1\""
        ))
        .args([
            "-c",
            "model_providers.tdd_selftest.env_key=\"CODEX_API_KEY\"",
        ])
        .args(["-c", "model_providers.tdd_selftest.wire_api=\"responses\""])
        .args([
            "-c",
            "model_providers.tdd_selftest.supports_websockets=false",
        ])
        .arg("Run the tdd hook self-test.")
        .env("CODEX_HOME", &codex_home)
        .env("CODEX_API_KEY", "sk-tdd-selftest");
    Ok(())
}

/// Runs `command` in a process group of its own, its output captured, killed with its
/// group past `bound`: how it ended, in words, and what it printed (what it printed by
/// a few seconds after, when something outside its group still holds its output).
fn run_bounded(mut command: Command, bound: Duration) -> Result<(String, String), String> {
    let mut child = command
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("the CLI could not start: {e}"))?;
    let readers = [
        child.stdout.take().map(|o| drain(Box::new(o))),
        child.stderr.take().map(|e| drain(Box::new(e))),
    ];
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break format!("it {status}"),
            Ok(None) if started.elapsed() < bound => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(None) | Err(_) => {
                kill_group(&child);
                let _ = child.wait();
                break format!("killed after {} ms without ending", bound.as_millis());
            }
        }
    };
    // Whatever the CLI left running in its group goes with it.
    kill_group(&child);
    let readers: Vec<_> = readers.into_iter().flatten().collect();
    let waited = Instant::now();
    while readers.iter().any(|r| !r.is_finished()) && waited.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = readers
        .into_iter()
        .filter(std::thread::JoinHandle::is_finished)
        .map(|reader| reader.join().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    Ok((status, output))
}

/// Reads `from` to its end on a thread of its own.
fn drain(mut from: Box<dyn Read + Send>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = from.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// SIGKILL to the child's process group.
fn kill_group(child: &std::process::Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// The last lines of what the CLI printed (each cut to 200 characters), for a
/// failure's detail.
fn tail(output: &str) -> String {
    let lines: Vec<String> = output
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.chars().take(200).collect())
        .collect();
    let last = lines[lines.len().saturating_sub(3)..].join(" | ");
    if last.is_empty() {
        String::new()
    } else {
        format!(": {}", last.chars().take(600).collect::<String>())
    }
}

/// What `program --version` prints first, if it answers within a few seconds.
fn version(program: &Path) -> Option<String> {
    let mut command = Command::new(program);
    command.arg("--version");
    let (_, output) = run_bounded(command, Duration::from_secs(15)).ok()?;
    output
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_string)
}

/// `program` as the shell would find it on `PATH`.
fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| {
            std::fs::metadata(candidate).is_ok_and(|m| {
                m.is_file()
                    && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cli_that_outlives_its_bound_is_killed_with_its_whole_group() {
        let marker = format!("tdd-selftest-bound-{}", std::process::id());
        let mut command = Command::new("bash");
        // A child that keeps the group's output open, as a CLI's own helper would.
        command.args([
            "-c",
            &format!("(exec -a {marker} sleep 1000) & exec -a {marker} sleep 1000"),
        ]);
        let (status, _) = run_bounded(command, Duration::from_millis(300)).expect("runs");
        assert!(status.starts_with("killed after"), "{status}");
        // Both are gone once the kernel has torn them down (a bounded wait on that).
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = Command::new("pgrep")
                .args(["-f", &marker])
                .output()
                .expect("pgrep");
            if left.stdout.is_empty() {
                break;
            }
            assert!(Instant::now() < deadline, "left running: {:?}", left.stdout);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn a_cli_that_ends_says_how_and_what_it_printed() {
        let mut command = Command::new("sh");
        command.args(["-c", "echo out; echo err >&2; exit 3"]);
        let (status, output) = run_bounded(command, TIMEOUT).expect("runs");
        assert!(status.contains('3'), "{status}");
        assert!(output.contains("out") && output.contains("err"), "{output}");
    }
}
