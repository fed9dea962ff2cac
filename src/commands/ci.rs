//! `tdd ci init github` (the workflow that runs `tdd conduct` as a GitHub Actions job)
//! and `tdd ci gate` (the job's first decision: whether this event asks for a run).

use std::path::Path;

use serde_json::Value;
use serde_json::json;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::NextAction;
use crate::output::Outcome;
use crate::output::Verb;

use super::ci_workflow as workflow;

/// Run `tdd conduct` in CI.
#[derive(Debug, clap::Subcommand)]
pub enum CiCommand {
    /// Write a CI definition for this repository.
    #[command(subcommand)]
    Init(CiInit),
    /// Inside a GitHub Actions job: decide from the event whether to conduct an issue,
    /// and say which (`conduct` and `issue` in `$GITHUB_OUTPUT`).
    Gate(GateArgs),
}

/// What `tdd ci init` writes.
#[derive(Debug, clap::Subcommand)]
pub enum CiInit {
    /// `.github/workflows/tdd.yml`: `tdd conduct` as a job, one per issue, triggered by a
    /// label or a `/tdd conduct` comment from a member.
    Github(GithubArgs),
    /// `deploy/k8s/tdd-job.yaml`: `tdd conduct` for one issue as a Kubernetes Job (one
    /// pod per issue, the repository cloned in an init container, keys from Secrets).
    K8s(K8sArgs),
}

/// The options of `tdd ci init k8s`.
#[derive(Debug, clap::Args)]
pub struct K8sArgs {
    /// The image the pod runs: it must hold `tdd`, git and the agent CLI.
    #[arg(long, value_name = "IMAGE")]
    image: String,
    /// The agent CLI the conductor uses (default: `[conductor] provider`).
    #[arg(long, value_name = "P")]
    provider: Option<String>,
    /// The repository's clone URL (default: the `origin` remote's).
    #[arg(long, value_name = "URL")]
    repository: Option<String>,
    /// CPU the pod requests (a Kubernetes quantity).
    #[arg(long, value_name = "CPU", default_value = "2")]
    cpu: String,
    /// Memory the pod requests and is limited to (a Kubernetes quantity).
    #[arg(long, value_name = "MEMORY", default_value = "4Gi")]
    memory: String,
    /// The Job's deadline, in minutes.
    #[arg(long, value_name = "MINUTES", default_value_t = 120)]
    timeout: u32,
    /// Overwrite an existing manifest.
    #[arg(long)]
    force: bool,
}

/// The options of `tdd ci init github`.
#[derive(Debug, clap::Args)]
pub struct GithubArgs {
    /// The agent CLI the job installs and conducts with: claude, codex, aider, or a
    /// provider of tdd.toml that needs nothing installed (default: `[conductor] provider`).
    #[arg(long, value_name = "P")]
    provider: Option<String>,
    /// The runner image (`runs-on`).
    #[arg(long, value_name = "IMAGE", default_value = "ubuntu-latest")]
    runs_on: String,
    /// The conduct step's timeout, in minutes; the job gets 15 more for setup.
    #[arg(long, value_name = "MINUTES", default_value_t = 120)]
    timeout: u32,
    /// The issue label that starts a run.
    #[arg(long, value_name = "NAME", default_value = "tdd")]
    label: String,
    /// Overwrite an existing workflow file.
    #[arg(long)]
    force: bool,
}

/// The options of `tdd ci gate`.
#[derive(Debug, clap::Args)]
pub struct GateArgs {
    /// The issue label that starts a run.
    #[arg(long, value_name = "NAME", default_value = "tdd")]
    label: String,
}

impl CiCommand {
    /// The envelope's command name.
    pub fn name(&self) -> &'static str {
        match self {
            CiCommand::Init(CiInit::Github(_)) => "ci init github",
            CiCommand::Init(CiInit::K8s(_)) => "ci init k8s",
            CiCommand::Gate(_) => "ci gate",
        }
    }
}

