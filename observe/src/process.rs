//! Running one runner process under the project's timeout.
//!
//! Guarantees: the runner gets its own process group, stdin is closed, its
//! stdout and stderr go to files the engine holds open and that have no name (so a
//! chatty runner can never block on a full pipe, and no runner can swap the file the
//! engine reads for a link), wall time is measured by us from spawn to reap, the
//! variables [`crate::withheld_from_runners`] names never reach it, and when it ends
//! (or times out) the *whole group* is killed, so a test's background process does
//! not outlive the run (see [`unix`]).

#[cfg(unix)]
mod unix;

use std::path::Path;
use std::process::Command;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;
use std::time::Instant;

use super::model::Exit;

/// What to run and where its output goes.
pub(crate) struct ProcessSpec<'a> {
    /// Program and arguments; never passed through a shell by this module.
    pub argv: &'a [String],
    /// Working directory.
    pub cwd: &'a Path,
    /// Variables added to (or overriding) the inherited environment, of which the ones
    /// [`crate::withheld_from_runners`] names are never inherited; the caller sets only
    /// what the runner may see.
    pub env: &'a [(String, String)],
    /// Whether the process starts from an empty environment (only `env`).
    pub clear_env: bool,
    /// Wall-clock limit before the process group is killed.
    pub timeout: Duration,
    /// File receiving standard output.
    pub stdout: &'a std::fs::File,
    /// File receiving standard error.
    pub stderr: &'a std::fs::File,
    /// The rules the runner is confined by; without them, the policy of
    /// [`crate::RUNNER_SANDBOX_VAR`] when this process has one.
    pub confinement: Option<tdd_sandbox::Confinement>,
    /// Called with the time since spawn every interval while the process runs.
    pub tick: Option<(Duration, &'a dyn Fn(Duration))>,
}

/// How the process ended and how long it took.
#[derive(Debug)]
pub(crate) struct Finished {
    /// Exit code, signal, timeout or spawn failure.
    pub exit: Exit,
    /// Milliseconds from spawn to reap, to the nearest.
    pub wall_ms: u64,
    /// The confinement level the runner got, when it was confined.
    pub sandbox: Option<String>,
}

/// Runs `spec` to completion or timeout. Never panics; a spawn failure is
/// reported as [`Exit::NotStarted`].
pub(crate) fn run(spec: &ProcessSpec<'_>) -> Finished {
    let start = Instant::now();
    let (exit, sandbox) = spawn_and_wait(spec);
    Finished {
        exit,
        sandbox,
        // To the nearest millisecond: truncating would understate every run.
        wall_ms: u64::try_from((start.elapsed().as_micros() + 500) / 1000).unwrap_or(u64::MAX),
    }
}

/// Confines `command` by `rules`, or else by the policy in [`crate::RUNNER_SANDBOX_VAR`]
/// when this process has one, and returns the level it gets. A policy that cannot be
/// read or applied stops the runner from starting: confinement fails closed. Confined
/// or not, the runner dies with the thread that starts it, a kill of tdd included.
fn confine(
    command: &mut Command,
    rules: Option<&tdd_sandbox::Confinement>,
) -> Result<Option<String>, String> {
    if let Some(rules) = rules {
        let level = rules.level().label();
        rules
            .try_clone()
            .map_err(|e| format!("failed to copy the sandbox rules: {e}"))?
            .install(command);
        return Ok(Some(level));
    }
    // The rules are built once per process (the variable does not change) and cloned
    // for each runner: a suite run starts several.
    static RULES: std::sync::OnceLock<Result<Option<tdd_sandbox::Confinement>, String>> =
        std::sync::OnceLock::new();
    let rules = RULES.get_or_init(|| {
        let Some(text) = std::env::var_os(crate::RUNNER_SANDBOX_VAR) else {
            return Ok(None);
        };
        let policy: tdd_sandbox::Policy = serde_json::from_str(&text.to_string_lossy())
            .map_err(|e| format!("{} is not a sandbox policy: {e}", crate::RUNNER_SANDBOX_VAR))?;
        tdd_sandbox::Confinement::prepare(&policy)
            .map(Some)
            .map_err(|e| e.to_string())
    });
    match rules {
        Ok(None) => {
            // Unconfined, the runner still dies with the thread that started it.
            tdd_sandbox::die_with_spawner(command);
            Ok(None)
        }
        Ok(Some(rules)) => {
            let level = rules.level().label();
            rules
                .try_clone()
                .map_err(|e| format!("failed to copy the sandbox rules: {e}"))?
                .install(command);
            Ok(Some(level))
        }
        Err(why) => Err(why.clone()),
    }
}

