//! `tdd logs`: a leaf's captured output, whole or followed live.

use serde_json::json;
use tdd_supervisor::Follower;
use tdd_supervisor::LeafStatus;
use tdd_supervisor::WaitOutcome;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::logtext::Lines;
use crate::output::Outcome;
use crate::supervision;

/// In a JSON envelope, at most this much of each output file.
const JSON_BYTES: u64 = 64 * 1024;

/// Print a leaf's output: its stdout log to stdout and its stderr log to stderr. With
/// --follow, keep printing as it is written until the leaf ends. On a terminal, the
/// progress lines and the result of a `tdd` leaf (a detached conductor) read as text.
/// In JSON mode the envelope carries the paths and the last 64 KiB of each log, as
/// written.
#[derive(Debug, clap::Args)]
pub struct LogsArgs {
    /// The leaf: its name (`TDD_LEAF_ID`, as a bail or `tdd leaves show` names it) or
    /// the supervisor's id (see `tdd leaves`).
    id: String,
    /// Keep printing new output until the leaf ends.
    #[arg(long)]
    follow: bool,
}

/// Runs `tdd logs`.
pub fn cmd_logs(ctx: &Ctx, args: LogsArgs) -> Result<Outcome, CommandError> {
    let supervisor = supervision::supervisor(ctx)?;
    let mut leaf = match supervisor.open(&args.id) {
        Ok(leaf) => leaf,
        Err(not_found) => match supervisor_id_of(ctx, &args.id)? {
            Some(id) => supervisor.open(&id)?,
            None => return Err(not_found.into()),
        },
    };
    let finished = if ctx.out.is_json() {
        if args.follow {
            leaf.wait(None)?;
        }
        matches!(leaf.status()?, LeafStatus::Finished(_))
    } else if args.follow {
        // A detached conductor writes NDJSON progress and an envelope (its stdout is a
        // file); a person reads them as the text a terminal would have shown.
        let mut stdout = Lines::new(std::io::stdout());
        let mut stderr = Lines::new(std::io::stderr());
        let outcome = leaf.follow(&mut stdout, &mut stderr, None)?;
        finish(&mut stdout, leaf.stdout_path())?;
        finish(
            &mut stderr,
            leaf.stderr_path().unwrap_or(leaf.stdout_path()),
        )?;
        matches!(outcome, WaitOutcome::Finished(_))
    } else {
        let mut stdout = Lines::new(std::io::stdout());
        copy(leaf.stdout_path(), &mut stdout)?;
        finish(&mut stdout, leaf.stdout_path())?;
        if let Some(path) = leaf.stderr_path() {
            let mut stderr = Lines::new(std::io::stderr());
            copy(path, &mut stderr)?;
            finish(&mut stderr, path)?;
        }
        matches!(leaf.status()?, LeafStatus::Finished(_))
    };
    let tail = |path: &std::path::Path| -> Result<(String, bool), CommandError> {
        let bytes =
            tdd_supervisor::tail_bytes(path, JSON_BYTES).map_err(|e| unreadable(path, &e))?;
        let whole = std::fs::metadata(path).map_or(0, |m| m.len()) <= JSON_BYTES;
        Ok((String::from_utf8_lossy(&bytes).into_owned(), !whole))
    };
    let (stdout, stdout_cut) = tail(leaf.stdout_path())?;
    let stderr = match leaf.stderr_path() {
        Some(path) => Some(tail(path)?),
        None => None,
    };
    let data = json!({
        "id": leaf.id(),
        "finished": finished,
        "stdout_path": leaf.stdout_path(),
        "stderr_path": leaf.stderr_path(),
        "stdout": stdout,
        "stdout_truncated": stdout_cut,
        "stderr": stderr.as_ref().map(|(text, _)| text),
        "stderr_truncated": stderr.as_ref().is_some_and(|(_, cut)| *cut),
    });
    Ok(Outcome::new(data, ""))
}

/// The supervisor's id of the leaf named `name` in this repository's ledger, if one
/// by that name started.
fn supervisor_id_of(ctx: &Ctx, name: &str) -> Result<Option<String>, CommandError> {
    let location = ctx.ledger_location()?;
    match tdd_engine::ledger::Ledger::open_read_only(&location.database)? {
        Some(ledger) => Ok(tdd_leaves::identity::supervisor_id_of(&ledger, name)?),
        None => Ok(None),
    }
}

fn copy(path: &std::path::Path, sink: &mut dyn std::io::Write) -> Result<(), CommandError> {
    Follower::new(path)
        .pump(sink)
        .map(drop)
        .map_err(|e| unreadable(path, &e))
}

/// Writes out what `lines` still holds.
fn finish<W: std::io::Write>(
    lines: &mut Lines<W>,
    path: &std::path::Path,
) -> Result<(), CommandError> {
    lines.finish().map_err(|e| unreadable(path, &e))
}

fn unreadable(path: &std::path::Path, error: &std::io::Error) -> CommandError {
    CommandError::refused(
        "leaf_unreadable",
        format!("cannot read {}: {error}", path.display()),
    )
}
