//! What a run's events add up to: the header, the leaves, the engine's runs, the marks
//! on the timeline and the test deltas. The honesty panel is `crate::honesty`.

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use tdd_conductor::events::ConductorEvent;
use tdd_engine::ledger::Event;
use tdd_engine::observe::Observation;
use tdd_engine::run::events::RunEvent;
use tdd_leaves::events::LeavesEvent;

use crate::build::RunEvents;
use crate::build::first_outcomes;
use crate::model::*;

/// The report of `events`, in the repository named `repository`, with the ledger's `seal`.
pub(crate) fn report(events: &RunEvents, repository: String, seal: Seal) -> RunReport {
    let leaves = leaves(events);
    let mut header = header(events, &leaves, repository);
    header.ledger = seal;
    let mut steps = steps(events);
    // A step's cost is what its leaves (developers and verifiers) reported.
    for step in &mut steps {
        step.cost_usd = leaves
            .iter()
            .filter(|l| l.step == step.n)
            .filter_map(|l| l.cost_usd)
            .reduce(|a, b| a + b);
    }
    RunReport {
        version: 1,
        steps,
        runs: runs(events),
        marks: marks(events),
        tests: deltas(events),
        honesty: crate::honesty::evidence(events, &header.ledger),
        leaves,
        header,
    }
}

fn header(events: &RunEvents, leaves: &[Leaf], repository: String) -> Header {
    let mut header = Header {
        repository,
        conduct: events.conduct.clone(),
        run_id: events.run_id.clone(),
        outcome: "in progress".into(),
        leaves: leaves.len(),
        ..Header::default()
    };
    for (_, event) in &events.conductor {
        match event {
            ConductorEvent::ConductStarted(s) => {
                header.issue = Some(s.issue);
                header.branch = Some(s.branch.clone());
            }
            ConductorEvent::PrOpened(pr) => {
                header.pr = pr
                    .url
                    .clone()
                    .or_else(|| pr.path.as_ref().map(|p| p.display().to_string()));
            }
            ConductorEvent::Completed(_) => {
                header.outcome = "completed".into();
                header.outcome_detail = None;
                header.bail_cause = None;
            }
            ConductorEvent::Bailed(b) => {
                header.outcome = "bailed".into();
                header.bail_cause = Some(b.bail.cause.as_str().to_string());
                header.outcome_detail = Some(format!(
                    "{} ({}): {} — {}",
                    b.bail.cause.as_str(),
                    b.bail.class.words(),
                    b.bail.detail,
                    b.bail.action
                ));
            }
            ConductorEvent::Stopped(s) => {
                header.outcome = "stopped".into();
                header.outcome_detail = Some(format!("stopped on request ({})", s.mode));
            }
            ConductorEvent::Resumed(_) => {
                header.outcome = "in progress".into();
                header.outcome_detail = None;
            }
            _ => {}
        }
    }
    for (_, event) in &events.engine {
        match event {
            RunEvent::RunStarted(s) => {
                header.base = Some(s.start_sha.clone());
                header.contract = Some(s.contract.blob.clone());
            }
            RunEvent::PhaseChanged(p) => {
                if let Some(commit) = &p.commit {
                    header.head = Some(commit.clone());
                }
            }
            RunEvent::RunCompleted(_) if events.conduct.is_none() => {
                header.outcome = "completed".into();
            }
            RunEvent::RunAbandoned(a) if events.conduct.is_none() => {
                header.outcome = "abandoned".into();
                header.outcome_detail = Some(a.reason.clone());
            }
            _ => {}
        }
    }
    let times = all_times(events);
    header.started_at = times.first().cloned();
    header.ended_at = times.last().cloned();
    if let (Some(a), Some(b)) = (&header.started_at, &header.ended_at) {
        header.wall_ms = between_ms(a, b);
    }
    let mut cost = None;
    for leaf in leaves {
        if let Some(tokens) = leaf.tokens {
            header.tokens.input += tokens.input;
            header.tokens.cache_read += tokens.cache_read;
            header.tokens.cache_write += tokens.cache_write;
            header.tokens.output += tokens.output;
        }
        if let Some(c) = leaf.cost_usd {
            cost = Some(cost.unwrap_or(0.0) + c);
        }
    }
    header.cost_usd = cost;
    for (_, event) in &events.leaves {
        match event {
            LeavesEvent::VerdictRecorded(v) => match v.decision {
                tdd_leaves::Decision::Accept => header.verdicts.accept += 1,
                tdd_leaves::Decision::Reject => header.verdicts.reject += 1,
            },
            LeavesEvent::VerdictRefused(_) => header.verdicts.refused += 1,
            _ => {}
        }
    }
    header
}

