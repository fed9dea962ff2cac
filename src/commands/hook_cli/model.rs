//! A scripted model on loopback for the self-test: it answers the agent CLI's first
//! request that offers tools with one tool call, and every later one with a short
//! text, in the streamed format of the API the CLI speaks (Anthropic Messages for
//! Claude Code, OpenAI Responses for Codex). It keeps the bodies it was sent, so the
//! self-test can read what the CLI told the model after the call.

use std::io::BufRead;
use std::io::BufReader;
use std::io::Read;
use std::io::Write;
use std::net::TcpListener;
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use serde_json::Value;
use serde_json::json;

/// The most of one request read; a larger one is answered with nothing.
const MAX_BODY: usize = 16 * 1024 * 1024;

/// The API a CLI calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Api {
    /// `POST /v1/messages`, streamed.
    Anthropic,
    /// `POST /v1/responses`, streamed.
    Responses,
}

/// The model, serving until dropped.
pub(super) struct Model {
    /// `http://127.0.0.1:<port>`.
    pub(super) url: String,
    requests: Arc<Mutex<Vec<Value>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Model {
    /// Serves `api` on a loopback port of its own; its one tool call is `name` with
    /// `input`.
    pub(super) fn start(api: Api, name: &'static str, input: Value) -> std::io::Result<Model> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let url = format!("http://{}", listener.local_addr()?);
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen, stopped) = (Arc::clone(&requests), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                // A connection of its own thread: a CLI may hold one open, idle, while
                // it makes its next request on another.
                if let Ok(stream) = stream {
                    let (seen, input) = (Arc::clone(&seen), input.clone());
                    std::thread::spawn(move || serve(api, name, &input, stream, &seen));
                }
            }
        });
        Ok(Model {
            url,
            requests,
            stop,
            thread: Some(thread),
        })
    }

    /// The bodies of the requests served so far, oldest first.
    pub(super) fn requests(&self) -> Vec<Value> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Drop for Model {
    /// Stops the server: the flag, then a connection that wakes its `accept`.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(address) = self.url.strip_prefix("http://") {
            let _ = TcpStream::connect(address);
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Answers one connection's requests until it closes or one is answered.
fn serve(api: Api, name: &str, input: &Value, stream: TcpStream, seen: &Mutex<Vec<Value>>) {
    // An idle connection's thread ends with the self-test at the latest.
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(150)));
    let mut reader = BufReader::new(stream);
    while let Some((method, path, body)) = read_request(&mut reader) {
        let mut out = reader.get_ref();
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let wanted = match api {
            Api::Anthropic => path.starts_with("/v1/messages") && !path.contains("count_tokens"),
            Api::Responses => path.ends_with("/responses"),
        };
        if method != "POST" || !wanted {
            let _ = out.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 9\r\n\r\nnot here\n");
            continue;
        }
        let offers_tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
        let first = offers_tools && tool_results(api, &body) == 0;
        if let Ok(mut requests) = seen.lock() {
            requests.push(body);
        }
        let events = match (api, first) {
            (Api::Anthropic, true) => anthropic(Some((name, input)), "Done."),
            (Api::Anthropic, false) => anthropic(None, "Done."),
            (Api::Responses, true) => responses(Some((name, input)), "Done."),
            (Api::Responses, false) => responses(None, "Done."),
        };
        let _ = write!(
            out,
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n{events}",
            events.len()
        );
        let _ = out.flush();
        return;
    }
}

