//! What the forge shows, drawn from the ledger: the draft PR body, a step's comment,
//! a bail's comment.

use std::collections::BTreeMap;

use tdd_engine::ledger::Ledger;
use tdd_engine::ledger::LedgerError;
use tdd_engine::ledger::TypedEvent;
use tdd_engine::run::RunEvent;

use crate::bail::Bail;
use crate::conductor::Conductor;
use crate::events::ConductorEvent;
use crate::events::PhaseRecord;
use crate::events::PhaseVerdict;
use crate::events::StepDone;

/// One step's record, as the ledger tells it (entries of a reset attempt dropped).
#[derive(Debug, Default)]
struct StepRecord {
    phases: Vec<PhaseRecord>,
    verdicts: Vec<PhaseVerdict>,
    done: Option<StepDone>,
}

fn steps(events: &[ConductorEvent]) -> BTreeMap<u64, StepRecord> {
    let mut steps: BTreeMap<u64, StepRecord> = BTreeMap::new();
    for event in events {
        let Some(n) = event.step() else {
            continue;
        };
        let entry = steps.entry(u64::from(n)).or_default();
        match event {
            ConductorEvent::StepReset(_) => *entry = StepRecord::default(),
            ConductorEvent::PhaseAccepted(p) => entry.phases.push(p.clone()),
            ConductorEvent::PhaseVerdict(v) => entry.verdicts.push(v.clone()),
            ConductorEvent::StepDone(d) => entry.done = Some(d.clone()),
            _ => {}
        }
    }
    steps
}

fn short(sha: &str) -> String {
    sha.chars().take(10).collect()
}

fn secs(ms: u64) -> String {
    #[expect(
        clippy::cast_precision_loss,
        reason = "a duration in ms fits an f64's mantissa"
    )]
    let ms = ms as f64;
    format!("{:.1} s", ms / 1000.0)
}

fn render_step(out: &mut String, n: u64, title: &str, record: &StepRecord) {
    out.push_str(&format!("\n### Step {n}: {title}\n\n"));
    out.push_str("| phase | commit | revise rounds | leaf time | engine time | cost |\n|---|---|---|---|---|---|\n");
    for p in &record.phases {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | ${:.4} |\n",
            p.phase.to_uppercase(),
            short(&p.commit),
            p.revisions,
            secs(p.leaf_ms),
            secs(p.engine_ms),
            p.cost_usd
        ));
    }
    out.push_str("\nVerifier verdicts:\n\n");
    for v in &record.verdicts {
        let findings = v.findings.join(", ");
        out.push_str(&format!(
            "- {} {} (commit {}): {}{}\n",
            v.phase.to_uppercase(),
            decision_word(v),
            short(&v.commit),
            v.reason,
            if findings.is_empty() {
                String::new()
            } else {
                format!(" — findings: {findings}")
            }
        ));
    }
    render_integrity(out, &record.phases);
    if let Some(done) = &record.done {
        out.push_str(&format!(
            "\nStep time {}: leaves {}, engine {}, conductor {}.\n",
            secs(done.total_ms),
            secs(done.leaf_ms),
            secs(done.engine_ms),
            secs(done.overhead_ms)
        ));
    }
}

/// `ACCEPT` or `REJECT`.
fn decision_word(verdict: &PhaseVerdict) -> &'static str {
    match verdict.decision {
        tdd_leaves::Decision::Accept => "ACCEPT",
        tdd_leaves::Decision::Reject => "REJECT",
    }
}

/// The "Integrity events" of a step's accepted phases, when there are any.
fn render_integrity(out: &mut String, phases: &[PhaseRecord]) {
    let mut integrity = Vec::new();
    for p in phases {
        let phase = p.phase.to_uppercase();
        let reverted = p.reverted.join(", ");
        if !reverted.is_empty() {
            let what = if phase == "RED" {
                "implementation during RED"
            } else {
                "test edited outside RED"
            };
            integrity.push(format!("- {phase}: {what}: the engine reverted {reverted}"));
        }
        let undeclared = p.undeclared.join(", ");
        if !undeclared.is_empty() {
            integrity.push(format!(
                "- {phase}: undeclared files left uncommitted: {undeclared}"
            ));
        }
        if p.red_first_violation {
            integrity.push(format!("- {phase}: the target passed on arrival"));
        }
    }
    if !integrity.is_empty() {
        out.push_str("\nIntegrity events:\n\n");
        out.push_str(&integrity.join("\n"));
        out.push('\n');
    }
}

/// The engine run's own events, read as the engine's type.
fn run_events(c: &Conductor<'_>) -> Result<Vec<RunEvent>, LedgerError> {
    let Some(run_id) = c.run_id.as_deref() else {
        return Ok(Vec::new());
    };
    let mut events = Vec::new();
    for event in Ledger::open(c.journal.database())?.events(Some(run_id))? {
        events.extend(tdd_engine::ledger::decode::<RunEvent>(
            &event,
            RunEvent::KINDS,
        )?);
    }
    Ok(events)
}