/// Runs `tdd ci ...`.
pub fn cmd_ci(ctx: &Ctx, cmd: CiCommand) -> Result<Outcome, CommandError> {
    match cmd {
        CiCommand::Init(CiInit::Github(args)) => init_github(ctx, &args),
        CiCommand::Init(CiInit::K8s(args)) => init_k8s(ctx, &args),
        CiCommand::Gate(args) => gate(&args),
    }
}

/// The workflow's path under the work tree.
const WORKFLOW: &str = ".github/workflows/tdd.yml";

fn init_github(ctx: &Ctx, args: &GithubArgs) -> Result<Outcome, CommandError> {
    let root = ctx.work_tree()?;
    let (_, config, _) = ctx.config()?;
    let provider = provider_of(args.provider.as_ref(), &config)?;
    let settings = workflow::Settings {
        provider: &provider,
        runs_on: &args.runs_on,
        timeout: args.timeout,
        label: &args.label,
        branch_prefix: &config.conductor.branch_prefix,
        tdd_git: env!("CARGO_PKG_REPOSITORY"),
        tdd_version: env!("CARGO_PKG_VERSION"),
    };
    let text = workflow::render(&settings).map_err(|why| {
        CommandError::bad_input("ci_option_invalid", why)
            .hint("see `tdd ci init github --help` for what each option accepts")
    })?;
    let path = root.join(WORKFLOW);
    refuse_existing(&path, args.force, "tdd ci init github")?;
    write_file(&path, &text)?;
    let data = json!({
        "path": path,
        "provider": provider,
        "label": args.label,
        "runs_on": args.runs_on,
        "timeout_minutes": args.timeout,
        "secrets": workflow::secrets_of(&provider),
    });
    let secrets = workflow::secrets_of(&provider);
    let mut text = format!("wrote {}\n", path.display());
    if !secrets.is_empty() {
        text.push_str(&format!(
            "add the repository secret{} {} (Settings, Secrets and variables, Actions)\n",
            if secrets.len() == 1 { "" } else { "s" },
            secrets.join(", ")
        ));
    }
    text.push_str(&format!(
        "label an issue `{}`, or comment `/tdd conduct` on it, to start a run\n",
        args.label
    ));
    Ok(Outcome::new(data, text).next(NextAction::new(
        Verb::ReviewConfig,
        format!("commit {WORKFLOW} and push it to the default branch"),
    )))
}

/// The manifest's path under the work tree.
const MANIFEST: &str = "deploy/k8s/tdd-job.yaml";

/// The provider `given`, else tdd.toml's.
fn provider_of(
    given: Option<&String>,
    config: &tdd_engine::config::Config,
) -> Result<String, CommandError> {
    given
        .cloned()
        .or_else(|| config.conductor.provider.clone())
        .ok_or_else(|| {
            CommandError::bad_input(
                "ci_option_invalid",
                "no provider: tdd.toml sets no `[conductor] provider` and --provider was not given",
            )
            .hint("pass --provider claude (or codex, aider, or a provider of tdd.toml)")
        })
}

/// Refuses to overwrite `path` unless `force`.
fn refuse_existing(path: &Path, force: bool, command: &str) -> Result<(), CommandError> {
    if path.exists() && !force {
        return Err(CommandError::refused(
            "ci_workflow_exists",
            format!("{} exists", path.display()),
        )
        .hint(format!(
            "pass --force to write it again: `{command} --force`"
        )));
    }
    Ok(())
}

