//! Paths inside a repository as git prints them with `-z`: bytes, not text.
//!
//! A file name on Unix is any sequence of bytes except NUL and `/`, so a path
//! read from git or the work tree is carried as bytes. Where the engine keeps
//! a path as a `String` (ledger payloads, lock globs, outcomes), it uses the
//! lossless form of [`encode`]: the path itself when it is UTF-8 and does not
//! start with a double quote, otherwise git's C-style quoted form
//! (`"tests/\377.py"`). Since a verbatim path never starts with `"` and a
//! quoted one always does, [`decode`] gives back exactly the bytes, so acting
//! on a path never goes through a lossy conversion.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The lossless text form of `bytes`; [`decode`] inverts it exactly.
pub fn encode(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) if !text.starts_with('"') => text.to_string(),
        _ => c_quote(bytes),
    }
}

/// The bytes a string from [`encode`] stands for.
///
/// A string that starts with `"` and parses as a C-style quoted path is unquoted; any
/// other string is taken as it is, so a path typed by a person works too.
pub fn decode(text: &str) -> Vec<u8> {
    if text.starts_with('"')
        && let Some(bytes) = c_unquote(text)
    {
        return bytes;
    }
    text.as_bytes().to_vec()
}

/// `bytes` for a person to read: invalid UTF-8 becomes U+FFFD. Never use it to act.
///
/// Borrows when `bytes` is UTF-8, so matching every path of a large tree costs no copy.
pub fn display(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    // `from_utf8` checks ASCII a word at a time; the lossy decoder walks byte by byte.
    match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// The path `bytes`, relative to a work tree, as an `OsStr` for the file system.
pub fn os(bytes: &[u8]) -> &Path {
    Path::new(OsStr::from_bytes(bytes))
}

/// Git's C-style quoting: `"`, `\` and control bytes escaped, other bytes kept.
///
/// This is the form `git hash-object --stdin-paths` and `git update-index --stdin`
/// (without `-z`) unquote, so any path fits on one line.
pub fn c_quote(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    for &b in bytes {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => out.push_str(&format!("\\{b:03o}")),
        }
    }
    out.push('"');
    out
}

/// The bytes of a C-style quoted path, or `None` when `text` is not one.
fn c_unquote(text: &str) -> Option<Vec<u8>> {
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    let bytes = inner.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        i += 1;
        if b == b'"' {
            return None;
        }
        if b != b'\\' {
            out.push(b);
            continue;
        }
        let escaped = *bytes.get(i)?;
        i += 1;
        match escaped {
            b'"' | b'\\' => out.push(escaped),
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'a' => out.push(0x07),
            b'b' => out.push(0x08),
            b'f' => out.push(0x0c),
            b'r' => out.push(b'\r'),
            b'v' => out.push(0x0b),
            b'0'..=b'3' => {
                let digits = bytes.get(i - 1..i + 2)?;
                let text = std::str::from_utf8(digits).ok()?;
                out.push(u8::from_str_radix(text, 8).ok()?);
                i += 2;
            }
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn plain_paths_stay_as_they_are() {
        assert_eq!(encode(b"tests/test_a.py"), "tests/test_a.py");
        assert_eq!(encode("t\u{e9}st.py".as_bytes()), "t\u{e9}st.py");
        assert_eq!(decode("tests/test_a.py"), b"tests/test_a.py");
    }

    #[test]
    fn unusual_paths_are_quoted_like_git() {
        assert_eq!(encode(b"tests/\xff.py"), "\"tests/\\377.py\"");
        assert_eq!(encode(b"\"q"), "\"\\\"q\"");
        assert_eq!(decode("\"tests/\\377.py\""), b"tests/\xff.py");
    }

    proptest! {
        #[test]
        fn encoding_round_trips(bytes in proptest::collection::vec(1u8..=255, 0..24)) {
            prop_assert_eq!(decode(&encode(&bytes)), bytes.clone());
            prop_assert_eq!(c_unquote(&c_quote(&bytes)), Some(bytes));
        }
    }
}
