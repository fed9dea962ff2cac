//! The conductor's own ledger events, all tagged with the conduct id.
//!
//! They are filed under the conduct id (not an engine run id: a conduct run begins,
//! with its branch and plan, before the engine run exists), and every payload also
//! carries it as `conduct`.

use std::path::Path;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;
use tdd_engine::ledger::Event;
use tdd_engine::ledger::Ledger;
use tdd_engine::ledger::LedgerError;
use tdd_engine::ledger::TypedEvent;

use crate::events::CommentPosted;
use crate::events::ConductorEvent;
use crate::events::PhaseVerdict;

/// Where a payload names its conduct run; events recorded before the journal filed
/// them under the conduct id are found by it.
const TAG: &str = "$.conduct";

/// The conduct id every journal payload carries beside its own fields.
#[derive(Debug, Deserialize)]
struct Filed {
    conduct: String,
}

/// `event` as a conductor event: `None` for another domain's, an error naming the event
/// for an unknown kind or a payload that does not parse.
fn decode(event: &Event) -> Result<Option<ConductorEvent>, LedgerError> {
    Ok(tdd_engine::ledger::decode::<ConductorEvent>(
        event,
        &crate::events::EVENT_KINDS,
    )?)
}

/// Appends and reads one conduct run's events.
#[derive(Debug, Clone)]
pub struct Journal {
    database: PathBuf,
    conduct: String,
}

impl Journal {
    /// The journal of conduct run `conduct` in the ledger at `database`.
    pub fn new(database: &Path, conduct: &str) -> Journal {
        Journal {
            database: database.to_path_buf(),
            conduct: conduct.to_string(),
        }
    }

    /// The conduct id.
    pub fn conduct(&self) -> &str {
        &self.conduct
    }

    /// The ledger database.
    pub fn database(&self) -> &Path {
        &self.database
    }

    /// Appends `event`, filed under the conduct id, its payload carrying the id as
    /// `conduct`.
    pub fn record(&self, event: &ConductorEvent) -> Result<(), LedgerError> {
        let mut payload = tdd_engine::ledger::encode(event)?;
        if let Value::Object(map) = &mut payload {
            map.insert("conduct".into(), Value::String(self.conduct.clone()));
        }
        Ledger::open(&self.database)?.append(Some(&self.conduct), event.kind(), &payload)?;
        Ok(())
    }

    /// This run's events, oldest first. An event of an unknown kind, or one whose
    /// payload does not parse, is an error naming it: nothing is skipped.
    pub fn events(&self) -> Result<Vec<ConductorEvent>, LedgerError> {
        let ledger = Ledger::open(&self.database)?;
        let mut events = Vec::new();
        for event in ledger.events_filed(&self.conduct, TAG, None)? {
            events.extend(decode(&event)?);
        }
        Ok(events)
    }

    /// The comments first written to the forge, oldest first.
    pub fn comments_posted(&self) -> Result<Vec<CommentPosted>, LedgerError> {
        Ok(self
            .events()?
            .into_iter()
            .filter_map(|e| match e {
                ConductorEvent::CommentPosted(p) => Some(p),
                _ => None,
            })
            .collect())
    }

    /// Every draft PR record, oldest first.
    pub fn prs_opened(&self) -> Result<Vec<crate::events::PrOpened>, LedgerError> {
        Ok(self
            .events()?
            .into_iter()
            .filter_map(|e| match e {
                ConductorEvent::PrOpened(p) => Some(p),
                _ => None,
            })
            .collect())
    }

    /// Every commit status posted, oldest first.
    pub fn statuses_posted(&self) -> Result<Vec<crate::events::PostedStatus>, LedgerError> {
        Ok(self
            .events()?
            .into_iter()
            .flat_map(|e| match e {
                ConductorEvent::StatusesPosted(p) => p.statuses,
                _ => Vec::new(),
            })
            .collect())
    }

    /// Whether the draft PR was written to the forge.
    pub fn pr_opened(&self) -> Result<bool, LedgerError> {
        Ok(self
            .events()?
            .iter()
            .any(|e| matches!(e, ConductorEvent::PrOpened(_))))
    }

    /// The engine run this conduct run started last, if any.
    pub fn engine_run(&self) -> Result<Option<String>, LedgerError> {
        Ok(self
            .events()?
            .into_iter()
            .filter_map(|e| match e {
                ConductorEvent::RunStarted(p) => Some(p.run_id),
                _ => None,
            })
            .next_back())
    }

    /// The blind verifiers' verdicts, oldest first.
    pub fn verdicts(&self) -> Result<Vec<PhaseVerdict>, LedgerError> {
        Ok(self
            .events()?
            .into_iter()
            .filter_map(|e| match e {
                ConductorEvent::PhaseVerdict(p) => Some(p),
                _ => None,
            })
            .collect())
    }
}

