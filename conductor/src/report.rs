//! What the forge shows, drawn from the ledger: the draft PR body, a step's comment,
//! a bail's comment.

use std::collections::BTreeMap;
use std::path::Path;

use tdd_engine::ledger::Ledger;
use tdd_engine::ledger::LedgerError;
use tdd_engine::run::RunEvent;
use tdd_leaves::events::LeavesEvent;

use crate::bail::Bail;
use crate::conductor::Conductor;
use crate::events::ConductorEvent;
use crate::events::PhaseRecord;
use crate::events::PhaseVerdict;
use crate::events::StepDone;
use crate::forge::CommitStatus;
use crate::forge::StatusState;

/// The run report's header figures as markdown for the top of the draft PR, for the
/// conduct `conduct` of the ledger at `database` (its work tree `work_tree`); with
/// `complete`, every step is done although the run's end is not recorded yet. `None`
/// when they cannot be computed: the PR is written without them. The report crate,
/// which sits above this one, computes them from the ledger alone.
pub type Figures =
    fn(database: &Path, work_tree: &Path, conduct: &str, complete: bool) -> Option<String>;

/// Where a reviewer finds the run report, as the draft PR names it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ReportPlace {
    /// `report.html` in the run directory, written when the conduct ends.
    #[default]
    RunDirectory,
    /// An artifact of a GitHub Actions workflow run, uploaded as `tdd ci init github`'s
    /// workflow does ([`artifact_name`]).
    ActionsArtifact {
        /// The workflow run's page, where its artifacts are listed.
        run_url: String,
        /// The workflow run's id (`GITHUB_RUN_ID`).
        run_id: String,
        /// Its attempt (`GITHUB_RUN_ATTEMPT`).
        attempt: String,
    },
}

/// The name of the artifact that holds the run report of `issue` in the workflow run
/// `run_id`, attempt `attempt`: the name `tdd ci init github`'s workflow uploads under.
pub fn artifact_name(issue: u64, run_id: &str, attempt: &str) -> String {
    format!("tdd-issue-{issue}-run-{run_id}-{attempt}")
}

