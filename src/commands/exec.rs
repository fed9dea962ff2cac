//! `tdd exec`: run any command under a detached supervisor.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;
use tdd_supervisor::ExitClass;
use tdd_supervisor::ExitRecord;
use tdd_supervisor::LeafHandle;
use tdd_supervisor::LeafSpec;
use tdd_supervisor::WaitOutcome;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::exit::Exit;
use crate::output::NextAction;
use crate::output::Outcome;
use crate::output::Verb;
use crate::supervision;

/// How much of each output file a JSON envelope carries.
const TAIL_BYTES: u64 = 4096;

/// Run a command under a supervisor: its own session and process group, timeouts, an
/// output cap, and no process left behind.
///
/// In the foreground the command's output is streamed and `tdd exec` exits with the
/// command's code: 124 when killed for a limit, 137 when killed by someone else, 130
/// when stopped (Ctrl-C once: SIGTERM, grace, SIGKILL; twice: SIGKILL now), 127 when
/// it could not start, 125 when the supervisor was lost. The command gets no stdin
/// and only PATH, HOME, USER, LOGNAME, SHELL, LANG, LC_ALL, LC_CTYPE, TERM, TZ, TMPDIR,
/// the variables named with --env, and TDD_LEAF_ID (its own leaf id).
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// Kill the command after S seconds (exit 124).
    #[arg(long, value_name = "S", value_parser = supervision::parse_seconds)]
    timeout: Option<Duration>,
    /// Kill the command after S seconds without a byte on stdout or stderr (exit 124).
    #[arg(long, value_name = "S", value_parser = supervision::parse_seconds)]
    idle_timeout: Option<Duration>,
    /// Kill the command once stdout or stderr passes BYTES (exit 124); the log ends
    /// with a line saying it was cut.
    #[arg(long, value_name = "BYTES")]
    max_output: Option<u64>,
    /// Seconds between SIGTERM and SIGKILL when the command is killed.
    #[arg(long, value_name = "S", default_value = "5", value_parser = supervision::parse_seconds)]
    grace: Duration,
    /// Print the leaf id and return at once; the command runs on under its supervisor.
    #[arg(long)]
    detach: bool,
    /// A label for the leaf, shown by `tdd leaves` and part of its id.
    #[arg(long, value_name = "N")]
    name: Option<String>,
    /// Also pass this environment variable to the command (repeatable).
    #[arg(long = "env", value_name = "NAME")]
    env: Vec<String>,
    /// The command and its arguments (put them after `--`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<String>,
}

/// Runs `tdd exec`.
pub fn cmd_exec(ctx: &Ctx, args: ExecArgs) -> Result<Outcome, CommandError> {
    let supervisor = supervision::supervisor(ctx)?;
    let spec = spec(ctx, &args);
    // Handlers go in before the launch, so a Ctrl-C during it is not lost.
    let interrupted = Arc::new(AtomicBool::new(false));
    if !args.detach {
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            signal_hook::flag::register(signal, Arc::clone(&interrupted)).map_err(|e| {
                CommandError::internal("signal_setup_failed", format!("cannot handle signals: {e}"))
            })?;
        }
    }
    let mut leaf = supervisor.launch(&spec)?;
    if args.detach {
        return Ok(detached(&leaf));
    }
    let exit = run_foreground(ctx, &mut leaf, &interrupted)?;
    Ok(finished(ctx, &leaf, exit))
}

fn spec(ctx: &Ctx, args: &ExecArgs) -> LeafSpec {
    let mut spec = LeafSpec::new(args.command.clone())
        .cwd(&ctx.cwd)
        .allow_env(supervision::BASE_ENV)
        .allow_env(&args.env)
        .id_env(supervision::LEAF_ID_ENV)
        .grace(args.grace);
    if let Some(name) = &args.name {
        spec = spec.name(name);
    }
    if let Some(timeout) = args.timeout {
        spec = spec.wall_timeout(timeout);
    }
    if let Some(idle) = args.idle_timeout {
        spec = spec.idle_timeout(idle);
    }
    if let Some(bytes) = args.max_output {
        spec = spec.max_output_bytes(bytes);
    }
    spec
}

