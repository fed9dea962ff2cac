//! Run metrics: how a plan went, in counts and rates, for one run or summed over the
//! runs of one plan contract (runs of different plans do not add up).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::RunReport;
use crate::model::Tokens;

/// What leaves are grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    /// The provider (`claude`, `codex`, `scripted`, ...).
    Provider,
    /// The model their command line names (`unnamed` where none).
    Model,
}

/// The metrics of one run, or of several runs of one plan contract.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Metrics {
    /// The engine runs counted.
    pub runs: Vec<String>,
    /// The plan contract they share (the plan's blob id).
    pub contract: Option<String>,
    /// Steps the plans declared, closed and skipped.
    pub steps_declared: usize,
    /// Closed.
    pub steps_closed: usize,
    /// Skipped.
    pub steps_skipped: usize,
    /// Targets that passed before any implementation, per step declared.
    pub red_first_violation_rate: f64,
    /// Developer leaves per step, by phase (`red`, `green`, `refactor`).
    pub attempts_per_phase: BTreeMap<String, f64>,
    /// Revise rounds in all.
    pub revise_rounds: u32,
    /// Tool calls an agent CLI's hook denied before they ran.
    pub hook_denials: usize,
    /// The share of verdicts that accepted, by phase.
    pub accept_rate: BTreeMap<String, f64>,
    /// Bails by cause.
    pub bails: BTreeMap<String, usize>,
    /// Leaves by how they ended (`exited`, `kill_stuck`, ...).
    pub leaves_by_exit: BTreeMap<String, usize>,
    /// Milliseconds in the engine's own runs of the suites and targets (a verifier's
    /// runs count in its leaf's time).
    pub suite_ms: u64,
    /// Milliseconds in leaves.
    pub agent_ms: u64,
    /// The engine's share of the two.
    pub suite_share: f64,
    /// Tokens and cost by step (step 0: the planner).
    pub per_step: BTreeMap<u32, Spend>,
    /// Leaves grouped as asked (`--by`).
    pub groups: BTreeMap<String, Spend>,
}

/// What a group of leaves took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Spend {
    /// Leaves.
    pub leaves: usize,
    /// Their wall time.
    pub ms: u64,
    /// Their tokens.
    pub tokens: Tokens,
    /// Their cost, where reported.
    pub cost_usd: Option<f64>,
}

impl Spend {
    fn add(&mut self, leaf: &crate::model::Leaf) {
        self.leaves += 1;
        self.ms += leaf.duration_ms.unwrap_or(0);
        if let Some(t) = leaf.tokens {
            self.tokens.input += t.input;
            self.tokens.cache_read += t.cache_read;
            self.tokens.cache_write += t.cache_write;
            self.tokens.output += t.output;
        }
        if let Some(c) = leaf.cost_usd {
            self.cost_usd = Some(self.cost_usd.unwrap_or(0.0) + c);
        }
    }
}

