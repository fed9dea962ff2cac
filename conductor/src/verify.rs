//! The blind verifier: its own scratch worktree at the phase's commit, a prompt built
//! only from `VerifierInput`, and a real work tree that must be byte-identical after.

use serde_json::json;
use tdd_engine::git::Git;
use tdd_engine::plan::PlannedCycle;
use tdd_engine::run::Phase;
use tdd_engine::run::Snapshot;
use tdd_leaves::Request;
use tdd_leaves::VerifierVerdict;
use tdd_prompts::CommitSha;
use tdd_prompts::Prompt;
use tdd_prompts::TestId;
use tdd_prompts::VerifierInput;

use crate::bail::Bail;
use crate::bail::BailCause;
use crate::conductor::Conductor;
use crate::error::ConductError;
use crate::error::Doing;
use crate::error::Halt;
use crate::events::ConductorEvent;
use crate::events::PhaseVerdict;
use crate::leaf::Who;
use crate::step::Timing;

/// Removes a verifier's scratch worktree, if it is there, and the build output its test
/// runs left in the ledger directory `state_dir` (a cargo target, a Go build cache: see
/// `CleanRoom::live_build_dir`), which would otherwise outlive it.
fn remove_scratch(
    work_tree: &std::path::Path,
    scratch: &std::path::Path,
    state_dir: &std::path::Path,
) {
    if !scratch.exists() {
        return;
    }
    if let Ok(canonical) = scratch.canonicalize() {
        tdd_engine::run::CleanRoom::of(state_dir, &canonical).remove_live_build();
    }
    // Best effort: a leftover scratch tree is harmless, and pruned the next time one
    // cannot be removed cleanly.
    let git = Git::new(work_tree);
    let removed = git
        .output([
            "worktree",
            "remove",
            "--force",
            &scratch.display().to_string(),
        ])
        .is_ok();
    if !removed {
        let _ = std::fs::remove_dir_all(scratch);
        let _ = git.output(["worktree", "prune"]);
    }
}

