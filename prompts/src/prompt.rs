//! Rendering inputs into prompts, with the assignment a leaf may read back.

use serde::Serialize;
use serde_json::json;
use sha2::Digest;
use tdd_engine::run::Phase;

use crate::input::DeveloperInput;
use crate::input::PlannerInput;
use crate::input::Role;
use crate::input::VerifierInput;
use crate::provenance::TestId;
use crate::render::RenderError;
use crate::render::Vars;
use crate::render::render;

const DEVELOPER: &str = include_str!("../templates/developer.md");
const DEVELOPER_RED: &str = include_str!("../templates/developer-red.md");
const DEVELOPER_GREEN: &str = include_str!("../templates/developer-green.md");
const DEVELOPER_REFACTOR: &str = include_str!("../templates/developer-refactor.md");
const DEVELOPER_PIN: &str = include_str!("../templates/developer-pin.md");
const VERIFIER: &str = include_str!("../templates/verifier.md");
const VERIFIER_RED: &str = include_str!("../templates/verifier-red.md");
const VERIFIER_GREEN: &str = include_str!("../templates/verifier-green.md");
const VERIFIER_REFACTOR: &str = include_str!("../templates/verifier-refactor.md");
const VERIFIER_PIN: &str = include_str!("../templates/verifier-pin.md");
const PLANNER: &str = include_str!("../templates/planner.md");
const SESSION: &str = include_str!("../templates/session.md");

/// Why a prompt could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromptError {
    /// A template and its values disagree (a bug, caught by the snapshot tests).
    #[error(transparent)]
    Render(#[from] RenderError),
    /// No leaf works on a closed or skipped cycle.
    #[error("no leaf is launched for a cycle at {phase}")]
    PhaseOver {
        /// The phase.
        phase: Phase,
    },
}

/// A rendered prompt: its text, what it was built from, and the assignment the leaf
/// may read back with `tdd status` (the same facts, nothing more).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prompt {
    role: Role,
    phase: Option<Phase>,
    template: &'static str,
    text: String,
    fixed_bytes: usize,
    variable_bytes: usize,
    assignment: serde_json::Value,
}

/// The phases a leaf works in, as named in prompts, fixtures and `TDD_PHASE`.
pub fn phase_name(phase: Phase) -> Result<&'static str, PromptError> {
    match phase {
        Phase::AwaitingTest => Ok("red"),
        Phase::AwaitingImpl => Ok("green"),
        Phase::AwaitingRefactor => Ok("refactor"),
        Phase::AwaitingPin | Phase::SensitivityRequired => Ok("pin"),
        Phase::Closed | Phase::Skipped => Err(PromptError::PhaseOver { phase }),
    }
}

fn phase_title(phase: Phase) -> Result<&'static str, PromptError> {
    Ok(match phase_name(phase)? {
        "red" => "RED",
        "green" => "GREEN",
        "refactor" => "REFACTOR",
        _ => "PIN",
    })
}

