//! The template renderer: `{{name}}` substitution and nothing else.
//!
//! A template is text with `{{name}}` holes (`name` is lowercase letters, digits and
//! `_`). Rendering replaces every hole with its value in one left-to-right pass and
//! never looks at a value again, so text inside a value (an issue body that happens to
//! contain `{{secret}}`) is copied verbatim and cannot reach another variable. There
//! are no loops, conditions, filters, includes or escapes: the renderer executes
//! nothing. A hole without a value, a value without a hole, and an unclosed `{{` are
//! errors, so a template and the code that fills it cannot drift apart silently.

use std::collections::BTreeMap;

/// One value for a hole: text fixed at build time (another compiled-in template) or
/// text computed from the run's facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// Compiled-in template text, counted as fixed when prompts are measured.
    Fixed(&'static str),
    /// Text computed from the issue, the plan, the repository or the engine.
    Text(String),
}

/// The values of one rendering, by hole name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vars {
    values: BTreeMap<&'static str, Value>,
}

impl Vars {
    /// No values yet.
    pub fn new() -> Vars {
        Vars::default()
    }

    /// Sets a computed value.
    pub fn text(mut self, name: &'static str, value: impl Into<String>) -> Vars {
        self.values.insert(name, Value::Text(value.into()));
        self
    }

    /// Sets a compiled-in value.
    pub fn fixed(mut self, name: &'static str, value: &'static str) -> Vars {
        self.values.insert(name, Value::Fixed(value));
        self
    }
}

/// A rendered template with the split of its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The text.
    pub text: String,
    /// Bytes that came from compiled-in templates.
    pub fixed_bytes: usize,
    /// Bytes that came from computed values.
    pub variable_bytes: usize,
}

/// Why a template could not be rendered. Each is a bug in a template or in the code
/// that fills it, caught by the snapshot tests.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// A hole has no value.
    #[error("template {template}:{line}: no value for `{{{{{name}}}}}`")]
    Missing {
        /// The template's name.
        template: &'static str,
        /// 1-based line of the hole.
        line: usize,
        /// The hole.
        name: String,
    },
    /// A value has no hole.
    #[error("template {template}: the value `{name}` is never used")]
    Unused {
        /// The template's name.
        template: &'static str,
        /// The value's name.
        name: &'static str,
    },
    /// `{{` without `}}`, or a hole whose name is not `[a-z0-9_]+`.
    #[error("template {template}:{line}: malformed hole")]
    Malformed {
        /// The template's name.
        template: &'static str,
        /// 1-based line.
        line: usize,
    },
}

/// Renders `source` (named `template` in errors) with `vars`.
pub fn render(template: &'static str, source: &str, vars: &Vars) -> Result<Rendered, RenderError> {
    let mut text = String::with_capacity(source.len() * 2);
    let mut fixed_bytes = 0;
    let mut variable_bytes = 0;
    let mut used = std::collections::BTreeSet::new();
    let mut rest = source;
    let line_of = |rest: &str| source[..source.len() - rest.len()].matches('\n').count() + 1;
    while let Some(open) = rest.find("{{") {
        text.push_str(&rest[..open]);
        fixed_bytes += open;
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            return Err(RenderError::Malformed {
                template,
                line: line_of(&rest[open..]),
            });
        };
        let name = &after[..close];
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !valid {
            return Err(RenderError::Malformed {
                template,
                line: line_of(&rest[open..]),
            });
        }
        let Some((key, value)) = vars.values.get_key_value(name) else {
            return Err(RenderError::Missing {
                template,
                line: line_of(&rest[open..]),
                name: name.to_string(),
            });
        };
        used.insert(*key);
        match value {
            Value::Fixed(fixed) => {
                text.push_str(fixed);
                fixed_bytes += fixed.len();
            }
            Value::Text(value) => {
                text.push_str(value);
                variable_bytes += value.len();
            }
        }
        rest = &after[close + 2..];
    }
    text.push_str(rest);
    fixed_bytes += rest.len();
    if let Some(name) = vars.values.keys().find(|name| !used.contains(*name)) {
        return Err(RenderError::Unused { template, name });
    }
    Ok(Rendered {
        text,
        fixed_bytes,
        variable_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holes_are_filled_once_and_values_are_never_expanded() {
        let vars = Vars::new()
            .text("body", "ignore {{secret}} and {{#each x}}")
            .fixed("rule", "R");
        let out = render("t", "a {{body}} b {{rule}}\n", &vars).expect("renders");
        assert_eq!(out.text, "a ignore {{secret}} and {{#each x}} b R\n");
        assert_eq!(out.fixed_bytes + out.variable_bytes, out.text.len());
        assert_eq!(
            out.variable_bytes,
            "ignore {{secret}} and {{#each x}}".len()
        );
    }

    #[test]
    fn a_missing_value_names_the_hole_and_its_line() {
        let err = render("t", "one\ntwo {{gone}}\n", &Vars::new()).expect_err("missing");
        assert_eq!(
            err,
            RenderError::Missing {
                template: "t",
                line: 2,
                name: "gone".into()
            }
        );
    }

    #[test]
    fn an_unused_value_is_an_error() {
        let vars = Vars::new().text("a", "1").text("b", "2");
        let err = render("t", "{{a}}", &vars).expect_err("unused");
        assert_eq!(
            err,
            RenderError::Unused {
                template: "t",
                name: "b"
            }
        );
    }

    #[test]
    fn control_syntax_is_not_a_hole() {
        for source in ["{{#each items}}", "{{ name }}", "{{a", "{{}}", "{{A}}"] {
            let vars = Vars::new();
            assert!(
                matches!(
                    render("t", source, &vars),
                    Err(RenderError::Malformed { .. })
                ),
                "{source}"
            );
        }
    }
}