fn init_k8s(ctx: &Ctx, args: &K8sArgs) -> Result<Outcome, CommandError> {
    let root = ctx.work_tree()?;
    let (_, config, _) = ctx.config()?;
    let provider = provider_of(args.provider.as_ref(), &config)?;
    let repository = match &args.repository {
        Some(url) => url.clone(),
        None => tdd_engine::git::Git::new(&root)
            .text(["remote", "get-url", "origin"])
            .map_err(|_| {
                CommandError::bad_input(
                    "ci_option_invalid",
                    "no repository URL: the work tree has no `origin` remote and --repository was not given",
                )
                .hint("pass --repository https://github.com/<owner>/<name>.git")
            })?,
    };
    let settings = super::ci_k8s::Settings {
        provider: &provider,
        image: &args.image,
        cpu: &args.cpu,
        memory: &args.memory,
        timeout: args.timeout,
        repository: &repository,
        branch_prefix: &config.conductor.branch_prefix,
    };
    let text = super::ci_k8s::render(&settings).map_err(|why| {
        CommandError::bad_input("ci_option_invalid", why)
            .hint("see `tdd ci init k8s --help` for what each option accepts")
    })?;
    let path = root.join(MANIFEST);
    refuse_existing(&path, args.force, "tdd ci init k8s")?;
    write_file(&path, &text)?;
    let secrets = workflow::secrets_of(&provider);
    let data = json!({
        "path": path,
        "provider": provider,
        "image": args.image,
        "repository": repository,
        "secrets": { super::ci_k8s::FORGE_SECRET: ["token"], super::ci_k8s::PROVIDER_SECRET: secrets },
    });
    let text = format!(
        "wrote {}\ncreate the Secrets `{}` (key token) and `{}` (keys {}), then one Job per issue:\n  sed 's/{}/12/' {MANIFEST} | kubectl create -f -\n",
        path.display(),
        super::ci_k8s::FORGE_SECRET,
        super::ci_k8s::PROVIDER_SECRET,
        if secrets.is_empty() {
            "none for this provider".to_string()
        } else {
            secrets.join(", ")
        },
        super::ci_k8s::ISSUE_PLACEHOLDER,
    );
    Ok(Outcome::new(data, text).next(NextAction::new(
        Verb::ReviewConfig,
        format!("commit {MANIFEST}, create the Secrets, and create a Job per issue"),
    )))
}

fn write_file(path: &Path, text: &str) -> Result<(), CommandError> {
    let failed = |e: std::io::Error| {
        CommandError::refused("write_failed", format!("{}: {e}", path.display()))
            .hint("make the directory writable and run the command again")
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(failed)?;
    }
    std::fs::write(path, text).map_err(failed)
}

/// What the event asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Conduct this issue.
    Conduct(u64),
    /// Nothing, and why.
    Skip(String),
}

/// The authors whose `/tdd conduct` comment starts a run.
const TRUSTED: &[&str] = &["OWNER", "MEMBER", "COLLABORATOR"];
/// The comment that asks for a run.
const COMMAND: &str = "/tdd conduct";

/// Decides from a GitHub event (`name`, the payload) whether to conduct an issue.
pub(crate) fn decide(name: &str, event: &Value, label: &str) -> Decision {
    let issue = &event["issue"];
    let Some(number) = issue["number"].as_u64() else {
        return Decision::Skip(format!("the {name} event names no issue"));
    };
    if !issue["pull_request"].is_null() {
        return Decision::Skip(format!("#{number} is a pull request, not an issue"));
    }
    let action = event["action"].as_str().unwrap_or_default();
    match name {
        "issues" if action == "labeled" => match event["label"]["name"].as_str() {
            Some(found) if found == label => Decision::Conduct(number),
            found => Decision::Skip(format!(
                "#{number} was labelled `{}`, not `{label}`",
                found.unwrap_or_default()
            )),
        },
        "issue_comment" if action == "created" => {
            let body = event["comment"]["body"].as_str().unwrap_or_default();
            let asks = body
                .trim_start()
                .strip_prefix(COMMAND)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(char::is_whitespace));
            if !asks {
                return Decision::Skip(format!(
                    "the comment on #{number} does not start with `{COMMAND}`"
                ));
            }
            let author = event["comment"]["author_association"]
                .as_str()
                .unwrap_or("NONE");
            if TRUSTED.contains(&author) {
                Decision::Conduct(number)
            } else {
                Decision::Skip(format!(
                    "`{COMMAND}` on #{number} came from an author who is {author}, not an owner, member or collaborator"
                ))
            }
        }
        _ => Decision::Skip(format!("a {name} event ({action}) does not start a run")),
    }
}

