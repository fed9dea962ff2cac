//! Argument parsing, dispatch, and the guarantees every command shares.

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;

use clap::Parser;
use clap::Subcommand;

use crate::commands;
use crate::context::Ctx;
use crate::error::CommandError;
use crate::exit::Exit;
use crate::output::Output;

/// Makes autonomous coding agents do test-driven development honestly.
///
/// Phases are computed from test runs `tdd` observes itself, never from what an
/// agent says. Output is a JSON envelope when --json is given or stdout is not a
/// terminal.
#[derive(Debug, Parser)]
#[command(name = "tdd", version, propagate_version = true, max_term_width = 100)]
pub struct Cli {
    /// Print one JSON envelope on stdout, whatever stdout is.
    #[arg(long, global = true)]
    json: bool,
    /// Run as if started in DIR.
    #[arg(short = 'C', value_name = "DIR", global = true)]
    directory: Option<PathBuf>,
    /// More detail on stderr.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// No progress on stderr.
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Init(commands::init::InitArgs),
    Doctor(commands::doctor::DoctorArgs),
    #[command(subcommand)]
    Config(commands::config::ConfigCommand),
    #[command(subcommand)]
    Ledger(commands::ledger::LedgerCommand),
    #[command(subcommand)]
    Plan(commands::plan::PlanCommand),
    #[command(subcommand)]
    Run(commands::run::RunCommand),
    Status(commands::status::StatusArgs),
    Test(commands::test::TestArgs),
    Advance(commands::advance::AdvanceArgs),
    #[command(subcommand)]
    Cycle(commands::cycle::CycleCommand),
    Note(commands::note::NoteArgs),
    Annotate(commands::annotate::AnnotateArgs),
    Blocker(commands::blocker::BlockerArgs),
    Resume(commands::resume::ResumeArgs),
    Rollback(commands::rollback::RollbackArgs),
    Target(commands::target::TargetArgs),
    Exec(commands::exec::ExecArgs),
    Wait(commands::wait::WaitArgs),
    Leaves(commands::leaves::LeavesArgs),
    Logs(commands::logs::LogsArgs),
    Kill(commands::kill::KillArgs),
    Stop(commands::stop::StopArgs),
    #[command(name = "__supervise", hide = true)]
    Supervise(commands::supervise::SuperviseArgs),
    Verdict(commands::verdict::VerdictArgs),
    Conduct(commands::conduct::ConductArgs),
    Demo(commands::demo::DemoArgs),
    Hook(commands::hook::HookArgs),
    Agent(commands::agent::AgentArgs),
    Mcp(commands::mcp::McpArgs),
    Report(commands::report::ReportArgs),
    #[command(subcommand)]
    Log(commands::log::LogCommand),
    Metrics(commands::metrics::MetricsArgs),
    Fleet(commands::fleet::FleetArgs),
    #[command(subcommand)]
    Ci(commands::ci::CiCommand),
}

impl Command {
    /// The name in the envelope's `command` field.
    fn name(&self) -> &'static str {
        match self {
            Command::Init(_) => "init",
            Command::Doctor(_) => "doctor",
            Command::Config(c) => c.name(),
            Command::Ledger(c) => c.name(),
            Command::Plan(c) => c.name(),
            Command::Run(c) => c.name(),
            Command::Status(_) => "status",
            Command::Test(_) => "test",
            Command::Advance(_) => "advance",
            Command::Cycle(c) => c.name(),
            Command::Note(_) => "note",
            Command::Annotate(_) => "annotate",
            Command::Blocker(_) => "blocker",
            Command::Resume(_) => "resume",
            Command::Rollback(_) => "rollback",
            Command::Target(_) => "target",
            Command::Exec(_) => "exec",
            Command::Wait(_) => "wait",
            Command::Leaves(args) => args.name(),
            Command::Logs(_) => "logs",
            Command::Kill(_) => "kill",
            Command::Stop(_) => "stop",
            Command::Supervise(_) => crate::supervision::SUPERVISE_COMMAND,
            Command::Verdict(_) => "verdict",
            Command::Conduct(_) => "conduct",
            Command::Demo(_) => "demo",
            Command::Hook(_) => "hook",
            Command::Agent(_) => "agent",
            Command::Mcp(_) => "mcp",
            Command::Report(_) => "report",
            Command::Log(c) => c.name(),
            Command::Metrics(_) => "metrics",
            Command::Fleet(_) => "fleet",
            Command::Ci(c) => c.name(),
        }
    }
}