/// Reads one HTTP/1.1 request: method, path, body (by length or chunked).
fn read_request(reader: &mut BufReader<TcpStream>) -> Option<(String, String, Vec<u8>)> {
    let mut line = String::new();
    reader.read_line(&mut line).ok().filter(|n| *n > 0)?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let (mut length, mut chunked) = (0usize, false);
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok().filter(|n| *n > 0)?;
        let header = header.trim_end().to_ascii_lowercase();
        if header.is_empty() {
            break;
        }
        if let Some(value) = header.strip_prefix("content-length:") {
            length = value.trim().parse().unwrap_or(0);
        }
        if header.starts_with("transfer-encoding:") && header.contains("chunked") {
            chunked = true;
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).ok()?;
            let size = usize::from_str_radix(size.trim(), 16).ok()?;
            if body.len() + size > MAX_BODY {
                return None;
            }
            let mut chunk = vec![0u8; size + 2];
            reader.read_exact(&mut chunk).ok()?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        if length > MAX_BODY {
            return None;
        }
        body.resize(length, 0);
        reader.read_exact(&mut body).ok()?;
    }
    Some((method, path, body))
}

/// How many tool results the conversation in `body` holds.
pub(super) fn tool_results(api: Api, body: &Value) -> usize {
    tool_outputs(api, body).len()
}

/// What the conversation in `body` says each tool call gave, as text.
pub(super) fn tool_outputs(api: Api, body: &Value) -> Vec<String> {
    let empty = Vec::new();
    match api {
        Api::Anthropic => body["messages"]
            .as_array()
            .unwrap_or(&empty)
            .iter()
            .flat_map(|m| m["content"].as_array().unwrap_or(&empty))
            .filter(|c| c["type"] == "tool_result")
            .map(|c| c["content"].to_string())
            .collect(),
        Api::Responses => body["input"]
            .as_array()
            .unwrap_or(&empty)
            .iter()
            .filter(|i| i["type"] == "function_call_output")
            .map(|i| i["output"].to_string())
            .collect(),
    }
}

fn sse(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

/// One Messages answer, streamed: the tool call when there is one, else `said`.
fn anthropic(call: Option<(&str, &Value)>, said: &str) -> String {
    let mut text = sse(
        "message_start",
        &json!({"type": "message_start", "message": {"id": "msg_tdd_selftest", "type": "message",
            "role": "assistant", "model": "claude-sonnet-4-5", "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 1, "output_tokens": 1}}}),
    );
    let (block, delta, stop) = match call {
        Some((name, input)) => (
            json!({"type": "tool_use", "id": "toolu_tdd_selftest", "name": name, "input": {}}),
            json!({"type": "input_json_delta", "partial_json": input.to_string()}),
            "tool_use",
        ),
        None => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": said}),
            "end_turn",
        ),
    };
    text += &sse(
        "content_block_start",
        &json!({"type": "content_block_start", "index": 0, "content_block": block}),
    );
    text += &sse(
        "content_block_delta",
        &json!({"type": "content_block_delta", "index": 0, "delta": delta}),
    );
    text += &sse(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": 0}),
    );
    text += &sse(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": 1}}),
    );
    text + &sse("message_stop", &json!({"type": "message_stop"}))
}

/// One Responses answer, streamed: the tool call when there is one, else `said`.
fn responses(call: Option<(&str, &Value)>, said: &str) -> String {
    let item = match call {
        Some((name, input)) => json!({"type": "function_call", "id": "fc_tdd_selftest",
            "call_id": "call_tdd_selftest", "name": name,
            "arguments": input.to_string(), "status": "completed"}),
        None => json!({"type": "message", "id": "msg_tdd_selftest",
            "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": said, "annotations": []}]}),
    };
    let id = "resp_tdd_selftest";
    let mut text = sse(
        "response.created",
        &json!({"type": "response.created", "response": {"id": id, "object": "response",
            "status": "in_progress", "output": []}}),
    );
    text += &sse(
        "response.output_item.added",
        &json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
    );
    text += &sse(
        "response.output_item.done",
        &json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
    );
    text + &sse(
        "response.completed",
        &json!({"type": "response.completed", "response": {"id": id, "object": "response",
            "status": "completed", "output": [item],
            "usage": {"input_tokens": 1, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 1, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 2}}}),
    )
}
