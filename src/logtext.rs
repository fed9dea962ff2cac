//! What a person reads of output `tdd` captured from another `tdd`: a detached
//! conductor writes its progress as NDJSON and its result as an envelope (its stdout
//! is a file, not a terminal), and `tdd logs` and `tdd wait` show those as text.
//!
//! Only lines that are `tdd`'s own (a progress event carrying its `text`, or an
//! envelope) are rewritten; every other line passes through unchanged, so the log of
//! an agent CLI reads as it was written.

use std::io::Write;

use serde_json::Value;

/// The text a person would have seen for one captured line, or `None` when the line is
/// not one of `tdd`'s own and must be shown as it is.
pub fn render_line(line: &str) -> Option<String> {
    let trimmed = line.trim_end_matches(['\n', '\r']);
    if !trimmed.starts_with('{') {
        return None;
    }
    let value: Value = serde_json::from_str(trimmed).ok()?;
    if value.get("envelope_version").is_some() {
        return envelope_text(&value);
    }
    let is_event = value.get("event").is_some_and(Value::is_string)
        && value.get("at").is_some_and(Value::is_string);
    if !is_event {
        return None;
    }
    value
        .get("text")
        .and_then(Value::as_str)
        .map(|text| format!("{text}\n"))
}

/// An envelope as the lines a terminal would have shown at its end: the error and its
/// hint when it failed, what to do next when it succeeded.
pub fn envelope_text(envelope: &Value) -> Option<String> {
    let command = envelope.get("command").and_then(Value::as_str)?;
    let ok = envelope.get("ok").and_then(Value::as_bool)?;
    let detail = envelope
        .pointer("/next_action/detail")
        .and_then(Value::as_str);
    if ok {
        return Some(match detail {
            Some(detail) => format!("`tdd {command}` finished: {detail}\n"),
            None => format!("`tdd {command}` finished\n"),
        });
    }
    let message = envelope
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or("it failed without a message");
    let mut text = format!("`tdd {command}` failed: {message}\n");
    if let Some(hint) = envelope.pointer("/error/hint").and_then(Value::as_str) {
        text.push_str(&format!("hint: {hint}\n"));
    }
    Some(text)
}

/// The last envelope in captured stdout `bytes` (a `tdd` command's result is its last
/// line), if the last non-empty line is one.
pub fn last_envelope(bytes: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(bytes);
    let last = text.lines().rev().find(|line| !line.trim().is_empty())?;
    let value: Value = serde_json::from_str(last.trim()).ok()?;
    value.get("envelope_version").is_some().then_some(value)
}

/// The longest line held back to be rendered; tdd's progress lines and envelopes are
/// far shorter.
const LONGEST_LINE: usize = 1024 * 1024;

/// A writer that passes whole lines through [`render_line`] on their way to `inner`,
/// holding a partial line until its end arrives (or [`Lines::finish`]).
pub struct Lines<W: Write> {
    inner: W,
    pending: Vec<u8>,
}

impl<W: Write> Lines<W> {
    /// Renders into `inner`.
    pub fn new(inner: W) -> Lines<W> {
        Lines {
            inner,
            pending: Vec::new(),
        }
    }

    /// Writes out a last line that had no newline.
    pub fn finish(&mut self) -> std::io::Result<()> {
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.emit(&line)?;
        }
        self.inner.flush()
    }

    fn emit(&mut self, line: &[u8]) -> std::io::Result<()> {
        match std::str::from_utf8(line).ok().and_then(render_line) {
            Some(text) => self.inner.write_all(text.as_bytes()),
            None => self.inner.write_all(line),
        }
    }
}

impl<W: Write> Write for Lines<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            self.emit(&line)?;
        }
        // A line longer than any of tdd's own is nobody's progress line: passed on as
        // it comes, so a log without newlines is never held whole in memory.
        if self.pending.len() > LONGEST_LINE {
            let held = std::mem::take(&mut self.pending);
            self.inner.write_all(&held)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(input: &str) -> String {
        let mut lines = Lines::new(Vec::new());
        // Split mid-line on purpose: a line arrives in two writes.
        let (a, b) = input.split_at(input.len() / 2);
        lines.write_all(a.as_bytes()).expect("writes");
        lines.write_all(b.as_bytes()).expect("writes");
        lines.finish().expect("finishes");
        String::from_utf8(lines.inner).expect("utf-8")
    }

    #[test]
    fn progress_and_envelopes_become_text_and_everything_else_passes_through() {
        let input = concat!(
            r#"{"event":"conduct_phase","at":"2026-01-01T00:00:00Z","step":1,"text":"step 1 red: committed 3f2a9c1"}"#,
            "\n",
            "a line of a test runner\n",
            r#"{"type":"assistant","message":{}}"#,
            "\n",
            r#"{"event":"old","at":"2026-01-01T00:00:00Z"}"#,
            "\n",
            r#"{"envelope_version":1,"ok":false,"command":"conduct","data":{},"next_action":{"verb":"fix_and_retry","detail":"x","terminal":false},"error":{"reason":"verdict_missing","message":"bailed (the process's failure): no verdict","hint":"tdd logs verifier-1"}}"#,
        );
        insta::assert_snapshot!(rendered(input), @r#"
        step 1 red: committed 3f2a9c1
        a line of a test runner
        {"type":"assistant","message":{}}
        {"event":"old","at":"2026-01-01T00:00:00Z"}
        `tdd conduct` failed: bailed (the process's failure): no verdict
        hint: tdd logs verifier-1
        "#);
    }

    #[test]
    fn a_line_without_end_is_passed_on_not_held() {
        let mut lines = Lines::new(Vec::new());
        let long = vec![b'x'; LONGEST_LINE + 10];
        lines.write_all(&long).expect("writes");
        assert_eq!(lines.inner.len(), long.len());
        assert!(lines.pending.is_empty());
    }

    #[test]
    fn the_last_envelope_is_found_only_on_the_last_line() {
        let envelope = r#"{"envelope_version":1,"ok":true,"command":"conduct","data":{}}"#;
        assert!(last_envelope(format!("noise\n{envelope}\n\n").as_bytes()).is_some());
        assert!(last_envelope(format!("{envelope}\nnoise\n").as_bytes()).is_none());
        assert!(last_envelope(b"").is_none());
    }
}
