//! `tdd hook`: an agent CLI's hook, answered from the run's locks.

use std::io::Read;
use std::path::Path;
use std::path::PathBuf;

use tdd_leaves::hook::Harness;
use tdd_leaves::hook::ToolCall;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::exit::Exit;
use crate::output::Outcome;
use crate::output::Raw;

/// The most of a hook event read from stdin; a larger one is refused (and so blocked).
const MAX_EVENT: u64 = 4 * 1024 * 1024;

/// Answer an agent CLI's hook. Before a tool runs (`pre-tool-use`): a write to a path
/// the current phase locks (tests in GREEN and REFACTOR, implementation in RED, the
/// files that decide how tests run always), to git's internals or to the agent CLI's
/// own settings is denied, with the lock, the phase and what to do instead. When a
/// session starts (`session-start`): the open cycle, its phase, target and locks are
/// added to the agent's context. Reads the event as JSON on stdin and answers in the
/// harness's own format. Fails closed: when tdd cannot tell, it exits 2, which the
/// harness takes as a block. Guidance only: the gate reverts a locked change whatever
/// a hook said.
#[derive(Debug, clap::Args)]
pub struct HookArgs {
    /// The agent CLI whose protocol to speak.
    harness: HarnessArg,
    /// The hook event.
    event: EventArg,
}

/// The agent CLIs `tdd hook` speaks to.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum HarnessArg {
    /// Claude Code.
    Claude,
    /// Codex CLI.
    Codex,
    /// Gemini CLI (its `BeforeTool`, `AfterTool`, `AfterAgent` and `SessionStart`).
    Gemini,
    /// GitHub Copilot CLI (its `preToolUse`, `postToolUse`, `agentStop` and
    /// `sessionStart`).
    Copilot,
}

/// The hook events `tdd hook` answers.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum EventArg {
    /// Before a tool runs: a locked write is denied.
    PreToolUse,
    /// After a tool ran: a shell command's changes to locked files are restored, and the
    /// agent told which.
    PostToolUse,
    /// When a session starts: the run's current assignment is added to its context.
    SessionStart,
    /// Not an event: feeds the hook this harness's settings run a write no agent may
    /// make, in a scratch repository, and checks it is blocked in the harness's format;
    /// then runs the harness's own CLI (Claude Code, Codex) against a scripted model on
    /// loopback and checks that it runs the hook, blocks the write and tells the model.
    Selftest,
    /// When the agent would end its turn: kept going while the phase's gate would refuse.
    Stop,
}

impl HookArgs {
    /// Whether this answers one of the harness's events (not the self-test, which
    /// makes a scratch repository of its own): what a confined leaf's hook asks the
    /// conductor's relay.
    pub fn is_event(&self) -> bool {
        !matches!(self.event, EventArg::Selftest)
    }
}

/// Runs `tdd hook`.
pub fn cmd_hook(ctx: &Ctx, args: HookArgs) -> Result<Outcome, CommandError> {
    let started = std::time::Instant::now();
    let harness = match args.harness {
        HarnessArg::Claude => Harness::Claude,
        HarnessArg::Codex => Harness::Codex,
        HarnessArg::Gemini => Harness::Gemini,
        HarnessArg::Copilot => Harness::Copilot,
    };
    let answer = match args.event {
        EventArg::Selftest => return selftest(ctx, harness),
        EventArg::PreToolUse => pre_tool_use(ctx, harness).map(|denied| {
            denied.map(|(engine, reason, call, paths)| {
                record_denial(ctx, &engine, harness, &call, paths, &reason, started);
                harness.deny(&reason)
            })
        }),
        EventArg::PostToolUse => super::hook_turn::post_tool_use(ctx, harness, started)
            .map(|reverted| reverted.map(|reason| harness.after_tool(&reason))),
        EventArg::Stop => super::hook_turn::stop(ctx, harness, started)
            .map(|blocked| blocked.map(|reason| harness.keep_going(&reason))),
        EventArg::SessionStart => {
            session_start(ctx).map(|context| context.map(|c| harness.session_context(&c)))
        }
    };
    Ok(match answer {
        Ok(None) => Outcome::raw(Raw::default(), Exit::Ok),
        Ok(Some(stdout)) => Outcome::raw(
            Raw {
                stdout,
                stderr: String::new(),
            },
            Exit::Ok,
        ),
        // Fail closed: exit 2 is the harness's block, with stderr as the reason.
        Err(err) => Outcome::raw(
            Raw {
                stdout: String::new(),
                stderr: format!(
                    "tdd hook: {}; the tool call is blocked until tdd can tell whether it may run{}\n",
                    err.message,
                    err.hint
                        .as_deref()
                        .map(|h| format!(" ({h})"))
                        .unwrap_or_default()
                ),
            },
            Exit::BadInput,
        ),
    })
}

