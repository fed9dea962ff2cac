//! The GitHub forge: the issue read from GitHub, the thread as comments edited in
//! place, the work branch pushed with the git CLI, a draft PR, commit statuses and
//! optional state labels. Every id is kept in the run's journal, and every comment
//! carries a hidden marker so a lost id is found again by listing the comments.

mod api;
mod push;
pub mod spec;
mod token;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;

use http::Method;
use serde_json::Value;
use serde_json::json;
use tdd_prompts::Issue;

pub use api::Api;
pub use api::ApiError;
pub use api::Reply;
pub use api::RetryPolicy;
pub use push::PushError;
pub use push::TOKEN_VAR;
pub use spec::Repo;
pub use token::REDACTED;
pub use token::Redactor;
pub use token::TOKEN_VARS;
pub use token::Token;
pub use token::resolve as resolve_token;

use super::CommitStatus;
use super::Forge;
use super::ForgeError;
use super::RunMark;
use crate::events::CommentPosted;
use crate::events::ConductorEvent;
use crate::events::PostedStatus;
use crate::events::PrOpened;
use crate::events::StatusesPosted;
use crate::journal::Journal;

/// Which GitHub issue, where, and with what token.
#[derive(Debug, Clone)]
pub struct GitHubSpec {
    /// The API root (`https://api.github.com`).
    pub api: String,
    /// The repository.
    pub repo: Repo,
    /// The issue number.
    pub number: u64,
    /// The token.
    pub token: Token,
    /// The git remote the work branch is pushed to.
    pub remote: String,
    /// Whether the issue gets the `tdd:running`, `tdd:bailed` and `tdd:done` labels.
    pub labels: bool,
    /// How calls are retried.
    pub retry: RetryPolicy,
}

impl GitHubSpec {
    /// `owner/name#n`.
    pub fn describe(&self) -> String {
        format!("{}#{}", self.repo, self.number)
    }
}

/// What a token may do in a repository, as `tdd doctor` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// The repository's issues can be read.
    pub read_issues: bool,
    /// The token may push (and so write statuses and pull requests).
    pub push: bool,
    /// A classic token's scopes (`None` for a fine-grained token, which has none).
    pub scopes: Option<Vec<String>>,
    /// What the token lacks: scopes of a classic token, permissions of a
    /// fine-grained one.
    pub missing: Vec<String>,
}

/// Asks GitHub what `token` may do in `repo`: the repository (its `permissions` and
/// the token's scopes), then its issues.
pub fn access(api: &str, repo: &Repo, token: &Token) -> Result<Access, ApiError> {
    let policy = RetryPolicy {
        attempts: 2,
        ..RetryPolicy::default()
    };
    let client = Api::new(api, token, policy)?;
    let reply = client.get(&format!("/repos/{repo}"))?;
    let push = reply.body["permissions"]["push"].as_bool().unwrap_or(false);
    let private = reply.body["private"].as_bool().unwrap_or(true);
    let read_issues = match client.get(&format!("/repos/{repo}/issues?per_page=1")) {
        Ok(_) => true,
        Err(ApiError::Denied { .. }) => false,
        Err(err) => return Err(err),
    };
    let scopes: Option<Vec<String>> = reply.scopes.map(|s| {
        s.split(',')
            .map(|x| x.trim().to_string())
            .filter(|x| !x.is_empty())
            .collect()
    });
    let mut missing = Vec::new();
    match &scopes {
        Some(scopes) => {
            let has = |name: &str| scopes.iter().any(|s| s == name);
            if !has("repo") && (private || !has("public_repo")) {
                missing.push(if private { "repo" } else { "public_repo" }.to_string());
            }
        }
        None => {
            if !read_issues {
                missing.push("Issues: read and write".to_string());
            }
            if !push {
                missing.push("Contents: read and write".to_string());
                missing.push("Pull requests: read and write".to_string());
                missing.push("Commit statuses: read and write".to_string());
            }
        }
    }
    Ok(Access {
        read_issues,
        push,
        scopes,
        missing,
    })
}

/// The hidden marker that ends every comment posted under `key`.
fn marker(key: &str) -> String {
    format!("<!-- tdd-conduct:{key} -->")
}

/// The key of a comment's marker, if it carries one.
fn marker_key(body: &str) -> Option<&str> {
    let start = body.rfind("<!-- tdd-conduct:")? + "<!-- tdd-conduct:".len();
    let rest = &body[start..];
    rest.find(" -->").map(|end| &rest[..end])
}