fn bullets(items: &[String], none: &str) -> String {
    if items.is_empty() {
        return format!("  - {none}");
    }
    items
        .iter()
        .map(|item| format!("  - `{item}`"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn inline(items: &[String], none: &str) -> String {
    if items.is_empty() {
        return none.to_string();
    }
    items
        .iter()
        .map(|item| format!("`{item}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn ids(tests: &[TestId]) -> Vec<String> {
    tests.iter().map(|t| t.as_str().to_string()).collect()
}

impl Prompt {
    /// The developer prompt for one phase of one step.
    pub fn developer(input: &DeveloperInput) -> Result<Prompt, PromptError> {
        let phase = input.phase;
        let rules = match phase_name(phase)? {
            "red" => DEVELOPER_RED,
            "green" => DEVELOPER_GREEN,
            "refactor" => DEVELOPER_REFACTOR,
            _ => DEVELOPER_PIN,
        };
        let cycle = &input.step.cycle;
        let targets = ids(&input.targets);
        let findings = if input.findings.is_empty() {
            String::from("None: this is the first attempt at this phase.")
        } else {
            let mut text = String::from(
                "The verifier rejected the previous attempt. Address each finding:\n\n",
            );
            for finding in &input.findings {
                text.push_str(&format!("- {finding}\n"));
            }
            text.trim_end().to_string()
        };
        let vars = Vars::new()
            .fixed("phase_title", phase_title(phase)?)
            .fixed("phase_rules", rules.trim_end())
            .text("step", cycle.n.to_string())
            .text("issue_number", input.issue.number().to_string())
            .text("issue_title", input.issue.title())
            .text("issue_body", input.issue.body().trim_end())
            .text(
                "criterion",
                input.step.criterion.as_deref().unwrap_or("(none named)"),
            )
            .text("cycle_title", cycle.title.as_str())
            .text(
                "targets",
                bullets(&targets, "(none: this cycle has no test)"),
            )
            .text("files", inline(&cycle.files, "(not declared)"))
            .text(
                "test_commands",
                inline(&input.repo.test_commands, "(the adapter's default)"),
            )
            .text("locked", inline(&input.repo.locked, "(nothing)"))
            .text("touched", inline(&input.repo.touched, "(none yet)"))
            .text("findings", findings);
        let rendered = render("developer.md", DEVELOPER, &vars)?;
        let assignment = json!({
            "role": Role::Developer,
            "issue": { "number": input.issue.number(), "title": input.issue.title() },
            "step": cycle.n,
            "phase": phase_name(phase)?,
            "criterion": input.step.criterion,
            "cycle_title": cycle.title,
            "targets": targets,
            "files": cycle.files,
            "locked": input.repo.locked,
            "test_commands": input.repo.test_commands,
            "findings": input.findings,
        });
        Ok(Prompt::new(
            Role::Developer,
            Some(phase),
            "developer.md",
            rendered,
            assignment,
        ))
    }

    /// The verifier prompt, built from a [`VerifierInput`] and nothing else.
    pub fn verifier(input: &VerifierInput) -> Result<Prompt, PromptError> {
        let phase = input.phase();
        let rules = match phase_name(phase)? {
            "red" => VERIFIER_RED,
            "green" => VERIFIER_GREEN,
            "refactor" => VERIFIER_REFACTOR,
            _ => VERIFIER_PIN,
        };
        let spec = input.behaviour_spec();
        let (index, of) = spec.position();
        let targets = ids(input.test_ids());
        let base_line = match input.base() {
            Some(base) => format!(
                "The phase started at `{base}`: `git diff {} {}` shows the change to judge.",
                base.short(),
                input.repo_at().short()
            ),
            None => format!(
                "No base commit is given: `git show {}` shows the last change.",
                input.repo_at().short()
            ),
        };
        let vars = Vars::new()
            .fixed("phase_title", phase_title(phase)?)
            .fixed("phase_rules", rules.trim_end())
            .text("issue_number", spec.issue().to_string())
            .text("issue_title", spec.title())
            .text("criterion_position", format!("{index} of {of}"))
            .text("behaviour_spec", spec.text().replace('\n', "\n> "))
            .text("test_ids", bullets(&targets, "(none)"))
            .text("repo_at", input.repo_at().as_str())
            .text("base_line", base_line);
        let rendered = render("verifier.md", VERIFIER, &vars)?;
        let assignment = json!({
            "role": Role::Verifier,
            "issue": spec.issue(),
            "phase": phase_name(phase)?,
            "targets": targets,
            "behaviour_spec": spec.text(),
            "repo_at": input.repo_at(),
            "base": input.base(),
        });
        Ok(Prompt::new(
            Role::Verifier,
            Some(phase),
            "verifier.md",
            rendered,
            assignment,
        ))
    }

    /// The planner prompt for an issue.
    pub fn planner(input: &PlannerInput) -> Result<Prompt, PromptError> {
        let criteria = if input.issue.criteria().is_empty() {
            String::from("(the issue lists none: derive them from its body)")
        } else {
            input
                .issue
                .criteria()
                .iter()
                .enumerate()
                .map(|(i, c)| format!("{}. {c}", i + 1))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let vars = Vars::new()
            .text("issue_number", input.issue.number().to_string())
            .text("issue_title", input.issue.title())
            .text("issue_body", input.issue.body().trim_end())
            .text("criteria", criteria)
            .text(
                "test_commands",
                inline(&input.repo.test_commands, "(the adapters' defaults)"),
            )
            .text("plan_path", input.plan_path.as_str())
            .text(
                "errors",
                if input.errors.is_empty() {
                    String::from("(none: this is the first attempt)")
                } else {
                    input
                        .errors
                        .iter()
                        .map(|e| format!("- {e}"))
                        .collect::<Vec<_>>()
                        .join("\n")
                },
            );
        let rendered = render("planner.md", PLANNER, &vars)?;
        let assignment = json!({
            "role": Role::Planner,
            "issue": { "number": input.issue.number(), "title": input.issue.title() },
            "criteria": input.issue.criteria(),
        });
        Ok(Prompt::new(
            Role::Planner,
            None,
            "planner.md",
            rendered,
            assignment,
        ))
    }

    /// The record of an interactive session a person drives with `cli` (`tdd agent`):
    /// a developer's, in `phase` of the open `cycle` when a run has one (`position` says
    /// where it stood, in words). Sent to no agent; its assignment (the cycle, its
    /// targets and files) is what `tdd status` answers inside the session.
    pub fn session(
        cli: &str,
        phase: Option<Phase>,
        cycle: Option<&tdd_engine::plan::PlannedCycle>,
        position: &str,
    ) -> Result<Prompt, PromptError> {
        let vars = Vars::new().text("cli", cli).text("position", position);
        let rendered = render("session.md", SESSION, &vars)?;
        let phase_word = phase.map(phase_name).transpose()?;
        let assignment = json!({
            "role": Role::Developer,
            "session": cli,
            "step": cycle.map_or(0, |c| c.n),
            "phase": phase_word,
            "cycle_title": cycle.map(|c| c.title.clone()),
            "targets": cycle.map(|c| ids(&TestId::planned(c))).unwrap_or_default(),
            "files": cycle.map(|c| c.files.clone()).unwrap_or_default(),
        });
        Ok(Prompt::new(
            Role::Developer,
            phase,
            "session.md",
            rendered,
            assignment,
        ))
    }

    fn new(
        role: Role,
        phase: Option<Phase>,
        template: &'static str,
        rendered: crate::render::Rendered,
        assignment: serde_json::Value,
    ) -> Prompt {
        Prompt {
            role,
            phase,
            template,
            text: rendered.text,
            fixed_bytes: rendered.fixed_bytes,
            variable_bytes: rendered.variable_bytes,
            assignment,
        }
    }

    /// The role the prompt is for.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The phase, for developers and verifiers.
    pub fn phase(&self) -> Option<Phase> {
        self.phase
    }

    /// The top-level template's file name.
    pub fn template(&self) -> &'static str {
        self.template
    }

    /// The text, exactly as the leaf receives it.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Bytes of the text that came from compiled-in templates.
    pub fn fixed_bytes(&self) -> usize {
        self.fixed_bytes
    }

    /// Bytes of the text that came from the issue, the plan and the repository.
    pub fn variable_bytes(&self) -> usize {
        self.variable_bytes
    }

    /// SHA-256 of the text, hex.
    pub fn sha256(&self) -> String {
        hex::encode(sha2::Sha256::digest(self.text.as_bytes()))
    }

    /// The facts of the assignment, as `tdd status` shows them inside the leaf.
    pub fn assignment(&self) -> &serde_json::Value {
        &self.assignment
    }
}