fn detached(leaf: &LeafHandle) -> Outcome {
    let pid = leaf
        .launch_record()
        .ok()
        .flatten()
        .map(|launch| launch.leaf.pid);
    let data = json!({
        "id": leaf.id(),
        "pid": pid,
        "dir": leaf.dir(),
        "stdout": leaf.stdout_path(),
        "stderr": leaf.stderr_path(),
    });
    Outcome::new(data, format!("{}\n", leaf.id())).next(NextAction::new(
        Verb::Complete,
        format!("`tdd wait {}` waits for it", leaf.id()),
    ))
}

/// Streams the output (text mode) or just waits (JSON mode, where stdout is the
/// envelope's), turning interrupts into kill requests.
fn run_foreground(
    ctx: &Ctx,
    leaf: &mut LeafHandle,
    interrupted: &AtomicBool,
) -> Result<ExitRecord, CommandError> {
    let slice = Some(Duration::from_millis(100));
    let mut stdout = std::io::stdout();
    let mut stderr = std::io::stderr();
    let mut graceful_sent = false;
    loop {
        let outcome = if ctx.out.is_json() {
            leaf.wait(slice)?
        } else {
            leaf.follow(&mut stdout, &mut stderr, slice)?
        };
        if let WaitOutcome::Finished(exit) = outcome {
            return Ok(exit);
        }
        if interrupted.swap(false, Ordering::SeqCst) {
            let force = graceful_sent;
            leaf.kill(if force {
                tdd_supervisor::Kill::Now
            } else {
                tdd_supervisor::Kill::Graceful
            })?;
            let text = if force {
                "tdd exec: killing the command now (SIGKILL)"
            } else {
                "tdd exec: stopping the command (SIGTERM, then SIGKILL after the grace period); \
                 interrupt again to kill it now"
            };
            ctx.out.progress(
                "leaf_kill_requested",
                json!({ "id": leaf.id(), "force": force }),
                text,
            );
            graceful_sent = true;
        }
    }
}

/// The exit code `tdd exec` returns for a class.
pub fn exec_code(class: &ExitClass) -> u8 {
    match class {
        ExitClass::Exited { code } => u8::try_from(*code).unwrap_or(1),
        ExitClass::KillStuck { .. } => 124,
        ExitClass::SupervisorLost => 125,
        ExitClass::SpawnFailed { .. } => 127,
        ExitClass::Stopped => 130,
        ExitClass::KilledExternal { .. } => 137,
    }
}

fn finished(ctx: &Ctx, leaf: &LeafHandle, exit: ExitRecord) -> Outcome {
    let code = exec_code(&exit.class);
    let took = exit
        .duration_ms
        .map(|ms| format!(" after {}", supervision::seconds(ms)))
        .unwrap_or_default();
    let leaked = match exit.leaked {
        0 => String::new(),
        n => format!("; killed {n} leftover process(es)"),
    };
    let line = format!(
        "tdd exec: {}{took}{leaked} (leaf {})",
        exit.class.words(),
        leaf.id()
    );
    ctx.out.progress(
        "leaf_exited",
        json!({ "id": leaf.id(), "class": exit.class, "code": code }),
        &line,
    );
    let tail = |path: Option<&std::path::Path>| {
        path.and_then(|path| tdd_supervisor::tail_bytes(path, TAIL_BYTES).ok())
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
    };
    let data = json!({
        "id": leaf.id(),
        "class": exit.class,
        "code": code,
        "exit": exit,
        "stdout": leaf.stdout_path(),
        "stderr": leaf.stderr_path(),
        "stdout_tail": tail(Some(leaf.stdout_path())),
        "stderr_tail": tail(leaf.stderr_path()),
    });
    Outcome::new(data, "")
        .next(NextAction::terminal(
            Verb::Complete,
            format!("the command {}", exit.class.words()),
        ))
        .exit(Exit::Leaf(code))
}