fn spawn_and_wait(spec: &ProcessSpec<'_>) -> (Exit, Option<String>) {
    let Some((program, args)) = spec.argv.split_first() else {
        let exit = Exit::NotStarted {
            message: "empty command".to_string(),
        };
        return (exit, None);
    };
    let not_started = |what: &str, err: std::io::Error| Exit::NotStarted {
        message: format!("failed to {what} `{program}`: {err}"),
    };
    let stdout = match spec.stdout.try_clone() {
        Ok(file) => file,
        Err(err) => return (not_started("capture the output of", err), None),
    };
    let stderr = match spec.stderr.try_clone() {
        Ok(file) => file,
        Err(err) => return (not_started("capture the output of", err), None),
    };
    let mut command = Command::new(program);
    #[cfg(unix)]
    if let Some(file) = spec
        .env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .and_then(|(_, path)| unix::locate_program(program, path))
    {
        use std::os::unix::process::CommandExt;
        command = Command::new(file);
        command.arg0(program);
    }
    if spec.clear_env {
        command.env_clear();
    } else {
        for (name, _) in std::env::vars_os() {
            if name.to_str().is_none_or(crate::withheld_from_runners) {
                command.env_remove(name);
            }
        }
    }
    command
        .args(args)
        .current_dir(spec.cwd)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr);
    #[cfg(unix)]
    unix::own_process_group(&mut command);
    let level = match confine(&mut command, spec.confinement.as_ref()) {
        Ok(level) => level,
        Err(why) => {
            let exit = Exit::NotStarted {
                message: format!("refused to start `{program}`: {why}"),
            };
            return (exit, None);
        }
    };
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(err) => return (not_started("start", err), level),
    };
    let pid = child.id();
    // A waiter thread blocks in wait(2) so the timeout is a channel receive
    // instead of a polling loop: the runner is reaped the instant it exits.
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        // The receiver may be gone if we gave up; nothing to do then.
        let _ = sender.send(child.wait());
    });
    let exit = match wait(&receiver, spec) {
        Ok(Ok(status)) => {
            // What the runner left running in its group (a test's `cmd &`) ends with it.
            #[cfg(unix)]
            unix::kill_leftovers(pid);
            exit_of(status)
        }
        Ok(Err(err)) => not_started("wait for", err),
        Err(mpsc::RecvTimeoutError::Disconnected) => Exit::NotStarted {
            message: format!("lost track of `{program}`"),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => {
            #[cfg(unix)]
            unix::kill_group(pid, &receiver);
            Exit::TimedOut {
                after_seconds: spec.timeout.as_secs(),
            }
        }
    };
    (exit, level)
}

/// Waits for the waiter thread's answer until the timeout, ticking at the interval.
fn wait<T>(
    receiver: &mpsc::Receiver<T>,
    spec: &ProcessSpec<'_>,
) -> Result<T, mpsc::RecvTimeoutError> {
    let start = Instant::now();
    let Some((every, tick)) = spec.tick else {
        return receiver.recv_timeout(spec.timeout);
    };
    loop {
        let left = spec.timeout.saturating_sub(start.elapsed());
        match receiver.recv_timeout(left.min(every)) {
            Err(mpsc::RecvTimeoutError::Timeout) if start.elapsed() < spec.timeout => {
                tick(start.elapsed());
            }
            other => return other,
        }
    }
}

