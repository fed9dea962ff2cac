//! The run report's header figures as markdown, for the top of the draft PR: what a
//! reviewer reads of the run before the steps, computed from the ledger alone.

use std::path::Path;

use crate::AsOf;
use crate::Which;
use crate::model::Header;
use crate::timeline::seconds;

/// The header figures of the conduct `conduct` (see [`tdd_conductor::Figures`]) as of
/// its last step done, bail or stop, so a PR written again from an unchanged run reads
/// the same: `None` when the ledger cannot be read, so the PR is written without them.
pub fn figures(database: &Path, work_tree: &Path, conduct: &str, complete: bool) -> Option<String> {
    let which = Which::Id(conduct.to_string());
    let report = crate::build_as_of(database, work_tree, &which, AsOf::LastMilestone).ok()?;
    Some(markdown(&report.header, complete))
}

/// `header` as a markdown table and a line of commits; with `complete`, a run whose end
/// is not recorded yet is said to be completed (the PR is written just before it is).
pub fn markdown(h: &Header, complete: bool) -> String {
    let outcome = if complete && h.outcome == "in progress" {
        "completed"
    } else {
        h.outcome.as_str()
    };
    let t = &h.tokens;
    let cost = h
        .cost_usd
        .map_or_else(|| "not reported".to_string(), |c| format!("${c:.4}"));
    let verdicts = format!(
        "{} accepted, {} rejected, {} refused by the engine",
        h.verdicts.accept, h.verdicts.reject, h.verdicts.refused
    );
    let ledger = format!(
        "{}: {} events, chain head `{}`{}",
        if h.ledger.verified {
            "verifies"
        } else {
            "**does not verify**"
        },
        h.ledger.events,
        h.ledger
            .chain_head
            .as_deref()
            .map_or("-", |head| &head[..head.len().min(16)]),
        h.ledger
            .problem
            .as_deref()
            .map(|p| format!(" ({p})"))
            .unwrap_or_default()
    );
    let short = |c: &Option<String>| {
        c.as_deref()
            .map_or_else(|| "-".to_string(), |c| c[..c.len().min(10)].to_string())
    };
    let mut out = String::from(
        "| outcome | wall time | leaves | verdicts | tokens (input / cache read / cache write / output) | cost | ledger |\n|---|---|---|---|---|---|---|\n",
    );
    out.push_str(&format!(
        "| {outcome} | {} | {} | {verdicts} | {} / {} / {} / {} | {cost} | {ledger} |\n",
        seconds(h.wall_ms),
        h.leaves,
        t.input,
        t.cache_read,
        t.cache_write,
        t.output,
    ));
    out.push_str(&format!(
        "\nBase `{}` → head `{}`.\n",
        short(&h.base),
        short(&h.head)
    ));
    if let Some(detail) = &h.outcome_detail {
        out.push_str(&format!("\n{detail}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Seal;
    use crate::model::Tally;
    use crate::model::Tokens;

    #[test]
    fn the_figures_read_as_one_row_and_a_completed_run_says_so() {
        let header = Header {
            outcome: "in progress".into(),
            wall_ms: 125_000,
            leaves: 7,
            tokens: Tokens {
                input: 10,
                cache_read: 20,
                cache_write: 30,
                output: 40,
            },
            cost_usd: Some(0.25),
            verdicts: Tally {
                accept: 3,
                reject: 1,
                refused: 0,
            },
            ledger: Seal {
                events: 99,
                chain_head: Some("0123456789abcdef0123".into()),
                verified: true,
                problem: None,
            },
            base: Some("aaaaaaaaaaaaaaaa".into()),
            head: Some("bbbbbbbbbbbbbbbb".into()),
            ..Header::default()
        };
        let text = markdown(&header, false);
        assert!(
            text.contains(
                "| in progress | 2 min 5 s | 7 | 3 accepted, 1 rejected, 0 refused by the engine | 10 / 20 / 30 / 40 | $0.2500 | verifies: 99 events, chain head `0123456789abcdef` |"
            ),
            "{text}"
        );
        assert!(
            text.contains("Base `aaaaaaaaaa` → head `bbbbbbbbbb`."),
            "{text}"
        );
        assert!(markdown(&header, true).contains("| completed |"));
        let broken = Header {
            outcome: "bailed".into(),
            ledger: Seal {
                problem: Some("event 4: edited".into()),
                ..Seal::default()
            },
            ..header
        };
        let text = markdown(&broken, true);
        assert!(
            text.contains("| bailed |") && text.contains("**does not verify**"),
            "{text}"
        );
        assert!(text.contains("(event 4: edited)"), "{text}");
    }
}