/// A connection to GitHub, the issue read, before the run's journal exists.
#[derive(Debug)]
pub struct Connection {
    api: Api,
    spec: GitHubSpec,
    labels: Vec<String>,
}

impl Connection {
    /// A client of `spec`'s API.
    pub fn open(spec: &GitHubSpec) -> Result<Connection, ForgeError> {
        Ok(Connection {
            api: Api::new(&spec.api, &spec.token, spec.retry)?,
            spec: spec.clone(),
            labels: Vec::new(),
        })
    }

    /// The API client.
    pub fn api(&self) -> &Api {
        &self.api
    }

    /// Reads the issue: its title, body and labels; the criteria are its `- [ ]` items
    /// under an "Acceptance criteria" heading, else every checklist item (none is
    /// allowed here: the run bails `needs_user` before planning).
    pub fn read_issue(&mut self) -> Result<Issue, ForgeError> {
        let path = format!("/repos/{}/issues/{}", self.spec.repo, self.spec.number);
        let reply = self.api.get(&path)?;
        let redactor = self.api.redactor();
        let title = redactor.redact(reply.body["title"].as_str().unwrap_or_default());
        let mut body = redactor.redact(reply.body["body"].as_str().unwrap_or_default());
        self.labels = reply.body["labels"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| l["name"].as_str().map(str::to_string))
            .collect();
        let shown: Vec<&str> = self
            .labels
            .iter()
            .map(String::as_str)
            .filter(|l| !l.starts_with("tdd:"))
            .collect();
        let criteria = crate::issue::criteria(&body);
        if !shown.is_empty() {
            body = format!("{}\n\nLabels: {}", body.trim_end(), shown.join(", "));
        }
        Ok(Issue::new(
            self.spec.number,
            title.trim().to_string(),
            body.trim().to_string(),
            criteria,
        ))
    }

    /// The forge of a run, recording in `journal`.
    pub fn into_forge(self, journal: Journal) -> GitHubForge {
        GitHubForge {
            api: self.api,
            spec: self.spec,
            journal,
            cache: RefCell::new(Cache {
                labels: self.labels,
                ..Cache::default()
            }),
        }
    }
}

/// What the forge knows of GitHub's side, read once per process.
#[derive(Debug, Default)]
struct Cache {
    /// Comments by key: id and body, once listed.
    comments: Option<BTreeMap<String, (u64, String)>>,
    /// The draft PR, once found or opened.
    pr: Option<Pr>,
    /// The issue's labels.
    labels: Vec<String>,
}

#[derive(Debug, Clone)]
struct Pr {
    number: u64,
    url: String,
    title: String,
    body: String,
}

impl Pr {
    fn from_json(v: &Value) -> Option<Pr> {
        Some(Pr {
            number: v["number"].as_u64()?,
            url: v["html_url"].as_str().unwrap_or_default().to_string(),
            title: v["title"].as_str().unwrap_or_default().to_string(),
            body: v["body"].as_str().unwrap_or_default().to_string(),
        })
    }
}

/// The GitHub forge of one conduct run.
#[derive(Debug)]
pub struct GitHubForge {
    api: Api,
    spec: GitHubSpec,
    journal: Journal,
    cache: RefCell<Cache>,
}

impl GitHubForge {
    /// Records the retried attempts of the last calls in the journal.
    fn record_retries(&self) -> Result<(), ForgeError> {
        for retried in self.api.take_retried() {
            self.journal.record(&ConductorEvent::ForgeRetry(retried))?;
        }
        Ok(())
    }

