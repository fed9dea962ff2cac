//! The page: one HTML file with its style inline, no script, no external asset, and a
//! content security policy that forbids every load, so it opens from `file://` and
//! reaches nothing. The report's data is embedded as JSON for re-rendering.

use maud::DOCTYPE;
use maud::Markup;
use maud::PreEscaped;
use maud::html;

use crate::model::RunReport;
use crate::timeline::seconds;

/// The page's style.
const STYLE: &str = include_str!("report.css");

/// The content security policy: nothing is loaded from anywhere; inline style only.
const POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:";

/// The whole page of `report`.
pub fn page(report: &RunReport) -> String {
    let h = &report.header;
    let title = match h.issue {
        Some(n) => format!("tdd run report: issue #{n} in {}", h.repository),
        None => format!("tdd run report: {}", h.repository),
    };
    let data = serde_json::to_string(report)
        .unwrap_or_default()
        // Nothing in the data may close the element that holds it.
        .replace("</", "<\\/");
    let markup: Markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="Content-Security-Policy" content=(POLICY);
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                h1 { (title) }
                (header(report))
                h2 { "Timeline" }
                p class="legend" {
                    span class="key role-planner" { "planner" } " "
                    span class="key role-developer" { "developer" } " "
                    span class="key role-verifier" { "verifier" } " "
                    span class="key run" { "engine run" } " "
                    span class="key failed" { "failed" } " · marks: "
                    span class="key mark-accept" { "accept" } " "
                    span class="key mark-reject" { "reject" } " "
                    span class="key mark-refused" { "refused" } " "
                    span class="key mark-reverted" { "reverted" } " "
                    span class="key mark-hook_denied" { "hook denial" } " "
                    span class="key mark-dependencies" { "dependencies changed" }
                }
                (crate::timeline::svg(report))
                h2 { "Honesty" }
                (honesty(report))
                h2 { "Steps" }
                (steps(report))
                h2 { "Leaves" }
                (leaves(report))
                h2 { "Tests by checkpoint" }
                (tests(report))
                script type="application/json" id="run-data" { (PreEscaped(data)) }
            }
        }
    };
    markup.into_string()
}

fn header(report: &RunReport) -> Markup {
    let h = &report.header;
    let short = |c: &Option<String>| c.as_deref().map(|c| c[..c.len().min(10)].to_string());
    html! {
        table class="header" {
            tr { th { "outcome" } td class=(format!("outcome {}", h.outcome.replace(' ', "-"))) { (h.outcome) } }
            @if let Some(detail) = &h.outcome_detail { tr { th { "why" } td { (detail) } } }
            @if let Some(n) = h.issue { tr { th { "issue" } td { "#" (n) } } }
            tr { th { "repository" } td { (h.repository) } }
            @if let Some(b) = &h.branch { tr { th { "branch" } td { code { (b) } } } }
            tr { th { "commits" } td {
                "base " code { (short(&h.base).unwrap_or_else(|| "-".into())) }
                " → head " code { (short(&h.head).unwrap_or_else(|| "-".into())) }
            } }
            @if let Some(pr) = &h.pr { tr { th { "pull request" } td {
                @if pr.starts_with("https://") { a href=(pr) { (pr) } } @else { code { (pr) } }
            } } }
            tr { th { "wall time" } td { (seconds(h.wall_ms)) } }
            tr { th { "tokens" } td {
                "input " (h.tokens.input) ", cache read " (h.tokens.cache_read)
                ", cache write " (h.tokens.cache_write) ", output " (h.tokens.output)
            } }
            tr { th { "cost" } td { (h.cost_usd.map_or_else(|| "not reported".to_string(), |c| format!("${c:.4}"))) } }
            tr { th { "leaves" } td { (h.leaves) } }
            tr { th { "verdicts" } td {
                (h.verdicts.accept) " accepted, " (h.verdicts.reject) " rejected, "
                (h.verdicts.refused) " refused by the engine"
            } }
            tr { th { "ledger" } td {
                @if h.ledger.verified { span class="ok" { "verifies" } } @else { span class="bad" { "does not verify" } }
                " · " (h.ledger.events) " events"
                @if let Some(head) = &h.ledger.chain_head { " · chain head " code { (head[..head.len().min(16)]) } }
                @if let Some(p) = &h.ledger.problem { " · " (p) }
            } }
            @if let Some(run) = &h.run_id { tr { th { "engine run" } td { code { (run) } } } }
            @if let Some(c) = &h.conduct { tr { th { "conduct" } td { code { (c) } } } }
        }
    }
}