/// `tdd hook <harness> selftest`: the wired hook, fed a write to `.git/config` as the
/// harness would feed it, must block it.
fn selftest(ctx: &Ctx, harness: Harness) -> Result<Outcome, CommandError> {
    let root = ctx.work_tree()?;
    let test = super::hook_selftest::run(&root, harness);
    let Some(command) = test.command.clone() else {
        return Err(
            CommandError::refused("hooks_not_wired", test.detail.clone())
                .hint(format!("run `tdd init --hooks {}`", harness.as_str()))
                .data(serde_json::json!(test)),
        );
    };
    if !test.blocked {
        return Err(CommandError::refused(
            "hook_selftest_failed",
            format!("`{command}` did not block a write to git's internals: {}", test.detail),
        )
        .hint("check that `tdd` on the harness's PATH is this one (`command -v tdd`), then run the self-test again")
        .data(serde_json::json!(test)));
    }
    let mut text = format!(
        "{}: `{command}` blocked a write to .git/config in {} ms ({})\n",
        harness.as_str(),
        test.latency_ms,
        test.detail
    );
    // Then the CLI itself, when it is installed: does it run the hook and block?
    let cli = super::hook_cli::check(harness);
    let report = serde_json::json!({
        "harness": test.harness,
        "settings": test.settings,
        "command": test.command,
        "blocked": test.blocked,
        "latency_ms": test.latency_ms,
        "detail": test.detail,
        "cli": cli,
    });
    match &cli {
        Some(cli) if cli.found.is_some() && !cli.blocked => {
            return Err(CommandError::refused("hook_selftest_failed", cli.summary())
            .hint(format!(
                "the hook answers, but this {} does not run it or heed it in the mode tdd runs it; the gate still reverts a locked change at `tdd advance`",
                cli.cli
            ))
            .data(report));
        }
        Some(cli) => text.push_str(&format!("{}\n", cli.summary())),
        None => text.push_str(&format!(
            "{}: no scripted model here for its CLI; only the wiring was checked\n",
            harness.as_str()
        )),
    }
    Ok(Outcome::new(&report, text))
}

/// What the agent is to do now, as context for a session that starts: the cycle, its
/// phase and target, what is locked, and the commands that run the target and say
/// where the run stands. `None` while no cycle is open.
fn session_start(ctx: &Ctx) -> Result<Option<String>, CommandError> {
    read_event()?;
    // A repository tdd is not set up in has no assignment to give.
    if !set_up(ctx)? {
        return Ok(None);
    }
    let engine = ctx.engine()?;
    let view = engine.view()?;
    let Some((state, locks)) = view.locks()? else {
        return Ok(None);
    };
    let Some((cycle, planned)) = state.current_cycle() else {
        return Ok(None);
    };
    let target = cycle
        .target_override
        .clone()
        .unwrap_or_else(|| planned.tests.join(", "));
    let phase = locks.phase();
    let locked = match phase {
        tdd_engine::run::Phase::AwaitingTest | tdd_engine::run::Phase::AwaitingPin => {
            "implementation files (a stub the cycle declares apart) and the files that decide how tests run"
        }
        _ => "test files and the files that decide how tests run",
    };
    Ok(Some(format!(
        "tdd: cycle {} of {} ({}) is in {}. Target: `{target}`. Now: {}. Locked in this phase: {locked}; a write to them is denied, and the gate reverts any that lands. Run the target with `tdd test {target}`; `tdd status` says where the run stands; `tdd advance` moves the phase once the tests, run by tdd itself, show it.",
        planned.n,
        state.plan.cycles.len(),
        planned.title,
        phase_name(phase),
        phase.verb().words()
    )))
}

/// Whether tdd is set up in this repository (its `tdd.toml` is there): elsewhere a hook
/// has no run to speak for.
pub(super) fn set_up(ctx: &Ctx) -> Result<bool, CommandError> {
    Ok(ctx
        .work_tree()?
        .join(tdd_engine::config::CONFIG_FILE)
        .exists())
}

/// The event on stdin, read whole (at most [`MAX_EVENT`] bytes).
pub(crate) fn read_event() -> Result<String, CommandError> {
    let mut text = String::new();
    std::io::stdin()
        .take(MAX_EVENT + 1)
        .read_to_string(&mut text)
        .map_err(|e| CommandError::bad_input("hook_input", format!("cannot read stdin: {e}")))?;
    if text.len() as u64 > MAX_EVENT {
        return Err(CommandError::bad_input(
            "hook_input",
            format!("the event is larger than {MAX_EVENT} bytes"),
        ));
    }
    Ok(text)
}

/// Records a denied call in the ledger, on the run's current cycle, for the run report
/// and the friction log. Best effort: the denial stands whether or not it is recorded
/// (with no run active, there is nothing to record it on).
fn record_denial(
    ctx: &Ctx,
    engine: &tdd_engine::run::Session,
    harness: Harness,
    call: &ToolCall,
    paths: Vec<String>,
    reason: &str,
    started: std::time::Instant,
) {
    let denied = tdd_engine::run::events::HookDenied {
        n: None,
        phase: None,
        harness: harness.as_str().to_string(),
        tool: call.tool.clone(),
        paths,
        reason: reason.to_string(),
        latency_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    };
    // On the last glance's check when the ledger is as it checked; else a checked
    // change.
    let recorded = match engine.record_hook_denial(denied.clone()) {
        Ok(true) => Ok(()),
        Ok(false) | Err(_) => engine
            .begin_unlocked()
            .and_then(|tx| tx.hook_denied(denied)),
    };
    if let Err(err) = recorded {
        ctx.out
            .debug(&format!("the denial was not recorded: {err}"));
    }
}