/// The "Baseline" line of the PR body: the failures the engine run accepted at baseline
/// because `known_failures` declares them, and the entries that matched no failure.
/// `None` when the baseline was plain green with nothing declared.
fn baseline_line(run: &[RunEvent]) -> Option<String> {
    let mut declared = Vec::new();
    let mut unmatched = Vec::new();
    for event in run {
        let RunEvent::BaselineCaptured(captured) = event else {
            continue;
        };
        declared.extend(captured.declared.iter().map(|id| format!("`{id}`")));
        unmatched.extend(
            captured
                .unmatched_known_failures
                .iter()
                .map(|entry| format!("`{entry}` ({})", captured.project)),
        );
    }
    if declared.is_empty() && unmatched.is_empty() {
        return None;
    }
    let mut line = match declared.len() {
        0 => "**Baseline:** green.".to_string(),
        n => format!(
            "**Baseline:** green apart from {n} declared failure{} (`known_failures`), already red before this work: {}.",
            if n == 1 { "" } else { "s" },
            declared.join(", ")
        ),
    };
    if !unmatched.is_empty() {
        line.push_str(&format!(
            " `known_failures` entries that matched no failure: {}.",
            unmatched.join(", ")
        ));
    }
    Some(line)
}

/// The steps skipped by hand in the engine run (`tdd cycle skip`), with their reasons.
fn skipped_steps(run: &[RunEvent]) -> BTreeMap<u64, String> {
    run.iter()
        .filter_map(|e| match e {
            RunEvent::CycleSkipped(skipped) => Some((u64::from(skipped.n), skipped.reason.clone())),
            _ => None,
        })
        .collect()
}

/// The draft PR body.
pub(crate) fn pr_body(c: &Conductor<'_>) -> Result<String, LedgerError> {
    let events = c.journal.events()?;
    let plan = tdd_engine::git::Git::new(&c.work_tree)
        .text(["show", &format!("HEAD:{}", c.plan_path)])
        .unwrap_or_default();
    let checklist: Vec<&str> = plan.lines().filter(|l| l.starts_with("- [")).collect();
    let mut out = format!(
        "Closes #{}.\n\n{}\n\n## Steps\n\n{}\n",
        c.issue.number(),
        c.issue.body(),
        checklist.join("\n")
    );
    let run = run_events(c)?;
    if let Some(line) = baseline_line(&run) {
        out.push_str(&format!("\n{line}\n"));
    }
    let records = steps(&events);
    let skipped = skipped_steps(&run);
    for line in &checklist {
        let Some((n, title)) = line
            .get(6..)
            .and_then(|rest| rest.strip_prefix("Step "))
            .and_then(|rest| rest.split_once(": "))
        else {
            continue;
        };
        let Ok(n) = n.parse::<u64>() else { continue };
        if let Some(reason) = skipped.get(&n) {
            out.push_str(&format!("\n### Step {n}: {title}\n\nSkipped: {reason}\n"));
        } else if let Some(record) = records.get(&n) {
            render_step(&mut out, n, title, record);
        }
    }
    render_interruptions(&mut out, &events);
    out.push_str(&format!(
        "\n---\nconduct `{}` · engine run `{}` · every event behind this report is in the ledger (`tdd ledger path`, `tdd ledger verify`).\n",
        c.journal.conduct(),
        c.run_id.as_deref().unwrap_or("-")
    ));
    Ok(out)
}

/// Bails and stops that a resume got past, one line each; the run's bail in full
/// while no resume has followed it.
fn render_interruptions(out: &mut String, events: &[ConductorEvent]) {
    let mut earlier = Vec::new();
    let mut open: Option<&ConductorEvent> = None;
    for event in events {
        match event {
            ConductorEvent::Bailed(_) | ConductorEvent::Stopped(_) => open = Some(event),
            ConductorEvent::Resumed(_) => earlier.extend(open.take().and_then(interruption)),
            _ => {}
        }
    }
    if !earlier.is_empty() {
        out.push_str("\n## Interruptions (resumed)\n\n");
        out.push_str(&earlier.join("\n"));
        out.push('\n');
    }
    if let Some(ConductorEvent::Bailed(bailed)) = open {
        // Through a JSON value, so the keys come out sorted as the ledger stores them.
        let bail = serde_json::to_value(&bailed.bail)
            .and_then(|v| serde_json::to_string_pretty(&v))
            .unwrap_or_default();
        out.push_str(&format!("\n## Bailed\n\n```json\n{bail}\n```\n"));
    }
}

/// One line for a bail or a stop.
fn interruption(event: &ConductorEvent) -> Option<String> {
    match event {
        ConductorEvent::Bailed(bailed) => {
            let bail = &bailed.bail;
            let at = match (bail.step, bail.phase.as_deref()) {
                (Some(step), Some(phase)) => format!(" at step {step} {phase}"),
                (Some(step), None) => format!(" at step {step}"),
                _ => String::new(),
            };
            Some(format!(
                "- bailed `{}`{at}: {}",
                bail.cause.as_str(),
                bail.detail.lines().collect::<Vec<_>>().join(" ")
            ))
        }
        ConductorEvent::Stopped(stopped) => Some(format!("- stopped ({})", stopped.mode)),
        _ => None,
    }
}

/// The comment of step `n`.
pub(crate) fn step_comment(c: &Conductor<'_>, n: u32) -> Result<String, LedgerError> {
    let events = c.journal.events()?;
    let records = steps(&events);
    let mut out = String::new();
    if let Some(record) = records.get(&u64::from(n)) {
        render_step(&mut out, u64::from(n), "done", record);
    }
    Ok(out)
}

/// The comment of a bail: cause, class, where, what to do, the output tail.
pub(crate) fn bail_comment(bail: &Bail) -> String {
    format!(
        "**Bailed: `{}`** ({:?})\n\nStep: {} · phase: {}\n\n{}\n\nWhat to do: {}\n\n```\n{}\n```\n",
        bail.cause.as_str(),
        bail.class,
        bail.step.map_or("-".into(), |s| s.to_string()),
        bail.phase.as_deref().unwrap_or("-"),
        bail.detail,
        bail.action,
        bail.output_tail
    )
}
