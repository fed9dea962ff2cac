//! The fleet: every run of one repository's ledger, or of every repository in the
//! ledger home, with where it stands, what leaf runs now and whether anyone still
//! drives it. Read while conductors write: each ledger is opened read-only and read in
//! one transaction, and no run's events are walked.

use std::path::Path;
use std::path::PathBuf;

use serde::Serialize;
use tdd_engine::ledger::Ledger;
use tdd_engine::ledger::RunHead;
use tdd_engine::run::Phase;

use crate::ReportError;

/// A run with no event for this long, and no conductor driving it, is stale.
pub const STALE_AFTER_S: u64 = 30 * 60;

/// The kinds that say where a run stands.
const STANDING: &[&str] = &[
    "cycle_opened",
    "phase_changed",
    "cycle_closed",
    "cycle_skipped",
    "run_completed",
    "run_abandoned",
];

/// The kinds that move a run to another work tree (a clone took it in).
const MOVED: &[&str] = &["run_adopted"];

/// The payload fields the fleet reads of a run's newest events, by JSON path; [`Field`]
/// names their places.
const FIELDS: &[&str] = &["$.worktree", "$.n", "$.phase", "$.to"];

/// The place of each of [`FIELDS`].
#[derive(Clone, Copy)]
enum Field {
    Worktree = 0,
    N = 1,
    Phase = 2,
    To = 3,
}

/// The value of `field` among `fields`.
fn field(fields: &[Option<serde_json::Value>], field: Field) -> Option<&serde_json::Value> {
    fields.get(field as usize).and_then(Option::as_ref)
}

/// One run of the fleet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FleetRow {
    /// The repository's ledger directory name (`<name>-<hash>`).
    pub repository: String,
    /// The work tree the run was started in.
    pub worktree: String,
    /// The engine run id.
    pub run_id: String,
    /// The issue a conductor drives it for, while one does.
    pub issue: Option<u64>,
    /// The step it is at (0 before the first opened).
    pub step: u32,
    /// The plan's steps.
    pub of: u32,
    /// The phase (`red`, `green`, `refactor`, `closed`, ...).
    pub phase: String,
    /// `running` (a conductor drives it), `idle`, `stale`, `completed` or `abandoned`.
    pub state: String,
    /// The leaf running now, when a conductor drives the run.
    pub leaf: Option<String>,
    /// How long that leaf has run, in seconds.
    pub leaf_age_s: Option<u64>,
    /// Seconds since the run's last event.
    pub last_event_age_s: u64,
    /// No event for [`STALE_AFTER_S`] and no conductor: nobody is driving it.
    pub stale: bool,
}

/// The runs of the repositories whose ledger directories are `dirs`, as of `now`
/// (Unix seconds). A directory without a ledger has no runs.
pub fn fleet(dirs: &[PathBuf], now: u64) -> Result<Vec<FleetRow>, ReportError> {
    // Each ledger is a file of its own: they are read on every core at once.
    let read = tdd_engine::ledger::parallel::on_every_core(
        dirs,
        2,
        |dir| rows_of(dir, now),
        |dir| {
            Err(ReportError::Unreadable {
                path: dir.join(tdd_engine::ledger::DATABASE_FILE),
            })
        },
    );
    let mut rows = Vec::new();
    for part in read {
        rows.extend(part?);
    }
    Ok(rows)
}

/// The runs of the one repository whose ledger directory is `dir`.
fn rows_of(dir: &Path, now: u64) -> Result<Vec<FleetRow>, ReportError> {
    let database = dir.join(tdd_engine::ledger::DATABASE_FILE);
    let Some(ledger) = Ledger::open_read_only(&database)? else {
        return Ok(Vec::new());
    };
    let repository = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(ledger
        .run_heads(&[STANDING, MOVED], FIELDS)?
        .iter()
        .map(|head| row(dir, &repository, head, now))
        .collect())
}

fn row(dir: &Path, repository: &str, head: &RunHead, now: u64) -> FleetRow {
    let mut row = FleetRow {
        repository: repository.to_string(),
        run_id: head.run_id.clone(),
        phase: "not started".into(),
        state: "idle".into(),
        ..FleetRow::default()
    };
    let text = |value: Option<&serde_json::Value>| {
        value
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    row.worktree = head.worktree.clone().unwrap_or_default();
    row.of = head
        .cycles
        .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX));
    // A run a clone took in is driven from the work tree it moved to last.
    if let Some(Some((_, moved))) = head.newest.get(1) {
        let to = text(field(moved, Field::Worktree));
        if !to.is_empty() {
            row.worktree = to;
        }
    }
    if let Some(Some((kind, fields))) = head.newest.first() {
        let n = field(fields, Field::N)
            .and_then(serde_json::Value::as_u64)
            .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX));
        let phase = |f: Field| {
            field(fields, f)
                .and_then(|v| serde_json::from_value::<Phase>(v.clone()).ok())
                .map(|p| p.trailer().to_string())
        };
        match kind.as_str() {
            "cycle_opened" => {
                row.step = n;
                row.phase = phase(Field::Phase).unwrap_or_default();
            }
            "phase_changed" => {
                row.step = n;
                row.phase = phase(Field::To).unwrap_or_default();
            }
            "cycle_closed" => {
                row.step = n;
                row.phase = "closed".into();
            }
            "cycle_skipped" => {
                row.step = n;
                row.phase = "skipped".into();
            }
            "run_completed" => {
                row.step = row.of;
                row.state = "completed".into();
                row.phase = "done".into();
            }
            "run_abandoned" => row.state = "abandoned".into(),
            _ => {}
        }
    }
    let last = crate::compute::parse(&head.last_at)
        .map_or(0, |t| u64::try_from(t.unix_timestamp()).unwrap_or(0));
    row.last_event_age_s = now.saturating_sub(last);
    let finished = row.state == "completed" || row.state == "abandoned";
    if !finished {
        if let Some(position) = tdd_conductor::lock::read_position(dir, Path::new(&row.worktree)) {
            row.state = "running".into();
            row.issue = Some(position.issue);
            row.leaf = position.leaf;
            row.leaf_age_s = position.leaf_started_s.map(|s| now.saturating_sub(s));
        } else if row.last_event_age_s >= STALE_AFTER_S {
            row.state = "stale".into();
            row.stale = true;
        }
    }
    row
}

/// The fleet as a table for a terminal.
pub fn text(rows: &[FleetRow]) -> String {
    if rows.is_empty() {
        return "no runs\n".to_string();
    }
    let mut out = format!(
        "{:<28} {:<10} {:<9} {:<10} {:<44} {:>10}  worktree\n",
        "run", "state", "step", "phase", "leaf (running for)", "last event"
    );
    for r in rows {
        let leaf = match (&r.leaf, r.leaf_age_s) {
            (Some(leaf), Some(age)) => format!("{leaf} ({})", ago(age)),
            (Some(leaf), None) => leaf.clone(),
            _ => "-".into(),
        };
        out.push_str(&format!(
            "{:<28} {:<10} {:<9} {:<10} {:<44} {:>10}  {}\n",
            r.run_id,
            r.state,
            format!("{}/{}", r.step, r.of),
            r.phase,
            leaf,
            format!("{} ago", ago(r.last_event_age_s)),
            r.worktree
        ));
    }
    out
}

/// Seconds in a few characters (`42s`, `7m`, `3h`, `2d`).
fn ago(s: u64) -> String {
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}