/// Parses arguments, runs one command, prints its result and returns the exit status.
pub fn main() -> Exit {
    install_panic_hook();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let json_flag = args.iter().any(|a| a == "--json");
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(err) if err.kind() == clap::error::ErrorKind::InvalidUtf8 => {
            return not_utf8(&args, json_flag);
        }
        Err(err) => return usage_error(err, json_flag),
    };
    if let Some(exit) = relayed(&cli, &args) {
        return exit;
    }
    let out = Output::new(crate::output::Asked {
        json: cli.json,
        quiet: cli.quiet,
        verbose: cli.verbose,
    });
    let name = cli.command.name();
    let reaps = runs_project_code(&cli.command) && tdd_supervisor::become_subreaper();
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| dispatch(cli, out.clone())));
    if reaps {
        tdd_supervisor::end_descendants();
    }
    match result {
        Ok(exit) => exit,
        Err(_) => out.finish(
            name,
            Err(
                CommandError::internal("internal_error", "tdd panicked; see stderr")
                    .hint("this is a bug in tdd: report it with the command you ran"),
            ),
        ),
    }
}

/// Whether `args` (after the program name) is a command a leaf may have the relay run,
/// as this very parser reads it: `tdd test`, `status`, `verdict`, `stop` or a hook's
/// event (never its self-test), with no directory option in any spelling (`-C DIR`,
/// `-CDIR`, `-qCDIR`, ...).
pub fn relayable(args: &[String]) -> Result<(), String> {
    let argv = std::iter::once("tdd".to_string()).chain(args.iter().cloned());
    let cli = Cli::try_parse_from(argv).map_err(|e| {
        let first = e.to_string();
        let first = first.lines().next().unwrap_or_default().to_string();
        format!("the arguments do not parse: {first}")
    })?;
    if cli.directory.is_some() {
        return Err("a relayed command runs in the leaf's directory: no -C".into());
    }
    match cli.command {
        Command::Test(_) | Command::Status(_) | Command::Verdict(_) | Command::Stop(_) => Ok(()),
        Command::Hook(hook) if hook.is_event() => Ok(()),
        _ => Err(
            "only `tdd test`, `tdd status`, `tdd verdict`, `tdd stop` and a hook's event reach the engine from a leaf"
                .into(),
        ),
    }
}

/// Whether `command` runs project code (suites, baselines, gates, leaves) and waits for
/// it: such a command is the subreaper of what it starts and, when it ends, kills what
/// is left, so no process of a test outlives the command that ran it.
fn runs_project_code(command: &Command) -> bool {
    match command {
        Command::Test(_)
        | Command::Advance(_)
        | Command::Run(_)
        | Command::Demo(_)
        | Command::Agent(_) => true,
        Command::Conduct(args) => !args.detached(),
        _ => false,
    }
}

/// Inside a confined leaf (`TDD_ENGINE_RELAY` set), `tdd test`, `tdd status`,
/// `tdd verdict`, `tdd stop` and `tdd hook`'s events are run by the conductor on the
/// leaf's behalf (a hook's event, read here, goes with the request): their output and
/// exit code are the conductor's run's. `None` for every other case.
fn relayed(cli: &Cli, args: &[std::ffi::OsString]) -> Option<Exit> {
    use std::io::Write;
    let stdin = match &cli.command {
        Command::Test(_) | Command::Status(_) | Command::Verdict(_) | Command::Stop(_) => None,
        Command::Hook(hook) if hook.is_event() => Some(()),
        _ => return None,
    };
    let socket = std::env::var_os(tdd_conductor::relay::RELAY_VAR)?;
    let mut cwd = std::env::current_dir().ok()?;
    if let Some(dir) = &cli.directory {
        cwd = cwd.join(dir);
    }
    let args = tdd_conductor::relay::without_directory(
        args.iter()
            .skip(1)
            .map(|a| a.to_string_lossy().into_owned()),
    );
    let stdin = match stdin.map(|()| commands::hook::read_event()) {
        None => None,
        Some(Ok(event)) => Some(event),
        Some(Err(error)) => {
            // Fail closed, as the hook itself would.
            let _ = writeln!(std::io::stderr(), "tdd hook: {}", error.message);
            return Some(Exit::BadInput);
        }
    };
    let hook = stdin.is_some();
    match tdd_conductor::relay::forward(std::path::Path::new(&socket), &args, &cwd, stdin) {
        Ok(reply) => {
            let _ = std::io::stdout().write_all(reply.stdout.as_bytes());
            let _ = std::io::stderr().write_all(reply.stderr.as_bytes());
            Some(Exit::Relayed(u8::try_from(reply.code).unwrap_or(70)))
        }
        // A hook that cannot ask blocks the call (exit 2 is every harness's block).
        Err(error) if hook => {
            let _ = writeln!(
                std::io::stderr(),
                "tdd hook: {error}; the tool call is blocked until tdd can tell whether it may run"
            );
            Some(Exit::BadInput)
        }
        Err(error) => {
            let _ = writeln!(std::io::stderr(), "tdd: {error}");
            Some(Exit::Internal)
        }
    }
}

