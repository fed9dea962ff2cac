//! The Kubernetes Job `tdd ci init k8s` writes (`render`): one pod per issue.
//!
//! An init container clones the repository (with the published ledgers and the issue's
//! work branch, so a Job started again resumes), and the one container runs
//! `tdd conduct` on the GitHub forge. The forge token and the provider's key come from
//! Secrets, each only into the container that needs it: the clone gets the token, the
//! conductor gets both, and tdd passes a leaf only the provider's key. The pod runs as
//! a non-root user with the runtime's default seccomp profile, no service-account token,
//! no retry (`backoffLimit: 0`: a conductor is resumed, not re-run beside itself) and a
//! hard deadline.

use super::ci_workflow::checked;
use super::ci_workflow::plain;
use super::ci_workflow::secrets_of;

/// What the Job is written from.
#[derive(Debug)]
pub struct Settings<'a> {
    /// The provider the conductor uses.
    pub provider: &'a str,
    /// The image with `tdd`, git and the agent CLI.
    pub image: &'a str,
    /// CPU requested (Kubernetes quantity).
    pub cpu: &'a str,
    /// Memory requested (Kubernetes quantity).
    pub memory: &'a str,
    /// The Job's deadline, in minutes.
    pub timeout: u32,
    /// The repository's clone URL.
    pub repository: &'a str,
    /// `[conductor] branch_prefix`.
    pub branch_prefix: &'a str,
}

/// The Secret holding the forge token (key `token`).
pub const FORGE_SECRET: &str = "tdd-forge";
/// The Secret holding the provider's keys (one key per variable).
pub const PROVIDER_SECRET: &str = "tdd-provider";
/// The placeholder the manifest carries for the issue number.
pub const ISSUE_PLACEHOLDER: &str = "__ISSUE__";