fn honesty(report: &RunReport) -> Markup {
    let weak = report.honesty.iter().filter(|e| !e.ok).count();
    html! {
        p class="summary" {
            (report.honesty.len() - weak) " pieces of evidence support the run; "
            (weak) " weaken it or record something the engine had to stop."
        }
        table class="honesty" {
            tr { th { "step" } th { "phase" } th { "what" } th { "" } th { "evidence" } }
            @for e in &report.honesty {
                tr class=(if e.ok { "ok" } else { "bad" }) {
                    td { (if e.step == 0 { "-".to_string() } else { e.step.to_string() }) }
                    td { (e.phase) }
                    td { (e.kind) }
                    td { (if e.ok { "✓" } else { "✗" }) }
                    td { (e.text) }
                }
            }
        }
    }
}

fn steps(report: &RunReport) -> Markup {
    html! {
        table class="steps" {
            tr { th { "step" } th { "title" } th { "targets" } th { "state" } }
            @for s in &report.steps {
                tr { td { (s.n) } td { (s.title) } td { code { (s.targets.join(", ")) } } td { (s.state) } }
            }
        }
    }
}

fn leaves(report: &RunReport) -> Markup {
    html! {
        table class="leaves" {
            tr {
                th { "leaf" } th { "step" } th { "phase" } th { "CLI" } th { "model" } th { "time" }
                th { "ended" } th { "sandbox" } th { "tokens in/out" } th { "cost" } th { "files touched" } th { "reverted" } th { "verdict" }
            }
            @for l in &report.leaves {
                tr class=(if l.ok { "" } else { "bad" }) {
                    td { code { (l.id) } }
                    td { (l.step) } td { (l.phase) }
                    td { (l.provider) @if let Some(v) = &l.cli_version { " " (v) } }
                    td { (l.model.as_deref().unwrap_or("-")) }
                    td { (l.duration_ms.map_or_else(|| "-".to_string(), seconds)) }
                    td { (l.ended.as_deref().unwrap_or("running")) }
                    td { (l.sandbox.as_deref().unwrap_or("-")) }
                    td { (l.tokens.map_or_else(|| "-".to_string(), |t| format!("{} / {}", t.input + t.cache_read + t.cache_write, t.output))) }
                    td { (l.cost_usd.map_or_else(|| "-".to_string(), |c| format!("${c:.4}"))) }
                    td { (l.touched.as_ref().map_or_else(|| "not recorded".to_string(), |t| if t.is_empty() { "none".to_string() } else { t.join(", ") })) }
                    td { (l.reverted.join(", ")) }
                    td { (l.verdict.as_deref().unwrap_or("")) }
                }
            }
        }
    }
}

fn tests(report: &RunReport) -> Markup {
    let t = &report.tests;
    html! {
        table class="tests" {
            tr { th { "test" } @for c in &t.checkpoints { th { (c) } } th { "change" } }
            @for row in &t.rows {
                tr class=(row.change.as_deref().map_or_else(String::new, |c| format!("change-{}", c.replace(' ', "-")))) {
                    td { code { (row.id) } }
                    @for cell in &row.cells { td class=(format!("cell {cell}")) { (cell) } }
                    td { (row.change.as_deref().unwrap_or("")) }
                }
            }
        }
    }
}