fn gate(args: &GateArgs) -> Result<Outcome, CommandError> {
    let outside = |what: &str| {
        CommandError::bad_input(
            "ci_event_missing",
            format!("{what} is not set: `tdd ci gate` runs inside a GitHub Actions job"),
        )
        .hint("run it as a step of the workflow `tdd ci init github` writes")
    };
    let name = std::env::var("GITHUB_EVENT_NAME").map_err(|_| outside("GITHUB_EVENT_NAME"))?;
    let path = std::env::var_os("GITHUB_EVENT_PATH").ok_or_else(|| outside("GITHUB_EVENT_PATH"))?;
    let path = std::path::PathBuf::from(path);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        CommandError::bad_input("ci_event_invalid", format!("{}: {e}", path.display()))
            .hint("GITHUB_EVENT_PATH must name the event payload the runner wrote")
    })?;
    let event: Value = serde_json::from_str(&text).map_err(|e| {
        CommandError::bad_input(
            "ci_event_invalid",
            format!(
                "{}:{}:{}: not JSON: {e}",
                path.display(),
                e.line(),
                e.column()
            ),
        )
        .hint("GITHUB_EVENT_PATH must name the event payload the runner wrote")
    })?;
    let decision = decide(&name, &event, &args.label);
    let (conduct, issue, reason) = match &decision {
        Decision::Conduct(n) => (true, Some(*n), format!("conduct issue #{n}")),
        Decision::Skip(why) => (false, None, why.clone()),
    };
    if let Some(output) = std::env::var_os("GITHUB_OUTPUT") {
        let line = format!(
            "conduct={conduct}\nissue={}\n",
            issue.map(|n| n.to_string()).unwrap_or_default()
        );
        use std::io::Write as _;
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&output)
            .and_then(|mut f| f.write_all(line.as_bytes()))
            .map_err(|e| {
                CommandError::refused(
                    "write_failed",
                    format!("{}: {e}", std::path::Path::new(&output).display()),
                )
                .hint("GITHUB_OUTPUT must name a file the job can append to")
            })?;
    }
    let data = json!({ "event": name, "conduct": conduct, "issue": issue, "reason": reason });
    Ok(Outcome::new(data, format!("{reason}\n")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comment(body: &str, author: &str) -> Value {
        json!({
            "action": "created",
            "issue": { "number": 7 },
            "comment": { "body": body, "author_association": author },
        })
    }

    #[test]
    fn a_label_or_a_members_command_conducts_and_nothing_else_does() {
        let labelled =
            json!({ "action": "labeled", "issue": { "number": 7 }, "label": { "name": "tdd" } });
        assert_eq!(decide("issues", &labelled, "tdd"), Decision::Conduct(7));
        assert!(matches!(
            decide("issues", &labelled, "agent"),
            Decision::Skip(_)
        ));
        for author in TRUSTED {
            assert_eq!(
                decide("issue_comment", &comment("/tdd conduct", author), "tdd"),
                Decision::Conduct(7)
            );
        }
        assert_eq!(
            decide(
                "issue_comment",
                &comment("  /tdd conduct please", "MEMBER"),
                "tdd"
            ),
            Decision::Conduct(7)
        );
        for (body, author) in [
            ("/tdd conduct", "CONTRIBUTOR"),
            ("/tdd conduct", "NONE"),
            ("/tdd conduct", "FIRST_TIME_CONTRIBUTOR"),
            ("please /tdd conduct", "OWNER"),
            ("/tdd conductor", "OWNER"),
        ] {
            let decision = decide("issue_comment", &comment(body, author), "tdd");
            assert!(matches!(decision, Decision::Skip(_)), "{body} by {author}");
        }
        let mut on_pr = comment("/tdd conduct", "OWNER");
        on_pr["issue"]["pull_request"] = json!({ "url": "x" });
        assert!(matches!(
            decide("issue_comment", &on_pr, "tdd"),
            Decision::Skip(_)
        ));
        let edited = json!({ "action": "edited", "issue": { "number": 7 }, "comment": { "body": "/tdd conduct", "author_association": "OWNER" } });
        assert!(matches!(
            decide("issue_comment", &edited, "tdd"),
            Decision::Skip(_)
        ));
    }
}