/// Every conductor event in the ledger at `database`, of every conduct run, oldest
/// first, each with its conduct id; read as strictly as [`Journal::events`].
pub fn every_conduct(database: &Path) -> Result<Vec<(String, ConductorEvent)>, LedgerError> {
    let ledger = Ledger::open(database)?;
    let mut events = Vec::new();
    for event in ledger.events_of_kinds(None, ConductorEvent::KINDS)? {
        let Some(typed) = decode(&event)? else {
            continue;
        };
        let filed = Filed::deserialize(&event.payload).map_err(|source| {
            tdd_engine::ledger::EventError::Payload {
                id: event.id,
                kind: event.kind.clone(),
                source,
            }
        })?;
        events.push((filed.conduct, typed));
    }
    Ok(events)
}

/// The last conduct run of one work tree: its issue, and how it ended.
#[derive(Debug, Clone)]
pub struct LastConduct {
    /// The issue number.
    pub issue: u64,
    /// The issue as `tdd conduct` was given it (a file or a number).
    pub issue_path: String,
    /// The event that ended it (`conduct_bailed`, `conduct_stopped` or
    /// `conduct_completed`); `None` while it runs, or when it was killed or resumed
    /// since.
    pub ended: Option<ConductorEvent>,
}

/// Which conduct runs belong to one work tree: those started in it, and those started in
/// a work tree of another repository on the branch checked out here. The ledger of a
/// repository records only its own work trees but for what it took in from a published
/// ledger, so the latter are the runs of a clone's origin that continue here.
pub struct Here {
    path: String,
    branch: Option<String>,
    worktrees: std::cell::OnceCell<Vec<String>>,
    root: std::path::PathBuf,
}

impl Here {
    /// The work tree at `work_tree` (its branch read now, its repository's work trees
    /// listed only if asked).
    pub fn of(work_tree: &Path) -> Here {
        Here {
            path: work_tree.display().to_string(),
            branch: tdd_engine::published::current_branch(work_tree)
                .ok()
                .flatten(),
            worktrees: std::cell::OnceCell::new(),
            root: work_tree.to_path_buf(),
        }
    }

    /// Whether the conduct run `started` belongs here.
    pub fn owns(&self, started: &crate::events::ConductStarted) -> bool {
        if started.worktree == self.path {
            return true;
        }
        if self.branch.as_deref() != Some(started.branch.as_str()) {
            return false;
        }
        let worktrees = self.worktrees.get_or_init(|| {
            tdd_engine::git::Git::new(&self.root)
                .text(["worktree", "list", "--porcelain"])
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.strip_prefix("worktree "))
                .map(|p| {
                    std::path::Path::new(p)
                        .canonicalize()
                        .map_or_else(|_| p.to_string(), |c| c.display().to_string())
                })
                .collect()
        });
        // Unlisted means nothing is known of the repository's work trees: not taken.
        !worktrees.is_empty() && !worktrees.contains(&started.worktree)
    }
}

