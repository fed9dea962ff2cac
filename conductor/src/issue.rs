//! Local markdown issues: a `# Title` line, a body, and an `## Acceptance criteria`
//! section of `- [ ]` items.

use std::path::Path;

use tdd_prompts::Issue;

/// Why a local issue file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    /// The file could not be read.
    #[error("failed to read issue file {}", path.display())]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file breaks the format.
    #[error("{}: {why}", path.display())]
    Format {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong.
        why: String,
    },
}

/// The issue number of a local file: the `<n>` of a file named `issue-<n>.md`, else 1.
pub fn number_from_path(path: &Path) -> u64 {
    path.file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.strip_prefix("issue-"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

/// Reads a local markdown issue file.
pub fn read_local(path: &Path) -> Result<Issue, IssueError> {
    let text = std::fs::read_to_string(path).map_err(|source| IssueError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(number_from_path(path), &text).map_err(|why| IssueError::Format {
        path: path.to_path_buf(),
        why,
    })
}

/// The question a run without acceptance criteria asks: what a person must add to
/// issue `number` before it can be conducted.
pub fn no_criteria_question(number: u64) -> String {
    format!(
        "issue #{number} names no acceptance criteria: which behaviours must this change deliver? \
         Add each as a `- [ ]` item under an `## Acceptance criteria` heading in the issue, \
         then run `tdd conduct` again"
    )
}

/// The checklist items (`- [ ]`, `- [x]`) of the section under the heading named
/// "Acceptance criteria" (any level, up to the next heading).
fn criteria_section(body: &str) -> Vec<String> {
    let mut in_section = false;
    let mut section = String::new();
    for line in body.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with('#') {
            let heading = trimmed.trim_start_matches('#').trim();
            in_section = heading.eq_ignore_ascii_case("acceptance criteria");
            continue;
        }
        if in_section {
            section.push_str(line);
            section.push('\n');
        }
    }
    checklist(&section)
}

/// Every checklist item of `text`.
fn checklist(text: &str) -> Vec<String> {
    Issue::from_markdown(0, String::new(), text.to_string())
        .criteria()
        .to_vec()
}

/// The criteria of a forge issue's body: the `- [ ]` items under an "Acceptance
/// criteria" heading, else every checklist item of the body; empty when it has none.
pub fn criteria(body: &str) -> Vec<String> {
    let section = criteria_section(body);
    if section.is_empty() {
        checklist(body)
    } else {
        section
    }
}

/// Parses an issue's markdown: the first `# ` line is the title, everything after it
/// the body; the criteria are the checklist items of the `## Acceptance criteria`
/// section (up to the next `## ` heading).
pub fn parse(number: u64, text: &str) -> Result<Issue, String> {
    let mut lines = text.lines();
    let title = lines
        .by_ref()
        .find_map(|l| l.strip_prefix("# "))
        .map(|t| t.trim().to_string())
        .ok_or("no `# Title` line")?;
    let body: String = lines.map(|l| format!("{l}\n")).collect();
    let mut in_section = false;
    let mut section = String::new();
    for line in body.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            in_section = heading.trim().eq_ignore_ascii_case("acceptance criteria");
            continue;
        }
        if in_section {
            section.push_str(line);
            section.push('\n');
        }
    }
    let criteria = Issue::from_markdown(number, title.clone(), section)
        .criteria()
        .to_vec();
    if criteria.is_empty() {
        return Err(format!(
            "no `- [ ]` item under `## Acceptance criteria`: {}",
            no_criteria_question(number)
        ));
    }
    Ok(Issue::new(number, title, body.trim().to_string(), criteria))
}

/// A branch-safe slug of a title: lowercase ASCII words joined by `-`, at most 40 bytes.
pub fn slug(title: &str) -> String {
    let words: Vec<String> = title
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    let mut out = String::new();
    for word in words {
        if out.len() + word.len() + 1 > 40 {
            break;
        }
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(&word);
    }
    if out.is_empty() { "issue".into() } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn criteria_come_from_their_section_only() {
        let text = "# Add numbers\n\nSome text.\n- [ ] not a criterion\n\n## Acceptance criteria\n- [ ] adds two\n- [x] adds three\n\n## Notes\n- [ ] no\n";
        let issue = parse(4, text).expect("parses");
        assert_eq!(issue.title(), "Add numbers");
        assert_eq!(issue.criteria(), ["adds two", "adds three"]);
        assert_eq!(issue.number(), 4);
    }

    #[test]
    fn a_file_without_criteria_is_refused() {
        assert!(parse(1, "# T\nbody\n").is_err());
        assert!(parse(1, "no title\n").is_err());
    }

    #[test]
    fn forge_criteria_come_from_their_heading_else_from_every_checklist_item() {
        let body = "Text\n- [ ] not this\n\n### Acceptance Criteria\n- [ ] one\n- [ ] two\n\n## Notes\n- [ ] no\n";
        assert_eq!(criteria(body), ["one", "two"]);
        assert_eq!(criteria("- [ ] a\n- [x] b\n"), ["a", "b"]);
        assert!(criteria("no checklist at all").is_empty());
        assert!(no_criteria_question(7).contains("#7"));
    }

    #[test]
    fn numbers_and_slugs() {
        assert_eq!(number_from_path(Path::new("x/issue-12.md")), 12);
        assert_eq!(number_from_path(Path::new("x/feature.md")), 1);
        assert_eq!(slug("Parse durations: `1h30m`!"), "parse-durations-1h30m");
    }
}
