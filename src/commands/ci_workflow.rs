//! The GitHub Actions workflow `tdd ci init github` writes (`render`).
//!
//! Every value put into it is checked against a narrow alphabet first, and no text of
//! the event (an issue's title or body, a comment) is ever interpolated into a `run:`
//! script: what a step needs of the event reaches it through `env:`, from `tdd ci gate`'s
//! outputs. The job has exactly the permissions a run uses (contents, issues,
//! pull-requests and statuses: write), one job per issue at a time (a concurrency
//! group per issue number; a second trigger waits), no `pull_request_target`, and no
//! credential left in `.git/config` for a leaf to read: the checkout does not persist
//! it, and git gets the token from the environment of the one step that fetches.

use tdd_leaves::providers;

/// What the workflow is written from.
#[derive(Debug)]
pub struct Settings<'a> {
    /// The provider the job conducts with.
    pub provider: &'a str,
    /// The runner image.
    pub runs_on: &'a str,
    /// The conduct step's timeout, in minutes.
    pub timeout: u32,
    /// The label that starts a run.
    pub label: &'a str,
    /// `[conductor] branch_prefix`.
    pub branch_prefix: &'a str,
    /// Where tdd's source is, for `cargo install --git`.
    pub tdd_git: &'a str,
    /// The tdd version the job installs (tag `v<version>`).
    pub tdd_version: &'a str,
}

/// What the job installs for an agent CLI, and the secrets its key comes from.
struct Agent {
    install: String,
    secrets: &'static [&'static str],
}

fn agent(provider: &str) -> Option<Agent> {
    let tested = |versions: &[&str]| versions.first().copied().unwrap_or("latest").to_string();
    match provider {
        "claude" => Some(Agent {
            install: format!(
                "npm install --global @anthropic-ai/claude-code@{}",
                tested(providers::claude::TESTED_VERSIONS)
            ),
            secrets: &["ANTHROPIC_API_KEY"],
        }),
        "codex" => Some(Agent {
            install: format!(
                "npm install --global @openai/codex@{}",
                tested(providers::codex::TESTED_VERSIONS)
            ),
            secrets: &["OPENAI_API_KEY"],
        }),
        "aider" => Some(Agent {
            install: format!(
                "python3 -m pip install --user 'aider-chat=={}.*'",
                tested(providers::aider::TESTED_VERSIONS)
            ),
            secrets: &["OPENAI_API_KEY", "ANTHROPIC_API_KEY"],
        }),
        _ => None,
    }
}

/// The repository secrets the workflow reads for `provider`.
pub fn secrets_of(provider: &str) -> Vec<&'static str> {
    agent(provider)
        .map(|a| a.secrets.to_vec())
        .unwrap_or_default()
}

/// `value` (named `what`) when it is non-empty, at most 200 characters, and every one
/// of them is `allowed`; else why it cannot go into the file (`into`).
pub fn checked<'a>(
    into: &str,
    what: &str,
    value: &'a str,
    allowed: impl Fn(char) -> bool,
) -> Result<&'a str, String> {
    if value.is_empty() || value.len() > 200 || !value.chars().all(allowed) {
        return Err(format!(
            "{what} `{value}` is not allowed in the {into}: use letters, digits and - _ . (and / : @ in an image or a URL) only"
        ));
    }
    Ok(value)
}

/// Letters, digits, `-`, `_` and `.`.
pub fn plain(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-_.".contains(c)
}

