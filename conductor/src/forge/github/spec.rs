//! Which issue `tdd conduct <ISSUE>` means: a local file, or a GitHub issue named by a
//! number (`12`, `#12`) or its URL, in a repository named by `--repo` or the `origin`
//! remote.

use std::path::PathBuf;

/// The default API root.
pub const DEFAULT_API: &str = "https://api.github.com";

/// A GitHub repository, `owner/name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    /// The owner (user or organisation).
    pub owner: String,
    /// The repository's name.
    pub name: String,
}

impl std::fmt::Display for Repo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.owner, self.name)
    }
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl Repo {
    /// `owner/name`, or `None` when it is not of that form.
    pub fn parse(text: &str) -> Option<Repo> {
        let (owner, name) = text.trim().split_once('/')?;
        let name = name.strip_suffix(".git").unwrap_or(name);
        (is_name(owner) && is_name(name)).then(|| Repo {
            owner: owner.to_string(),
            name: name.to_string(),
        })
    }
}

/// The host and repository of a remote URL: `https://host/owner/name(.git)`,
/// `ssh://git@host(:port)/owner/name(.git)` or `git@host:owner/name(.git)`.
pub fn remote_repo(url: &str) -> Option<(String, Repo)> {
    let url = url.trim().trim_end_matches('/');
    let (host, path) = if let Some(rest) = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .or_else(|| url.strip_prefix("ssh://"))
        .or_else(|| url.strip_prefix("git://"))
    {
        let (authority, path) = rest.split_once('/')?;
        let host = authority.rsplit('@').next()?;
        let host = host.split(':').next()?;
        (host.to_string(), path)
    } else {
        let (user_host, path) = url.split_once(':')?;
        if user_host.contains('/') {
            return None;
        }
        let host = user_host.rsplit('@').next()?;
        (host.to_string(), path)
    };
    Some((host.to_ascii_lowercase(), Repo::parse(path)?))
}

/// What the `ISSUE` argument names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IssueArg {
    /// `12` or `#12`.
    Number(u64),
    /// `https://host/owner/name/issues/12`.
    Url {
        /// The web host.
        host: String,
        /// The repository.
        repo: Repo,
        /// The issue number.
        number: u64,
    },
    /// Anything else: a path.
    Path(PathBuf),
}

/// Reads the `ISSUE` argument.
pub fn issue_arg(text: &str) -> IssueArg {
    let digits = text.strip_prefix('#').unwrap_or(text);
    if !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit())
        && let Ok(n) = digits.parse()
    {
        return IssueArg::Number(n);
    }
    if let Some(rest) = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"))
    {
        let parts: Vec<&str> = rest.trim_end_matches('/').split('/').collect();
        if let [host, owner, name, "issues", n] = parts[..]
            && let (Some(repo), Ok(number)) = (Repo::parse(&format!("{owner}/{name}")), n.parse())
        {
            return IssueArg::Url {
                host: host.to_ascii_lowercase(),
                repo,
                number,
            };
        }
    }
    IssueArg::Path(PathBuf::from(text))
}

/// The API root for a web host: `https://api.github.com` for `github.com`, else the
/// GitHub Enterprise Server root `https://<host>/api/v3`.
pub fn api_for_host(host: &str) -> String {
    if host == "github.com" || host == "www.github.com" {
        DEFAULT_API.to_string()
    } else {
        format!("https://{host}/api/v3")
    }
}

/// Where an issue is conducted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// A local markdown file.
    Local(PathBuf),
    /// A GitHub issue.
    GitHub {
        /// The repository.
        repo: Repo,
        /// The issue number.
        number: u64,
        /// The API root when the argument or the remote named one.
        api: Option<String>,
    },
}

/// What the choice is made from.
#[derive(Debug, Clone, Default)]
pub struct Hints<'a> {
    /// `--forge`.
    pub forge: Option<&'a str>,
    /// `--repo`.
    pub repo: Option<&'a str>,
    /// The `origin` remote's URL.
    pub origin: Option<&'a str>,
    /// Whether the argument names an existing file.
    pub is_file: bool,
}

