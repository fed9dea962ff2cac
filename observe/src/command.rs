//! Building runner command lines: built-in argv vectors, or a user's
//! `test_command` template run through `sh -c`.
//!
//! Placeholders in a template: `{target}` (the runner-native selection,
//! shell-quoted), `{report}` (the engine-owned report path, shell-quoted)
//! and `{workers}` (worker processes the runner may use: the machine's core
//! budget shared among the conductors that hold leases on it, see
//! [`crate::lease`]). When a template lacks `{report}` or `{target}`, the
//! adapter's own report flags or selection are appended, so a plain
//! `test_command = "npx vitest run"` still yields a report the engine can read.

use std::path::Path;

/// Worker processes a runner may start: the core budget shared among the live leases
/// (never 0), counted afresh for each runner.
pub(crate) fn workers() -> usize {
    crate::lease::workers()
}

/// Quotes `word` for POSIX `sh` (single quotes, embedded quotes escaped).
pub(crate) fn shell_quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@,+%".contains(c));
    if safe {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The pieces substituted into a template.
#[derive(Debug)]
pub(crate) struct Substitutions<'a> {
    /// Selection arguments for `{target}`; empty for a whole-suite run.
    pub target: &'a [String],
    /// Report flags appended when the template has no `{report}`.
    pub report_flags: &'a [String],
    /// The report path for `{report}`.
    pub report: &'a Path,
}

/// Expands a user template into `sh -c <command>`.
pub(crate) fn user_command(template: &str, subs: &Substitutions<'_>) -> Vec<String> {
    let quoted = |words: &[String]| {
        words
            .iter()
            .map(|w| shell_quote(w))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let target = quoted(subs.target);
    let report = shell_quote(&subs.report.to_string_lossy());
    let mut command = template
        .replace("{workers}", &workers().to_string())
        .replace("{report}", &report)
        .replace("{target}", &target);
    if !template.contains("{report}") && !subs.report_flags.is_empty() {
        command.push(' ');
        command.push_str(&quoted(subs.report_flags));
    }
    if !template.contains("{target}") && !target.is_empty() {
        command.push(' ');
        command.push_str(&target);
    }
    vec!["sh".to_string(), "-c".to_string(), command]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_leaves_plain_words_and_escapes_quotes() {
        assert_eq!(shell_quote("tests/a.py::t"), "tests/a.py::t");
        assert_eq!(shell_quote("it's [x]"), r"'it'\''s [x]'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn placeholders_are_substituted() {
        let target = vec!["a b".to_string()];
        let command = user_command(
            "run {target} --out {report} -j {workers}",
            &Substitutions {
                target: &target,
                report_flags: &[],
                report: Path::new("/tmp/r.xml"),
            },
        );
        assert_eq!(command[0], "sh");
        assert!(command[2].starts_with("run 'a b' --out /tmp/r.xml -j "));
    }

    #[test]
    fn missing_placeholders_append_report_flags_and_target() {
        let target = vec!["t1".to_string()];
        let flags = vec!["--json=/r".to_string()];
        let command = user_command(
            "npx vitest run",
            &Substitutions {
                target: &target,
                report_flags: &flags,
                report: Path::new("/r"),
            },
        );
        assert_eq!(command[2], "npx vitest run --json=/r t1");
    }
}
