//! `tdd mcp`: the engine's read-only questions as an MCP server over stdio, for an agent
//! that speaks the Model Context Protocol. The agent can ask, never set: no tool moves a
//! phase, and `test` runs only what `tdd.toml` configures.

use rmcp::Json;
use rmcp::ServerHandler;
use rmcp::ServiceExt;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::tool;
use rmcp::tool_handler;
use rmcp::tool_router;
use schemars::JsonSchema;
use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;

use rmcp::ErrorData;
use rmcp::model::ListResourcesResult;
use rmcp::model::PaginatedRequestParams;
use rmcp::model::ReadResourceRequestParams;
use rmcp::model::ReadResourceResponse;
use rmcp::model::ReadResourceResult;
use rmcp::model::ServerCapabilities;
use rmcp::model::ServerConfig;
use rmcp::model::SubscribeRequestParams;
use rmcp::model::SubscriptionFilter;
use rmcp::model::UnsubscribeRequestParams;
use rmcp::service::RequestContext;
use rmcp::service::RoleServer;
use rmcp::service::SubscriptionContext;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::exit::Exit;
use crate::output::Outcome;
use crate::output::Raw;

mod resources;

/// Serve the engine over MCP on stdin and stdout until the client closes them: the
/// tools `status` (where the run stands), `test` (the configured command for a target
/// or the suite, run by tdd itself) and `explain` (why the last advance was refused
/// and what to do), and inside a verifier leaf `verdict`; the resources
/// `tdd://assignment` and `tdd://plan`, whose subscribers are told when a phase moves.
/// No tool moves a phase: `tdd advance` stays the agent's own call.
#[derive(Debug, clap::Args)]
pub struct McpArgs {}

/// Runs `tdd mcp`.
pub fn cmd_mcp(ctx: &Ctx, _args: McpArgs) -> Result<Outcome, CommandError> {
    let tdd = std::env::current_exe().map_err(|e| {
        CommandError::internal("mcp_failed", format!("cannot find the tdd binary: {e}"))
    })?;
    let (stand, watched) = tokio::sync::watch::channel(None);
    let server = Server::new(tdd, ctx.cwd.clone(), watched);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CommandError::internal("mcp_failed", format!("no async runtime: {e}")))?;
    runtime
        .block_on(async {
            server.start_watch(stand).await;
            let running = server.serve(rmcp::transport::stdio()).await?;
            running.waiting().await?;
            Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
        })
        .map_err(|e| {
            CommandError::internal("mcp_failed", format!("the MCP session failed: {e}"))
        })?;
    // Stdout was the protocol's: nothing more is written to it.
    Ok(Outcome::raw(Raw::default(), Exit::Ok))
}

/// What a tool answers: tdd's own envelope for the command it ran.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Answer {
    /// Whether the command did what was asked.
    pub ok: bool,
    /// What it found (the `data` of `tdd <command> --json`).
    pub data: Value,
    /// What to do next, in words, when tdd says.
    pub next: Option<String>,
    /// Why it did not, in words, when it did not.
    pub error: Option<String>,
    /// A command that helps, when it did not.
    pub hint: Option<String>,
}

/// The parameters of `test`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TestParams {
    /// Test ids to run alone (`project::native id`, or the runner's own id); none runs
    /// every project's whole suite. Only ids: the command is the one `tdd.toml`
    /// configures.
    #[serde(default)]
    pub targets: Vec<String>,
}

/// The parameters of `verdict`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct VerdictParams {
    /// `accept` or `reject`.
    pub decision: Decision,
    /// Why, in one or two sentences.
    pub reason: String,
    /// Concrete problems, one each.
    #[serde(default)]
    pub findings: Vec<String>,
}

/// A verifier's decision.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// The phase does what the behaviour spec says, by the verifier's own test runs.
    Accept,
    /// It does not.
    Reject,
}