fn dispatch(cli: Cli, out: Output) -> Exit {
    let trace = crate::diagnostics::init(cli.verbose);
    let every = std::env::var("TDD_HEARTBEAT_SECS")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(
            crate::output::HEARTBEAT_EVERY,
            std::time::Duration::from_secs_f64,
        );
    let beats = out.clone();
    tdd_engine::observe::progress::install(every, move |beat| beats.heartbeat(beat));
    tdd_engine::failpoint::hit("dispatch");
    let name = cli.command.name();
    let cwd = match resolve_dir(cli.directory) {
        Ok(cwd) => cwd,
        Err(err) => return out.finish(name, Err(err)),
    };
    let ctx = Ctx::new(cwd, out.clone(), trace);
    let result = match cli.command {
        Command::Init(args) => commands::init::cmd_init(&ctx, args),
        Command::Doctor(args) => commands::doctor::cmd_doctor(&ctx, args),
        Command::Config(cmd) => commands::config::cmd_config(&ctx, cmd),
        Command::Ledger(cmd) => commands::ledger::cmd_ledger(&ctx, cmd),
        Command::Plan(cmd) => commands::plan::cmd_plan(&ctx, cmd),
        Command::Run(cmd) => commands::run::cmd_run(&ctx, cmd),
        Command::Status(args) => commands::status::cmd_status(&ctx, args),
        Command::Test(args) => commands::test::cmd_test(&ctx, args),
        Command::Advance(args) => commands::advance::cmd_advance(&ctx, args),
        Command::Cycle(cmd) => commands::cycle::cmd_cycle(&ctx, cmd),
        Command::Note(args) => commands::note::cmd_note(&ctx, args),
        Command::Annotate(args) => commands::annotate::cmd_annotate(&ctx, args),
        Command::Blocker(args) => commands::blocker::cmd_blocker(&ctx, args),
        Command::Resume(args) => commands::resume::cmd_resume(&ctx, args),
        Command::Rollback(args) => commands::rollback::cmd_rollback(&ctx, args),
        Command::Target(args) => commands::target::cmd_target(&ctx, args),
        Command::Exec(args) => commands::exec::cmd_exec(&ctx, args),
        Command::Wait(args) => commands::wait::cmd_wait(&ctx, args),
        Command::Leaves(args) => commands::leaves::cmd_leaves(&ctx, args),
        Command::Logs(args) => commands::logs::cmd_logs(&ctx, args),
        Command::Kill(args) => commands::kill::cmd_kill(&ctx, args),
        Command::Stop(args) => commands::stop::cmd_stop(&ctx, args),
        Command::Supervise(args) => commands::supervise::cmd_supervise(args),
        Command::Verdict(args) => commands::verdict::cmd_verdict(&ctx, args),
        Command::Conduct(args) => commands::conduct::cmd_conduct(&ctx, args),
        Command::Demo(args) => commands::demo::cmd_demo(&ctx, args),
        Command::Hook(args) => commands::hook::cmd_hook(&ctx, args),
        Command::Agent(args) => commands::agent::cmd_agent(&ctx, args),
        Command::Mcp(args) => commands::mcp::cmd_mcp(&ctx, args),
        Command::Report(args) => commands::report::cmd_report(&ctx, args),
        Command::Log(cmd) => commands::log::cmd_log(&ctx, cmd),
        Command::Metrics(args) => commands::metrics::cmd_metrics(&ctx, args),
        Command::Fleet(args) => commands::fleet::cmd_fleet(&ctx, args),
        Command::Ci(cmd) => commands::ci::cmd_ci(&ctx, cmd),
    };
    out.finish(name, result)
}

