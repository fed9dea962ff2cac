//! Configuration errors that point at `file:line:column` with a snippet and a fix.

use std::path::Path;
use std::path::PathBuf;

/// Why a `tdd.toml` could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but could not be read.
    #[error("failed to read {path}")]
    Read {
        /// The file that could not be read.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// The file was read but its contents are not a valid configuration.
    #[error("{}:{line}:{column}: {message}", path.display())]
    Invalid {
        /// The configuration file.
        path: PathBuf,
        /// 1-based line of the offending text.
        line: usize,
        /// 1-based column of the offending text.
        column: usize,
        /// What is wrong, as a lowercase fragment.
        message: String,
        /// The offending source line.
        snippet: String,
        /// Width of the offending text on that line, for the caret marker.
        width: usize,
        /// The nearest valid key or value, when one is close.
        suggestion: Option<String>,
    },
}

impl ConfigError {
    /// Builds an error from a TOML or serde failure, locating it in `text`.
    pub(crate) fn from_toml(path: &Path, text: &str, err: &toml::de::Error) -> ConfigError {
        let message = err.message().trim().to_string();
        let span = err.span().unwrap_or(0..0);
        let suggestion = if message.starts_with("unknown ") {
            nearest_expected(&message, &text[clamp(text, span.clone())])
        } else {
            None
        };
        invalid_at(path, text, span, tidy_message(&message), suggestion)
    }

    /// Builds an error for `key` in `[table]` naming something that does not exist.
    pub(crate) fn reference(
        path: &Path,
        text: &str,
        table: &str,
        key: &str,
        value: &str,
        candidates: &[String],
    ) -> ConfigError {
        let span = locate_key(text, table, key).unwrap_or(0..0);
        let message = format!("`{key}` in [{table}] names `{value}`, which is not defined");
        let suggestion = nearest(value, candidates.iter().map(String::as_str));
        invalid_at(path, text, span, message, suggestion)
    }

    /// Builds an error for the entry `value` of the list `key` in `[table]`, pointing at
    /// the entry when it is written as a plain string, else at the key.
    pub(crate) fn entry(
        path: &Path,
        text: &str,
        table: &str,
        key: &str,
        value: &str,
        message: String,
    ) -> ConfigError {
        let key_span = locate_key(text, table, key);
        let span = key_span
            .clone()
            .and_then(|k| {
                ["\"", "'"].iter().find_map(|quote| {
                    let quoted = format!("{quote}{value}{quote}");
                    let at = text[k.start..].find(&quoted)?;
                    let start = k.start + at + quote.len();
                    Some(start..start + value.len())
                })
            })
            .or(key_span)
            .unwrap_or(0..0);
        invalid_at(path, text, span, message, None)
    }

    /// Builds an error about `key` in `[table]` (or the table's header when the key is
    /// absent), with `message` as is.
    pub(crate) fn at_key(
        path: &Path,
        text: &str,
        table: &str,
        key: &str,
        message: String,
    ) -> ConfigError {
        let header = format!("[{table}]");
        let span = locate_key(text, table, key)
            .or_else(|| text.find(&header).map(|at| at..at + header.len()))
            .unwrap_or(0..0);
        invalid_at(path, text, span, message, None)
    }

    /// The fix to show after the message, if there is one.
    pub fn hint(&self) -> Option<String> {
        match self {
            ConfigError::Read { .. } => {
                Some("check that the file is readable, or remove it and run `tdd init`".into())
            }
            ConfigError::Invalid {
                suggestion: Some(s),
                ..
            } => Some(format!(
                "did you mean `{s}`? docs/config.md lists every key"
            )),
            ConfigError::Invalid { message, .. } if message.starts_with("missing key") => {
                Some("add the key to this table; docs/config.md lists every key".into())
            }
            ConfigError::Invalid { message, .. } if message.contains("known_failures entry") => {
                Some("an entry is a test id or a glob; write a literal `[` as `[[]` (docs/config.md, `known_failures`)".into())
            }
            ConfigError::Invalid { .. } => {
                Some("fix the text at that position; docs/config.md lists every key".into())
            }
        }
    }

