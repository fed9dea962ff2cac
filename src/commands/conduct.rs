//! `tdd conduct`: drive an issue from plan to draft PR with developer and verifier leaves.

use tdd_conductor::ForgeSpec;
use tdd_conductor::GitHubSpec;
use tdd_conductor::forge::github::RetryPolicy;
use tdd_conductor::forge::github::resolve_token;
use tdd_conductor::forge::github::spec;

use serde_json::json;
use tdd_conductor::Conductor;
use tdd_conductor::Finish;
use tdd_conductor::NewBinary;
use tdd_conductor::Options;
use tdd_conductor::Place;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::NextAction;
use crate::output::Outcome;
use crate::output::Verb;

/// Conduct an issue: a planner leaf plans one step per acceptance criterion, then
/// every step goes through RED, GREEN and REFACTOR by developer leaves, each phase
/// judged by the engine and then by a blind verifier leaf. Progress goes to the
/// forge; the end is a draft PR (exit 0), a bail (exit 4) or a stop (exit 5).
/// Running it again resumes at the first unticked step.
#[derive(Debug, clap::Args)]
pub struct ConductArgs {
    /// The issue: a GitHub issue's number (`12`, `#12`) or URL, or the path of a local
    /// markdown issue file (`# Title`, a body, and `- [ ]` items under
    /// `## Acceptance criteria`; its number is the `<n>` of a file named
    /// `issue-<n>.md`, else 1). A number means GitHub when `origin` is on GitHub.
    #[arg(value_name = "ISSUE")]
    issue: String,
    /// The developer and planner provider (default: `[conductor] provider`).
    #[arg(long, value_name = "P")]
    provider: Option<String>,
    /// The verifier provider (default: `[conductor] verifier_provider`, else --provider).
    #[arg(long, value_name = "P")]
    verifier_provider: Option<String>,
    /// Where the issue comes from and progress goes: `local` (files under the ledger
    /// home) or `github`; default: chosen from ISSUE.
    #[arg(long, value_name = "FORGE")]
    forge: Option<String>,
    /// The GitHub repository, `owner/name` (default: the `origin` remote's).
    #[arg(long, value_name = "OWNER/NAME")]
    repo: Option<String>,
    /// The GitHub API root (default: https://api.github.com, or the GitHub Enterprise
    /// root of an issue URL's host).
    #[arg(long, value_name = "URL", env = "GITHUB_API_URL")]
    github_api_url: Option<String>,
    /// Label the GitHub issue `tdd:running`, `tdd:bailed` or `tdd:done` as the run goes.
    #[arg(long)]
    state_labels: bool,
    /// Do at most N steps in this invocation, then exit 0; `tdd conduct` again continues.
    #[arg(long, value_name = "N")]
    max_steps: Option<u32>,
    /// Resume with a different tdd binary than the run started with (recorded).
    #[arg(long)]
    accept_new_binary: bool,
    /// Work in a separate git worktree, `<repo>-tdd-issue-<n>` beside the repository,
    /// and leave this work tree as it is (default: `[conductor] worktree`).
    #[arg(long)]
    worktree: bool,
    /// Run the conductor under a supervisor in the background: print its id and return.
    /// Follow it with `tdd logs <id> --follow`, wait for it with `tdd wait <id>`.
    #[arg(long)]
    detach: bool,
}

impl ConductArgs {
    /// Whether the conductor is to run in the background (`--detach`): this process
    /// only launches it and returns.
    pub fn detached(&self) -> bool {
        self.detach
    }

    /// The conductor's options, built once from the parsed arguments and `forge`.
    fn options(self, forge: ForgeSpec) -> Result<Options, CommandError> {
        Ok(Options {
            provider: self.provider,
            verifier_provider: self.verifier_provider,
            max_steps: self.max_steps,
            new_binary: if self.accept_new_binary {
                NewBinary::Accept
            } else {
                NewBinary::Refuse
            },
            place: if self.worktree {
                Place::OwnWorktree
            } else {
                Place::AsConfigured
            },
            ..default_options(forge)?
        })
    }
}

