//! The GitHub REST API over octocrab, called synchronously: a runtime owned by the
//! client, every call retried on what a retry can cure, traced without its headers or
//! bodies, and every text that leaves redacted of the token.
//!
//! Requests go through octocrab's client (`build_request`, `execute`: its TLS, base
//! URL, authentication and timeouts) rather than its typed endpoint builders
//! (`issues()`, `pulls()`, `repos().create_status()`), because the retry policy needs
//! what those builders do not return: the status of a refused call before it becomes
//! an error, `Retry-After` and `X-RateLimit-Remaining` to tell a rate limit from a
//! denial, and `X-OAuth-Scopes` for `tdd doctor`'s token check. The typed builders'
//! error keeps the status and GitHub's message but no header, and octocrab takes a
//! layer of our own (`with_layer`) only on a client built from a service of our own
//! (`with_service`), which leaves out the default client's TLS connector, timeouts,
//! base URL, authentication and headers: we would write again what octocrab gives.
//! The bodies sent and read are the ones those endpoints document
//! (`forge/github/mod.rs`).

use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

use http::Method;
use http::StatusCode;
use http_body_util::BodyExt;
use serde_json::Value;

use super::token::Redactor;
use super::token::Token;

/// How calls are retried.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub attempts: u32,
    /// The wait before the second attempt; doubled before each later one.
    pub base: Duration,
    /// The longest wait, `Retry-After` included; a longer one is not waited for.
    pub max_wait: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            attempts: 4,
            base: Duration::from_millis(250),
            max_wait: Duration::from_secs(60),
        }
    }
}

/// Why a call failed for good.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The token was refused (401), lacks a permission (403) or the thing is not
    /// visible to it (404).
    #[error("GitHub answered {status} to {method} {path}: {message}")]
    Denied {
        /// The HTTP method.
        method: String,
        /// The request path.
        path: String,
        /// The HTTP status.
        status: u16,
        /// GitHub's message, redacted.
        message: String,
    },
    /// Another status that no retry cures (422, ...).
    #[error("GitHub answered {status} to {method} {path}: {message}")]
    Refused {
        /// The HTTP method.
        method: String,
        /// The request path.
        path: String,
        /// The HTTP status.
        status: u16,
        /// GitHub's message, redacted.
        message: String,
    },
    /// Every attempt failed on the network, a 5xx or a rate limit.
    #[error("GitHub could not be reached for {method} {path} after {attempts} attempts: {last}")]
    Unreachable {
        /// The HTTP method.
        method: String,
        /// The request path.
        path: String,
        /// Attempts made.
        attempts: u32,
        /// The last failure, redacted.
        last: String,
    },
    /// The client could not be built.
    #[error("the GitHub client could not be set up: {0}")]
    Setup(String),
}

impl ApiError {
    /// The HTTP status of a failure GitHub answered, if it did.
    pub fn status(&self) -> Option<u16> {
        match self {
            ApiError::Denied { status, .. } | ApiError::Refused { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// A successful answer.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The JSON body (`Null` when empty).
    pub body: Value,
    /// The `X-OAuth-Scopes` header of a classic token, when sent.
    pub scopes: Option<String>,
}

/// A retried attempt, for the record.
pub use crate::events::ForgeRetried as Retried;

/// A GitHub REST client owning its runtime.
pub struct Api {
    runtime: tokio::runtime::Runtime,
    octo: octocrab::Octocrab,
    redactor: Redactor,
    policy: RetryPolicy,
    retried: Mutex<Vec<Retried>>,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api").finish_non_exhaustive()
    }
}

/// What one attempt came to.
enum Attempt {
    Done(u16, Value, Option<String>),
    Retry(String, Option<Duration>),
    Fail(u16, String),
}

impl Api {
    /// A client of the API at `base` (`https://api.github.com`, or a GitHub Enterprise
    /// `https://host/api/v3`) authenticated with `token`.
    pub fn new(base: &str, token: &Token, policy: RetryPolicy) -> Result<Api, ApiError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ApiError::Setup(e.to_string()))?;
        let octo = {
            // hyper's pool is spawned on the runtime that builds the client.
            let _guard = runtime.enter();
            octocrab::Octocrab::builder()
                .base_uri(base.trim_end_matches('/'))
                .map_err(|e| ApiError::Setup(format!("bad API URL {base}: {e}")))?
                .personal_token(token.expose().to_string())
                .add_header(http::header::USER_AGENT, "tdd-conductor".to_string())
                .add_header(
                    http::HeaderName::from_static("x-github-api-version"),
                    "2022-11-28".to_string(),
                )
                .set_connect_timeout(Some(Duration::from_secs(10)))
                .set_read_timeout(Some(Duration::from_secs(60)))
                .build()
                .map_err(|e| ApiError::Setup(e.to_string()))?
        };
        Ok(Api {
            runtime,
            octo,
            redactor: Redactor::new(token),
            policy,
            retried: Mutex::new(Vec::new()),
        })
    }