/// What `explain` answers.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Explanation {
    /// Whether the last `tdd advance` of the open cycle was refused.
    pub refused: bool,
    /// The cycle and its phase.
    pub cycle: Option<Value>,
    /// The refusal as the engine recorded it (reason, what the tests showed).
    pub refusal: Option<Value>,
    /// What to do now, in words.
    pub next: Option<String>,
}

/// The MCP server: each tool runs one `tdd` command in the server's directory and
/// answers with its envelope.
#[derive(Clone)]
pub struct Server {
    tdd: std::path::PathBuf,
    cwd: std::path::PathBuf,
    tool_router: ToolRouter<Server>,
    /// Where the run stands, as the ledger watch last saw it.
    stand: tokio::sync::watch::Receiver<resources::Stand>,
    /// Clients subscribed the way before `subscriptions/listen`.
    legacy: resources::Legacy,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("tdd", &self.tdd)
            .field("cwd", &self.cwd)
            .finish_non_exhaustive()
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_resources_subscribe()
                .build(),
        )
        .with_server_info(rmcp::model::Implementation::new(
            "tdd",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(
            "tdd's engine, read-only: `status` says where the run stands and what to do, `test` runs test ids as tdd runs them, `explain` says why the last advance was refused; the resources `tdd://assignment` and `tdd://plan` are updated when a phase moves. Phases move only with `tdd advance`, from what the tests do.",
        )
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(resources::listed()))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let envelope = self
            .envelope(vec!["status".into()])
            .await
            .map_err(|e| ErrorData::internal_error(e, None))?;
        let contents = resources::read(&request.uri, &envelope).ok_or_else(|| {
            ErrorData::resource_not_found(
                format!(
                    "tdd has no resource {}: it has {} and {}",
                    request.uri,
                    resources::ASSIGNMENT,
                    resources::PLAN
                ),
                None,
            )
        })?;
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if ![resources::ASSIGNMENT, resources::PLAN].contains(&request.uri.as_str()) {
            return Err(ErrorData::resource_not_found(
                format!("tdd has no resource {}", request.uri),
                None,
            ));
        }
        self.legacy.lock().await.push((request.uri, context.peer));
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.legacy
            .lock()
            .await
            .retain(|(uri, _)| *uri != request.uri);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.supported_by(&self.get_info().capabilities))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let uris = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        let mut stand = self.stand.clone();
        stand.borrow_and_update();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                changed = stand.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    for uri in &uris {
                        if context.sink().notify_resource_updated(uri.clone()).await.is_err() {
                            return Ok(());
                        }
                    }
                }
            }
        }
    }
}

#[tool_router(router = tool_router)]
impl Server {
    fn new(
        tdd: std::path::PathBuf,
        cwd: std::path::PathBuf,
        stand: tokio::sync::watch::Receiver<resources::Stand>,
    ) -> Server {
        let mut tool_router = Server::tool_router();
        // A verdict is a verifier leaf's to give: outside a leaf the tool is not offered
        // (and inside one, `tdd verdict` checks the leaf's token and role).
        if std::env::var_os("TDD_LEAF_ID").is_none() {
            tool_router.remove_route("verdict");
        }
        Server {
            tdd,
            cwd,
            tool_router,
            stand,
            legacy: resources::Legacy::default(),
        }
    }

