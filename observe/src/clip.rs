//! Clipping of runner output and messages, keeping both ends.
//!
//! A runner's first lines say what started and its last lines say how it
//! ended; the middle is usually repetition. Clipping keeps a head and a tail
//! and says how much was dropped, always on UTF-8 character boundaries.

/// Bytes kept from each end of a runner's stdout or stderr.
pub const OUTPUT_KEEP: usize = 4096;

/// Bytes kept from each end of one failure message.
pub const MESSAGE_KEEP: usize = 1024;

/// Returns `text` unchanged when short, else its head and tail around a marker.
pub fn clip(text: &str, keep: usize) -> String {
    if text.len() <= keep * 2 + 64 {
        return text.to_string();
    }
    let head_end = floor_boundary(text, keep);
    let tail_start = ceil_boundary(text, text.len() - keep);
    let dropped = tail_start - head_end;
    format!(
        "{}\n[... {dropped} bytes clipped ...]\n{}",
        &text[..head_end],
        &text[tail_start..]
    )
}

/// Lossily decodes `bytes` and clips the result.
pub fn clip_bytes(bytes: &[u8], keep: usize) -> String {
    clip(&strip_ansi(&String::from_utf8_lossy(bytes)), keep)
}

/// Removes ANSI escape sequences (colours, cursor moves) from runner text.
pub fn strip_ansi(text: &str) -> String {
    if !text.contains('\u{1b}') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'[') {
            chars.next();
            // A CSI sequence ends with a byte in the range '@'..='~'.
            for next in chars.by_ref() {
                if ('@'..='~').contains(&next) {
                    break;
                }
            }
        }
    }
    out
}

/// A runner's one-line failure message followed by its full text, or the
/// text alone when it already holds the message (pytest's message repeats
/// the assertion its traceback ends with; nextest's repeats the `panicked
/// at` line its output starts with).
pub fn with_message(message: &str, text: &str) -> String {
    let message = message.trim();
    let text = text.trim();
    if message.is_empty() || text.contains(message) {
        text.to_string()
    } else if text.is_empty() {
        message.to_string()
    } else {
        format!("{message}\n{text}")
    }
}

/// Rust failure text without its stack backtrace (printed when the
/// environment sets `RUST_BACKTRACE`): the frames would crowd the assertion's
/// values out of an excerpt. One line says where the frames were.
pub fn without_backtrace(text: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let mut in_frames = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed == "stack backtrace:" {
            in_frames = true;
            out.push("[stack backtrace omitted]");
            continue;
        }
        if in_frames {
            let frame = trimmed
                .split_once(": ")
                .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            if frame
                || trimmed.starts_with("at ")
                || trimmed.starts_with("note: Some details are omitted")
            {
                continue;
            }
            in_frames = false;
        }
        out.push(line);
    }
    out.join("\n")
}

fn floor_boundary(text: &str, mut index: usize) -> usize {
    while index > 0 && !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

fn ceil_boundary(text: &str, mut index: usize) -> usize {
    while index < text.len() && !text.is_char_boundary(index) {
        index += 1;
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_unchanged() {
        assert_eq!(clip("abc", 10), "abc");
    }

    #[test]
    fn long_text_keeps_head_and_tail() {
        let text = format!("HEAD{}TAIL", "x".repeat(10_000));
        let clipped = clip(&text, 100);
        assert!(clipped.starts_with("HEAD"));
        assert!(clipped.ends_with("TAIL"));
        assert!(clipped.contains("bytes clipped"));
        assert!(clipped.len() < 300);
    }

    #[test]
    fn clipping_respects_char_boundaries() {
        let text = "é".repeat(5000);
        let clipped = clip(&text, 101);
        assert!(clipped.contains("clipped"));
    }

    #[test]
    fn a_message_inside_its_text_is_not_repeated() {
        assert_eq!(
            with_message("assert 2 == 3", "E   assert 2 == 3"),
            "E   assert 2 == 3"
        );
        assert_eq!(with_message("boom", "trace"), "boom\ntrace");
        assert_eq!(with_message("", "trace"), "trace");
    }

    #[test]
    fn backtrace_frames_are_left_out() {
        let text = "thread 't' panicked at src/lib.rs:2:5:\nassertion `left == right` failed\n  left: 2\n right: 3\nstack backtrace:\n   0: __rustc::rust_begin_unwind\n             at /rustc/x/panicking.rs:689:5\n   1: calc::t\nnote: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.\nafter";
        assert_eq!(
            without_backtrace(text),
            "thread 't' panicked at src/lib.rs:2:5:\nassertion `left == right` failed\n  left: 2\n right: 3\n[stack backtrace omitted]\nafter"
        );
    }

    #[test]
    fn ansi_sequences_are_removed() {
        assert_eq!(strip_ansi("\u{1b}[31mred\u{1b}[0m"), "red");
    }
}