/// Every event time of the run, sorted (RFC 3339 in UTC sorts as text).
fn all_times(events: &RunEvents) -> Vec<String> {
    let mut times: Vec<String> = events
        .conductor
        .iter()
        .map(|(e, _)| &e.at)
        .chain(events.engine.iter().map(|(e, _)| &e.at))
        .chain(events.leaves.iter().map(|(e, _)| &e.at))
        .cloned()
        .collect();
    times.sort();
    times
}

/// Milliseconds from `a` to `b` (RFC 3339); 0 when either does not parse or `b` is earlier.
pub(crate) fn between_ms(a: &str, b: &str) -> u64 {
    match (parse(a), parse(b)) {
        (Some(a), Some(b)) => u64::try_from((b - a).whole_milliseconds()).unwrap_or(0),
        _ => 0,
    }
}

/// `at` less `ms` milliseconds, as RFC 3339; `at` itself when it does not parse.
fn minus_ms(at: &str, ms: u64) -> String {
    let Some(time) = parse(at) else {
        return at.to_string();
    };
    let earlier = time - time::Duration::milliseconds(i64::try_from(ms).unwrap_or(0));
    earlier
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| at.to_string())
}

/// An RFC 3339 time.
pub(crate) fn parse(at: &str) -> Option<time::OffsetDateTime> {
    time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339).ok()
}

fn steps(events: &RunEvents) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut state: BTreeMap<u32, String> = BTreeMap::new();
    let mut targets: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    let mut more: BTreeMap<u32, Step> = BTreeMap::new();
    for (_, event) in &events.engine {
        match event {
            RunEvent::RunStarted(s) => {
                steps = s
                    .plan
                    .cycles
                    .iter()
                    .map(|c| Step {
                        n: c.n,
                        title: c.title.clone(),
                        targets: c.tests.clone(),
                        state: "not started".into(),
                        ..Step::default()
                    })
                    .collect();
            }
            RunEvent::CycleOpened(c) => {
                state.insert(c.n, c.phase.trailer().to_string());
            }
            RunEvent::PhaseChanged(p) => {
                state.insert(p.n, p.to.trailer().to_string());
                if let Some(commit) = &p.commit {
                    let short = &commit[..commit.len().min(10)];
                    more.entry(p.n)
                        .or_default()
                        .commits
                        .push(format!("{} {short}", p.from.trailer()));
                }
            }
            RunEvent::CycleClosed(c) => {
                state.insert(c.n, "closed".into());
            }
            RunEvent::CycleSkipped(c) => {
                state.insert(c.n, "skipped".into());
                more.entry(c.n).or_default().skipped_because = Some(c.reason.clone());
            }
            RunEvent::TargetAdopted(t) => targets.entry(t.n).or_default().push(t.test.clone()),
            RunEvent::TargetNamed(t) => targets.entry(t.n).or_default().push(t.test.clone()),
            RunEvent::Note(note) => {
                more.entry(note.n.unwrap_or(0))
                    .or_default()
                    .notes
                    .push(note.text.clone());
            }
            RunEvent::Annotation(a) => {
                more.entry(a.n.unwrap_or(0))
                    .or_default()
                    .notes
                    .push(format!("{}: {}", a.key, a.value));
            }
            _ => {}
        }
    }
    for (_, event) in &events.conductor {
        match event {
            ConductorEvent::PhaseAccepted(p) => {
                let step = more.entry(p.step).or_default();
                step.revisions += p.revisions;
            }
            ConductorEvent::StepDone(d) => {
                more.entry(d.step).or_default().time = Some(StepTime {
                    total_ms: d.total_ms,
                    leaf_ms: d.leaf_ms,
                    engine_ms: d.engine_ms,
                    overhead_ms: d.overhead_ms,
                });
            }
            _ => {}
        }
    }
    for step in &mut steps {
        if let Some(s) = state.get(&step.n) {
            step.state = s.clone();
        }
        if let Some(t) = targets.get(&step.n) {
            step.targets = t.clone();
        }
        if let Some(m) = more.remove(&step.n) {
            step.skipped_because = m.skipped_because;
            step.commits = m.commits;
            step.revisions = m.revisions;
            step.time = m.time;
            step.notes = m.notes;
        }
    }
    steps
}