fn resolve_dir(dir: Option<PathBuf>) -> Result<PathBuf, CommandError> {
    let cwd = std::env::current_dir().map_err(|e| {
        CommandError::refused(
            "cwd_unreadable",
            format!("cannot read the current directory: {e}"),
        )
    })?;
    let Some(dir) = dir else { return Ok(cwd) };
    let dir = cwd.join(dir);
    if !dir.is_dir() {
        return Err(CommandError::bad_input(
            "directory_missing",
            format!("-C {}: no such directory", dir.display()),
        )
        .hint("pass an existing directory to -C"));
    }
    Ok(dir)
}

/// Help and version go to stdout with exit 0; anything else is a usage error, exit 2.
fn usage_error(err: clap::Error, json_flag: bool) -> Exit {
    use clap::error::ErrorKind;
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    ) || err.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand && !json_flag
    {
        let _ = err.print();
        return if err.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
            Exit::BadInput
        } else {
            Exit::Ok
        };
    }
    let rendered = err.render().to_string();
    let out = Output::new(crate::output::Asked {
        json: json_flag,
        ..Default::default()
    });
    if out.is_json() {
        crate::output::write_err(&rendered);
        let message = rendered.lines().next().unwrap_or("invalid arguments");
        let message = message.trim_start_matches("error: ").to_string();
        out.finish(
            "tdd",
            Err(CommandError::bad_input("usage", message).hint("run `tdd --help` for usage")),
        )
    } else {
        let _ = err.print();
        Exit::BadInput
    }
}

/// Exit 2 for an argument that is not UTF-8, naming it: tdd reads its arguments as text.
fn not_utf8(args: &[std::ffi::OsString], json_flag: bool) -> Exit {
    let (n, arg) = args
        .iter()
        .enumerate()
        .find(|(_, a)| a.to_str().is_none())
        .map_or((0, String::new()), |(n, a)| {
            (n, a.to_string_lossy().into_owned())
        });
    let error = CommandError::bad_input(
        "usage",
        format!("argument {n} ({arg:?}) is not UTF-8 text, which tdd needs its arguments to be"),
    )
    .hint("pass the argument as UTF-8, or rename the file it names");
    Output::new(crate::output::Asked {
        json: json_flag,
        ..Default::default()
    })
    .finish("tdd", Err(error))
}

/// A panic prints a short report on stderr; `main` then exits 70.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let location = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let payload = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_string());
        crate::output::write_err(&format!(
            "tdd: internal error: {payload}{location}\n\
             This is a bug in tdd. Please report it with the command you ran.\n"
        ));
    }));
}

#[cfg(test)]
mod tests {
    use super::relayable;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn the_relay_takes_five_commands_and_no_directory_in_any_spelling() {
        for ok in [
            &["test", "x"][..],
            &["--json", "status"],
            &["verdict", "accept", "--reason", "ran it"],
            &["stop"],
            &["hook", "claude", "pre-tool-use"],
            &["hook", "codex", "post-tool-use"],
        ] {
            assert_eq!(relayable(&args(ok)), Ok(()), "{ok:?}");
        }
        for refused in [
            &["-C", "/other", "status"][..],
            &["-C/other", "status"],
            &["-qC/other", "test"],
            &["-vqC", "/other", "test"],
            &["test", "-C/other", "x"],
            &["status", "--json", "-qvC/other"],
            &["advance"],
            &["run", "start"],
            &["--no-such-flag", "status"],
            // The self-test makes a scratch repository and runs what settings wire.
            &["hook", "claude", "selftest"],
            &["hook", "-C/other", "claude", "stop"],
        ] {
            assert!(relayable(&args(refused)).is_err(), "{refused:?}");
        }
    }
}