/// The workflow's text, or why a setting cannot go into it.
pub fn render(s: &Settings<'_>) -> Result<String, String> {
    let provider = checked("workflow", "the provider", s.provider, plain)?;
    let runs_on = checked("workflow", "the runner image", s.runs_on, plain)?;
    let label = checked("workflow", "the label", s.label, |c| plain(c) || c == ':')?;
    let prefix = checked(
        "workflow",
        "[conductor] branch_prefix",
        s.branch_prefix,
        |c| plain(c) || c == '/',
    )?;
    let version = checked("workflow", "the tdd version", s.tdd_version, plain)?;
    let git = checked("workflow", "the tdd repository", s.tdd_git, |c| {
        plain(c) || ":/".contains(c)
    })?;
    if !(1..=345).contains(&s.timeout) {
        return Err(format!(
            "the timeout {} is outside 1 to 345 minutes (a job may run 360 minutes, and setup needs 15)",
            s.timeout
        ));
    }
    let agent = agent(provider);
    let install = match &agent {
        Some(agent) => format!(
            "
      - name: Install the agent CLI
        id: install-agent
        if: steps.gate.outputs.conduct == 'true'
        run: {}
",
            agent.install
        ),
        None => String::new(),
    };
    let keys: String = agent
        .as_ref()
        .map(|a| a.secrets.to_vec())
        .unwrap_or_default()
        .iter()
        .map(|k| format!("          {k}: ${{{{ secrets.{k} }}}}\n"))
        .collect();
    let job_timeout = s.timeout + 15;
    let timeout = s.timeout;
    Ok(format!(
        r#"# Written by `tdd ci init github`: `tdd conduct` as a GitHub Actions job, one per issue.
# A run starts when an issue is labelled `{label}`, or when an owner, member or
# collaborator comments `/tdd conduct` on it. A second trigger for the same issue waits
# for the first; a run started again resumes from the branch and the ledger it pushed.
# Write it again with `tdd ci init github --force`.
name: tdd

on:
  issues:
    types: [labeled]
  issue_comment:
    types: [created]

permissions: {{}}

jobs:
  conduct:
    if: >-
      github.event.issue.pull_request == null && (
      (github.event_name == 'issues' && github.event.label.name == '{label}') ||
      (github.event_name == 'issue_comment' &&
      startsWith(github.event.comment.body, '/tdd conduct') &&
      contains(fromJSON('["OWNER", "MEMBER", "COLLABORATOR"]'), github.event.comment.author_association)))
    runs-on: {runs_on}
    timeout-minutes: {job_timeout}
    permissions:
      contents: write
      issues: write
      pull-requests: write
      statuses: write
    concurrency:
      group: tdd-issue-${{{{ github.event.issue.number }}}}
      cancel-in-progress: false
    env:
      TDD_VERSION: "{version}"
      # The identity of the commits tdd makes for the run.
      GIT_AUTHOR_NAME: github-actions[bot]
      GIT_AUTHOR_EMAIL: 41898282+github-actions[bot]@users.noreply.github.com
      GIT_COMMITTER_NAME: github-actions[bot]
      GIT_COMMITTER_EMAIL: 41898282+github-actions[bot]@users.noreply.github.com
    steps:
      - name: Check out the repository
        uses: actions/checkout@v4
        with:
          fetch-depth: 0
          persist-credentials: false

      - name: Restore tdd
        id: cache-tdd
        uses: actions/cache@v4
        with:
          path: ~/.cargo/bin/tdd
          key: tdd-${{{{ runner.os }}}}-${{{{ env.TDD_VERSION }}}}

      - name: Install tdd
        id: install-tdd
        if: steps.cache-tdd.outputs.cache-hit != 'true'
        run: cargo install --locked --git "$TDD_GIT" --tag "v$TDD_VERSION" tdd
        env:
          TDD_GIT: {git}

      - name: Decide whether to conduct
        id: gate
        run: tdd ci gate --label "$LABEL"
        env:
          LABEL: "{label}"
{install}
      - name: Fetch the published ledger and the work branch
        id: resume
        if: steps.gate.outputs.conduct == 'true'
        run: |
          git fetch --no-tags origin '+refs/tdd/ledger/*:refs/tdd/ledger/*'
          branch="$(git for-each-ref --format='%(refname:lstrip=3)' "refs/remotes/origin/${{BRANCH_PREFIX}}${{ISSUE}}-*" | head -n 1)"
          if [ -n "$branch" ]; then
            git checkout -q "$branch"
            echo "resuming issue #$ISSUE on $branch"
          fi
        env:
          ISSUE: ${{{{ steps.gate.outputs.issue }}}}
          BRANCH_PREFIX: "{prefix}"
          TDD_GIT_TOKEN: ${{{{ github.token }}}}
          GIT_CONFIG_COUNT: "2"
          GIT_CONFIG_KEY_0: credential.helper
          GIT_CONFIG_VALUE_0: ""
          GIT_CONFIG_KEY_1: credential.helper
          GIT_CONFIG_VALUE_1: '!f() {{ test "$1" = get && printf "username=x-access-token\npassword=%s\n" "$TDD_GIT_TOKEN"; }}; f'

      - name: Conduct the issue
        id: conduct
        if: steps.gate.outputs.conduct == 'true'
        timeout-minutes: {timeout}
        run: tdd conduct "$ISSUE" --forge github --repo "$GITHUB_REPOSITORY" --provider "$PROVIDER" --state-labels
        env:
          ISSUE: ${{{{ steps.gate.outputs.issue }}}}
          PROVIDER: {provider}
          GITHUB_TOKEN: ${{{{ github.token }}}}
{keys}
      - name: Keep the run report and the ledger
        if: always() && steps.gate.outputs.conduct == 'true'
        run: |
          mkdir -p "$RUNNER_TEMP/tdd"
          tdd report --out "$RUNNER_TEMP/tdd/report.html" || echo "no report to keep"
          tdd ledger export --json > "$RUNNER_TEMP/tdd/ledger.json" || echo "no ledger to keep"

      - name: Upload the run report and the ledger
        if: always() && steps.gate.outputs.conduct == 'true'
        uses: actions/upload-artifact@v4
        with:
          name: tdd-issue-${{{{ steps.gate.outputs.issue }}}}-run-${{{{ github.run_id }}}}-${{{{ github.run_attempt }}}}
          path: ${{{{ runner.temp }}}}/tdd/
          if-no-files-found: warn
"#
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(provider: &str) -> Settings<'_> {
        Settings {
            provider,
            runs_on: "ubuntu-latest",
            timeout: 120,
            label: "tdd",
            branch_prefix: "tdd/issue-",
            tdd_git: "https://github.com/tdd-dev/tdd",
            tdd_version: "0.1.0",
        }
    }

    /// The workflow's steps as YAML values.
    fn steps(text: &str) -> Vec<serde_json::Value> {
        let doc: serde_json::Value = serde_saphyr::from_str(text).expect("the workflow is YAML");
        doc["jobs"]["conduct"]["steps"]
            .as_array()
            .expect("steps")
            .clone()
    }

    #[test]
    fn no_run_script_interpolates_an_expression_and_permissions_are_the_four() {
        for provider in ["claude", "codex", "aider", "scripted"] {
            let text = render(&settings(provider)).expect("renders");
            for step in steps(&text) {
                if let Some(run) = step["run"].as_str() {
                    assert!(
                        !run.contains("${{"),
                        "{provider}: an expression in `run:`: {run}"
                    );
                }
            }
            let doc: serde_json::Value = serde_saphyr::from_str(&text).expect("yaml");
            assert_eq!(doc["permissions"], serde_json::json!({}));
            let permissions = &doc["jobs"]["conduct"]["permissions"];
            assert_eq!(
                permissions,
                &serde_json::json!({ "contents": "write", "issues": "write", "pull-requests": "write", "statuses": "write" })
            );
            assert_eq!(
                doc["jobs"]["conduct"]["concurrency"]["group"],
                "tdd-issue-${{ github.event.issue.number }}"
            );
            assert_eq!(
                doc["jobs"]["conduct"]["concurrency"]["cancel-in-progress"],
                false
            );
            assert!(!text.contains("pull_request_target"));
            let job_if = doc["jobs"]["conduct"]["if"]
                .as_str()
                .expect("a job condition");
            assert!(job_if.contains("author_association"), "{job_if}");
        }
    }

    #[test]
    fn the_provider_key_reaches_only_the_conduct_step_from_a_secret() {
        let text = render(&settings("claude")).expect("renders");
        let with_key: Vec<String> = steps(&text)
            .iter()
            .filter(|s| !s["env"]["ANTHROPIC_API_KEY"].is_null())
            .map(|s| s["id"].as_str().unwrap_or_default().to_string())
            .collect();
        assert_eq!(with_key, ["conduct"]);
        assert!(text.contains("ANTHROPIC_API_KEY: ${{ secrets.ANTHROPIC_API_KEY }}"));
        assert!(text.contains("@anthropic-ai/claude-code@2.1"));
        // The forge token is in no step but the two that talk to GitHub.
        let with_token: Vec<String> = steps(&text)
            .iter()
            .filter(|s| {
                s["env"]
                    .as_object()
                    .is_some_and(|e| e.values().any(|v| v == "${{ github.token }}"))
            })
            .map(|s| s["id"].as_str().unwrap_or_default().to_string())
            .collect();
        assert_eq!(with_token, ["resume", "conduct"]);
    }

    #[test]
    fn a_setting_that_could_break_out_of_the_workflow_is_refused() {
        for (field, value) in [
            ("label", "tdd' || true || '"),
            ("label", "a\"b"),
            ("provider", "claude; rm -rf /"),
            ("runs_on", "${{ secrets.X }}"),
        ] {
            let mut s = settings("claude");
            match field {
                "label" => s.label = value,
                "provider" => s.provider = value,
                _ => s.runs_on = value,
            }
            let refused = render(&s).expect_err("refused");
            assert!(refused.contains("not allowed"), "{refused}");
        }
        let mut s = settings("claude");
        s.timeout = 0;
        assert!(render(&s).is_err());
        s.timeout = 346;
        assert!(render(&s).is_err());
    }
}
