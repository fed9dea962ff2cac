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
    fn ansi_sequences_are_removed() {
        assert_eq!(strip_ansi("\u{1b}[31mred\u{1b}[0m"), "red");
    }
}
