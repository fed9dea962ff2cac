//! `tdd agent`: your agent CLI, interactively, inside the boundary a conducted
//! developer gets.

use crate::context::Ctx;
use crate::error::CommandError;
use crate::exit::Exit;
use crate::output::Outcome;

/// Run your agent CLI interactively in this repository inside the boundary a `tdd
/// conduct` developer leaf gets: confined by the sandbox (the work tree writable but
/// `.git`; the ledger, credentials and your home's files out of reach), with a private
/// home seeded with the CLI's credentials and settings (nothing it writes reaches your
/// own CLI state), `tdd test`, `tdd status` and the hooks reaching the engine through a
/// relay that serves this session alone, and, for Claude Code and Codex, `tdd hook`
/// wired for this session only. Your terminal is attached; end the session as you end
/// the CLI. What it left running is ended with it. You still move the phases yourself
/// with `tdd advance`, outside the session.
#[derive(Debug, clap::Args)]
pub struct AgentArgs {
    /// The agent CLI: `claude`, `codex`, or any program (then without hooks).
    cli: String,
    /// Its arguments, as you would give them.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

/// Runs `tdd agent`.
pub fn cmd_agent(ctx: &Ctx, args: AgentArgs) -> Result<Outcome, CommandError> {
    let root = ctx.work_tree()?;
    let (_, config, _) = ctx.config()?;
    let location = ctx.ledger_location()?;
    if !found(&args.cli) {
        return Err(CommandError::bad_input(
            "agent_not_found",
            format!("`{}` is not a program on PATH", args.cli),
        )
        .hint("install the CLI, or give its path: `tdd agent /path/to/claude`"));
    }
    let engine = ctx.engine()?;
    let view = engine.view()?;
    let position = view.locks()?.and_then(|(state, locks)| {
        state
            .current_cycle()
            .map(|(_, planned)| (planned.clone(), locks.phase()))
    });
    let words = match &position {
        Some((planned, phase)) => format!(
            "cycle {} ({}) in {}",
            planned.n,
            planned.title,
            super::hook::phase_name(*phase)
        ),
        None => "no cycle open".to_string(),
    };
    let tdd = std::env::current_exe().map_err(|e| {
        CommandError::internal("agent_failed", format!("cannot find the tdd binary: {e}"))
    })?;
    ctx.out.progress(
        "agent_started",
        serde_json::json!({ "cli": args.cli, "position": words }),
        &format!("tdd agent: {} in {} ({words})", args.cli, root.display()),
    );
    let end = tdd_conductor::session::run(tdd_conductor::session::SessionSpec {
        work_tree: &root,
        config: &config,
        location: &location,
        tdd: &tdd,
        relay_args: crate::cli::relayable,
        program: &args.cli,
        args: args.args,
        position,
        position_words: words,
    })?;
    let code = match end.exit {
        tdd_supervisor::ExitClass::Exited { code } => code,
        _ => 1,
    };
    let touched = match &end.touched {
        Some(files) if files.is_empty() => "changed nothing".to_string(),
        Some(files) => format!("changed {}", files.join(", ")),
        None => "changed files not recorded".to_string(),
    };
    let text = format!(
        "session {} ended (exit code {code}) after {:.1} s: confined {}, hooks {}, engine {}; {touched}\nnext: `tdd status` says where the run stands; `tdd advance` moves the phase\n",
        end.leaf,
        end.duration_ms as f64 / 1000.0,
        end.sandbox.as_deref().unwrap_or("not at all"),
        if end.hooks {
            "wired"
        } else {
            "not wired (tdd has none for this CLI)"
        },
        if end.relay {
            "through the relay"
        } else {
            "reached directly (not confined)"
        },
    );
    let outcome = Outcome::new(&end, text);
    Ok(match u8::try_from(code) {
        Ok(0) => outcome,
        Ok(code) => outcome.exit(Exit::Leaf(code)),
        Err(_) => outcome.exit(Exit::Leaf(1)),
    })
}

/// Whether `program` names something to run: a path that exists, or a name on `PATH`.
fn found(program: &str) -> bool {
    if program.contains('/') {
        return std::path::Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}