    /// Calls the API, then records its retries (whatever the outcome).
    fn call(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Reply, ForgeError> {
        let result = self.api.call(method, path, body);
        self.record_retries()?;
        Ok(result?)
    }

    fn repo_path(&self) -> String {
        format!("/repos/{}", self.spec.repo)
    }

    /// Lists the issue's comments once, keeping those with a marker.
    fn load_comments(&self) -> Result<(), ForgeError> {
        if self.cache.borrow().comments.is_some() {
            return Ok(());
        }
        let mut found = BTreeMap::new();
        for page in 1.. {
            let path = format!(
                "{}/issues/{}/comments?per_page=100&page={page}",
                self.repo_path(),
                self.spec.number
            );
            let reply = self.call(Method::GET, &path, None)?;
            let items = reply.body.as_array().cloned().unwrap_or_default();
            for item in &items {
                let body = item["body"].as_str().unwrap_or_default();
                if let (Some(key), Some(id)) = (marker_key(body), item["id"].as_u64()) {
                    found
                        .entry(key.to_string())
                        .or_insert((id, body.to_string()));
                }
            }
            if items.len() < 100 {
                break;
            }
        }
        self.cache.borrow_mut().comments = Some(found);
        Ok(())
    }

    /// The comment id the journal recorded under `key`.
    fn recorded_comment(&self, key: &str) -> Result<Option<u64>, ForgeError> {
        Ok(self
            .journal
            .comments_posted()?
            .iter()
            .rev()
            .find(|p| p.key == key)
            .and_then(|p| p.id.parse().ok()))
    }

    fn post_comment(&self, body: &str) -> Result<u64, ForgeError> {
        let path = format!("{}/issues/{}/comments", self.repo_path(), self.spec.number);
        let reply = self.call(Method::POST, &path, Some(&json!({ "body": body })))?;
        reply.body["id"].as_u64().ok_or_else(|| {
            ForgeError::Api(ApiError::Refused {
                method: "POST".into(),
                path,
                status: reply.status,
                message: "the answer names no comment id".into(),
            })
        })
    }

    /// The draft PR of `branch`: the one recorded, else the one GitHub has for the
    /// branch (open or not), else none.
    fn find_pr(&self, branch: &str) -> Result<Option<Pr>, ForgeError> {
        if let Some(pr) = self.cache.borrow().pr.clone() {
            return Ok(Some(pr));
        }
        let recorded = self.journal.prs_opened()?.last().and_then(|p| p.number);
        let found = match recorded {
            Some(n) => Pr::from_json(
                &self
                    .call(
                        Method::GET,
                        &format!("{}/pulls/{n}", self.repo_path()),
                        None,
                    )?
                    .body,
            ),
            None => {
                let path = format!(
                    "{}/pulls?head={}:{branch}&state=all&per_page=1",
                    self.repo_path(),
                    self.spec.repo.owner
                );
                let reply = self.call(Method::GET, &path, None)?;
                reply
                    .body
                    .as_array()
                    .and_then(|a| a.first())
                    .and_then(Pr::from_json)
            }
        };
        self.cache.borrow_mut().pr.clone_from(&found);
        Ok(found)
    }

    fn record_pr(&self, branch: &str, pr: &Pr) -> Result<(), ForgeError> {
        let recorded = self.journal.prs_opened()?;
        if !recorded.iter().any(|p| p.number == Some(pr.number)) {
            self.journal.record(&ConductorEvent::PrOpened(PrOpened {
                branch: branch.to_string(),
                path: None,
                number: Some(pr.number),
                url: Some(pr.url.clone()),
            }))?;
        }
        Ok(())
    }
}

impl Forge for GitHubForge {
    fn issue(&self) -> Result<Issue, ForgeError> {
        let mut connection = Connection {
            api: Api::new(&self.spec.api, &self.spec.token, self.spec.retry)?,
            spec: self.spec.clone(),
            labels: Vec::new(),
        };
        connection.read_issue()
    }

    fn comment(&self, key: &str, body: &str) -> Result<String, ForgeError> {
        let body = format!(
            "{}\n\n{}",
            self.api.redactor().redact(body.trim_end()),
            marker(key)
        );
        self.load_comments()?;
        let listed = self
            .cache
            .borrow()
            .comments
            .as_ref()
            .and_then(|c| c.get(key).cloned());
        let recorded = self.recorded_comment(key)?;
        let id = match (recorded, listed) {
            (_, Some((id, current))) if current == body => id,
            (recorded, listed) => match recorded.or(listed.map(|(id, _)| id)) {
                Some(id) => {
                    let path = format!("{}/issues/comments/{id}", self.repo_path());
                    match self.call(Method::PATCH, &path, Some(&json!({ "body": body }))) {
                        Ok(_) => id,
                        // Deleted by someone: posted again.
                        Err(ForgeError::Api(ApiError::Denied { status: 404, .. })) => {
                            self.post_comment(&body)?
                        }
                        Err(err) => return Err(err),
                    }
                }
                None => self.post_comment(&body)?,
            },
        };
        if let Some(comments) = self.cache.borrow_mut().comments.as_mut() {
            comments.insert(key.to_string(), (id, body));
        }
        if recorded != Some(id) {
            self.journal
                .record(&ConductorEvent::CommentPosted(CommentPosted {
                    key: key.to_string(),
                    id: id.to_string(),
                }))?;
        }
        Ok(id.to_string())
    }