#[cfg(unix)]
fn exit_of(status: std::process::ExitStatus) -> Exit {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => Exit::Code { code },
        (None, Some(signal)) => Exit::Signal { signal },
        (None, None) => Exit::Code { code: -1 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> (std::fs::File, std::fs::File) {
        (
            tempfile::tempfile().expect("stdout"),
            tempfile::tempfile().expect("stderr"),
        )
    }

    fn spec<'a>(
        argv: &'a [String],
        dir: &'a Path,
        timeout: Duration,
        out: &'a (std::fs::File, std::fs::File),
    ) -> ProcessSpec<'a> {
        ProcessSpec {
            argv,
            cwd: dir,
            env: &[],
            clear_env: false,
            timeout,
            stdout: &out.0,
            stderr: &out.1,
            confinement: None,
            tick: None,
        }
    }

    /// Makes a FIFO at `fifo` and reads it on a thread: the receiver hears `true` once
    /// every writer has closed it (the process holding it has died).
    fn watch_fifo(fifo: &Path) -> std::io::Result<mpsc::Receiver<bool>> {
        use std::io::Read;
        let made = Command::new("mkfifo").arg(fifo).status()?;
        assert!(made.success(), "mkfifo failed");
        let (sender, receiver) = mpsc::channel();
        let reader_path = fifo.to_path_buf();
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let done = std::fs::File::open(&reader_path).and_then(|mut f| f.read_to_end(&mut sink));
            let _ = sender.send(done.is_ok());
        });
        Ok(receiver)
    }

    fn text(file: &std::fs::File) -> String {
        String::from_utf8(crate::exec::read_capped(file).expect("read")).expect("utf-8")
    }

    fn argv(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_running_process_ticks_at_the_interval_until_it_exits() {
        let dir = tempfile::tempdir().expect("dir");
        let argv = argv(&["sh", "-c", "sleep 1"]);
        let ticks = std::cell::Cell::new(0u32);
        let tick = |_elapsed: Duration| ticks.set(ticks.get() + 1);
        let out = files();
        let mut spec = spec(&argv, dir.path(), Duration::from_secs(60), &out);
        spec.tick = Some((Duration::from_millis(100), &tick));
        let finished = run(&spec);
        assert_eq!(finished.exit, Exit::Code { code: 0 });
        assert!(ticks.get() >= 1, "{}", ticks.get());
    }

    #[test]
    fn exit_code_and_output_are_captured() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let command = argv(&["sh", "-c", "echo hi; echo oops >&2; exit 3"]);
        let out = files();
        let finished = run(&spec(&command, dir.path(), Duration::from_secs(60), &out));
        assert_eq!(finished.exit, Exit::Code { code: 3 });
        assert_eq!(text(&out.0), "hi\n");
        assert_eq!(text(&out.1), "oops\n");
        Ok(())
    }

    #[test]
    fn missing_program_is_not_started() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let command = argv(&["tdd-no-such-runner-xyz"]);
        let out = files();
        let finished = run(&spec(&command, dir.path(), Duration::from_secs(60), &out));
        assert!(
            matches!(&finished.exit, Exit::NotStarted { message } if message.contains("tdd-no-such-runner-xyz"))
        );
        Ok(())
    }

    #[test]
    fn timeout_kills_the_whole_group() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        // The grandchild holds the FIFO's write end; the reader sees EOF
        // exactly when it has died, without polling.
        let receiver = watch_fifo(&dir.path().join("alive"))?;
        // The grandchild ignores SIGTERM, so only the group-wide SIGKILL ends it.
        let script = "sh -c 'trap \"\" TERM; exec sleep 300' 3>alive & wait";
        let command = argv(&["sh", "-c", script]);
        let out = files();
        let finished = run(&spec(&command, dir.path(), Duration::from_secs(1), &out));
        assert_eq!(finished.exit, Exit::TimedOut { after_seconds: 1 });
        let died = receiver.recv_timeout(Duration::from_secs(60));
        assert_eq!(died, Ok(true), "the grandchild survived the timeout");
        Ok(())
    }

    #[test]
    fn a_background_process_left_by_a_finished_runner_is_killed()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let receiver = watch_fifo(&dir.path().join("alive"))?;
        // The runner opens the FIFO (once the reader has), leaves a sleeper in its group
        // holding it, and exits: the reader sees the end only when the sleeper is gone.
        let command = argv(&["sh", "-c", "exec 3>alive; sleep 300 & exit 0"]);
        let out = files();
        let finished = run(&spec(&command, dir.path(), Duration::from_secs(120), &out));
        assert_eq!(finished.exit, Exit::Code { code: 0 });
        let died = receiver.recv_timeout(Duration::from_secs(60));
        assert_eq!(died, Ok(true), "the background process outlived the runner");
        Ok(())
    }
}