/// The metrics of `reports` (runs of one plan contract), leaves grouped by `by`.
pub fn of(reports: &[RunReport], by: Option<GroupBy>) -> Metrics {
    let mut m = Metrics {
        contract: reports.first().and_then(|r| r.header.contract.clone()),
        ..Metrics::default()
    };
    let mut red_first = 0;
    let mut attempts: BTreeMap<String, usize> = BTreeMap::new();
    let mut verdicts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for r in reports {
        m.runs.extend(r.header.run_id.clone());
        m.steps_declared += r.steps.len();
        m.steps_closed += r.steps.iter().filter(|s| s.state == "closed").count();
        m.steps_skipped += r.steps.iter().filter(|s| s.state == "skipped").count();
        m.revise_rounds += r.steps.iter().map(|s| s.revisions).sum::<u32>();
        red_first += r.honesty.iter().filter(|e| e.kind == "red first").count();
        m.hook_denials += r.marks.iter().filter(|e| e.kind == "hook_denied").count();
        if let Some(cause) = &r.header.bail_cause {
            *m.bails.entry(cause.clone()).or_default() += 1;
        }
        // A verifier's own runs are part of its leaf's time.
        m.suite_ms += r
            .runs
            .iter()
            .filter(|run| run.purpose != crate::compute::VERIFIER_RUN)
            .map(|run| run.wall_ms)
            .sum::<u64>();
        for leaf in &r.leaves {
            m.agent_ms += leaf.duration_ms.unwrap_or(0);
            let class = leaf.exit_class.clone().unwrap_or_else(|| "running".into());
            *m.leaves_by_exit.entry(class).or_default() += 1;
            if leaf.role == "developer" {
                *attempts.entry(leaf.phase.clone()).or_default() += 1;
            }
            if let Some(verdict) = &leaf.verdict {
                let entry = verdicts.entry(leaf.phase.clone()).or_default();
                if verdict.starts_with("accept") {
                    entry.0 += 1;
                }
                entry.1 += 1;
            }
            m.per_step.entry(leaf.step).or_default().add(leaf);
            if let Some(by) = by {
                let key = match by {
                    GroupBy::Provider => leaf.provider.clone(),
                    GroupBy::Model => leaf.model.clone().unwrap_or_else(|| "unnamed".into()),
                };
                m.groups.entry(key).or_default().add(leaf);
            }
        }
    }
    let steps = m.steps_declared.max(1) as f64;
    m.red_first_violation_rate = red_first as f64 / steps;
    m.attempts_per_phase = attempts
        .into_iter()
        .map(|(phase, n)| (phase, n as f64 / steps))
        .collect();
    m.accept_rate = verdicts
        .into_iter()
        .map(|(phase, (accepted, all))| (phase, accepted as f64 / all.max(1) as f64))
        .collect();
    let both = (m.suite_ms + m.agent_ms).max(1) as f64;
    m.suite_share = m.suite_ms as f64 / both;
    m
}

/// `metrics` as text for a terminal.
pub fn text(metrics: &Metrics) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let contract = metrics
        .contract
        .as_deref()
        .map(|c| format!(" of plan contract {}", &c[..c.len().min(12)]))
        .unwrap_or_default();
    let _ = writeln!(out, "{} run(s){contract}", metrics.runs.len());
    let _ = writeln!(
        out,
        "steps: {} declared, {} closed, {} skipped",
        metrics.steps_declared, metrics.steps_closed, metrics.steps_skipped
    );
    let _ = writeln!(
        out,
        "RED-first violations: {:.0}% of steps",
        metrics.red_first_violation_rate * 100.0
    );
    let pairs = |map: &BTreeMap<String, f64>, pct: bool| {
        if map.is_empty() {
            return "none".to_string();
        }
        map.iter()
            .map(|(k, v)| {
                if pct {
                    format!("{k} {:.0}%", v * 100.0)
                } else {
                    format!("{k} {v:.2}")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(
        out,
        "developer attempts per step: {}",
        pairs(&metrics.attempts_per_phase, false)
    );
    let _ = writeln!(out, "revise rounds: {}", metrics.revise_rounds);
    let _ = writeln!(out, "tool calls denied by a hook: {}", metrics.hook_denials);
    let _ = writeln!(
        out,
        "verdicts accepted: {}",
        pairs(&metrics.accept_rate, true)
    );
    let counts = |map: &BTreeMap<String, usize>| {
        if map.is_empty() {
            return "none".to_string();
        }
        map.iter()
            .map(|(k, v)| format!("{} {v}", k.replace('_', " ")))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(out, "bails: {}", counts(&metrics.bails));
    let _ = writeln!(
        out,
        "leaves by how they ended: {}",
        counts(&metrics.leaves_by_exit)
    );
    let _ = writeln!(
        out,
        "time: {} in the engine's runs, {} in leaves ({:.0}% engine)",
        crate::timeline::seconds(metrics.suite_ms),
        crate::timeline::seconds(metrics.agent_ms),
        metrics.suite_share * 100.0
    );
    let spend = |label: String, s: &Spend| {
        format!(
            "{label}: {} leaves, {}, tokens {} in / {} out, {}",
            s.leaves,
            crate::timeline::seconds(s.ms),
            s.tokens.input + s.tokens.cache_read + s.tokens.cache_write,
            s.tokens.output,
            s.cost_usd
                .map_or_else(|| "cost not reported".to_string(), |c| format!("${c:.4}"))
        )
    };
    for (step, s) in &metrics.per_step {
        let _ = writeln!(out, "{}", spend(format!("step {step}"), s));
    }
    for (group, s) in &metrics.groups {
        let _ = writeln!(out, "{}", spend(group.clone(), s));
    }
    out
}