impl Conductor<'_> {
    /// The blind verifier's verdict on `commit`, recorded with its round.
    pub(crate) fn judge(
        &self,
        planned: &PlannedCycle,
        phase: Phase,
        commit: &str,
        base: &str,
        revisions: u32,
        timing: &mut Timing,
    ) -> Result<VerifierVerdict, Halt> {
        let (n, name) = (planned.n, phase.trailer());
        let verdict = self
            .verify(planned, phase, commit, base, revisions + 1, timing)
            .doing(|| format!("verifying {} of step {n}", name.to_uppercase()))?;
        self.journal
            .record(&ConductorEvent::PhaseVerdict(PhaseVerdict {
                step: n,
                phase: name.to_string(),
                commit: commit.to_string(),
                round: revisions,
                decision: verdict.decision,
                reason: verdict.reason.clone(),
                findings: verdict.findings.clone(),
                verifier: verdict.leaf_id.clone(),
            }))?;
        tdd_engine::failpoint::hit(&format!("conduct_after_verdict_{name}"));
        self.progress.event(
            "verdict",
            json!({ "step": n, "phase": name, "decision": verdict.decision }),
            &format!(
                "step {n} {name}: the verifier {}: {}",
                match verdict.decision {
                    tdd_leaves::Decision::Accept => "accepts",
                    tdd_leaves::Decision::Reject => "rejects",
                },
                verdict.reason
            ),
        );
        Ok(verdict)
    }

    /// The blind verifier of the phase's commit, in its own scratch worktree; the real
    /// work tree must be byte-identical afterwards.
    fn verify(
        &self,
        planned: &PlannedCycle,
        phase: Phase,
        commit: &str,
        base: &str,
        round: u32,
        timing: &mut Timing,
    ) -> Result<VerifierVerdict, Halt> {
        let (n, name) = (planned.n, phase.trailer());
        let _span = tracing::info_span!("verify", commit, round).entered();
        let git = Git::new(&self.work_tree);
        let input = VerifierInput::new(
            TestId::planned(planned),
            self.issue.spec_for(planned)?,
            CommitSha::resolve(&git, commit)?,
            Some(CommitSha::resolve(&git, base)?),
            phase,
        );
        let scratch = self.dir.join(format!("verify-s{n}-{name}-r{round}"));
        remove_scratch(&self.work_tree, &scratch, &self.location.dir);
        // The scratch worktree is made (and later removed) while the real tree is
        // scanned: git touches only its own metadata for it, never the real tree.
        let scratch_arg = scratch.display().to_string();
        let (before, added) = std::thread::scope(|scope| {
            let added = scope
                .spawn(|| git.output(["worktree", "add", "-q", "--detach", &scratch_arg, commit]));
            let before = Snapshot::scan(&self.work_tree);
            (before, added.join())
        });
        let before = before?;
        added.map_err(|_| ConductError::config("the worktree thread panicked"))??;
        let mut request = Request::new(Prompt::verifier(&input)?, self.issue.number(), n, &scratch);
        request.attempt = round;
        let result = self.run_leaf(Who::Verifier, request, n, name);
        let work_tree = self.work_tree.as_path();
        let state_dir = self.location.dir.as_path();
        let judged = Snapshot {
            tree: git.text(["rev-parse", "--verify", &format!("{commit}^{{tree}}")])?,
        };
        let (after, drift) = std::thread::scope(|scope| {
            // The checkout judged must still be the commit: what differs from it (test
            // code that rewrote a tracked file while the verifier ran it) was not judged.
            let drift = scope.spawn(|| {
                let drift = judged.tracked_drift(&scratch);
                remove_scratch(work_tree, &scratch, state_dir);
                drift
            });
            (Snapshot::scan(work_tree), drift.join())
        });
        let after = after?;
        let drift = drift.map_err(|_| ConductError::config("the scratch check panicked"))??;
        let (response, took) = result?;
        timing.leaf += took;
        if before.tree != after.tree {
            let changed: Vec<String> = before
                .changes_to(&self.work_tree, &after)?
                .into_iter()
                .map(|c| c.path)
                .collect();
            return Err(Bail::new(
                BailCause::VerifierModifiedTree,
                format!("verifier {} changed the real work tree: {}", response.leaf_id, changed.join(", ")),
                "the verifier provider is not read-only: fix its configuration (it must only read and run `tdd test`), then run `tdd conduct` again",
            )
            .at(n, name)
            .tail(&response.text)
            .into());
        }
        let ledger = tdd_engine::ledger::Ledger::open(&self.location.database)?;
        let verdict = tdd_leaves::verdict::verdict_of(&ledger, &response.leaf_id)?;
        let verdict = verdict.map(|v| not_judged_if_changed(v, commit, drift));
        verdict.ok_or_else(|| {
            Bail::new(
                BailCause::VerdictMissing,
                format!("verifier {} ended without a verdict", response.leaf_id),
                format!(
                    "read what the verifier printed with `tdd logs {}` (what it was told: `tdd leaves show {} --prompt`); it must end with `tdd verdict accept|reject`, then run `tdd conduct` again",
                    response.leaf_id, response.leaf_id
                ),
            )
            .at(n, name)
            .tail(&response.text)
            .into()
        })
    }
}

/// `verdict`, or a REJECT in its place when the verifier's checkout no longer held the
/// commit's files (`drift`) by the time it ended: a verdict on other bytes than the
/// commit's does not count, and code that rewrites tracked files while its tests run is
/// itself the finding.
fn not_judged_if_changed(
    mut verdict: VerifierVerdict,
    commit: &str,
    drift: Vec<String>,
) -> VerifierVerdict {
    if drift.is_empty() {
        return verdict;
    }
    let shown: Vec<&str> = drift.iter().take(10).map(String::as_str).collect();
    let more = drift.len().saturating_sub(shown.len());
    let listed = if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    };
    verdict.findings = vec![format!(
        "tracked files of the checkout being verified changed while it was verified ({listed}): the tests or the code must not rewrite files of the repository"
    )];
    let given = match verdict.decision {
        tdd_leaves::Decision::Accept => "ACCEPT",
        tdd_leaves::Decision::Reject => "REJECT",
    };
    verdict.reason = format!(
        "the verifier's {given} does not count: its checkout no longer held commit {commit}"
    );
    verdict.decision = tdd_leaves::Decision::Reject;
    verdict
}
