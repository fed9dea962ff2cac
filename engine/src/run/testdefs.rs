//! Test definitions in source text: which test functions a file defines, and their text.
//!
//! Locks work on whole files, but a test can live in a file the phase may change (a Rust
//! `#[cfg(test)]` module in `src/`, a Go `_test.go` beside code, a pytest function in a
//! module) and a test file may hold many tests of which one cycle adds a single one.
//! This module finds a test function's definition (its attributes or decorators, its
//! signature and its body) so the gates can tell whether that one test changed.
//!
//! The reading is lexical and deliberately simple: Python by indentation, Rust and Go
//! by balanced braces from the signature. It is applied the same way to both versions of
//! a file, so it never misses a change to the definition's own lines; in odd code
//! (braces in strings) it may include more than the function, which can only make a
//! comparison stricter.

use std::collections::HashMap;

use crate::config::AdapterKind;

/// The source language of `path`, by extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lang {
    Python,
    Rust,
    Go,
}

fn lang_of(path: &str) -> Option<Lang> {
    let ext = path.rsplit_once('.').map(|(_, e)| e)?;
    match ext {
        "py" => Some(Lang::Python),
        "rs" => Some(Lang::Rust),
        "go" => Some(Lang::Go),
        _ => None,
    }
}

/// Whether definitions in `path` can be read at all.
pub(crate) fn readable(path: &str) -> bool {
    lang_of(path).is_some()
}