    /// The redactor of this client's token.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// The attempts retried since the last call of this, oldest first.
    pub fn take_retried(&self) -> Vec<Retried> {
        self.retried
            .lock()
            .map(|mut r| std::mem::take(&mut *r))
            .unwrap_or_default()
    }

    /// `GET path` (a path from the API root, with its query).
    pub fn get(&self, path: &str) -> Result<Reply, ApiError> {
        self.call(Method::GET, path, None)
    }

    /// Calls `method path` with a JSON `body`, retrying 5xx answers, rate limits and
    /// network errors with backoff; 401, 403 and 404 are [`ApiError::Denied`].
    pub fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Reply, ApiError> {
        let mut last = String::new();
        for attempt in 1..=self.policy.attempts.max(1) {
            let span = tracing::info_span!(
                "http",
                method = method.as_str(),
                path = path_only(path),
                attempt,
                status = tracing::field::Empty,
                latency_ms = tracing::field::Empty,
            );
            let _entered = span.enter();
            let began = Instant::now();
            let outcome = self.runtime.block_on(self.once(&method, path, body));
            let latency = u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX);
            span.record("latency_ms", latency);
            let (retry, wait) = match outcome {
                Attempt::Done(status, body, scopes) => {
                    span.record("status", status);
                    tracing::info!(status, latency_ms = latency, "http call");
                    return Ok(Reply {
                        status,
                        body,
                        scopes,
                    });
                }
                Attempt::Fail(status, message) => {
                    span.record("status", status);
                    tracing::info!(status, latency_ms = latency, "http call refused");
                    return Err(refused(&method, path, status, message));
                }
                Attempt::Retry(failure, wait) => (failure, wait),
            };
            tracing::info!(
                failure = retry.as_str(),
                latency_ms = latency,
                "http call failed"
            );
            last = retry;
            if attempt == self.policy.attempts {
                break;
            }
            let backoff = self.policy.base * 2u32.saturating_pow(attempt - 1);
            let wait = wait.unwrap_or(backoff);
            if wait > self.policy.max_wait {
                last = format!("{last} (asked to wait {} s)", wait.as_secs());
                break;
            }
            if let Ok(mut r) = self.retried.lock() {
                r.push(Retried {
                    method: method.to_string(),
                    path: path_only(path).to_string(),
                    attempt,
                    failure: last.clone(),
                    wait_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                });
            }
            std::thread::sleep(wait);
        }
        Err(ApiError::Unreachable {
            method: method.to_string(),
            path: path_only(path).to_string(),
            attempts: self.policy.attempts,
            last,
        })
    }

    /// One attempt.
    async fn once(&self, method: &Method, path: &str, body: Option<&Value>) -> Attempt {
        let request = http::Request::builder()
            .method(method.clone())
            .uri(path)
            .header(http::header::ACCEPT, "application/vnd.github+json");
        let request = match self.octo.build_request(request, body) {
            Ok(request) => request,
            Err(e) => return Attempt::Fail(0, self.redactor.redact(&e.to_string())),
        };
        let response = match self.octo.execute(request).await {
            Ok(response) => response,
            Err(e) => return Attempt::Retry(self.redactor.redact(&error_chain(&e)), None),
        };
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = match response.into_body().collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) => return Attempt::Retry(self.redactor.redact(&error_chain(&e)), None),
        };
        let text = String::from_utf8_lossy(&bytes);
        let json: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status.is_success() {
            let scopes = header(&headers, "x-oauth-scopes");
            return Attempt::Done(status.as_u16(), json, scopes);
        }
        let message = self.redactor.redact(
            json["message"]
                .as_str()
                .unwrap_or_else(|| text.lines().next().unwrap_or_default()),
        );
        let retry_after = header(&headers, "retry-after")
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let rate_limited = status == StatusCode::TOO_MANY_REQUESTS
            || (status == StatusCode::FORBIDDEN
                && (retry_after.is_some()
                    || header(&headers, "x-ratelimit-remaining").as_deref() == Some("0")
                    || message.to_ascii_lowercase().contains("rate limit")));
        if status.is_server_error() || rate_limited {
            return Attempt::Retry(format!("HTTP {}: {message}", status.as_u16()), retry_after);
        }
        Attempt::Fail(status.as_u16(), message)
    }
}

/// The error of a status no retry cures: 401, 403 and 404 are `Denied`.
fn refused(method: &Method, path: &str, status: u16, message: String) -> ApiError {
    let (method, path) = (method.to_string(), path_only(path).to_string());
    if matches!(status, 401 | 403 | 404) {
        ApiError::Denied {
            method,
            path,
            status,
            message,
        }
    } else {
        ApiError::Refused {
            method,
            path,
            status,
            message,
        }
    }
}

/// A header's value as text.
fn header(headers: &http::HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// The path of a request without its query (what traces and errors name).
fn path_only(path: &str) -> &str {
    path.split('?').next().unwrap_or(path)
}

/// An error and its sources, one line.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