/// A denied call: the engine that judged it, the reason, the call and the paths it
/// would have written.
type Denied = (tdd_engine::run::Session, String, ToolCall, Vec<String>);

/// Why the tool call on stdin must not run, or `None` when it may.
fn pre_tool_use(ctx: &Ctx, harness: Harness) -> Result<Option<Denied>, CommandError> {
    let text = read_event()?;
    let call = ToolCall::parse_from(harness, &text)
        .map_err(|e| CommandError::bad_input("hook_input", e.to_string()))?;
    let writes = call.writes();
    if writes.is_empty() {
        return Ok(None);
    }
    let engine = ctx.engine()?;
    let denied = first_denied(ctx, &engine, &call, &writes)?;
    Ok(denied.map(|(reason, path)| (engine, reason, call, vec![path])))
}

/// The first of `writes` (by `call`) that no agent may make now, with the reason.
fn first_denied(
    ctx: &Ctx,
    engine: &tdd_engine::run::Session,
    call: &ToolCall,
    writes: &[String],
) -> Result<Option<(String, String)>, CommandError> {
    let work_tree = engine.work_tree().to_path_buf();
    let cwd = real(call.cwd.as_deref().unwrap_or(&ctx.cwd));
    let ledger_dir = ctx
        .ledger_location()
        .ok()
        .and_then(|l| l.database.parent().map(real));
    // Checked as a change would be (a ledger that fails verification blocks), or read
    // from the last check when the ledger has not changed since.
    let locks = engine.glance_locks()?;
    for path in writes {
        let absolute = real_parent(&cwd.join(path));
        if ledger_dir.as_ref().is_some_and(|d| absolute.starts_with(d)) {
            return Ok(Some((
                format!("`{path}` is tdd's own state (the ledger); no agent writes it"),
                path.clone(),
            )));
        }
        // The path through its directory's links first (a link to `tests/` names a
        // test all the same), then by its name as written.
        let through_links =
            tdd_leaves::hook::relative_to(&work_tree, Path::new("/"), &absolute.to_string_lossy());
        let Some(relative) =
            through_links.or_else(|| tdd_leaves::hook::relative_to(&work_tree, &cwd, path))
        else {
            continue;
        };
        if let Some(reason) = protected(&relative) {
            return Ok(Some((
                format!("`{relative}` is {reason}; no agent writes it"),
                relative,
            )));
        }
        let Some((cycle, locks)) = &locks else {
            continue;
        };
        if let Some(lock) = locks.lock_of(&relative) {
            let verb = locks.phase().verb();
            return Ok(Some((
                format!(
                    "`{relative}` is {} (cycle {cycle}, {}); the next `tdd advance` would revert it. Instead: {}",
                    lock.words(),
                    phase_name(locks.phase()),
                    verb.words()
                ),
                relative,
            )));
        }
    }
    Ok(None)
}

/// What `relative` is when no agent may write it whatever the phase.
fn protected(relative: &str) -> Option<&'static str> {
    let first = relative.split('/').next().unwrap_or(relative);
    if first == ".git" {
        return Some("git's own state");
    }
    let settings = [
        ".claude/settings.json",
        ".claude/settings.local.json",
        ".codex/hooks.json",
        ".codex/config.toml",
        ".gemini/settings.json",
    ];
    let hook_dirs = [".claude/hooks/", ".github/hooks/"];
    if settings.contains(&relative) || hook_dirs.iter().any(|d| relative.starts_with(d)) {
        return Some("the agent CLI's own settings and hooks");
    }
    None
}

/// The phase as the agent's instructions name it (`RED`, `GREEN`, ...).
pub(super) fn phase_name(phase: tdd_engine::run::Phase) -> &'static str {
    use tdd_engine::run::Phase;
    match phase {
        Phase::AwaitingTest => "RED",
        Phase::AwaitingPin => "a pin test",
        Phase::AwaitingImpl => "GREEN",
        Phase::AwaitingRefactor => "REFACTOR",
        Phase::SensitivityRequired => "a sensitivity check",
        Phase::Closed => "closed",
        Phase::Skipped => "skipped",
    }
}

/// `path` with its links resolved where it exists; as given where it does not.
fn real(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// `path` with its directory's links resolved (the file itself may not exist yet, or
/// be a link the tool would write through, which the gate judges on disk).
fn real_parent(path: &Path) -> PathBuf {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => real(parent).join(name),
        _ => path.to_path_buf(),
    }
}
