//! The timeline: one lane per step (the plan and the baseline first), a bar per leaf
//! and per engine run, marks for verdicts, refusals and reverts; each with its details
//! in a `<title>`, which a browser shows on hover. Plain SVG, no script.

use maud::Markup;
use maud::html;

use crate::compute::between_ms;
use crate::model::RunReport;

/// The drawing's width, its label column, and a lane's rows.
const WIDTH: f64 = 1100.0;
const LABEL: f64 = 120.0;
const ROW: f64 = 16.0;
const LANE: f64 = 2.0 * ROW + 10.0;

/// The timeline of `report`.
pub(crate) fn svg(report: &RunReport) -> Markup {
    let Some(start) = report.header.started_at.as_deref() else {
        return html! { p { "No event recorded yet." } };
    };
    let span = report.header.wall_ms.max(1) as f64;
    let x = |at: &str| LABEL + (between_ms(start, at) as f64 / span) * (WIDTH - LABEL - 10.0);
    let width = |from: &str, ms: u64| {
        let w = (ms as f64 / span) * (WIDTH - LABEL - 10.0);
        let room = WIDTH - 10.0 - x(from);
        w.clamp(2.0, room.max(2.0))
    };
    let mut lanes: Vec<u32> = report
        .leaves
        .iter()
        .map(|l| l.step)
        .chain(report.runs.iter().map(|r| r.step))
        .chain(report.steps.iter().map(|s| s.n))
        .collect();
    lanes.push(0);
    lanes.sort_unstable();
    lanes.dedup();
    let lane_y = |step: u32| {
        let i = lanes.iter().position(|s| *s == step).unwrap_or(0);
        10.0 + i as f64 * LANE
    };
    let height = 20.0 + lanes.len() as f64 * LANE;
    html! {
        svg class="timeline" xmlns="http://www.w3.org/2000/svg" width=(WIDTH) height=(height)
            viewBox=(format!("0 0 {WIDTH} {height}")) role="img" aria-label="timeline of the run" {
            @for step in &lanes {
                g class="lane" {
                    rect class="lane-bg" x="0" y=(lane_y(*step) - 3.0) width=(WIDTH) height=(LANE - 4.0) {}
                    text class="lane-label" x="6" y=(lane_y(*step) + ROW) {
                        (if *step == 0 { "plan, baseline".to_string() } else { format!("step {step}") })
                    }
                }
            }
            @for leaf in &report.leaves {
                @let ms = leaf.duration_ms.unwrap_or(0);
                rect class=(format!("bar leaf role-{} phase-{}{}", leaf.role, leaf.phase, if leaf.ok { "" } else { " failed" }))
                    x=(x(&leaf.started_at)) y=(lane_y(leaf.step)) width=(width(&leaf.started_at, ms)) height=(ROW - 2.0) rx="2" {
                    title {
                        (leaf.role) " leaf " (leaf.id) " (" (leaf.provider)
                        @if let Some(version) = &leaf.cli_version { " " (version) }
                        @if let Some(model) = &leaf.model { ", " (model) }
                        "), " (leaf.phase) ", " (seconds(ms))
                        @if let Some(ended) = &leaf.ended { "; " (ended) }
                        @if let Some(t) = &leaf.tokens { "; tokens in " (t.input) " out " (t.output) }
                        @if let Some(c) = leaf.cost_usd { "; $" (format!("{c:.4}")) }
                        @if let Some(v) = &leaf.verdict { "; verdict " (v) }
                    }
                }
            }
            @for run in &report.runs {
                rect class=(format!("bar run{}", if run.failed == 0 { "" } else { " failed" }))
                    x=(x(&run.started_at)) y=(lane_y(run.step) + ROW) width=(width(&run.started_at, run.wall_ms)) height=(ROW - 2.0) rx="2" {
                    title {
                        (run.purpose) " run of " (run.project) ": " (run.passed) " passed, "
                        (run.failed) " failed of " (run.total) ", " (seconds(run.wall_ms))
                    }
                }
            }
            @for mark in &report.marks {
                circle class=(format!("mark mark-{}", mark.kind)) cx=(x(&mark.at)) cy=(lane_y(mark.step) - 1.0) r="4" {
                    title { (mark.text) }
                }
            }
        }
    }
}

/// Milliseconds in words (`1.2 s`, `3 min 4 s`).
pub(crate) fn seconds(ms: u64) -> String {
    if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000)
    }
}