/// The last conduct run started in `work_tree`, read from the ledger at `database`;
/// `None` when there is no ledger or no conduct ran there. Never creates the ledger.
pub fn last_conduct(database: &Path, work_tree: &Path) -> Result<Option<LastConduct>, LedgerError> {
    if !database.is_file() {
        return Ok(None);
    }
    let all = every_conduct(database)?;
    let here = Here::of(work_tree);
    let Some((id, started)) = all.iter().rev().find_map(|(id, event)| match event {
        ConductorEvent::ConductStarted(started) if here.owns(started) => Some((id, started)),
        _ => None,
    }) else {
        return Ok(None);
    };
    let ended = all
        .iter()
        .filter(|(conduct, _)| conduct == id)
        .map(|(_, event)| event)
        .rfind(|event| {
            matches!(
                event,
                ConductorEvent::Bailed(_)
                    | ConductorEvent::Stopped(_)
                    | ConductorEvent::Completed(_)
                    | ConductorEvent::Resumed(_)
            )
        })
        .filter(|event| !matches!(event, ConductorEvent::Resumed(_)))
        .cloned();
    Ok(Some(LastConduct {
        issue: started.issue,
        issue_path: started.issue_path.clone(),
        ended,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::StepReset;

    fn posted(key: &str, id: &str) -> ConductorEvent {
        ConductorEvent::CommentPosted(CommentPosted {
            key: key.into(),
            id: id.into(),
        })
    }

    #[test]
    fn events_recorded_before_filing_are_read_with_the_filed_ones_in_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let database = dir.path().join("ledger.db");
        let journal = Journal::new(&database, "conduct-a");
        {
            let mut ledger = Ledger::open(&database).expect("ledger");
            let legacy = serde_json::json!({ "conduct": "conduct-a", "key": "step-1", "id": "c1" });
            ledger
                .append(None, "forge_comment_posted", &legacy)
                .expect("append");
            let other = serde_json::json!({ "conduct": "conduct-b", "key": "bail", "id": "c1" });
            ledger
                .append(None, "forge_comment_posted", &other)
                .expect("append");
        }
        journal.record(&posted("step-2", "c2")).expect("record");
        let events = journal.events().expect("events");
        let kinds: Vec<&str> = events.iter().map(TypedEvent::kind).collect();
        assert_eq!(kinds, ["forge_comment_posted", "forge_comment_posted"]);
        let ids: Vec<String> = journal
            .comments_posted()
            .expect("comments")
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(ids, ["c1", "c2"]);
        let every: Vec<String> = every_conduct(&database)
            .expect("every conduct")
            .into_iter()
            .map(|(conduct, _)| conduct)
            .collect();
        assert_eq!(every, ["conduct-a", "conduct-b", "conduct-a"]);
    }

    /// The payload on disk is the payload type's fields plus the conduct id, filed
    /// under the conduct id: what the previous release wrote.
    #[test]
    fn a_recorded_event_is_stored_as_its_fields_and_the_conduct_id() {
        let dir = tempfile::tempdir().expect("tempdir");
        let database = dir.path().join("ledger.db");
        let journal = Journal::new(&database, "conduct-a");
        journal
            .record(&ConductorEvent::StepReset(StepReset { step: 3 }))
            .expect("record");
        let stored = Ledger::open(&database)
            .expect("ledger")
            .events(None)
            .expect("events");
        assert_eq!(stored.len(), 1);
        assert_eq!(stored[0].kind, "step_reset");
        assert_eq!(stored[0].run_id.as_deref(), Some("conduct-a"));
        assert_eq!(
            stored[0].payload,
            serde_json::json!({ "conduct": "conduct-a", "step": 3 })
        );
    }

    /// An unknown kind or an unreadable payload filed under the conduct run is an
    /// error naming the event, never skipped.
    #[test]
    fn an_unknown_kind_or_a_bad_payload_is_an_error_naming_the_event() {
        let dir = tempfile::tempdir().expect("tempdir");
        let database = dir.path().join("ledger.db");
        let journal = Journal::new(&database, "conduct-a");
        journal.record(&posted("step-1", "c1")).expect("record");
        let bad = serde_json::json!({ "conduct": "conduct-a", "step": "three" });
        Ledger::open(&database)
            .expect("ledger")
            .append(Some("conduct-a"), "step_reset", &bad)
            .expect("append");
        let err = journal.events().expect_err("a bad payload");
        assert!(err.to_string().contains("event 2 (`step_reset`)"), "{err}");
        assert!(every_conduct(&database).is_err());

        let dir = tempfile::tempdir().expect("tempdir");
        let database = dir.path().join("ledger.db");
        let journal = Journal::new(&database, "conduct-a");
        let odd = serde_json::json!({ "conduct": "conduct-a" });
        Ledger::open(&database)
            .expect("ledger")
            .append(Some("conduct-a"), "conduct_paused", &odd)
            .expect("append");
        let err = journal.events().expect_err("an unknown kind");
        assert!(
            err.to_string()
                .contains("event 1 has the unknown kind `conduct_paused`"),
            "{err}"
        );
    }

    /// A ledger the last release wrote (the demo, conducted to the end): every
    /// conductor event reads as its type, the run's story reads back from them, and
    /// each is written again exactly as it was stored.
    #[test]
    fn a_ledger_written_by_the_last_release_reads_as_conductor_events() {
        let (_dir, database) = tdd_testutil::demo_ledger();
        let every = every_conduct(&database).expect("reads");
        assert_eq!(every.len(), 30);
        let conduct = every[0].0.clone();
        assert!(every.iter().all(|(c, _)| *c == conduct));
        let journal = Journal::new(&database, &conduct);
        let events = journal.events().expect("reads as its type");
        assert_eq!(events.len(), 30);
        let count = |kind: &str| events.iter().filter(|e| e.kind() == kind).count();
        assert_eq!(count("conduct_phase"), 9);
        assert_eq!(count("phase_verdict"), 10);
        assert_eq!(count("conduct_step_done"), 3);
        let ConductorEvent::ConductStarted(started) = &events[0] else {
            panic!("the run starts with conduct_started: {:?}", events[0]);
        };
        assert_eq!(started.issue, 1);
        assert_eq!(started.version, "0.1.0");
        assert_eq!(journal.verdicts().expect("verdicts")[0].round, 0);
        assert!(journal.pr_opened().expect("pr"));
        assert_eq!(
            journal.engine_run().expect("run").as_deref(),
            Some("run-20261130T165616-43f7e6")
        );
        let stored = Ledger::open(&database)
            .expect("ledger")
            .events_filed(&conduct, TAG, None)
            .expect("events");
        for (event, typed) in stored.iter().zip(&events) {
            let mut payload = tdd_engine::ledger::encode(typed).expect("encodes");
            payload["conduct"] = Value::String(conduct.clone());
            assert_eq!(payload, event.payload, "event {}", event.id);
        }
    }
}