/// Chooses the forge for `arg`; `Err` says what is wrong and how to fix it.
pub fn choose(arg: &str, hints: &Hints<'_>) -> Result<Choice, String> {
    let parsed = issue_arg(arg);
    let origin = hints.origin.and_then(remote_repo);
    let explicit = match hints.repo {
        Some(text) => {
            Some(Repo::parse(text).ok_or_else(|| format!("--repo {text}: expected owner/name"))?)
        }
        None => None,
    };
    let github = |number: u64, from_url: Option<(String, Repo)>| {
        if let Some((host, repo)) = from_url {
            return Ok(Choice::GitHub {
                repo: explicit.clone().unwrap_or(repo),
                number,
                api: Some(api_for_host(&host)),
            });
        }
        if let Some(repo) = explicit.clone() {
            return Ok(Choice::GitHub {
                repo,
                number,
                api: None,
            });
        }
        match origin.clone() {
            Some((host, repo)) => Ok(Choice::GitHub {
                repo,
                number,
                api: (host != "github.com").then(|| api_for_host(&host)),
            }),
            None => Err(format!(
                "issue #{number}: no repository: pass --repo owner/name or add an `origin` remote on GitHub"
            )),
        }
    };
    match (hints.forge, parsed) {
        (Some("local"), _) => Ok(Choice::Local(PathBuf::from(arg))),
        (Some("github"), IssueArg::Number(n)) => github(n, None),
        (Some("github"), IssueArg::Url { host, repo, number }) => {
            github(number, Some((host, repo)))
        }
        (Some("github"), IssueArg::Path(_)) => Err(format!(
            "{arg}: not a GitHub issue: pass its number (12, #12) or its URL"
        )),
        (Some(other), _) => Err(format!("no forge `{other}`: use local or github")),
        (None, IssueArg::Url { host, repo, number }) => github(number, Some((host, repo))),
        (None, IssueArg::Number(_)) if hints.is_file => Ok(Choice::Local(PathBuf::from(arg))),
        (None, IssueArg::Number(n)) => match &origin {
            Some((host, _)) if host == "github.com" || explicit.is_some() => github(n, None),
            _ if explicit.is_some() => github(n, None),
            _ => Err(format!(
                "issue #{n}: the `origin` remote is not on github.com: pass --forge github --repo owner/name"
            )),
        },
        (None, IssueArg::Path(path)) => Ok(Choice::Local(path)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(s: &str) -> Repo {
        Repo::parse(s).expect("a repo")
    }

    #[test]
    fn remotes_in_https_and_ssh_forms() {
        for url in [
            "https://github.com/acme/calc.git",
            "https://github.com/acme/calc",
            "https://user@github.com/acme/calc/",
            "git@github.com:acme/calc.git",
            "ssh://git@github.com:22/acme/calc.git",
        ] {
            assert_eq!(
                remote_repo(url),
                Some(("github.com".to_string(), repo("acme/calc"))),
                "{url}"
            );
        }
        assert_eq!(remote_repo("/srv/git/calc.git"), None);
        assert_eq!(remote_repo("../calc"), None);
    }

    #[test]
    fn issue_arguments() {
        assert_eq!(issue_arg("12"), IssueArg::Number(12));
        assert_eq!(issue_arg("#12"), IssueArg::Number(12));
        assert_eq!(
            issue_arg("https://github.com/acme/calc/issues/7"),
            IssueArg::Url {
                host: "github.com".into(),
                repo: repo("acme/calc"),
                number: 7
            }
        );
        assert_eq!(
            issue_arg("issue-3.md"),
            IssueArg::Path(PathBuf::from("issue-3.md"))
        );
    }

    #[test]
    fn a_number_with_a_github_origin_picks_github_and_a_file_stays_local() {
        let origin = Hints {
            origin: Some("git@github.com:acme/calc.git"),
            ..Hints::default()
        };
        assert_eq!(
            choose("#12", &origin),
            Ok(Choice::GitHub {
                repo: repo("acme/calc"),
                number: 12,
                api: None
            })
        );
        let file = Hints {
            is_file: true,
            ..origin.clone()
        };
        assert_eq!(choose("12", &file), Ok(Choice::Local("12".into())));
        assert!(choose("12", &Hints::default()).is_err());
        let forced = Hints {
            forge: Some("github"),
            repo: Some("o/r"),
            ..Hints::default()
        };
        assert_eq!(
            choose("3", &forced),
            Ok(Choice::GitHub {
                repo: repo("o/r"),
                number: 3,
                api: None
            })
        );
        assert!(choose("issue.md", &forced).is_err());
        let local = Hints {
            forge: Some("local"),
            ..origin
        };
        assert_eq!(choose("12", &local), Ok(Choice::Local("12".into())));
    }
}