fn leaves(events: &RunEvents) -> Vec<Leaf> {
    let mut order: Vec<String> = Vec::new();
    let mut by_id: BTreeMap<String, Leaf> = BTreeMap::new();
    fn entry<'a>(
        order: &mut Vec<String>,
        by_id: &'a mut BTreeMap<String, Leaf>,
        id: &str,
    ) -> &'a mut Leaf {
        if !by_id.contains_key(id) {
            order.push(id.to_string());
        }
        by_id.entry(id.to_string()).or_insert_with(|| Leaf {
            id: id.to_string(),
            ..Leaf::default()
        })
    }
    for (event, e) in &events.leaves {
        match e {
            LeavesEvent::LeafPrepared(r) => {
                let leaf = entry(&mut order, &mut by_id, &r.leaf_id);
                leaf.role = r.role.as_str().to_string();
                leaf.provider = r.provider.clone();
                leaf.model = model_of(&r.argv);
                leaf.step = r.step;
                leaf.phase = r.phase.clone();
                leaf.started_at = event.at.clone();
            }
            LeavesEvent::LeafStarted(s) => {
                let leaf = entry(&mut order, &mut by_id, &s.leaf_id);
                leaf.started_at = event.at.clone();
                leaf.sandbox = s.sandbox.clone();
                leaf.cli_version = s.cli_version.clone();
            }
            LeavesEvent::LeafFinished(f) => {
                let leaf = entry(&mut order, &mut by_id, &f.leaf_id);
                leaf.ended_at = Some(event.at.clone());
                leaf.duration_ms = f
                    .duration_ms
                    .or_else(|| Some(between_ms(&leaf.started_at, &event.at)));
                leaf.ended = Some(f.exit.words());
                leaf.exit_class = Some(f.exit.tag().to_string());
                leaf.ok = f.exit.is_success();
                leaf.tokens = f.usage.as_ref().map(|u| Tokens {
                    input: u.input_tokens,
                    cache_read: u.cache_read_tokens,
                    cache_write: u.cache_write_tokens,
                    output: u.output_tokens,
                });
                leaf.cost_usd = f.cost_usd;
                leaf.touched = f.touched.clone();
            }
            LeavesEvent::LeafAborted(a) => {
                let leaf = entry(&mut order, &mut by_id, &a.leaf_id);
                leaf.ended_at.get_or_insert_with(|| event.at.clone());
                leaf.ended.get_or_insert_with(|| "aborted".to_string());
            }
            LeavesEvent::VerdictRecorded(v) => {
                let decision = match v.decision {
                    tdd_leaves::Decision::Accept => "accept",
                    tdd_leaves::Decision::Reject => "reject",
                };
                entry(&mut order, &mut by_id, &v.leaf_id).verdict =
                    Some(format!("{decision}: {}", v.reason));
            }
            _ => {}
        }
    }
    // Locked files the engine reverted, charged to the developer of that phase.
    for (_, e) in &events.engine {
        if let RunEvent::LockedFileReverted(r) = e {
            let phase = r.phase.trailer();
            if let Some(id) = order.iter().rev().find(|id| {
                by_id
                    .get(*id)
                    .is_some_and(|l| l.role == "developer" && l.step == r.n && l.phase == phase)
            }) && let Some(leaf) = by_id.get_mut(id)
            {
                leaf.reverted
                    .extend(r.restored.iter().chain(&r.removed).cloned());
            }
        }
    }
    order
        .iter()
        .filter_map(|id| by_id.remove(id))
        .filter(|l| !l.role.is_empty())
        .collect()
}

/// The model a CLI's command line names (`--model M`, `-m M`, `--model=M`).
fn model_of(argv: &[String]) -> Option<String> {
    let mut args = argv.iter();
    while let Some(arg) = args.next() {
        if let Some(model) = arg.strip_prefix("--model=") {
            return Some(model.to_string());
        }
        if arg == "--model" || arg == "-m" {
            return args.next().cloned();
        }
    }
    None
}

/// The purpose of a run a verifier made itself.
pub(crate) const VERIFIER_RUN: &str = "verifier's own run";

