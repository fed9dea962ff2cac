//! `tdd ledger verify`, `tdd ledger path`, `tdd ledger export`, and the ledger
//! published in git: `tdd ledger publish` and `tdd ledger import`.

use serde_json::json;
use tdd_engine::integrity;
use tdd_engine::integrity::Integrity;
use tdd_engine::integrity::Scope;
use tdd_engine::ledger::Ledger;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::NextAction;
use crate::output::Outcome;
use crate::output::Verb;

/// Inspect this repository's ledger.
#[derive(Debug, clap::Subcommand)]
pub enum LedgerCommand {
    /// Walk the hash chain and the run commits of the branch; exit 1 naming the first
    /// event that does not match, or every commit that disagrees with the ledger.
    Verify,
    /// Print where this repository's ledger lives.
    Path,
    /// Print the ledger's events, oldest first, one JSON object per line (NDJSON):
    /// `id`, `run_id`, `kind`, `payload`, `at`, `prev_hash`, `hash`, as stored.
    Export(ExportArgs),
    /// Publish the ledger in git as `refs/tdd/ledger/<branch>` of the branch checked out
    /// (done after every phase commit anyway), and say how to push it with the branch.
    Publish,
    /// Take in the ledger published for the branch checked out (the local
    /// `refs/tdd/ledger/<branch>`, else fetched from the branch's remote) when it
    /// continues the ledger here; then check it against the branch.
    Import,
}

/// The options of `tdd ledger export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// Only the events of this run (its id, as `tdd status` shows it).
    #[arg(long)]
    run: Option<String>,
    /// The output format.
    #[arg(long, value_enum, default_value_t = ExportFormat::Ndjson)]
    format: ExportFormat,
}

/// How `tdd ledger export` writes events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// One JSON object per line.
    Ndjson,
}

impl LedgerCommand {
    /// The envelope's command name.
    pub fn name(&self) -> &'static str {
        match self {
            LedgerCommand::Verify => "ledger verify",
            LedgerCommand::Path => "ledger path",
            LedgerCommand::Export(_) => "ledger export",
            LedgerCommand::Publish => "ledger publish",
            LedgerCommand::Import => "ledger import",
        }
    }
}

/// Runs `tdd ledger ...`.
pub fn cmd_ledger(ctx: &Ctx, cmd: LedgerCommand) -> Result<Outcome, CommandError> {
    match cmd {
        LedgerCommand::Verify => verify(ctx),
        LedgerCommand::Path => path(ctx),
        LedgerCommand::Export(args) => export(ctx, &args),
        LedgerCommand::Publish => publish(ctx),
        LedgerCommand::Import => import(ctx),
    }
}

fn publish(ctx: &Ctx) -> Result<Outcome, CommandError> {
    let location = ctx.ledger_location()?;
    let work_tree = ctx.work_tree()?;
    integrity::ensure_intact(&location.database, &work_tree, &tdd_conductor::EVENT_KINDS)?;
    let snapshots = match ctx.engine().ok().map(|e| e.status()) {
        Some(Ok(Some(state))) => tdd_engine::published::snapshot_trees(&work_tree, &state.run_id)?,
        _ => Vec::new(),
    };
    let Some(published) =
        tdd_engine::published::publish(&location.database, &work_tree, &snapshots)?
    else {
        return Err(CommandError::refused(
            "nothing_to_publish",
            "nothing to publish: HEAD is detached or this repository has no ledger yet",
        )
        .hint("check out the work branch (`git switch <branch>`), or start a run with `tdd run start`"));
    };
    let branch = published
        .reference
        .strip_prefix(tdd_engine::published::LEDGER_REF_PREFIX)
        .unwrap_or(&published.reference)
        .to_string();
    let mut text = format!(
        "{} {} ({} events){}\npush it with the branch: git push origin {branch} {}\n",
        if published.written {
            "published"
        } else {
            "already published"
        },
        published.reference,
        published.events,
        if published.written {
            format!(
                " at {}",
                &published.commit[..12.min(published.commit.len())]
            )
        } else {
            String::new()
        },
        published.reference,
    );
    let push = crate::commands::run::carry_on_push(ctx, &mut text);
    let mut data = json!(published);
    data["push_configured"] = json!(push);
    Ok(Outcome::new(data, text))
}

fn import(ctx: &Ctx) -> Result<Outcome, CommandError> {
    let location = ctx.ledger_location()?;
    let work_tree = ctx.work_tree()?;
    let found =
        integrity::take_in_published(&location.database, &work_tree, &tdd_conductor::EVENT_KINDS)?;
    let text = match &found.adopted {
        Some(adopted) => format!(
            "{}\nledger intact: {} events; {} run commits checked\n",
            adopted.describe(),
            found.events,
            found.run_commits
        ),
        None => format!("ledger intact: {} events\n", found.events),
    };
    Ok(Outcome::new(json!(found), text))
}

