//! `tdd init`: write a `tdd.toml` from the projects detected in the work tree.

use std::path::Path;

use serde_json::json;
use tdd_engine::config::CONFIG_FILE;
use tdd_engine::config::Config;
use tdd_engine::config::detect;
use tdd_engine::config::detect::EnforcerRules;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::NextAction;
use crate::output::Outcome;
use crate::output::Verb;

/// Detect projects (Cargo.toml, pyproject.toml, package.json, go.mod, ...) at the
/// work-tree root and one level down, and write tdd.toml. Each project is named after
/// its package; its tests are where it declares them (pytest's testpaths,
/// package.json's test script, Cargo's [[test]] targets), else where test files are
/// found; every test file is locked as a test and every other source file as
/// implementation. Imports .tdd/rules.json when present. With --hooks, also wires
/// `tdd hook` into the agent CLI's project settings (an existing tdd.toml is then left
/// as it is).
#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// Overwrite an existing tdd.toml.
    #[arg(long)]
    force: bool,
    /// Wire `tdd hook <HARNESS> pre-tool-use` into that agent CLI's project settings
    /// (`claude`: .claude/settings.json, `codex`: .codex/hooks.json), beside the
    /// entries already there; repeat or separate with commas for several.
    #[arg(long, value_name = "HARNESS", value_delimiter = ',')]
    hooks: Vec<String>,
}

/// Runs `tdd init`.
pub fn cmd_init(ctx: &Ctx, args: InitArgs) -> Result<Outcome, CommandError> {
    let root = ctx.work_tree()?;
    let path = root.join(CONFIG_FILE);
    if !args.hooks.is_empty() {
        let harnesses = args
            .hooks
            .iter()
            .map(|name| {
                tdd_leaves::hook::Harness::parse(name).ok_or_else(|| {
                    CommandError::bad_input(
                        "harness_unknown",
                        format!(
                            "--hooks {name}: tdd has hooks for claude, codex, gemini and copilot"
                        ),
                    )
                    .hint("run `tdd init --hooks claude` (or codex, gemini, copilot)")
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        crate::commands::init_hooks::check_all(&root, &harnesses)?;
        if path.exists() && !args.force {
            return crate::commands::init_hooks::wire_all(&root, &harnesses, None);
        }
        let written = write_config(&root, &path, &args)?;
        return crate::commands::init_hooks::wire_all(&root, &harnesses, Some(written));
    }
    write_config(&root, &path, &args)
}

/// Writes tdd.toml from what is detected; refused when one exists, unless `--force`.
fn write_config(root: &Path, path: &Path, args: &InitArgs) -> Result<Outcome, CommandError> {
    let root = root.to_path_buf();
    let path = path.to_path_buf();
    if path.exists() && !args.force {
        return Err(CommandError::refused(
            "config_exists",
            format!("{} already exists; it was left untouched", path.display()),
        )
        .hint("pass --force to overwrite it"));
    }
    let rules = read_rules(&root)?;
    let detection = detect::detect(&root);
    let text = detect::render_config(&detection, rules.as_ref());
    // Never write a file that tdd itself would refuse to load.
    Config::parse(&path, &text).map_err(|e| {
        CommandError::internal(
            "init_invalid",
            format!("generated config does not load: {e}"),
        )
    })?;
    std::fs::write(&path, &text).map_err(|e| {
        CommandError::refused(
            "write_failed",
            format!("cannot write {}: {e}", path.display()),
        )
    })?;
    let data = json!({
        "path": path,
        "projects": detection.projects,
        "unclassified": detection.unclassified,
        "warnings": detection.warnings,
        "imported_rules": rules.is_some(),
    });
    Ok(
        Outcome::new(data, render(&path, &detection, rules.is_some())).next(NextAction::new(
            Verb::ReviewConfig,
            format!(
                "review {} and commit it, then run `tdd doctor`",
                path.display()
            ),
        )),
    )
}

fn read_rules(root: &Path) -> Result<Option<EnforcerRules>, CommandError> {
    let path = root.join(".tdd/rules.json");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(None);
    };
    serde_json::from_str(&text).map(Some).map_err(|e| {
        CommandError::bad_input(
            "rules_invalid",
            format!("{}:{}:{}: {e}", path.display(), e.line(), e.column()),
        )
        .verb(Verb::FixConfig)
        .hint("fix .tdd/rules.json (blockedInRed, blockedInGreen, testCommands, timeoutSeconds)")
    })
}

fn render(path: &Path, detection: &detect::Detection, imported: bool) -> String {
    let mut text = format!("wrote {}\n", path.display());
    if detection.projects.is_empty() {
        text.push_str("no project markers found; add [project.NAME] tables by hand\n");
    }
    for p in &detection.projects {
        text.push_str(&format!(
            "  project {:<16} {:<10} root {} ({})\n",
            p.name, p.adapter, p.root, p.marker
        ));
        text.push_str(&format!(
            "    tests {} ({} file(s), from {})\n",
            p.test_paths.join(", "),
            p.tests_matched,
            p.test_paths_from
        ));
    }
    if imported {
        text.push_str("  imported locks and commands from .tdd/rules.json\n");
    }
    if !detection.unclassified.is_empty() {
        text.push_str(&format!(
            "unclassified directories: {}\n",
            detection.unclassified.join(", ")
        ));
    }
    for warning in &detection.warnings {
        text.push_str(&format!("warning: {warning}\n"));
    }
    text
}
