//! What the forge shows, drawn from the ledger: the draft PR body, a step's comment,
//! a bail's comment.

use std::collections::BTreeMap;

use serde_json::Value;
use tdd_engine::ledger::Ledger;
use tdd_engine::ledger::LedgerError;

use crate::bail::Bail;
use crate::conductor::Conductor;
use crate::forge::CommitStatus;
use crate::forge::StatusState;

/// One step's record, as the ledger tells it (entries of a reset attempt dropped).
#[derive(Debug, Default)]
struct StepRecord {
    phases: Vec<Value>,
    verdicts: Vec<Value>,
    done: Option<Value>,
}

fn steps(events: &[(String, Value)]) -> BTreeMap<u64, StepRecord> {
    let mut steps: BTreeMap<u64, StepRecord> = BTreeMap::new();
    for (kind, p) in events {
        let Some(n) = p["step"].as_u64() else {
            continue;
        };
        let entry = steps.entry(n).or_default();
        match kind.as_str() {
            "step_reset" => *entry = StepRecord::default(),
            "conduct_phase" => entry.phases.push(p.clone()),
            "phase_verdict" => entry.verdicts.push(p.clone()),
            "conduct_step_done" => entry.done = Some(p.clone()),
            _ => {}
        }
    }
    steps
}

fn short(sha: &Value) -> String {
    sha.as_str().unwrap_or("-").chars().take(10).collect()
}

fn secs(ms: &Value) -> String {
    format!("{:.1} s", ms.as_f64().unwrap_or(0.0) / 1000.0)
}

fn list(v: &Value) -> String {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

fn render_step(out: &mut String, n: u64, title: &str, record: &StepRecord) {
    out.push_str(&format!("\n### Step {n}: {title}\n\n"));
    out.push_str("| phase | commit | revise rounds | leaf time | engine time | cost |\n|---|---|---|---|---|---|\n");
    for p in &record.phases {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | ${:.4} |\n",
            p["phase"].as_str().unwrap_or("?").to_uppercase(),
            short(&p["commit"]),
            p["revisions"],
            secs(&p["leaf_ms"]),
            secs(&p["engine_ms"]),
            p["cost_usd"].as_f64().unwrap_or(0.0)
        ));
    }
    out.push_str("\nVerifier verdicts:\n\n");
    for v in &record.verdicts {
        let findings = list(&v["findings"]);
        out.push_str(&format!(
            "- {} {} (commit {}): {}{}\n",
            v["phase"].as_str().unwrap_or("?").to_uppercase(),
            v["decision"].as_str().unwrap_or("?").to_uppercase(),
            short(&v["commit"]),
            v["reason"].as_str().unwrap_or_default(),
            if findings.is_empty() {
                String::new()
            } else {
                format!(" — findings: {findings}")
            }
        ));
    }
    let mut integrity = Vec::new();
    for p in &record.phases {
        let phase = p["phase"].as_str().unwrap_or("?").to_uppercase();
        let reverted = list(&p["reverted"]);
        if !reverted.is_empty() {
            let what = if phase == "RED" {
                "implementation during RED"
            } else {
                "test edited outside RED"
            };
            integrity.push(format!("- {phase}: {what}: the engine reverted {reverted}"));
        }
        let undeclared = list(&p["undeclared"]);
        if !undeclared.is_empty() {
            integrity.push(format!(
                "- {phase}: undeclared files left uncommitted: {undeclared}"
            ));
        }
        if p["red_first_violation"] == true {
            integrity.push(format!("- {phase}: the target passed on arrival"));
        }
    }
    if !integrity.is_empty() {
        out.push_str("\nIntegrity events:\n\n");
        out.push_str(&integrity.join("\n"));
        out.push('\n');
    }
    if let Some(done) = &record.done {
        out.push_str(&format!(
            "\nStep time {}: leaves {}, engine {}, conductor {}.\n",
            secs(&done["total_ms"]),
            secs(&done["leaf_ms"]),
            secs(&done["engine_ms"]),
            secs(&done["overhead_ms"])
        ));
    }
}