    /// The message, the source line and a caret marker, as a compiler would show them.
    pub fn render(&self) -> String {
        match self {
            ConfigError::Read { path, source } => {
                format!("failed to read {}: {source}", path.display())
            }
            ConfigError::Invalid {
                line,
                column,
                snippet,
                width,
                ..
            } => {
                let gutter = line.to_string().len();
                let pad = " ".repeat(gutter);
                let lead: String = snippet
                    .chars()
                    .take(column.saturating_sub(1))
                    .map(|c| if c == '\t' { '\t' } else { ' ' })
                    .collect();
                format!(
                    "{self}\n{pad} |\n{line} | {snippet}\n{pad} | {lead}{}",
                    "^".repeat((*width).max(1))
                )
            }
        }
    }
}

fn clamp(text: &str, span: std::ops::Range<usize>) -> std::ops::Range<usize> {
    let mut start = span.start.min(text.len());
    let mut end = span.end.min(text.len()).max(start);
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    while !text.is_char_boundary(end) {
        end += 1;
    }
    start..end
}

fn invalid_at(
    path: &Path,
    text: &str,
    span: std::ops::Range<usize>,
    message: String,
    suggestion: Option<String>,
) -> ConfigError {
    let span = clamp(text, span);
    let before = &text[..span.start];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = text[line_start..span.start].chars().count() + 1;
    let snippet = text[line_start..].lines().next().unwrap_or("").to_string();
    let on_line = text[span.clone()].lines().next().unwrap_or("");
    let width = on_line.chars().count();
    ConfigError::Invalid {
        path: path.to_path_buf(),
        line,
        column,
        message,
        snippet,
        width,
        suggestion,
    }
}

/// Turns serde's "unknown field `x`, expected one of ..." into a short fragment.
fn tidy_message(message: &str) -> String {
    let first = message.lines().next().unwrap_or(message).trim();
    if let Some(rest) = first.strip_prefix("unknown field ") {
        let field = rest.split(',').next().unwrap_or(rest);
        return format!("unknown key {field}");
    }
    if let Some(rest) = first.strip_prefix("unknown variant ") {
        let value = rest.split(',').next().unwrap_or(rest);
        let expected = expected_names(first).join(", ");
        return format!("unknown value {value}; expected one of {expected}");
    }
    if let Some(rest) = first.strip_prefix("missing field ") {
        return format!("missing key {rest} in this table");
    }
    first
        .replace("expected u64", "expected a non-negative integer")
        .replace("expected u32", "expected a non-negative integer")
        .replace("expected f64", "expected a number")
}

/// The backticked names after "expected" in a serde message.
fn expected_names(message: &str) -> Vec<String> {
    let Some(idx) = message.find("expected") else {
        return Vec::new();
    };
    message[idx..]
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

fn nearest_expected(message: &str, offending: &str) -> Option<String> {
    let names = expected_names(message);
    if names.is_empty() {
        return None;
    }
    let word = offending.trim().trim_matches('"').trim_matches('\'');
    nearest(word, names.iter().map(String::as_str))
}

/// The candidate closest to `word`, if it is close enough to be a likely typo.
pub(crate) fn nearest<'a>(word: &str, candidates: impl Iterator<Item = &'a str>) -> Option<String> {
    let word_lower = word.to_lowercase();
    candidates
        .map(|c| (strsim::levenshtein(&word_lower, &c.to_lowercase()), c))
        .filter(|(d, c)| *d <= (c.len().max(word.len()) / 2).max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c.to_string())
}

/// The byte span of `key = ...` inside `[table]`, found textually.
fn locate_key(text: &str, table: &str, key: &str) -> Option<std::ops::Range<usize>> {
    let header = format!("[{table}]");
    let mut offset = 0;
    let mut in_table = false;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            in_table = trimmed.replace(' ', "") == header;
        } else if in_table {
            let stripped = line.trim_start();
            if let Some(rest) = stripped.strip_prefix(key)
                && rest.trim_start().starts_with('=')
            {
                let start = offset + (line.len() - stripped.len());
                return Some(start..start + key.len());
            }
        }
        offset += line.len();
    }
    None
}
