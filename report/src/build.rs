//! The report computed from the ledger: which events are the run's, and what they add
//! up to. Nothing here runs a process or trusts what a leaf said of itself.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::Path;

use tdd_conductor::events::ConductorEvent;
use tdd_engine::ledger::Event;
use tdd_engine::ledger::Ledger;
use tdd_engine::ledger::TypedEvent;
use tdd_engine::run::events::RunEvent;
use tdd_leaves::events::LeavesEvent;

use crate::ReportError;
use crate::Which;
use crate::model::*;

/// The events of one run, decoded, each with its time.
#[derive(Default)]
pub(crate) struct RunEvents {
    pub conduct: Option<String>,
    pub run_id: Option<String>,
    pub conductor: Vec<(Event, ConductorEvent)>,
    pub engine: Vec<(Event, RunEvent)>,
    pub leaves: Vec<(Event, LeavesEvent)>,
    /// The `test_observed` events of this run's verifiers, which have no run.
    pub verifier_runs: Vec<(Event, RunEvent)>,
}

/// Reads the ledger at `database` and computes the report of the run `which` names
/// (the last one conducted, or started, in `work_tree` by default).
pub fn build(database: &Path, work_tree: &Path, which: &Which) -> Result<RunReport, ReportError> {
    build_as_of(database, work_tree, which, AsOf::Now)
}

/// How much of the ledger a report covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsOf {
    /// Every event recorded so far.
    Now,
    /// The events up to the conduct's newest step done, bail or stop (all of them when
    /// it has none yet): a report of the same run that is the same until the run moves
    /// again, whatever bookkeeping follows (a draft PR written twice reads the same).
    LastMilestone,
}

/// The conductor's events after which a run stands still until it moves again.
const MILESTONES: &[&str] = &["conduct_step_done", "conduct_bailed", "conduct_stopped"];

/// [`build`], covering the events `as_of` says; the seal's event count and chain head
/// are the ledger's at the last event covered, whether it verifies is the whole chain's.
pub fn build_as_of(
    database: &Path,
    work_tree: &Path,
    which: &Which,
    as_of: AsOf,
) -> Result<RunReport, ReportError> {
    let ledger = Ledger::open_read_only(database)?.ok_or_else(|| ReportError::NoLedger {
        database: database.to_path_buf(),
    })?;
    let mut all = ledger.events(None)?;
    let mut events = select(&all, work_tree, which)?;
    if as_of == AsOf::LastMilestone
        && let Some(cut) = events
            .conductor
            .iter()
            .rev()
            .find(|(e, _)| MILESTONES.contains(&e.kind.as_str()))
            .map(|(e, _)| e.id)
    {
        all.retain(|e| e.id <= cut);
        events = select(&all, work_tree, which)?;
    }
    let verification = ledger.verify()?;
    let seal = Seal {
        events: match as_of {
            AsOf::Now => ledger.count()?,
            AsOf::LastMilestone => all.len() as u64,
        },
        chain_head: all.last().map(|e| e.hash.clone()),
        verified: verification.broken.is_none(),
        problem: verification.broken.map(|b| match b.event_id {
            Some(id) => format!("event {id}: {}", b.reason),
            None => b.reason,
        }),
    };
    let repository = work_tree
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(crate::compute::report(&events, repository, seal))
}