fn runs(events: &RunEvents) -> Vec<SuiteRun> {
    let mut out = Vec::new();
    let mut add = |event: &Event, step: u32, purpose: &str, observations: &[Observation]| {
        // Laid back to back, the last ending when the event was written.
        let mut end = event.at.clone();
        let mut these = Vec::new();
        for (i, o) in observations.iter().enumerate().rev() {
            let start = minus_ms(&end, o.wall_ms);
            // A GREEN's lone run of a target it already ran is the sensitivity run,
            // made with the implementation reverted.
            let again = o.tests.len() == 1
                && o.tests
                    .keys()
                    .all(|id| observations[..i].iter().any(|e| e.tests.contains_key(id)));
            let purpose = if purpose == "green" && again {
                "sensitivity"
            } else {
                purpose
            };
            these.push(SuiteRun {
                step,
                purpose: purpose.to_string(),
                project: o.project.clone(),
                started_at: start.clone(),
                ended_at: end.clone(),
                wall_ms: o.wall_ms,
                total: o.totals.total,
                passed: o.totals.passed,
                failed: o.totals.failed + o.totals.errors,
            });
            end = start;
        }
        these.reverse();
        out.extend(these);
    };
    for (event, e) in &events.engine {
        match e {
            RunEvent::BaselineCaptured(b) => {
                add(event, 0, "baseline", std::slice::from_ref(&b.observation))
            }
            RunEvent::PhaseChanged(p) => add(event, p.n, p.from.trailer(), &p.observations),
            RunEvent::AdvanceRefused(r) => add(
                event,
                r.n,
                &format!("refused {}", r.phase.trailer()),
                &r.observations,
            ),
            RunEvent::TestObserved(t) => add(event, t.n.unwrap_or(0), "tdd test", &t.observations),
            _ => {}
        }
    }
    for (event, e) in &events.verifier_runs {
        if let RunEvent::TestObserved(t) = e {
            let step = t.leaf_id.as_deref().and_then(step_of_leaf).unwrap_or(0);
            add(event, step, VERIFIER_RUN, &t.observations);
        }
    }
    out
}

/// The files a revert restored or removed, as a list for a person.
pub(crate) fn reverted_files(restored: &[String], removed: &[String]) -> String {
    restored
        .iter()
        .chain(removed)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ")
}

/// The step a leaf id names (`verifier-i1-s2-green-a1-abc123` → 2).
pub(crate) fn step_of_leaf(id: &str) -> Option<u32> {
    id.split('-')
        .find_map(|part| part.strip_prefix('s').and_then(|n| n.parse().ok()))
}

fn marks(events: &RunEvents) -> Vec<Mark> {
    let mut marks = Vec::new();
    for (event, e) in &events.conductor {
        if let ConductorEvent::PhaseVerdict(v) = e {
            let kind = match v.decision {
                tdd_leaves::Decision::Accept => "accept",
                tdd_leaves::Decision::Reject => "reject",
            };
            marks.push(Mark {
                step: v.step,
                kind: kind.into(),
                at: event.at.clone(),
                text: format!(
                    "step {} {}: the verifier says {kind}: {}",
                    v.step, v.phase, v.reason
                ),
            });
        }
    }
    for (event, e) in &events.engine {
        match e {
            RunEvent::AdvanceRefused(r) => marks.push(Mark {
                step: r.n,
                kind: "refused".into(),
                at: event.at.clone(),
                text: format!(
                    "step {} {}: the engine refused: {}: {}",
                    r.n,
                    r.phase.trailer(),
                    r.refusal.reason,
                    r.detail
                ),
            }),
            RunEvent::HookDenied(d) => marks.push(Mark {
                step: d.n.unwrap_or(0),
                kind: "hook_denied".into(),
                at: event.at.clone(),
                text: format!(
                    "{}'s {} denied by the hook: {}",
                    d.harness, d.tool, d.reason
                ),
            }),
            RunEvent::HookReverted(r) => marks.push(Mark {
                step: r.n.unwrap_or(0),
                kind: "reverted".into(),
                at: event.at.clone(),
                text: format!(
                    "{}'s {} changed locked files, restored by the hook: {}",
                    r.harness,
                    r.tool,
                    reverted_files(&r.restored, &r.removed)
                ),
            }),
            RunEvent::DependenciesChanged(d) => marks.push(Mark {
                step: d.n,
                kind: "dependencies".into(),
                at: event.at.clone(),
                text: format!(
                    "step {}: the dependencies changed, as the plan lets it: {}",
                    d.n,
                    d.changed.join("; ")
                ),
            }),
            RunEvent::LockedFileReverted(r) => marks.push(Mark {
                step: r.n,
                kind: "reverted".into(),
                at: event.at.clone(),
                text: format!(
                    "step {} {}: locked files reverted ({}): {}",
                    r.n,
                    r.phase.trailer(),
                    r.kind.replace('_', " "),
                    reverted_files(&r.restored, &r.removed)
                ),
            }),
            _ => {}
        }
    }
    for (event, e) in &events.leaves {
        if let LeavesEvent::VerdictRefused(v) = e {
            marks.push(Mark {
                step: step_of_leaf(&v.leaf_id).unwrap_or(0),
                kind: "verdict_refused".into(),
                at: event.at.clone(),
                text: format!("a verdict of {} was refused: {}", v.leaf_id, v.reason),
            });
        }
    }
    marks.sort_by(|a, b| a.at.cmp(&b.at));
    marks
}