/// One step's record, as the ledger tells it (entries of a reset attempt dropped).
#[derive(Debug, Default)]
struct StepRecord {
    phases: Vec<PhaseRecord>,
    verdicts: Vec<PhaseVerdict>,
    done: Option<StepDone>,
    /// What the developers' hooks denied or undid during the step, one line each.
    hooks: Vec<String>,
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

/// Adds to each step of `records` what the agent CLI's hooks did during its cycle
/// (`run`: the engine run's events): writes denied before they happened, shell
/// commands' changes to locked files undone right after, turns kept going.
fn add_hooks(records: &mut BTreeMap<u64, StepRecord>, run: &[RunEvent]) {
    for event in run {
        let (n, phase, line) = match event {
            RunEvent::HookDenied(d) if d.tool == tdd_engine::run::STOP_TOOL => (
                d.n,
                &d.phase,
                format!(
                    "the hook kept the developer going ({}): its target was not where the gate wants it",
                    d.harness
                ),
            ),
            RunEvent::HookDenied(d) => (
                d.n,
                &d.phase,
                format!(
                    "the hook denied a write to {} before it happened ({} {})",
                    d.paths.join(", "),
                    d.harness,
                    d.tool
                ),
            ),
            RunEvent::HookReverted(r) => (
                r.n,
                &r.phase,
                format!(
                    "the hook undid a shell command's change to {} right after it ran ({} {})",
                    r.restored
                        .iter()
                        .chain(&r.removed)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", "),
                    r.harness,
                    r.tool
                ),
            ),
            _ => continue,
        };
        let Some(record) = n.and_then(|n| records.get_mut(&u64::from(n))) else {
            continue;
        };
        let phase = phase.as_deref().unwrap_or("").to_uppercase();
        let line = if phase.is_empty() {
            format!("- {line}")
        } else {
            format!("- {phase}: {line}")
        };
        record.hooks.push(line);
    }
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
    render_integrity(out, &record.phases, &record.hooks);
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

/// The "Integrity events" of a step's accepted phases, and what the hooks did during it
/// (`hooks`, one line each), when there are any.
fn render_integrity(out: &mut String, phases: &[PhaseRecord], hooks: &[String]) {
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
    integrity.extend(hooks.iter().cloned());
    if !integrity.is_empty() {
        out.push_str("\nIntegrity events:\n\n");
        out.push_str(&integrity.join("\n"));
        out.push('\n');
    }
}

/// The engine run's own events, read as the engine's type.
fn run_events(c: &Conductor<'_>) -> Result<Vec<RunEvent>, LedgerError> {
    let Some(run_id) = c.cursor.run_id() else {
        return Ok(Vec::new());
    };
    let mut events = Vec::new();
    for event in Ledger::open(c.journal.database())?.events(Some(run_id))? {
        events.extend(tdd_engine::ledger::decode::<RunEvent>(
            &event,
            &crate::EVENT_KINDS,
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

/// The draft PR body; it says "Closes #n" only once every step is done (`complete`),
/// and before that only mentions the issue.
pub(crate) fn pr_body(c: &Conductor<'_>, complete: bool) -> Result<String, LedgerError> {
    let events = c.journal.events()?;
    let plan = tdd_engine::git::Git::new(&c.work_tree)
        .text(["show", &format!("refs/heads/{}:{}", c.branch, c.plan_path)])
        .unwrap_or_default();
    let checklist: Vec<&str> = plan.lines().filter(|l| l.starts_with("- [")).collect();
    let figures = (c.options.pr_figures)(
        c.journal.database(),
        &c.work_tree,
        c.journal.conduct(),
        complete,
    )
    .map(|figures| format!("## Run\n\n{figures}\n"))
    .unwrap_or_default();
    let mut out = format!(
        "{} #{}.\n\n{}\n\n{figures}## Steps ({})\n\n{}\n",
        if complete { "Closes" } else { "Work on" },
        c.issue.number(),
        c.issue.body(),
        report_link(c),
        checklist.join("\n")
    );
    let run = run_events(c)?;
    if let Some(line) = baseline_line(&run) {
        out.push_str(&format!("\n{line}\n"));
    }
    let mut records = steps(&events);
    add_hooks(&mut records, &run);
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
    if let Some(line) = sandbox_line(c)? {
        out.push_str(&format!("\n{line}\n"));
    }
    out.push_str(&format!("\n**Run report:** {}\n", report_where(c)));
    out.push_str(&format!(
        "\n---\nconduct `{}` · engine run `{}` · every event behind this report is in the ledger (`tdd ledger path`, `tdd ledger verify`).\n",
        c.journal.conduct(),
        c.cursor.run_id().unwrap_or("-")
    ));
    Ok(out)
}

/// The step table's link to the run report.
fn report_link(c: &Conductor<'_>) -> String {
    match &c.options.report_place {
        ReportPlace::RunDirectory => {
            format!("run report: `{}`", c.dir.join("report.html").display())
        }
        ReportPlace::ActionsArtifact {
            run_url,
            run_id,
            attempt,
        } => format!(
            "[run report]({run_url}#artifacts): `report.html` in the artifact `{}`",
            artifact_name(c.issue.number(), run_id, attempt)
        ),
    }
}

/// Where the run report is, in a sentence.
fn report_where(c: &Conductor<'_>) -> String {
    let again = format!(
        "`tdd report --run {}` writes it again wherever this repository's ledger is",
        c.journal.conduct()
    );
    match &c.options.report_place {
        ReportPlace::RunDirectory => format!(
            "the timeline, the tests by checkpoint and the evidence of every gate are in `report.html` in the run directory (`{}`) once the run ends; {again}.",
            c.dir.display()
        ),
        ReportPlace::ActionsArtifact {
            run_url,
            run_id,
            attempt,
        } => format!(
            "the timeline, the tests by checkpoint and the evidence of every gate are in `report.html` in the artifact `{}` of [the workflow run]({run_url}) once the job ends; {again}.",
            artifact_name(c.issue.number(), run_id, attempt)
        ),
    }
}

/// The "Sandbox" line: how many of the issue's leaves ran under each confinement
/// level, from their `leaf_started` events. `None` when no leaf had one recorded
/// (`[sandbox]` not configured).
fn sandbox_line(c: &Conductor<'_>) -> Result<Option<String>, LedgerError> {
    let marker = format!("-i{}-", c.issue.number());
    let mut levels: BTreeMap<String, usize> = BTreeMap::new();
    let ledger = Ledger::open(c.journal.database())?;
    for (event, typed) in ledger.typed::<LeavesEvent>(None, &["leaf_started"])? {
        let LeavesEvent::LeafStarted(started) = typed else {
            continue;
        };
        let ours = event.run_id.is_none() || event.run_id.as_deref() == c.cursor.run_id();
        if ours && started.leaf_id.contains(&marker) {
            let level = started.sandbox.unwrap_or_else(|| "not confined".into());
            *levels.entry(level).or_default() += 1;
        }
    }
    if levels.keys().all(|level| level == "not confined") {
        return Ok(None);
    }
    let parts: Vec<String> = levels
        .iter()
        .map(|(level, n)| format!("{n} {} {level}", if *n == 1 { "leaf" } else { "leaves" }))
        .collect();
    Ok(Some(format!("**Sandbox:** {}.", parts.join(", "))))
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

/// The statuses of the phase commits of finished or running steps: `success` for
/// each phase the engine accepted and the verifier accepted. A rejected commit was
/// rolled back off the branch, so it gets none.
pub(crate) fn statuses(c: &Conductor<'_>) -> Result<Vec<CommitStatus>, LedgerError> {
    let events = c.journal.events()?;
    let mut out = Vec::new();
    for (n, record) in steps(&events) {
        for p in &record.phases {
            let (sha, phase) = (p.commit.as_str(), p.phase.as_str());
            let accepted = record
                .verdicts
                .iter()
                .any(|v| v.commit == sha && v.decision == tdd_leaves::Decision::Accept);
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
    let mut records = steps(&events);
    add_hooks(&mut records, &run_events(c)?);
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
    let commit = record.phases.last()?.commit.as_str();
    let format = "--format=%(trailers:key=TDD-Ledger,valueonly)";
    let head = tdd_engine::git::Git::new(&c.work_tree)
        .text(["log", "-1", format, commit])
        .ok()?;
    let head = head.trim();
    (!head.is_empty()).then(|| {
        format!(
            "\nLedger chain head at {}: `{head}` (`tdd ledger verify` checks the ledger against it).\n",
            short(commit)
        )
    })
}

/// The comment of a bail: cause, class, where, what to do, the output tail.
pub(crate) fn bail_comment(bail: &Bail) -> String {
    format!(
        "**Bailed: `{}`** ({})\n\nStep: {} · phase: {}\n\n{}\n\nWhat to do: {}\n\n```\n{}\n```\n",
        bail.cause.as_str(),
        bail.class.words(),
        bail.step.map_or("-".into(), |s| s.to_string()),
        bail.phase.as_deref().unwrap_or("-"),
        bail.detail,
        bail.action,
        bail.output_tail
    )
}
