//! Asking a project's runner for its version, started exactly the way the adapter starts
//! it for a run (through uv, poetry or pdm when their lock exists, the nearest
//! `node_modules/.bin` at or above the project root, ...).

use std::time::Duration;

use serde::Serialize;

use crate::Project;
use crate::exec::Scratch;
use crate::model::Exit;
use crate::process;
use crate::process::ProcessSpec;

/// How long a version probe may take before it counts as a failure.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

/// What asking a runner for its version showed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Probe {
    /// The command that was run.
    pub argv: Vec<String>,
    /// The first line it printed, when it succeeded.
    pub version: Option<String>,
    /// Why it did not, when it failed (not found, non-zero exit, timeout).
    pub error: Option<String>,
}

/// Runs `argv` in the project root with the project's `env`, under [`PROBE_TIMEOUT`]
/// (the whole process group is killed when it expires), and reads the first non-empty
/// line of its output. Output goes to files, never to a pipe that could fill.
pub(crate) fn run_version(project: &Project, argv: Vec<String>) -> Probe {
    let failed = |argv: Vec<String>, why: String| Probe {
        argv,
        version: None,
        error: Some(why),
    };
    let scratch = match Scratch::new() {
        Ok(scratch) => scratch,
        Err(e) => return failed(argv, e.to_string()),
    };
    let env: Vec<(String, String)> = project
        .config
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let (stdout, stderr) = match (scratch.capture(), scratch.capture()) {
        (Ok(out), Ok(err)) => (out, err),
        (Err(e), _) | (_, Err(e)) => return failed(argv, e.to_string()),
    };
    let finished = process::run(&ProcessSpec {
        argv: &argv,
        cwd: &project.root,
        env: &env,
        clear_env: false,
        timeout: PROBE_TIMEOUT,
        stdout: &stdout,
        stderr: &stderr,
        confinement: None,
        tick: None,
    });
    let read = |file: &std::fs::File| crate::exec::read_capped(file).unwrap_or_default();
    let mut text = String::from_utf8_lossy(&read(&stdout)).into_owned();
    text.push('\n');
    text.push_str(&String::from_utf8_lossy(&read(&stderr)));
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default()
        .to_string();
    let shown = argv.join(" ");
    let program = argv.first().cloned().unwrap_or_default();
    match finished.exit {
        Exit::Code { code: 0 } => Probe {
            argv,
            version: Some(first),
            error: None,
        },
        Exit::Code { code } => failed(argv, format!("`{shown}` exited {code}: {first}")),
        Exit::Signal { signal } => failed(argv, format!("`{shown}` died of signal {signal}")),
        Exit::TimedOut { after_seconds } => failed(
            argv,
            format!("`{shown}` did not answer within {after_seconds}s"),
        ),
        Exit::NotStarted { message } => failed(argv, format!("{program}: {message}")),
    }
}