/// The function name a test id ends in, for the adapters whose ids name a function.
pub(crate) fn target_name(adapter: AdapterKind, native_id: &str) -> Option<String> {
    let name = match adapter {
        AdapterKind::Pytest => native_id.rsplit("::").next()?.split('[').next()?,
        AdapterKind::Cargo => {
            let path = native_id.split_once(' ').map_or(native_id, |(_, p)| p);
            path.rsplit("::").next()?
        }
        AdapterKind::Go => native_id.rsplit("::").next()?.split('/').next()?,
        _ => return None,
    };
    let name = name.trim();
    (!name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_'))
        .then(|| name.to_string())
}

/// The file a test id names, for adapters whose ids start with the file.
pub(crate) fn target_file(adapter: AdapterKind, native_id: &str) -> Option<String> {
    let file = match adapter {
        AdapterKind::Pytest => native_id.split("::").next()?,
        AdapterKind::Vitest | AdapterKind::Jest | AdapterKind::Mocha | AdapterKind::NodeTest => {
            native_id.split(" > ").next()?
        }
        _ => return None,
    };
    let file = file.trim().trim_start_matches("./");
    (!file.is_empty() && file.contains('.')).then(|| file.to_string())
}

/// Every test function definition of `text` by name, with its text (attributes and
/// decorators included); a name defined twice keeps both texts, joined. A test is a
/// Rust function with a `test` attribute, a Go `Test`/`Example`/`Benchmark`/`Fuzz`
/// function, or a Python function whose name starts with `test`.
pub(crate) fn definitions(path: &str, text: &str) -> HashMap<String, String> {
    let Some(lang) = lang_of(path) else {
        return HashMap::new();
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut found: HashMap<String, String> = HashMap::new();
    for (at, line) in lines.iter().enumerate() {
        let Some(name) = defined_name(lang, line) else {
            continue;
        };
        let start = leading_annotations(lang, &lines, at);
        if !is_test(lang, &name, &lines[start..at]) {
            continue;
        }
        let end = match lang {
            Lang::Python => python_end(&lines, at),
            Lang::Rust | Lang::Go => brace_end(&lines, at),
        };
        let body = lines[start..end].join("\n");
        found
            .entry(name)
            .and_modify(|t| {
                t.push('\n');
                t.push_str(&body);
            })
            .or_insert(body);
    }
    found
}

fn is_test(lang: Lang, name: &str, annotations: &[&str]) -> bool {
    match lang {
        Lang::Python => name.starts_with("test"),
        Lang::Rust => annotations.iter().any(|a| a.contains("test")),
        Lang::Go => ["Test", "Example", "Benchmark", "Fuzz"]
            .iter()
            .any(|p| name.starts_with(p)),
    }
}

fn identifier(rest: &str) -> Option<String> {
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

fn defined_name(lang: Lang, line: &str) -> Option<String> {
    let t = line.trim_start();
    match lang {
        Lang::Python => {
            let rest = t.strip_prefix("async ").unwrap_or(t);
            identifier(rest.strip_prefix("def ")?)
        }
        Lang::Rust => {
            let mut rest = t;
            for prefix in [
                "pub(crate) ",
                "pub(super) ",
                "pub ",
                "const ",
                "async ",
                "unsafe ",
            ] {
                rest = rest.strip_prefix(prefix).unwrap_or(rest);
            }
            identifier(rest.strip_prefix("fn ")?)
        }
        Lang::Go => {
            let rest = t.strip_prefix("func ")?;
            let rest = match rest.strip_prefix('(') {
                Some(receiver) => receiver.split_once(')')?.1.trim_start(),
                None => rest,
            };
            identifier(rest)
        }
    }
}

/// The first line of the attributes (`#[...]`) or decorators (`@...`) right above `at`.
fn leading_annotations(lang: Lang, lines: &[&str], at: usize) -> usize {
    let marker = match lang {
        Lang::Python => "@",
        Lang::Rust => "#[",
        Lang::Go => "//go:",
    };
    let mut start = at;
    while start > 0 && lines[start - 1].trim_start().starts_with(marker) {
        start -= 1;
    }
    start
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// One past the last line of the Python block that starts at `at`.
fn python_end(lines: &[&str], at: usize) -> usize {
    let base = indent(lines[at]);
    let mut end = at + 1;
    for (i, line) in lines.iter().enumerate().skip(at + 1) {
        if line.trim().is_empty() {
            continue;
        }
        if indent(line) <= base {
            break;
        }
        end = i + 1;
    }
    end
}

/// One past the line where the braces opened from line `at` balance again.
fn brace_end(lines: &[&str], at: usize) -> usize {
    let mut depth = 0i64;
    let mut opened = false;
    for (i, line) in lines.iter().enumerate().skip(at) {
        for c in line.chars() {
            match c {
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => depth -= 1,
                ';' if !opened && depth == 0 => return i + 1,
                _ => {}
            }
        }
        if opened && depth <= 0 {
            return i + 1;
        }
    }
    lines.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rust_test_is_read_with_its_attributes_and_body() {
        let text = "pub fn sub(a: i32, b: i32) -> i32 {\n    a - b\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn subtracts() {\n        assert_eq!(super::sub(5, 2), 3);\n    }\n}\n";
        let defs = definitions("src/lib.rs", text);
        assert_eq!(
            defs["subtracts"],
            "    #[test]\n    fn subtracts() {\n        assert_eq!(super::sub(5, 2), 3);\n    }"
        );
        assert!(!defs.contains_key("sub"), "not a test");
        let weakened = text.replace(
            "    #[test]\n    fn",
            "    #[test]\n    #[should_panic]\n    fn",
        );
        assert_ne!(
            definitions("src/lib.rs", &weakened)["subtracts"],
            defs["subtracts"]
        );
    }

    #[test]
    fn a_python_test_ends_where_its_indentation_does() {
        let text = "import pytest\n\n@pytest.mark.slow\ndef test_a():\n    x = 1\n\n    assert x\n\ndef test_b():\n    pass\n";
        let defs = definitions("tests/test_x.py", text);
        assert_eq!(
            defs["test_a"],
            "@pytest.mark.slow\ndef test_a():\n    x = 1\n\n    assert x"
        );
        assert_eq!(defs["test_b"], "def test_b():\n    pass");
    }

    #[test]
    fn go_tests_are_found_by_name() {
        let text = "package calc\n\nfunc TestSub(t *testing.T) {\n\tif Sub(5, 2) != 3 {\n\t\tt.Fatal(\"no\")\n\t}\n}\n\nfunc (c *Calc) TestLike() {}\n";
        let defs = definitions("calc_test.go", text);
        assert!(defs["TestSub"].ends_with("\t}\n}"));
        assert_eq!(defs["TestLike"], "func (c *Calc) TestLike() {}");
    }

    #[test]
    fn target_names_and_files_follow_each_adapter() {
        assert_eq!(
            target_name(AdapterKind::Pytest, "tests/test_x.py::TestA::test_b[1-2]").as_deref(),
            Some("test_b")
        );
        assert_eq!(
            target_name(AdapterKind::Cargo, "calc tests::subtracts").as_deref(),
            Some("subtracts")
        );
        assert_eq!(
            target_name(AdapterKind::Go, "example.com/calc::TestSub/negative").as_deref(),
            Some("TestSub")
        );
        assert_eq!(target_name(AdapterKind::Vitest, "a.test.ts > adds"), None);
        assert_eq!(
            target_file(AdapterKind::Pytest, "tests/test_x.py::test_b").as_deref(),
            Some("tests/test_x.py")
        );
        assert_eq!(
            target_file(AdapterKind::NodeTest, "test/sub.test.js > subtracts").as_deref(),
            Some("test/sub.test.js")
        );
        assert_eq!(
            target_file(AdapterKind::Cargo, "calc tests::subtracts"),
            None
        );
    }
}