/// Options for conducting the issue of `forge` with every setting at its default.
pub fn default_options(forge: ForgeSpec) -> Result<Options, CommandError> {
    Ok(Options {
        forge,
        provider: None,
        verifier_provider: None,
        max_steps: None,
        tdd_exe: tdd_exe()?,
        new_binary: NewBinary::Refuse,
        place: Place::AsConfigured,
        relay_args: crate::cli::relayable,
        pr_figures: tdd_report::pr::figures,
        report_place: report_place(),
    })
}

/// The running tdd binary, which leaves and supervisors are launched through.
fn tdd_exe() -> Result<std::path::PathBuf, CommandError> {
    std::env::current_exe().map_err(|e| {
        CommandError::internal("conduct_failed", format!("cannot find the tdd binary: {e}"))
    })
}

/// Runs `tdd conduct`.
pub fn cmd_conduct(ctx: &Ctx, args: ConductArgs) -> Result<Outcome, CommandError> {
    let forge = forge_spec(ctx, &args)?;
    if args.detach {
        return detach(ctx);
    }
    conduct(ctx, args.options(forge)?)
}

/// The forge `args` name: a local file that must exist, or a GitHub issue with its
/// repository and a token.
fn forge_spec(ctx: &Ctx, args: &ConductArgs) -> Result<ForgeSpec, CommandError> {
    let origin = ctx.work_tree().ok().and_then(|root| {
        tdd_engine::git::Git::new(&root)
            .text(["remote", "get-url", "origin"])
            .ok()
    });
    let hints = spec::Hints {
        forge: args.forge.as_deref(),
        repo: args.repo.as_deref(),
        origin: origin.as_deref(),
        is_file: ctx.cwd.join(&args.issue).is_file(),
    };
    let choice = spec::choose(&args.issue, &hints).map_err(|why| {
        CommandError::bad_input("forge_unsupported", why)
            .hint("pass a local issue file, or a GitHub issue number or URL (with --repo owner/name when `origin` is not on GitHub)")
    })?;
    match choice {
        spec::Choice::Local(path) => {
            let issue = ctx.cwd.join(path);
            if !issue.is_file() {
                return Err(CommandError::bad_input(
                    "issue_not_found",
                    format!("{}: no such issue file", issue.display()),
                )
                .hint("pass the path of a local markdown issue file, or a GitHub issue number"));
            }
            Ok(ForgeSpec::Local(issue))
        }
        spec::Choice::GitHub { repo, number, api } => {
            let token = resolve_token(|name| std::env::var(name).ok()).ok_or_else(|| {
                CommandError::bad_input(
                    "forge_token_missing",
                    format!("no GitHub token for {repo}#{number}"),
                )
                .hint("set GITHUB_TOKEN or GH_TOKEN, or log in with `gh auth login`")
            })?;
            let api = args
                .github_api_url
                .clone()
                .filter(|u| !u.is_empty())
                .or(api)
                .unwrap_or_else(|| spec::DEFAULT_API.to_string());
            Ok(ForgeSpec::GitHub(GitHubSpec {
                api,
                repo,
                number,
                token,
                remote: "origin".to_string(),
                labels: args.state_labels,
                retry: RetryPolicy::default(),
            }))
        }
    }
}

