//! `tdd mcp` driven by a real MCP client (the SDK's own, over the child's stdio): the
//! tools it lists, what each answers in a run in GREEN, and that none moves a phase.

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::Value;
use serde_json::json;

/// A runtime for one test's session.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// An MCP session with `tdd mcp` started in `env`'s work tree with `vars` set.
async fn session(
    env: &crate::support::Env,
    vars: &[(&str, &str)],
) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let mut command = tokio::process::Command::from(env.tdd_std());
    command
        .arg("mcp")
        .current_dir(env.root())
        .envs(vars.iter().copied());
    let transport = rmcp::transport::TokioChildProcess::new(command).expect("tdd mcp starts");
    ().serve(transport).await.expect("the session starts")
}

/// The structured answer of tool `name` called with `arguments`.
async fn call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    name: &'static str,
    arguments: Value,
) -> Value {
    let mut params = CallToolRequestParams::new(name);
    if let Value::Object(map) = arguments {
        params = params.with_arguments(map);
    }
    let result = client.call_tool(params).await.expect("the tool answers");
    assert_ne!(result.is_error, Some(true), "{result:?}");
    result.structured_content.expect("a structured answer")
}

#[test]
fn an_mcp_client_asks_where_the_run_stands_runs_the_target_and_moves_nothing() {
    let env = crate::hook::in_green();
    let head = env.git(&["rev-parse", "HEAD"]);
    // A refused advance for `explain` to explain: GREEN with the target still failing.
    let (code, refused) = env.json(&["advance"]);
    assert_eq!(code, 1, "{refused}");
    runtime().block_on(async {
        let client = session(&env, &[]).await;
        let info = client.peer_info().expect("server info");
        assert_eq!(
            info.server_info.as_ref().map(|i| i.name.as_str()),
            Some("tdd")
        );
        // Three tools, each with its schemas; none that moves a phase.
        let tools = client.list_all_tools().await.expect("tools");
        let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        names.sort_unstable();
        assert_eq!(names, ["explain", "status", "test"]);
        for tool in &tools {
            assert!(tool.output_schema.is_some(), "{tool:?}");
        }
        let test = tools.iter().find(|t| t.name == "test").expect("test");
        assert!(
            Value::Object((*test.input_schema).clone())["properties"]["targets"].is_object(),
            "{test:?}"
        );
        // Where the run stands, as `tdd status` says it.
        let status = call(&client, "status", json!({})).await;
        assert_eq!(status["ok"], true, "{status}");
        assert_eq!(
            status["data"]["cycle"]["phase"], "AWAITING_IMPL",
            "{status}"
        );
        // The target, run as tdd runs it: it fails (GREEN has not begun).
        let ran = call(
            &client,
            "test",
            json!({ "targets": ["tests/test_sub.py::test_sub"] }),
        )
        .await;
        assert!(ran["data"].to_string().contains("failed"), "{ran}");
        // An id that looks like an option is refused, never handed to the runner.
        let odd = call(&client, "test", json!({ "targets": ["--all"] })).await;
        assert_eq!(odd["ok"], false, "{odd}");
        assert!(
            odd["error"]
                .as_str()
                .is_some_and(|e| e.contains("begins with `-`")),
            "{odd}"
        );
        // Why the advance was refused, and what to do.
        let why = call(&client, "explain", json!({})).await;
        assert_eq!(why["refused"], true, "{why}");
        assert_eq!(why["cycle"]["phase"], "AWAITING_IMPL", "{why}");
        assert!(why["next"].as_str().is_some_and(|n| !n.is_empty()), "{why}");
        client.cancel().await.expect("the session ends");
    });
    // Nothing moved: the phase, HEAD, the test.
    let (_, status) = env.json(&["status"]);
    assert_eq!(status["data"]["cycle"]["phase"], "AWAITING_IMPL");
    assert_eq!(env.git(&["rev-parse", "HEAD"]), head);
}

/// Inside a leaf (its identity in the environment) `verdict` is offered, and the engine
/// still checks who gives it: a leaf the ledger does not know is refused.
#[test]
fn a_verdict_is_offered_inside_a_leaf_and_checked_by_its_token() {
    let env = crate::hook::in_green();
    runtime().block_on(async {
        let client = session(
            &env,
            &[
                ("TDD_LEAF_ID", "verifier-i1-s1-green-a1-000000"),
                ("TDD_LEAF_TOKEN", "not-the-token"),
            ],
        )
        .await;
        let tools = client.list_all_tools().await.expect("tools");
        assert!(tools.iter().any(|t| t.name == "verdict"), "{tools:?}");
        let answer = call(
            &client,
            "verdict",
            json!({ "decision": "accept", "reason": "-looks fine" }),
        )
        .await;
        assert_eq!(answer["ok"], false, "{answer}");
        assert!(
            answer["error"]
                .as_str()
                .is_some_and(|e| e.contains("verifier-i1-s1-green-a1-000000")),
            "{answer}"
        );
        client.cancel().await.expect("the session ends");
    });
    // Nothing was recorded as a verdict.
    let (_, export) = env.json(&["ledger", "export"]);
    assert!(!export.to_string().contains("verdict_recorded"), "{export}");
}