/// The manifest's text, or why a setting cannot go into it.
pub fn render(s: &Settings<'_>) -> Result<String, String> {
    let provider = checked("manifest", "the provider", s.provider, plain)?;
    let image = checked("manifest", "the image", s.image, |c| {
        plain(c) || "/:@".contains(c)
    })?;
    let cpu = checked("manifest", "the CPU request", s.cpu, |c| {
        c.is_ascii_alphanumeric() || c == '.'
    })?;
    let memory = checked("manifest", "the memory request", s.memory, |c| {
        c.is_ascii_alphanumeric() || c == '.'
    })?;
    let repository = checked("manifest", "the repository URL", s.repository, |c| {
        plain(c) || "/:@".contains(c)
    })?;
    let prefix = checked(
        "manifest",
        "[conductor] branch_prefix",
        s.branch_prefix,
        |c| plain(c) || c == '/',
    )?;
    if !(1..=1440).contains(&s.timeout) {
        return Err(format!(
            "the timeout {} is outside 1 to 1440 minutes",
            s.timeout
        ));
    }
    let deadline = u64::from(s.timeout) * 60;
    let keys: String = secrets_of(provider)
        .iter()
        .map(|key| {
            format!(
                "            - name: {key}\n              valueFrom:\n                secretKeyRef:\n                  name: {PROVIDER_SECRET}\n                  key: {key}\n"
            )
        })
        .collect();
    Ok(format!(
        r#"# Written by `tdd ci init k8s`: `tdd conduct` for one issue as a Kubernetes Job.
# Create one Job per issue, e.g. for issue 12:
#   sed 's/{ISSUE_PLACEHOLDER}/12/' deploy/k8s/tdd-job.yaml | kubectl create -f -
# It needs the Secrets `{FORGE_SECRET}` (key `token`: a GitHub token that may push and
# write issues, pull requests and statuses) and `{PROVIDER_SECRET}` (the provider's key).
# A Job started again for the same issue resumes from the branch and the ledger the
# last one pushed. Write it again with `tdd ci init k8s --force`.
apiVersion: batch/v1
kind: Job
metadata:
  generateName: tdd-issue-
  labels:
    app.kubernetes.io/name: tdd
    app.kubernetes.io/component: conductor
spec:
  backoffLimit: 0
  activeDeadlineSeconds: {deadline}
  ttlSecondsAfterFinished: 86400
  template:
    metadata:
      labels:
        app.kubernetes.io/name: tdd
        app.kubernetes.io/component: conductor
    spec:
      restartPolicy: Never
      automountServiceAccountToken: false
      securityContext:
        runAsNonRoot: true
        runAsUser: 1000
        runAsGroup: 1000
        fsGroup: 1000
        seccompProfile:
          type: RuntimeDefault
      volumes:
        - name: work
          emptyDir: {{}}
      initContainers:
        - name: clone
          image: {image}
          workingDir: /work
          command:
            - sh
            - -ec
            - |
              git -c credential.helper='!f() {{ test "$1" = get && printf "username=x-access-token\npassword=%s\n" "$TDD_GIT_TOKEN"; }}; f' clone --quiet "$REPOSITORY" repo
              cd repo
              git -c credential.helper='!f() {{ test "$1" = get && printf "username=x-access-token\npassword=%s\n" "$TDD_GIT_TOKEN"; }}; f' fetch --no-tags origin '+refs/tdd/ledger/*:refs/tdd/ledger/*'
              branch="$$(git for-each-ref --format='%(refname:lstrip=3)' "refs/remotes/origin/${{BRANCH_PREFIX}}${{TDD_ISSUE}}-*" | head -n 1)"
              if [ -n "$branch" ]; then git checkout -q "$branch"; fi
          env:
            - name: REPOSITORY
              value: "{repository}"
            - name: TDD_ISSUE
              value: "{ISSUE_PLACEHOLDER}"
            - name: BRANCH_PREFIX
              value: "{prefix}"
            - name: TDD_GIT_TOKEN
              valueFrom:
                secretKeyRef:
                  name: {FORGE_SECRET}
                  key: token
          volumeMounts:
            - name: work
              mountPath: /work
          securityContext:
            allowPrivilegeEscalation: false
      containers:
        - name: conduct
          image: {image}
          workingDir: /work/repo
          command:
            - tdd
            - conduct
            - $(TDD_ISSUE)
            - --forge
            - github
            - --provider
            - {provider}
            - --state-labels
          env:
            - name: TDD_ISSUE
              value: "{ISSUE_PLACEHOLDER}"
            - name: HOME
              value: /work/home
            - name: GIT_AUTHOR_NAME
              value: tdd
            - name: GIT_AUTHOR_EMAIL
              value: tdd@users.noreply.github.com
            - name: GIT_COMMITTER_NAME
              value: tdd
            - name: GIT_COMMITTER_EMAIL
              value: tdd@users.noreply.github.com
            - name: GITHUB_TOKEN
              valueFrom:
                secretKeyRef:
                  name: {FORGE_SECRET}
                  key: token
{keys}          resources:
            requests:
              cpu: "{cpu}"
              memory: {memory}
            limits:
              memory: {memory}
          volumeMounts:
            - name: work
              mountPath: /work
          securityContext:
            allowPrivilegeEscalation: false
"#
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(provider: &str) -> Settings<'_> {
        Settings {
            provider,
            image: "ghcr.io/acme/tdd-runner:1",
            cpu: "2",
            memory: "4Gi",
            timeout: 120,
            repository: "https://github.com/acme/calc.git",
            branch_prefix: "tdd/issue-",
        }
    }

    #[test]
    fn the_manifest_is_a_job_every_field_of_which_kubernetes_knows() {
        use k8s_openapi::api::batch::v1::Job;
        for provider in ["claude", "codex", "aider", "scripted"] {
            let text = render(&settings(provider)).expect("renders");
            let as_written: serde_json::Value = serde_saphyr::from_str(&text).expect("YAML");
            let job: Job = serde_json::from_value(as_written.clone()).expect("a batch/v1 Job");
            // Read back through the typed Job, nothing is lost: no field is unknown to it.
            let typed = serde_json::to_value(&job).expect("serialises");
            assert_eq!(typed, as_written, "{provider}");
            let spec = job.spec.expect("spec");
            assert_eq!(spec.backoff_limit, Some(0));
            assert_eq!(spec.active_deadline_seconds, Some(7200));
            let pod = spec.template.spec.expect("pod spec");
            assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
            assert_eq!(pod.automount_service_account_token, Some(false));
            let conduct = &pod.containers[0];
            let requests = conduct
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .expect("requests");
            assert_eq!(requests["cpu"].0, "2");
            assert_eq!(requests["memory"].0, "4Gi");
            // The provider's key goes to the conductor only, from its Secret.
            let from_provider_secret = |c: &k8s_openapi::api::core::v1::Container| {
                c.env
                    .iter()
                    .flatten()
                    .filter(|e| {
                        e.value_from
                            .as_ref()
                            .and_then(|v| v.secret_key_ref.as_ref())
                            .is_some_and(|s| s.name == PROVIDER_SECRET)
                    })
                    .count()
            };
            assert_eq!(
                from_provider_secret(conduct),
                secrets_of(provider).len(),
                "{provider}"
            );
            let clone = &pod.init_containers.as_ref().expect("init containers")[0];
            assert_eq!(from_provider_secret(clone), 0);
        }
    }

    #[test]
    fn a_setting_that_could_break_out_of_the_manifest_is_refused() {
        let mut s = settings("claude");
        s.image = "img\n  hostNetwork: true";
        assert!(render(&s).is_err());
        let mut s = settings("claude");
        s.repository = "https://x/\"; rm -rf /";
        assert!(render(&s).is_err());
        let mut s = settings("claude");
        s.timeout = 0;
        assert!(render(&s).is_err());
    }
}