    /// A verifier leaf's verdict, recorded as `tdd verdict` records it.
    #[tool(
        name = "verdict",
        description = "Give this verifier leaf's verdict on the phase: accept (with your own runs of the target as evidence) or reject with findings. Only a verifier leaf can; the engine checks its identity and evidence."
    )]
    async fn verdict(
        &self,
        Parameters(params): Parameters<VerdictParams>,
    ) -> Result<Json<Answer>, String> {
        let decision = match params.decision {
            Decision::Accept => "accept",
            Decision::Reject => "reject",
        };
        // Each value joined to its option, so one that begins with `-` is still a value.
        let mut argv = vec![
            "verdict".to_string(),
            decision.to_string(),
            format!("--reason={}", params.reason),
        ];
        argv.extend(params.findings.iter().map(|f| format!("--finding={f}")));
        Ok(Json(self.run(argv).await?))
    }

    /// Where the run stands: the open cycle, its phase and targets, the last refusal.
    #[tool(
        name = "status",
        description = "Where the tdd run stands: the open cycle, its phase, its target tests and what to do next. Read-only."
    )]
    async fn status(&self) -> Result<Json<Answer>, String> {
        Ok(Json(self.run(vec!["status".into()]).await?))
    }

    /// Runs the targets (or the suite) as the engine runs them.
    #[tool(
        name = "test",
        description = "Run test ids (or, with none, every project's suite) with the command tdd.toml configures, as tdd itself runs them, and report each test's outcome. The command cannot be chosen; no phase moves."
    )]
    async fn test(
        &self,
        Parameters(params): Parameters<TestParams>,
    ) -> Result<Json<Answer>, String> {
        // After `--`, every id is an id, never an option of tdd's.
        let mut argv = vec!["test".to_string(), "--".to_string()];
        argv.extend(params.targets);
        Ok(Json(self.run(argv).await?))
    }

    /// Why the last advance was refused, and what to do.
    #[tool(
        name = "explain",
        description = "Why the last `tdd advance` of the open cycle was refused (what the tests showed) and what to do now. Read-only."
    )]
    async fn explain(&self) -> Result<Json<Explanation>, String> {
        let status = self.run(vec!["status".into()]).await?;
        let refusal = status
            .data
            .pointer("/cycle/refusal")
            .filter(|r| !r.is_null())
            .cloned();
        let cycle = status.data.get("cycle").map(|c| {
            serde_json::json!({ "n": c["n"], "title": c["title"], "phase": c["phase"], "tests": c["tests"] })
        });
        Ok(Json(Explanation {
            refused: refusal.is_some(),
            cycle,
            refusal,
            next: status.next.or(status.error),
        }))
    }

    /// Takes where the run stands now, then watches the ledger for it to move
    /// (`resources::watch`), in the background until the session ends. Without a
    /// ledger to watch, nothing is ever told.
    async fn start_watch(&self, stand: tokio::sync::watch::Sender<resources::Stand>) {
        let Ok(located) = self.envelope(vec!["ledger".into(), "path".into()]).await else {
            return;
        };
        let Some(database) = located.pointer("/data/database").and_then(Value::as_str) else {
            return;
        };
        let files = vec![
            std::path::PathBuf::from(database),
            std::path::PathBuf::from(format!("{database}-wal")),
        ];
        // Looked at before asking, so that a move after the answer is a change.
        let seen = resources::signature(&files);
        if let Ok(now) = self.envelope(vec!["status".into()]).await {
            stand.send_replace(Some(resources::stand_of(&now)));
        }
        let server = self.clone();
        let legacy = self.legacy.clone();
        tokio::spawn(resources::watch(files, seen, stand, legacy, move || {
            let server = server.clone();
            async move { server.envelope(vec!["status".into()]).await.ok() }
        }));
    }

    /// Runs `tdd --json ARGS` in the server's directory and reads its envelope.
    async fn run(&self, args: Vec<String>) -> Result<Answer, String> {
        let envelope = self.envelope(args).await?;
        let words = |v: &Value| v.as_str().map(str::to_string);
        Ok(Answer {
            ok: envelope["ok"].as_bool().unwrap_or(false),
            data: envelope["data"].clone(),
            next: envelope.pointer("/next_action/detail").and_then(words),
            error: envelope.pointer("/error/message").and_then(words),
            hint: envelope.pointer("/error/hint").and_then(words),
        })
    }

    /// The envelope `tdd --json ARGS` printed last, run in the server's directory.
    async fn envelope(&self, args: Vec<String>) -> Result<Value, String> {
        let out = tokio::process::Command::new(&self.tdd)
            .arg("--json")
            .args(&args)
            .current_dir(&self.cwd)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| format!("tdd {} could not run: {e}", args.join(" ")))?;
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .rev()
            .find_map(|line| serde_json::from_str(line).ok())
            .ok_or_else(|| format!("tdd {} answered no envelope", args.join(" ")))
    }
}