/// Conducts the issue of `options.forge` in the work tree of `ctx`.
pub fn conduct(ctx: &Ctx, options: Options) -> Result<Outcome, CommandError> {
    let (_, config, text) = ctx.config()?;
    let work_tree = ctx.work_tree()?;
    let conductor = Conductor::open(&work_tree, config, &text, options, &ctx.out)?;
    let trace = conductor.dir().join("trace.jsonl");
    if let Err(err) = ctx.trace.write_to(&trace) {
        ctx.out
            .debug(&format!("no trace file at {}: {err}", trace.display()));
    }
    let stop = crate::supervision::supervisor(ctx)?;
    let _interrupts = interrupts(stop);
    let finish = conductor.run()?;
    let summary = match &finish {
        Finish::Completed(s) | Finish::Paused(s) | Finish::Bailed(s, _) | Finish::Stopped(s, _) => {
            s
        }
    };
    let report = write_report(ctx, &work_tree, summary);
    let report_line = report
        .as_ref()
        .map(|p| format!("report: {}\n", p.display()))
        .unwrap_or_default();
    let data = |s: &tdd_conductor::Summary| {
        let mut data = json!(s);
        data["report"] = json!(report);
        data
    };
    match finish {
        Finish::Completed(s) => {
            let text = format!(
                "issue #{} done: {}/{} steps\ndraft PR: {}\nrun directory: {}\n{}{report_line}",
                s.issue,
                s.steps_done,
                s.steps,
                s.pr,
                s.dir.display(),
                worktree_line(&s)
            );
            Ok(Outcome::new(data(&s), text)
                .next(NextAction::terminal(Verb::Complete, "review the draft PR")))
        }
        Finish::Paused(s) => {
            let text = format!(
                "paused after --max-steps: {}/{} steps done\ndraft PR: {}\n{}{report_line}",
                s.steps_done,
                s.steps,
                s.pr,
                worktree_line(&s)
            );
            Ok(Outcome::new(data(&s), text).next(NextAction::new(
                Verb::ResumeConduct,
                "run `tdd conduct` again to continue",
            )))
        }
        Finish::Bailed(s, bail) => Err(CommandError::bailed(
            bail.cause.as_str(),
            format!("bailed ({}): {}", bail.class.words(), bail.detail),
        )
        .hint(bail.action.clone())
        .data(json!({ "bail": bail, "run": data(&s) }))),
        Finish::Stopped(s, mode) => Err(CommandError::stopped(format!(
            "stopped ({mode}) with {}/{} steps done",
            s.steps_done, s.steps
        ))
        .hint("run `tdd conduct` again to resume")
        .data(json!({ "mode": mode, "run": data(&s) }))),
    }
}

/// Where the draft PR says the run report is: inside a GitHub Actions job, the
/// artifact `tdd ci init github`'s workflow uploads; elsewhere the run directory.
fn report_place() -> tdd_conductor::ReportPlace {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let actions = var("GITHUB_ACTIONS").is_some_and(|v| v == "true");
    match (
        actions,
        var("GITHUB_SERVER_URL"),
        var("GITHUB_REPOSITORY"),
        var("GITHUB_RUN_ID"),
    ) {
        (true, Some(server), Some(repository), Some(run_id)) => {
            tdd_conductor::ReportPlace::ActionsArtifact {
                run_url: format!("{server}/{repository}/actions/runs/{run_id}"),
                attempt: var("GITHUB_RUN_ATTEMPT").unwrap_or_else(|| "1".to_string()),
                run_id,
            }
        }
        _ => tdd_conductor::ReportPlace::RunDirectory,
    }
}

/// Writes the run report beside the draft PR and returns its path; a report that
/// cannot be made is said on stderr and never fails the conduct, whose work is done.
fn write_report(
    ctx: &Ctx,
    work_tree: &std::path::Path,
    s: &tdd_conductor::Summary,
) -> Option<std::path::PathBuf> {
    let location = ctx.ledger_location().ok()?;
    let which = tdd_report::Which::Id(s.conduct.clone());
    let path = s.dir.join("report.html");
    let written = tdd_report::build(&location.database, work_tree, &which)
        .map_err(|e| e.to_string())
        .and_then(|report| {
            crate::commands::report::write_page(&path, &report).map_err(|e| e.message.clone())
        });
    match written {
        Ok(()) => Some(path),
        Err(e) => {
            ctx.out.progress(
                "report_failed",
                json!({ "error": e }),
                &format!("warning: no run report: {e}"),
            );
            None
        }
    }
}

/// The line naming the conductor's own worktree, when the run works in one.
fn worktree_line(summary: &tdd_conductor::Summary) -> String {
    summary
        .worktree
        .as_ref()
        .map(|w| format!("worktree: {} (branch {})\n", w.display(), summary.branch))
        .unwrap_or_default()
}

