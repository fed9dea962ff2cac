//! `tdd mcp`'s resources: the run's plan and the current assignment, read from
//! `tdd status`, and the watch that tells subscribers when the phase moves.
//!
//! The watch looks at the ledger's files (the database and its write-ahead log) four
//! times a second, by `stat` alone, and asks `tdd status` only when they changed: where
//! the run stands is recomputed by the engine, never guessed from the files.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use std::time::SystemTime;

use rmcp::model::Resource;
use rmcp::model::ResourceContents;
use rmcp::service::Peer;
use rmcp::service::RoleServer;
use serde_json::Value;
use tokio::sync::Mutex;
use tokio::sync::watch;

/// The open cycle: its phase, targets and what to do next.
pub const ASSIGNMENT: &str = "tdd://assignment";
/// The run's plan: the contract it runs and every cycle's phase.
pub const PLAN: &str = "tdd://plan";

/// How often the ledger's files are looked at.
const EVERY: Duration = Duration::from_millis(250);

/// Where the run stands, in as much as a subscriber is told of a change: the run, the
/// open cycle, its phase, whether the run is over. `None` before the first look.
pub type Stand = Option<String>;

/// The two resources, as `resources/list` shows them.
pub fn listed() -> Vec<Resource> {
    vec![
        Resource::new(ASSIGNMENT, "assignment")
            .with_title("The current assignment")
            .with_description(
                "The open cycle: its phase, its target tests, the last refusal and what to do next. Updated when the phase moves.",
            ),
        Resource::new(PLAN, "plan")
            .with_title("The run's plan")
            .with_description(
                "The plan the run follows (its contract) and every cycle's phase. Updated when a phase moves.",
            ),
    ]
}

/// The text of resource `uri`, from the envelope of `tdd --json status`; `None` for a
/// resource tdd does not have.
pub fn read(uri: &str, envelope: &Value) -> Option<ResourceContents> {
    let data = &envelope["data"];
    let body = match uri {
        ASSIGNMENT => serde_json::json!({
            "run_id": data["run_id"],
            "active": data["active"],
            "cycle": data["cycle"],
            "next": envelope.pointer("/next_action/detail"),
            "error": envelope.pointer("/error/message"),
        }),
        PLAN => serde_json::json!({
            "run_id": data["run_id"],
            "active": data["active"],
            "plan": data["plan"],
            "cycles": data["cycles"],
        }),
        _ => return None,
    };
    let text = serde_json::to_string_pretty(&body).unwrap_or_default();
    Some(ResourceContents::TextResourceContents {
        uri: uri.to_string(),
        mime_type: Some("application/json".into()),
        text,
        meta: None,
    })
}

/// What a subscriber is told changed about, from a `tdd status` envelope.
pub fn stand_of(envelope: &Value) -> String {
    let data = &envelope["data"];
    format!(
        "{} {} {} {} {}",
        data["run_id"],
        data["active"],
        data["complete"],
        data["cycle"]["n"],
        data["cycle"]["phase"]
    )
}

/// The clients subscribed by `resources/subscribe` (the protocol before
/// `subscriptions/listen`): each resource with the peer to tell.
pub type Legacy = Arc<Mutex<Vec<(String, Peer<RoleServer>)>>>;

/// What `stat` says of the ledger's files: each one's size and modification time, if
/// it exists.
pub type Signature = Vec<Option<(u64, Option<SystemTime>)>>;

/// `stat` of each of `files` that exists: size and modification time.
pub fn signature(files: &[PathBuf]) -> Signature {
    files
        .iter()
        .map(|f| {
            std::fs::metadata(f)
                .ok()
                .map(|m| (m.len(), m.modified().ok()))
        })
        .collect()
}

/// Watches the ledger's `files` (as `seen` when where the run stands was last asked)
/// and, when they changed, asks `status` where the run stands; a new stand is sent on
/// `stand` and told to every legacy subscriber. Runs for the session: the server keeps
/// a receiver, and the session's end ends the runtime and this with it.
pub async fn watch<F, Fut>(
    files: Vec<PathBuf>,
    seen: Signature,
    stand: watch::Sender<Stand>,
    legacy: Legacy,
    status: F,
) where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<Value>>,
{
    let mut seen = seen;
    let mut ticks = tokio::time::interval(EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !stand.is_closed() {
        ticks.tick().await;
        let now = signature(&files);
        if seen == now {
            continue;
        }
        seen = now;
        let Some(envelope) = status().await else {
            continue;
        };
        let next = Some(stand_of(&envelope));
        if !stand.send_if_modified(|current| {
            let changed = *current != next;
            *current = next.clone();
            changed
        }) {
            continue;
        }
        let subscribers = legacy.lock().await.clone();
        for (uri, peer) in subscribers {
            let updated = rmcp::model::ResourceUpdatedNotificationParam::new(uri);
            // A client gone is no reason to stop telling the others.
            let _ = peer.notify_resource_updated(updated).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The assignment carries the open cycle and what to do; the plan every cycle; a
    /// change of phase changes the stand, a refusal alone does not.
    #[test]
    fn resources_and_the_stand_come_from_status() {
        let envelope = serde_json::json!({
            "ok": true,
            "data": { "active": true, "run_id": "r1", "plan": { "path": ".tdd/plan.md" },
                      "cycle": { "n": 1, "phase": "AWAITING_IMPL", "refusal": null },
                      "cycles": [{ "n": 1, "phase": "AWAITING_IMPL" }] },
            "next_action": { "detail": "make the target pass" }
        });
        let Some(ResourceContents::TextResourceContents { text, .. }) = read(ASSIGNMENT, &envelope)
        else {
            panic!("the assignment is a text");
        };
        let body: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(body["cycle"]["phase"], "AWAITING_IMPL");
        assert_eq!(body["next"], "make the target pass");
        let Some(ResourceContents::TextResourceContents { text, .. }) = read(PLAN, &envelope)
        else {
            panic!("the plan is a text");
        };
        assert!(text.contains(".tdd/plan.md"));
        assert!(read("tdd://other", &envelope).is_none());
        let mut refused = envelope.clone();
        refused["data"]["cycle"]["refusal"] = serde_json::json!({ "reason": "target_failing" });
        assert_eq!(stand_of(&refused), stand_of(&envelope));
        let mut moved = envelope.clone();
        moved["data"]["cycle"]["phase"] = serde_json::json!("AWAITING_REFACTOR");
        assert_ne!(stand_of(&moved), stand_of(&envelope));
    }
}