fn export(ctx: &Ctx, args: &ExportArgs) -> Result<Outcome, CommandError> {
    let location = ctx.ledger_location()?;
    let events = match Ledger::open_read_only(&location.database)? {
        Some(ledger) => ledger.events(args.run.as_deref())?,
        None => Vec::new(),
    };
    if let Some(run) = &args.run
        && events.is_empty()
    {
        return Err(CommandError::bad_input(
            "run_not_found",
            format!("no run {run} is recorded in this repository's ledger"),
        )
        .hint("`tdd ledger export` without --run lists every event, each with its `run_id`"));
    }
    let ExportFormat::Ndjson = args.format;
    let mut text = String::new();
    for event in &events {
        text.push_str(&serde_json::to_string(event).unwrap_or_default());
        text.push('\n');
    }
    let data = json!({ "count": events.len(), "events": events });
    Ok(Outcome::new(data, text))
}

fn verify(ctx: &Ctx) -> Result<Outcome, CommandError> {
    let location = ctx.ledger_location()?;
    ctx.out.debug(&format!(
        "opening {} read-only",
        location.database.display()
    ));
    let work_tree = ctx.work_tree()?;
    if !location.dir.exists() {
        // A machine new to the repository (a clone): the published ledger is taken in
        // first, as every command does; a finding is reported by the full check below.
        if let Err(
            e @ (integrity::IntegrityError::Unpublished { .. }
            | integrity::IntegrityError::Published(_)),
        ) = integrity::ensure_intact(&location.database, &work_tree, &tdd_conductor::EVENT_KINDS)
        {
            return Err(e.into());
        }
    }
    let found = integrity::check(&location.database, &work_tree, Scope::Full)?;
    let schema_version = match Ledger::open_read_only(&location.database)? {
        Some(ledger) => Some(ledger.schema_version()?),
        None => None,
    };
    let mut data = json!(found);
    data["database"] = json!(location.database);
    data["exists"] = json!(found.ledger_exists);
    data["schema_version"] = json!(schema_version);
    data["broken"] = json!(found.chain);
    if !found.is_intact() {
        return Err(tampered(&found, &location.database).data(data));
    }
    // Every phase commit of the run active here must still be on the branch: one reset
    // or amended away is work the ledger vouches for that the branch no longer holds.
    let off_branch = match ctx.engine() {
        Ok(engine) => engine.phase_commits_off_branch()?,
        Err(_) => Vec::new(),
    };
    data["phase_commits_off_branch"] = json!(
        off_branch
            .iter()
            .map(|(n, phase, commit)| json!({ "cycle": n, "phase": phase, "commit": commit }))
            .collect::<Vec<_>>()
    );
    if let Some((_, _, first)) = off_branch.first() {
        let mut text = String::new();
        for (n, phase, commit) in &off_branch {
            text.push_str(&format!(
                "cycle {n}: the {phase} commit {commit} is not on this branch\n"
            ));
        }
        return Err(CommandError::refused(
            "phase_commit_missing",
            format!(
                "{} phase commit(s) recorded by the active run are not on this branch: it was reset, amended or rebased after tdd recorded them",
                off_branch.len()
            ),
        )
        .hint(format!(
            "put the branch back on the recorded work with `git reset --keep {first}` (or find it with `git reflog`), then run `tdd ledger verify` again"
        ))
        .text(text)
        .data(data));
    }
    let text = format!(
        "ledger intact: {} events{}; {} run commits on this branch, {} anchored\n",
        found.events,
        if found.ledger_exists {
            ""
        } else {
            " (no ledger yet)"
        },
        found.run_commits,
        found.anchors
    );
    Ok(Outcome::new(data, text).next(NextAction::terminal(
        Verb::Complete,
        "the ledger chain is intact and matches the branch",
    )))
}

/// The refusal for a ledger that fails verification, naming every commit concerned.
fn tampered(found: &Integrity, database: &std::path::Path) -> CommandError {
    let mut text = String::new();
    for problem in &found.problems {
        text.push_str(&format!(
            "commit {} (run {}): {}\n",
            problem.commit, problem.run_id, problem.reason
        ));
    }
    let hint = format!(
        "the ledger at {} does not match what tdd recorded; {}",
        database.display(),
        integrity::RESTORE_HINT
    );
    CommandError::refused("ledger_tampered", found.summary())
        .hint(hint)
        .text(text)
}

fn path(ctx: &Ctx) -> Result<Outcome, CommandError> {
    let location = ctx.ledger_location()?;
    let exists = location.database.exists();
    let data = json!({
        "database": location.database,
        "dir": location.dir,
        "home": location.home,
        "home_source": location.home_source,
        "repository": location.repository,
        "exists": exists,
    });
    Ok(Outcome::new(
        data,
        format!("{}\n", location.database.display()),
    ))
}