    fn open_or_update_draft_pr(
        &self,
        branch: &str,
        title: &str,
        body: &str,
    ) -> Result<String, ForgeError> {
        let redactor = self.api.redactor();
        let (title, body) = (redactor.redact(title), redactor.redact(body));
        let pr = match self.find_pr(branch)? {
            Some(pr) if pr.title == title && pr.body == body => pr,
            Some(pr) => {
                let path = format!("{}/pulls/{}", self.repo_path(), pr.number);
                // Title and body only: a draft is never marked ready, never merged.
                let reply = self.call(
                    Method::PATCH,
                    &path,
                    Some(&json!({ "title": title, "body": body })),
                )?;
                Pr::from_json(&reply.body).unwrap_or(Pr { title, body, ..pr })
            }
            None => {
                let repo = self.call(Method::GET, &self.repo_path(), None)?;
                let base = repo.body["default_branch"].as_str().unwrap_or("main");
                let path = format!("{}/pulls", self.repo_path());
                let reply = self.call(
                    Method::POST,
                    &path,
                    Some(&json!({ "title": title, "head": branch, "base": base, "body": body, "draft": true })),
                )?;
                Pr::from_json(&reply.body).ok_or_else(|| {
                    ForgeError::Api(ApiError::Refused {
                        method: "POST".into(),
                        path,
                        status: reply.status,
                        message: "the answer names no pull request".into(),
                    })
                })?
            }
        };
        self.record_pr(branch, &pr)?;
        let url = pr.url.clone();
        self.cache.borrow_mut().pr = Some(pr);
        Ok(url)
    }

    fn push(
        &self,
        work_tree: &Path,
        branch: &str,
        statuses: &[CommitStatus],
    ) -> Result<(), ForgeError> {
        push::push(work_tree, &self.spec.remote, branch, &self.spec.token)?;
        let posted = self.journal.statuses_posted()?;
        let mut now = Vec::new();
        let mut failed = None;
        for status in statuses {
            let done = posted.iter().chain(now.iter()).any(|p: &PostedStatus| {
                p.sha == status.sha
                    && p.context == status.context
                    && p.state == status.state.as_str()
            });
            if done {
                continue;
            }
            let path = format!("{}/statuses/{}", self.repo_path(), status.sha);
            let body = json!({
                "state": status.state.as_str(),
                "context": status.context,
                "description": self.api.redactor().redact(&status.description),
            });
            if let Err(err) = self.call(Method::POST, &path, Some(&body)) {
                failed = Some(err);
                break;
            }
            now.push(PostedStatus {
                sha: status.sha.clone(),
                context: status.context.clone(),
                state: status.state.as_str().to_string(),
            });
        }
        // One record for the statuses of this push (one ledger write, not one each);
        // those posted before a failure are recorded too.
        if !now.is_empty() {
            self.journal
                .record(&ConductorEvent::StatusesPosted(StatusesPosted {
                    statuses: now,
                }))?;
        }
        failed.map_or(Ok(()), Err)
    }

    fn mark(&self, mark: RunMark) -> Result<(), ForgeError> {
        if !self.spec.labels {
            return Ok(());
        }
        let wanted = mark.label();
        let current = self.cache.borrow().labels.clone();
        let issue = format!("{}/issues/{}/labels", self.repo_path(), self.spec.number);
        for stale in current
            .iter()
            .filter(|l| l.starts_with("tdd:") && *l != wanted)
        {
            let name = stale.replace(':', "%3A");
            match self.call(Method::DELETE, &format!("{issue}/{name}"), None) {
                Ok(_) | Err(ForgeError::Api(ApiError::Denied { status: 404, .. })) => {}
                Err(err) => return Err(err),
            }
        }
        if !current.iter().any(|l| l == wanted) {
            self.call(Method::POST, &issue, Some(&json!({ "labels": [wanted] })))?;
        }
        let mut cache = self.cache.borrow_mut();
        cache.labels.retain(|l| !l.starts_with("tdd:"));
        cache.labels.push(wanted.to_string());
        Ok(())
    }

    fn pr_location(&self) -> String {
        if let Some(pr) = &self.cache.borrow().pr {
            return pr.url.clone();
        }
        self.journal
            .prs_opened()
            .ok()
            .and_then(|p| p.last().and_then(|p| p.url.clone()))
            .unwrap_or_default()
    }

    fn needs_commits(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_found_at_the_end_of_a_comment() {
        let body = format!("text <!-- tdd-conduct:fake -->\n\n{}", marker("step-2"));
        assert_eq!(marker_key(&body), Some("step-2"));
        assert_eq!(marker_key("no marker"), None);
    }
}