/// A client of the protocol before `subscriptions/listen`, which subscribes with
/// `resources/subscribe` and hears `notifications/resources/updated` as a callback.
#[derive(Clone)]
struct LegacyClient {
    updated: tokio::sync::mpsc::UnboundedSender<String>,
}

impl rmcp::ClientHandler for LegacyClient {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut info = rmcp::model::ClientConfig::default();
        info.protocol_version = rmcp::model::ProtocolVersion::V_2025_06_18;
        info
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        let _ = self.updated.send(params.uri);
    }
}

/// A client of today's protocol, whose subscriptions are opened with
/// `subscriptions/listen`.
#[derive(Clone)]
struct ListeningClient;

impl rmcp::ClientHandler for ListeningClient {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut info = rmcp::model::ClientConfig::default();
        info.protocol_version = rmcp::model::ProtocolVersion::V_2026_07_28;
        info
    }
}

/// An MCP session with `tdd mcp` in `env`'s work tree, for `client`, opened with
/// `server/discover` (today's lifecycle) when `discover`, else with `initialize`.
async fn session_of<C: rmcp::ClientHandler>(
    env: &crate::support::Env,
    client: C,
    discover: bool,
) -> rmcp::service::RunningService<rmcp::RoleClient, C> {
    let mut command = tokio::process::Command::from(env.tdd_std());
    command.arg("mcp").current_dir(env.root());
    let transport = rmcp::transport::TokioChildProcess::new(command).expect("tdd mcp starts");
    let lifecycle = if discover {
        rmcp::service::ClientLifecycleMode::Discover {
            preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
        }
    } else {
        rmcp::service::ClientLifecycleMode::Initialize
    };
    rmcp::service::serve_client_with_lifecycle(client, transport, lifecycle)
        .await
        .expect("the session starts")
}

/// The text of resource `uri`, as JSON.
async fn resource<S: rmcp::service::Service<rmcp::RoleClient>>(
    client: &rmcp::service::RunningService<rmcp::RoleClient, S>,
    uri: &str,
) -> Value {
    let read = client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(uri))
        .await
        .expect("the resource is read");
    let Some(rmcp::model::ResourceContents::TextResourceContents { text, .. }) =
        read.contents.first()
    else {
        panic!("a text resource: {read:?}");
    };
    serde_json::from_str(text).expect("JSON")
}

/// How long a notification may take: the ledger is looked at four times a second, and
/// `tdd status` runs on a loaded machine.
const HEARD_WITHIN: std::time::Duration = std::time::Duration::from_secs(60);

#[test]
fn the_plan_and_the_assignment_are_resources_whose_subscribers_hear_the_phase_move() {
    let env = crate::hook::in_green();
    runtime().block_on(async {
        // Today's protocol: a subscription opened with `subscriptions/listen`.
        let client = session_of(&env, ListeningClient, true).await;
        let mut listed: Vec<String> = client
            .list_all_resources()
            .await
            .expect("resources")
            .into_iter()
            .map(|r| r.uri.clone())
            .collect();
        listed.sort();
        assert_eq!(listed, ["tdd://assignment", "tdd://plan"]);
        let assignment = resource(&client, "tdd://assignment").await;
        assert_eq!(
            assignment["cycle"]["phase"], "AWAITING_IMPL",
            "{assignment}"
        );
        assert!(assignment["next"].as_str().is_some_and(|n| !n.is_empty()));
        let plan = resource(&client, "tdd://plan").await;
        assert_eq!(plan["plan"]["path"], ".tdd/plan.md", "{plan}");
        let filter = rmcp::model::SubscriptionFilter::builder()
            .resource_subscription("tdd://assignment")
            .build();
        let mut subscription = client.peer().listen(filter).await.expect("listening");
        // The protocol before it: `resources/subscribe`, in a second session.
        let (updated, mut heard) = tokio::sync::mpsc::unbounded_channel();
        let legacy = session_of(&env, LegacyClient { updated }, false).await;
        #[allow(deprecated)]
        legacy
            .subscribe(rmcp::model::SubscribeRequestParams::new("tdd://plan"))
            .await
            .expect("subscribed");
        // GREEN accepted: the phase moves.
        env.write(
            "calc.py",
            "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n",
        );
        let (code, moved) = env.json(&["advance"]);
        assert_eq!(code, 0, "{moved}");
        assert_eq!(moved["data"]["to"], "AWAITING_REFACTOR", "{moved}");
        let told = tokio::time::timeout(HEARD_WITHIN, subscription.next())
            .await
            .expect("told within the bound")
            .expect("the subscription stands")
            .expect("a notification");
        let rmcp::model::ServerNotification::ResourceUpdatedNotification(told) = told else {
            panic!("a resource update: {told:?}");
        };
        assert_eq!(told.params.uri, "tdd://assignment");
        let uri = tokio::time::timeout(HEARD_WITHIN, heard.recv())
            .await
            .expect("the legacy client told within the bound")
            .expect("a notification");
        assert_eq!(uri, "tdd://plan");
        // What a subscriber reads next is where the run stands now.
        let assignment = resource(&client, "tdd://assignment").await;
        assert_eq!(
            assignment["cycle"]["phase"], "AWAITING_REFACTOR",
            "{assignment}"
        );
        legacy.cancel().await.expect("the legacy session ends");
        client.cancel().await.expect("the session ends");
    });
}