/// The "Baseline" line of the PR body: the failures the engine run accepted at baseline
/// because `known_failures` declares them, and the entries that matched no failure.
/// `None` when the baseline was plain green with nothing declared.
fn baseline_line(c: &Conductor<'_>) -> Result<Option<String>, LedgerError> {
    let Some(run_id) = c.run_id.as_deref() else {
        return Ok(None);
    };
    let captured =
        Ledger::open(c.journal.database())?.events_of_kind(Some(run_id), "baseline_captured")?;
    let mut declared = Vec::new();
    let mut unmatched = Vec::new();
    for event in &captured {
        let project = event.payload["project"].as_str().unwrap_or("?");
        let ids = |key: &str| -> Vec<String> {
            event.payload[key]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        declared.extend(ids("declared").into_iter().map(|id| format!("`{id}`")));
        unmatched.extend(
            ids("unmatched_known_failures")
                .into_iter()
                .map(|entry| format!("`{entry}` ({project})")),
        );
    }
    if declared.is_empty() && unmatched.is_empty() {
        return Ok(None);
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
    Ok(Some(line))
}

/// The steps skipped by hand in the engine run (`tdd cycle skip`), with their reasons.
fn skipped_steps(c: &Conductor<'_>) -> Result<BTreeMap<u64, String>, LedgerError> {
    let Some(run_id) = c.run_id.as_deref() else {
        return Ok(BTreeMap::new());
    };
    let ledger = tdd_engine::ledger::Ledger::open(&c.location.database)?;
    Ok(ledger
        .events_of_kind(Some(run_id), "cycle_skipped")?
        .into_iter()
        .filter_map(|e| {
            let n = e.payload["n"].as_u64()?;
            Some((n, e.payload["reason"].as_str().unwrap_or("-").to_string()))
        })
        .collect())
}

/// The draft PR body; it says "Closes #n" only once every step is done (`complete`),
/// and before that only mentions the issue.
pub(crate) fn pr_body(c: &Conductor<'_>, complete: bool) -> Result<String, LedgerError> {
    let events = c.journal.events()?;
    let plan = tdd_engine::git::Git::new(&c.work_tree)
        .text(["show", &format!("refs/heads/{}:{}", c.branch, c.plan_path)])
        .unwrap_or_default();
    let checklist: Vec<&str> = plan.lines().filter(|l| l.starts_with("- [")).collect();
    let mut out = format!(
        "{} #{}.\n\n{}\n\n## Steps\n\n{}\n",
        if complete { "Closes" } else { "Work on" },
        c.issue.number(),
        c.issue.body(),
        checklist.join("\n")
    );
    if let Some(line) = baseline_line(c)? {
        out.push_str(&format!("\n{line}\n"));
    }
    let records = steps(&events);
    let skipped = skipped_steps(c)?;
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
fn render_interruptions(out: &mut String, events: &[(String, Value)]) {
    let mut earlier = Vec::new();
    let mut open: Option<&(String, Value)> = None;
    for event in events {
        match event.0.as_str() {
            "conduct_bailed" | "conduct_stopped" => open = Some(event),
            "conduct_resumed" => earlier.extend(open.take().map(interruption)),
            _ => {}
        }
    }
    if !earlier.is_empty() {
        out.push_str("\n## Interruptions (resumed)\n\n");
        out.push_str(&earlier.join("\n"));
        out.push('\n');
    }
    if let Some((_, bail)) = open.filter(|(k, _)| k == "conduct_bailed") {
        out.push_str(&format!(
            "\n## Bailed\n\n```json\n{}\n```\n",
            serde_json::to_string_pretty(&bail["bail"]).unwrap_or_default()
        ));
    }
}

/// One line for a bail or a stop.
fn interruption((kind, p): &(String, Value)) -> String {
    if kind == "conduct_bailed" {
        let at = match (p["bail"]["step"].as_u64(), p["bail"]["phase"].as_str()) {
            (Some(step), Some(phase)) => format!(" at step {step} {phase}"),
            (Some(step), None) => format!(" at step {step}"),
            _ => String::new(),
        };
        let detail = p["bail"]["detail"].as_str().unwrap_or_default();
        format!(
            "- bailed `{}`{at}: {}",
            p["bail"]["cause"].as_str().unwrap_or("?"),
            detail.lines().collect::<Vec<_>>().join(" ")
        )
    } else {
        format!("- stopped ({})", p["mode"].as_str().unwrap_or("?"))
    }
}

/// The statuses of the phase commits of finished or running steps: `success` for
/// each phase the engine accepted and the verifier accepted. A rejected commit was
/// rolled back off the branch, so it gets none.
pub(crate) fn statuses(c: &Conductor<'_>) -> Result<Vec<CommitStatus>, LedgerError> {
    let events = c.journal.events()?;
    let mut out = Vec::new();
    for (n, record) in steps(&events) {
        for p in &record.phases {
            let (Some(sha), Some(phase)) = (p["commit"].as_str(), p["phase"].as_str()) else {
                continue;
            };
            let accepted = record
                .verdicts
                .iter()
                .any(|v| v["commit"] == sha && v["decision"] == "accept");
            if accepted {
                out.push(CommitStatus {
                    sha: sha.to_string(),
                    context: format!("tdd/{phase}"),
                    state: StatusState::Success,
                    description: format!(
                        "step {n} {}: accepted by the engine and the verifier",
                        phase.to_uppercase()
                    ),
                });
            }
        }
    }
    Ok(out)
}

/// The run's comment: the branch, the plan's steps and where the run stands.
pub(crate) fn run_comment(c: &Conductor<'_>, status: &str) -> String {
    let plan = tdd_engine::git::Git::new(&c.work_tree)
        .text(["show", &format!("refs/heads/{}:{}", c.branch, c.plan_path)])
        .unwrap_or_default();
    let steps: Vec<String> = plan
        .lines()
        .filter(|l| l.starts_with("- ["))
        .map(|l| format!("- {}", l.get(6..).unwrap_or(l)))
        .collect();
    format!(
        "**tdd conduct** works on this issue on the branch `{}`.\n\n**Status:** {status}\n\nPlan ({} step{}; each goes through RED, GREEN and REFACTOR with a blind verifier after each phase):\n\n{}\n\nEach step reports in its own comment below; the draft PR follows every step.\n",
        c.branch,
        steps.len(),
        if steps.len() == 1 { "" } else { "s" },
        steps.join("\n")
    )
}

/// The comment of a stop: its mode and what to do.
pub(crate) fn stop_comment(mode: &str) -> String {
    format!(
        "**Stopped** ({mode}). Finished steps keep their commits; run `tdd conduct` again to resume where it stopped.\n"
    )
}

/// The comment of step `n`.
pub(crate) fn step_comment(c: &Conductor<'_>, n: u32) -> Result<String, LedgerError> {
    let events = c.journal.events()?;
    let records = steps(&events);
    let mut out = String::new();
    if let Some(record) = records.get(&u64::from(n)) {
        render_step(&mut out, u64::from(n), "done", record);
        if let Some(line) = chain_head_line(c, record) {
            out.push_str(&line);
        }
    }
    Ok(out)
}

/// The ledger's chain head as the step's last phase commit anchors it (its `TDD-Ledger`
/// trailer), so a reader of the thread can check the ledger against it later. Fixed by
/// the commit: a comment rendered again later says the same.
fn chain_head_line(c: &Conductor<'_>, record: &StepRecord) -> Option<String> {
    let commit = record.phases.last()?["commit"].as_str()?;
    let format = "--format=%(trailers:key=TDD-Ledger,valueonly)";
    let head = tdd_engine::git::Git::new(&c.work_tree)
        .text(["log", "-1", format, commit])
        .ok()?;
    let head = head.trim();
    (!head.is_empty()).then(|| {
        format!(
            "\nLedger chain head at {}: `{head}` (`tdd ledger verify` checks the ledger against it).\n",
            short(&serde_json::Value::String(commit.to_string()))
        )
    })
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