fn deltas(events: &RunEvents) -> TestDeltas {
    let mut checkpoints: Vec<(String, BTreeMap<String, String>)> = Vec::new();
    let mut baseline = BTreeMap::new();
    for (_, e) in &events.engine {
        match e {
            RunEvent::BaselineCaptured(b) => {
                baseline.extend(first_outcomes(std::slice::from_ref(&b.observation)));
            }
            RunEvent::PhaseChanged(p) if !p.observations.is_empty() => {
                let label = format!("{} {}", p.n, p.from.trailer());
                let again = checkpoints
                    .iter()
                    .filter(|(l, _)| l.starts_with(&label))
                    .count();
                let label = if again == 0 {
                    label
                } else {
                    format!("{label} ({})", again + 1)
                };
                checkpoints.push((label, first_outcomes(&p.observations)));
            }
            _ => {}
        }
    }
    checkpoints.insert(0, ("baseline".into(), baseline));
    let ids: BTreeSet<&String> = checkpoints.iter().flat_map(|(_, c)| c.keys()).collect();
    let last_suite: Option<&BTreeMap<String, String>> = checkpoints
        .iter()
        .rev()
        .find(|(label, _)| label.ends_with("refactor"))
        .map(|(_, c)| c);
    let rows = ids
        .into_iter()
        .map(|id| {
            let cells: Vec<String> = checkpoints
                .iter()
                .map(|(_, c)| c.get(id).cloned().unwrap_or_default())
                .collect();
            let in_baseline = !cells[0].is_empty();
            let project = id.split("::").next().unwrap_or_default();
            let deleted = in_baseline
                && last_suite.is_some_and(|s| {
                    !s.contains_key(id) && s.keys().any(|k| k.split("::").next() == Some(project))
                });
            let ran: Vec<&String> = cells.iter().filter(|c| !c.is_empty()).collect();
            let newly_skipped =
                ran.last().is_some_and(|c| *c == "skipped") && ran.iter().any(|c| *c != "skipped");
            let change = if deleted {
                Some("deleted")
            } else if !in_baseline {
                Some("new")
            } else if newly_skipped {
                Some("newly skipped")
            } else {
                None
            };
            TestRow {
                id: id.clone(),
                cells,
                change: change.map(str::to_string),
            }
        })
        .collect();
    TestDeltas {
        checkpoints: checkpoints.into_iter().map(|(label, _)| label).collect(),
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_is_read_from_each_clis_flag() {
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            model_of(&argv(&["claude", "-p", "--model", "opus"])),
            Some("opus".into())
        );
        assert_eq!(
            model_of(&argv(&["codex", "exec", "-m", "o4"])),
            Some("o4".into())
        );
        assert_eq!(
            model_of(&argv(&["aider", "--model=sonnet"])),
            Some("sonnet".into())
        );
        assert_eq!(model_of(&argv(&["tdd", "__scripted-leaf"])), None);
    }

    #[test]
    fn times_are_laid_back_from_the_event() {
        assert_eq!(
            minus_ms("2026-12-04T05:00:01.500Z", 2000),
            "2026-12-04T04:59:59.5Z"
        );
        assert_eq!(
            between_ms("2026-12-04T05:00:00Z", "2026-12-04T05:00:02.25Z"),
            2250
        );
        assert_eq!(step_of_leaf("verifier-i1-s12-green-a1-abc123"), Some(12));
    }
}