/// Ctrl-C once asks for a stop `at-leaf`, twice for `now`: the conductor sees the
/// request between leaves, and the supervisor kills a running leaf for `now`.
fn interrupts(supervisor: tdd_supervisor::Supervisor) -> Option<std::thread::JoinHandle<()>> {
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGINT]).ok()?;
    std::thread::Builder::new()
        .name("conduct-interrupts".into())
        .spawn(move || {
            let mut count = 0;
            for _ in signals.forever() {
                count += 1;
                let mode = if count == 1 {
                    tdd_supervisor::StopMode::AtLeaf
                } else {
                    tdd_supervisor::StopMode::Now
                };
                // Nothing to report to: the conductor reads the request itself.
                let _ = supervisor.request_stop(mode);
            }
        })
        .ok()
}

/// Launches this same `tdd conduct`, without `--detach`, under a supervisor of its own
/// session, so the terminal or the caller can go away without taking the conductor down.
/// The background conductor gets this process's own arguments less `--detach`, in this
/// process's directory, so every option (global ones too) means what it meant here.
fn detach(ctx: &Ctx) -> Result<Outcome, CommandError> {
    let tdd = tdd_exe()?;
    let work_tree = ctx.work_tree()?;
    let here = std::env::current_dir().map_err(|e| {
        CommandError::internal(
            "conduct_failed",
            format!("cannot read the current directory: {e}"),
        )
    })?;
    let mut argv = vec![tdd.display().to_string()];
    argv.extend(without_detach(std::env::args_os().skip(1))?);
    // The conductor is the trusted side: it keeps the caller's whole environment (forge
    // tokens included); its leaves get their own allow-listed environments.
    let names: Vec<String> = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .collect();
    let spec = tdd_supervisor::LeafSpec::new(argv)
        .cwd(&here)
        .allow_env(&names)
        .name("conduct");
    let leaf = crate::supervision::supervisor(ctx)?.launch(&spec)?;
    ctx.out.debug(&format!(
        "the background conductor works on {}",
        work_tree.display()
    ));
    let data = serde_json::json!({
        "id": leaf.id(), "dir": leaf.dir(), "stdout": leaf.stdout_path(), "stderr": leaf.stderr_path(),
    });
    let text = format!("conductor started in the background: {}\n", leaf.id());
    let detail = format!(
        "follow it with `tdd logs {} --follow`; wait for it with `tdd wait {}`",
        leaf.id(),
        leaf.id()
    );
    Ok(
        Outcome::new(data, text).next(crate::output::NextAction::new(
            crate::output::Verb::Complete,
            detail,
        )),
    )
}

/// `args` (the program's name left out) without the `--detach` flag: every occurrence
/// before a `--`, where clap reads it as the flag (it takes no value, and no option
/// takes a value starting with `--`). The parser lets a path (`-C DIR`) through that is
/// not UTF-8, which the supervisor cannot pass on: that is refused as bad input.
fn without_detach(
    args: impl Iterator<Item = std::ffi::OsString>,
) -> Result<Vec<String>, CommandError> {
    let mut kept = Vec::new();
    let mut options_end = false;
    for arg in args {
        let Ok(arg) = arg.into_string() else {
            return Err(CommandError::bad_input(
                "usage",
                "an argument is not UTF-8 text",
            ));
        };
        if !options_end && arg == "--detach" {
            continue;
        }
        options_end |= arg == "--";
        kept.push(arg);
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::without_detach;

    fn strip(args: &[&str]) -> Vec<String> {
        without_detach(args.iter().map(std::ffi::OsString::from)).expect("utf-8")
    }

    #[test]
    fn only_the_detach_flag_is_left_out() {
        assert_eq!(
            strip(&["-q", "conduct", "--detach", "12", "--max-steps", "2"]),
            ["-q", "conduct", "12", "--max-steps", "2"]
        );
        assert_eq!(
            strip(&["conduct", "--detach", "--", "--detach"]),
            ["conduct", "--", "--detach"]
        );
    }
}
