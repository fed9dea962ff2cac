//! The friction log: the run as markdown a person reads top to bottom, with where the
//! plan and the run parted, what each step took and what the engine had to stop.

use std::fmt::Write as _;

use crate::model::RunReport;
use crate::model::Step;
use crate::timeline::seconds;

/// The friction log of `report`.
pub fn render(report: &RunReport) -> String {
    let h = &report.header;
    let mut out = String::new();
    let _ = match h.issue {
        Some(n) => writeln!(out, "# Friction log: issue #{n} in {}\n", h.repository),
        None => writeln!(out, "# Friction log: {}\n", h.repository),
    };
    let _ = writeln!(
        out,
        "Run `{}`{}{}. Outcome: **{}**{}.\n",
        h.run_id.as_deref().unwrap_or("-"),
        h.conduct
            .as_deref()
            .map(|c| format!(" (conduct `{c}`)"))
            .unwrap_or_default(),
        match (&h.base, &h.head) {
            (Some(b), Some(e)) => format!(", from `{}` to `{}`", short(b), short(e)),
            _ => String::new(),
        },
        h.outcome,
        h.outcome_detail
            .as_deref()
            .map(|d| format!(": {d}"))
            .unwrap_or_default()
    );
    fidelity(&mut out, &report.steps);
    for step in &report.steps {
        step_section(&mut out, report, step);
    }
    if let Some(run_notes) = report.steps.iter().find(|s| s.n == 0) {
        for note in &run_notes.notes {
            let _ = writeln!(out, "- note: {note}");
        }
    }
    time_table(&mut out, report);
    out
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(10)]
}

fn fidelity(out: &mut String, steps: &[Step]) {
    let count = |state: &str| steps.iter().filter(|s| s.state == state).count();
    let never = steps.iter().filter(|s| s.state == "not started").count();
    let _ = writeln!(out, "## Plan fidelity\n");
    let _ = writeln!(
        out,
        "| declared | delivered | skipped | never reached | in progress |"
    );
    let _ = writeln!(out, "| --- | --- | --- | --- | --- |");
    let delivered = count("closed");
    let skipped = count("skipped");
    let _ = writeln!(
        out,
        "| {} | {delivered} | {skipped} | {never} | {} |\n",
        steps.len(),
        steps.len() - delivered - skipped - never
    );
    for s in steps.iter().filter(|s| s.state == "skipped") {
        let _ = writeln!(
            out,
            "- step {} ({}) skipped: {}",
            s.n,
            s.title,
            s.skipped_because.as_deref().unwrap_or("no reason recorded")
        );
    }
    for s in steps.iter().filter(|s| s.state == "not started") {
        let _ = writeln!(out, "- step {} ({}) never reached", s.n, s.title);
    }
}

/// Runs, tests passed, tests failed and milliseconds of one purpose's runs.
type Tally = (usize, u64, u64, u64);

fn step_section(out: &mut String, report: &RunReport, step: &Step) {
    let _ = writeln!(
        out,
        "\n## Step {}: {} ({})\n",
        step.n, step.title, step.state
    );
    let _ = writeln!(out, "- target: {}", quoted(&step.targets));
    // What the engine ran, by what it ran for.
    let mut by_purpose: Vec<(&str, Tally)> = Vec::new();
    for run in report.runs.iter().filter(|r| r.step == step.n) {
        let at = match by_purpose.iter().position(|(p, _)| *p == run.purpose) {
            Some(at) => at,
            None => {
                by_purpose.push((&run.purpose, Default::default()));
                by_purpose.len() - 1
            }
        };
        let entry = &mut by_purpose[at].1;
        entry.0 += 1;
        entry.1 += run.passed;
        entry.2 += run.failed;
        entry.3 += run.wall_ms;
    }
    for (purpose, (runs, passed, failed, ms)) in &by_purpose {
        let _ = writeln!(
            out,
            "- {purpose}: {runs} run(s), {passed} passed, {failed} failed, {}",
            seconds(*ms)
        );
    }
    for e in report.honesty.iter().filter(|e| e.step == step.n) {
        let mark = if e.ok { "" } else { " ⚠" };
        let _ = writeln!(out, "- {} {}{mark}: {}", e.phase, e.kind, e.text);
    }
    if !step.commits.is_empty() {
        let _ = writeln!(out, "- commits: {}", quoted(&step.commits));
    }
    let _ = writeln!(out, "- revise rounds: {}", step.revisions);
    for note in &step.notes {
        let _ = writeln!(out, "- note: {note}");
    }
}

fn quoted(items: &[String]) -> String {
    if items.is_empty() {
        return "none".into();
    }
    items
        .iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn time_table(out: &mut String, report: &RunReport) {
    let _ = writeln!(out, "\n## Time and cost\n");
    let _ = writeln!(out, "| step | total | agents | engine | other | cost |");
    let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- |");
    let cost =
        |c: Option<f64>| c.map_or_else(|| "not reported".to_string(), |c| format!("${c:.4}"));
    for s in &report.steps {
        match s.time {
            Some(t) => {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} |",
                    s.n,
                    seconds(t.total_ms),
                    seconds(t.leaf_ms),
                    seconds(t.engine_ms),
                    seconds(t.overhead_ms),
                    cost(s.cost_usd)
                );
            }
            None => {
                let _ = writeln!(out, "| {} | - | - | - | - | {} |", s.n, cost(s.cost_usd));
            }
        }
    }
    let h = &report.header;
    let _ = writeln!(
        out,
        "| run | {} | | | | {} |\n\nTokens: {} input, {} cache read, {} cache write, {} output.",
        seconds(h.wall_ms),
        cost(h.cost_usd),
        h.tokens.input,
        h.tokens.cache_read,
        h.tokens.cache_write,
        h.tokens.output
    );
}