/// The events of the run `which` names.
fn select(all: &[Event], work_tree: &Path, which: &Which) -> Result<RunEvents, ReportError> {
    let here = work_tree.display().to_string();
    // A conduct run of a clone's origin, taken in with its published ledger, is this
    // work tree's too.
    let owner = tdd_conductor::journal::Here::of(work_tree);
    let conduct_runs = |conduct: &str| -> Vec<String> {
        all.iter()
            .filter(|e| e.run_id.as_deref() == Some(conduct))
            .filter_map(|e| decode::<ConductorEvent>(e).ok().flatten())
            .filter_map(|c| match c {
                ConductorEvent::RunStarted(run) => Some(run.run_id),
                _ => None,
            })
            .collect()
    };
    let (conduct, run_id) = match which {
        Which::Id(id) => {
            if !all.iter().any(|e| e.run_id.as_deref() == Some(id)) {
                return Err(ReportError::NotFound { id: id.clone() });
            }
            if id.starts_with("conduct-") {
                (Some(id.clone()), conduct_runs(id).pop())
            } else {
                let conduct = all
                    .iter()
                    .filter(|e| e.kind == "conduct_run_started")
                    .filter_map(|e| {
                        let run = decode::<ConductorEvent>(e).ok().flatten()?;
                        match run {
                            ConductorEvent::RunStarted(r) if &r.run_id == id => e.run_id.clone(),
                            _ => None,
                        }
                    })
                    .next_back();
                (conduct, Some(id.clone()))
            }
        }
        Which::Latest => {
            let conduct = all.iter().rev().find_map(|e| {
                match decode::<ConductorEvent>(e).ok().flatten()? {
                    ConductorEvent::ConductStarted(s) if owner.owns(&s) => e.run_id.clone(),
                    _ => None,
                }
            });
            match conduct {
                Some(conduct) => {
                    let run = conduct_runs(&conduct).pop();
                    (Some(conduct), run)
                }
                None => {
                    let run = all.iter().rev().find_map(|e| {
                        match decode::<RunEvent>(e).ok().flatten()? {
                            RunEvent::RunStarted(s) if s.worktree == here => e.run_id.clone(),
                            RunEvent::RunAdopted(s) if s.worktree == here => e.run_id.clone(),
                            _ => None,
                        }
                    });
                    match run {
                        Some(run) => (None, Some(run)),
                        None => return Err(ReportError::NoRun),
                    }
                }
            }
        }
    };
    let mut events = RunEvents {
        conduct: conduct.clone(),
        run_id: run_id.clone(),
        ..RunEvents::default()
    };
    let issue_marker = events_issue(all, conduct.as_deref()).map(|n| format!("-i{n}-"));
    let first_conduct_event = conduct
        .as_deref()
        .and_then(|c| all.iter().find(|e| e.run_id.as_deref() == Some(c)))
        .map_or(0, |e| e.id);
    for event in all {
        let mine = match (&event.run_id, &conduct, &run_id) {
            (Some(r), Some(c), _) if r == c => {
                if let Some(c) = decode::<ConductorEvent>(event)? {
                    events.conductor.push((event.clone(), c));
                }
                continue;
            }
            (Some(r), _, Some(run)) => r == run,
            (None, _, _) => false,
            _ => continue,
        };
        if mine {
            if let Some(e) = decode::<RunEvent>(event)? {
                events.engine.push((event.clone(), e));
            } else if let Some(e) = decode::<LeavesEvent>(event)? {
                events.leaves.push((event.clone(), e));
            }
            continue;
        }
        // Events with no run: a planner's (before the engine run began), and the runs
        // a verifier made in its own worktree.
        if event.id < first_conduct_event {
            continue;
        }
        if let Some(e) = decode::<LeavesEvent>(event)? {
            let of_issue = issue_marker.as_deref().is_some_and(|m| {
                leaf_of(&e).is_some_and(|id| id.starts_with("planner-") && id.contains(m))
            });
            if of_issue {
                events.leaves.push((event.clone(), e));
            }
        }
    }
    // A verifier's own runs, once its leaves are known.
    let verifiers: BTreeSet<String> = events
        .leaves
        .iter()
        .filter_map(|(_, e)| leaf_of(e))
        .filter(|id| id.starts_with("verifier-"))
        .map(str::to_string)
        .collect();
    for event in all
        .iter()
        .filter(|e| e.run_id.is_none() && e.kind == "test_observed")
    {
        if let Some(RunEvent::TestObserved(t)) = decode::<RunEvent>(event)?
            && t.leaf_id.as_ref().is_some_and(|l| verifiers.contains(l))
        {
            events
                .verifier_runs
                .push((event.clone(), RunEvent::TestObserved(t)));
        }
    }
    Ok(events)
}

/// The issue a conduct works on.
fn events_issue(all: &[Event], conduct: Option<&str>) -> Option<u64> {
    let conduct = conduct?;
    all.iter()
        .filter(|e| e.run_id.as_deref() == Some(conduct))
        .find_map(|e| match decode::<ConductorEvent>(e).ok().flatten()? {
            ConductorEvent::ConductStarted(s) => Some(s.issue),
            _ => None,
        })
}

/// The leaf a leaves event is about.
pub(crate) fn leaf_of(event: &LeavesEvent) -> Option<&str> {
    match event {
        LeavesEvent::LeafPrepared(r) => Some(&r.leaf_id),
        LeavesEvent::LeafStarted(s) => Some(&s.leaf_id),
        LeavesEvent::LeafAborted(a) => Some(&a.leaf_id),
        LeavesEvent::LeafFinished(f) => Some(&f.leaf_id),
        LeavesEvent::VerdictRecorded(v) => Some(&v.leaf_id),
        LeavesEvent::VerdictRefused(v) => Some(&v.leaf_id),
        _ => None,
    }
}

/// `event` as `E`, `None` for another domain's; an error for a kind no domain declares.
fn decode<E: TypedEvent>(event: &Event) -> Result<Option<E>, ReportError> {
    Ok(tdd_engine::ledger::decode::<E>(
        event,
        &tdd_conductor::EVENT_KINDS,
    )?)
}

/// Per test id, the first outcome `observations` give it: a phase's target runs come
/// before its suite runs and its sensitivity runs, so this is the tree's own result.
pub(crate) fn first_outcomes(
    observations: &[tdd_engine::observe::Observation],
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for observation in observations {
        for (id, result) in &observation.tests {
            out.entry(id.clone())
                .or_insert_with(|| outcome_word(&result.outcome).to_string());
        }
    }
    out
}

/// An outcome as the report writes it.
pub(crate) fn outcome_word(outcome: &tdd_engine::observe::Outcome) -> &'static str {
    use tdd_engine::observe::Outcome;
    match outcome {
        Outcome::Passed => "passed",
        Outcome::Failed => "failed",
        Outcome::Skipped => "skipped",
        Outcome::Error => "error",
    }
}

/// The report of every engine run the ledger at `database` holds, oldest first.
pub fn all_runs(database: &Path, work_tree: &Path) -> Result<Vec<RunReport>, ReportError> {
    let ledger = Ledger::open_read_only(database)?.ok_or_else(|| ReportError::NoLedger {
        database: database.to_path_buf(),
    })?;
    let all = ledger.events(None)?;
    let seal = Seal::default();
    let runs: Vec<String> = all
        .iter()
        .filter(|e| e.kind == "run_started")
        .filter_map(|e| e.run_id.clone())
        .collect();
    let repository = work_tree
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    runs.into_iter()
        .map(|run| {
            let events = select(&all, work_tree, &Which::Id(run))?;
            Ok(crate::compute::report(
                &events,
                repository.clone(),
                seal.clone(),
            ))
        })
        .collect()
}
