//! Loopback fakes of the model APIs the agent CLIs call: Anthropic Messages (SSE) for
//! Claude Code, OpenAI Responses (SSE) for codex and OpenAI Chat Completions (one JSON
//! answer, as `aider --no-stream` asks) for aider. Each replays a script of tool
//! calls ending with a text answer, and counts the requests and tokens it served, so a
//! test can compare them with what `tdd` read from the CLI.
//!
//! The script position of a request is the number of tool results the conversation
//! already holds, so a retried or extra request never skips a step. A request without
//! tools (a CLI's side request) gets a short text answer. A routed fake holds one
//! script per leaf and picks it by a marker the leaf's prompt holds, so one fake can
//! serve every leaf of a whole `tdd conduct`.

use std::io::BufRead;
use std::io::BufReader;
use std::io::Read;
use std::io::Write;
use std::net::TcpListener;
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::Mutex;

use serde_json::Value;
use serde_json::json;

/// Which API the fake speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `POST /v1/messages`, streamed.
    Anthropic,
    /// `POST /v1/responses`, streamed.
    Responses,
    /// `POST /v1/chat/completions`, not streamed; it has no tools, so each request
    /// takes the next step of the script.
    ChatCompletions,
}

/// One reply of a script.
#[derive(Debug, Clone)]
pub enum Step {
    /// A call of the CLI's tool `name` with `input`.
    Tool(&'static str, Value),
    /// The final answer.
    Text(std::borrow::Cow<'static, str>),
}

impl Step {
    /// The final answer `said`.
    pub fn text(said: impl Into<std::borrow::Cow<'static, str>>) -> Step {
        Step::Text(said.into())
    }
}

/// Tokens one reply reports, per API.
pub const ANTHROPIC_USAGE: (u64, u64, u64, u64) = (100, 20, 50, 5);
/// Input (cached included), cached, output, reasoning.
pub const RESPONSES_USAGE: (u64, u64, u64, u64) = (1000, 400, 50, 10);
/// Prompt and completion tokens.
pub const CHAT_USAGE: (u64, u64) = (1200, 80);

/// What the fake served.
#[derive(Debug, Clone, Default)]
pub struct Served {
    /// Requests answered from the script (side requests not counted).
    pub scripted: u64,
    /// Every request: method, path and body.
    pub requests: Vec<(String, String, Value)>,
    /// Tokens reported over every answer: input (not cached), output, cache read,
    /// cache write, reasoning.
    pub tokens: [u64; 5],
    /// Chat Completions requests answered per route.
    pub per_route: Vec<u64>,
}

/// One script, for the requests whose body holds `marker` (every request when `None`).
#[derive(Debug, Clone)]
struct Route {
    marker: Option<String>,
    script: Vec<Step>,
}

/// A running fake; it serves until the test ends. A refusing fake answers every
/// request 401, as an API does to a wrong key.
pub struct FakeApi {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    served: Arc<Mutex<Served>>,
}

impl FakeApi {
    /// Starts a fake of `api` that refuses every key.
    pub fn refusing(api: Api) -> FakeApi {
        FakeApi::serve(api, Vec::new(), true)
    }

    /// Starts a fake of `api` replaying `script`.
    pub fn start(api: Api, script: Vec<Step>) -> FakeApi {
        let route = Route {
            marker: None,
            script,
        };
        FakeApi::serve(api, vec![route], false)
    }

    /// Starts a fake of `api` that answers a request with the script of the first
    /// route whose marker its body holds (a prompt's heading, say), and a request no
    /// marker matches with a short text.
    pub fn routed(api: Api, routes: Vec<(&str, Vec<Step>)>) -> FakeApi {
        let routes = routes
            .into_iter()
            .map(|(marker, script)| Route {
                marker: Some(marker.to_string()),
                script,
            })
            .collect();
        FakeApi::serve(api, routes, false)
    }

    fn serve(api: Api, routes: Vec<Route>, refuse: bool) -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let served = Arc::new(Mutex::new(Served::default()));
        let state = Arc::clone(&served);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = Arc::clone(&state);
                let routes = routes.clone();
                std::thread::spawn(move || serve(api, &routes, refuse, stream, &state));
            }
        });
        FakeApi { url, served }
    }

    /// What was served so far.
    pub fn served(&self) -> Served {
        self.served.lock().expect("lock").clone()
    }
}

/// The script of the first route `body` matches, and the route's index.
fn script_for<'r>(routes: &'r [Route], body: &Value) -> Option<(usize, &'r [Step])> {
    let text = body.to_string();
    routes.iter().enumerate().find_map(|(index, route)| {
        let matched = route
            .marker
            .as_ref()
            .is_none_or(|marker| text.contains(marker.as_str()));
        matched.then_some((index, route.script.as_slice()))
    })
}

fn serve(api: Api, routes: &[Route], refuse: bool, stream: TcpStream, state: &Mutex<Served>) {
    let mut reader = BufReader::new(stream);
    while let Some((method, path, body)) = read_request(&mut reader) {
        let mut out = reader.get_ref();
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        state
            .lock()
            .expect("lock")
            .requests
            .push((method.clone(), path.clone(), body.clone()));
        let wanted = match api {
            Api::Anthropic => path.starts_with("/v1/messages") && !path.contains("count_tokens"),
            Api::Responses => path.ends_with("/responses"),
            Api::ChatCompletions => path.ends_with("/chat/completions"),
        };
        if method != "POST" || !wanted {
            let _ = out.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 9\r\n\r\nnot here\n");
            continue;
        }
        if refuse {
            let error = r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;
            let _ = write!(
                out,
                "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{error}",
                error.len()
            );
            return;
        }
        let Some((route, script)) = script_for(routes, &body) else {
            let events = match api {
                Api::Anthropic => anthropic_events(&Step::text("ok"), state),
                Api::Responses => responses_events(&Step::text("ok"), state),
                Api::ChatCompletions => chat_answer(0, &[Step::text("ok")], state),
            };
            respond(&mut out, api, &events);
            return;
        };
        if api == Api::ChatCompletions {
            let answer = chat_answer(route, script, state);
            respond(&mut out, api, &answer);
            return;
        }
        let has_tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
        let step = if has_tools {
            let at = tool_results(api, &body).min(script.len().saturating_sub(1));
            state.lock().expect("lock").scripted += 1;
            script.get(at).cloned().unwrap_or(Step::text("done"))
        } else {
            Step::text("ok")
        };
        let events = match api {
            Api::Anthropic => anthropic_events(&step, state),
            Api::Responses => responses_events(&step, state),
            Api::ChatCompletions => unreachable!("answered above, as one JSON body"),
        };
        respond(&mut out, api, &events);
        return;
    }
}

/// Writes one answer: a JSON body for Chat Completions, an event stream otherwise.
fn respond(out: &mut &TcpStream, api: Api, body: &str) {
    let kind = match api {
        Api::ChatCompletions => "application/json",
        Api::Anthropic | Api::Responses => "text/event-stream",
    };
    let _ = write!(
        out,
        "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = out.flush();
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
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let lower = header.to_ascii_lowercase();
        if let Some(value) = lower.strip_prefix("content-length:") {
            length = value.trim().parse().unwrap_or(0);
        }
        if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
            chunked = true;
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).ok()?;
            let size = usize::from_str_radix(size.trim(), 16).ok()?;
            let mut chunk = vec![0u8; size + 2];
            reader.read_exact(&mut chunk).ok()?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        body.resize(length, 0);
        reader.read_exact(&mut body).ok()?;
    }
    Some((method, path, body))
}

/// How many tool results the conversation in `body` holds.
fn tool_results(api: Api, body: &Value) -> usize {
    let empty = Vec::new();
    match api {
        Api::Anthropic => body["messages"]
            .as_array()
            .unwrap_or(&empty)
            .iter()
            .flat_map(|m| m["content"].as_array().unwrap_or(&empty))
            .filter(|c| c["type"] == "tool_result")
            .count(),
        Api::Responses => body["input"]
            .as_array()
            .unwrap_or(&empty)
            .iter()
            .filter(|i| i["type"] == "function_call_output")
            .count(),
        Api::ChatCompletions => 0,
    }
}

/// The next text of route `route`'s script as a Chat Completions answer (the last
/// step again once the script is spent).
fn chat_answer(route: usize, script: &[Step], state: &Mutex<Served>) -> String {
    let (prompt, completion) = CHAT_USAGE;
    let at = {
        let mut served = state.lock().expect("lock");
        served.tokens[0] += prompt;
        served.tokens[1] += completion;
        served.scripted += 1;
        if served.per_route.len() <= route {
            served.per_route.resize(route + 1, 0);
        }
        served.per_route[route] += 1;
        (served.per_route[route] as usize - 1).min(script.len().saturating_sub(1))
    };
    let content = match script.get(at) {
        Some(Step::Text(text)) => text.to_string(),
        Some(Step::Tool(name, _)) => format!("(no tool {name} in this API)"),
        None => "done".to_string(),
    };
    json!({"id": format!("chatcmpl-{}", rand_suffix()), "object": "chat.completion",
        "created": 1, "model": "gpt-4o",
        "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}})
    .to_string()
}

fn sse(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

fn anthropic_events(step: &Step, state: &Mutex<Served>) -> String {
    let (input, output, cache_read, cache_write) = ANTHROPIC_USAGE;
    {
        let mut served = state.lock().expect("lock");
        for (slot, n) in [input, output, cache_read, cache_write]
            .into_iter()
            .enumerate()
        {
            served.tokens[slot] += n;
        }
    }
    let id = format!("msg_{:x}", std::process::id());
    let mut text = sse(
        "message_start",
        &json!({"type": "message_start", "message": {"id": id, "type": "message",
            "role": "assistant", "model": "claude-sonnet-4-5", "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input, "output_tokens": 1,
                "cache_creation_input_tokens": cache_write,
                "cache_read_input_tokens": cache_read}}}),
    );
    let (block, delta, stop) = match step {
        Step::Tool(name, input) => (
            json!({"type": "tool_use", "id": format!("toolu_{name}_{}", rand_suffix()), "name": name, "input": {}}),
            json!({"type": "input_json_delta", "partial_json": input.to_string()}),
            "tool_use",
        ),
        Step::Text(said) => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": said.as_ref()}),
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
            "usage": {"output_tokens": output}}),
    );
    text + &sse("message_stop", &json!({"type": "message_stop"}))
}

fn responses_events(step: &Step, state: &Mutex<Served>) -> String {
    let (input, cached, output, reasoning) = RESPONSES_USAGE;
    {
        let mut served = state.lock().expect("lock");
        served.tokens[0] += input - cached;
        served.tokens[1] += output;
        served.tokens[2] += cached;
        served.tokens[4] += reasoning;
    }
    let id = format!("resp_{}", rand_suffix());
    let item = match step {
        Step::Tool(name, input) => {
            json!({"type": "function_call", "id": format!("fc_{}", rand_suffix()),
            "call_id": format!("call_{}", rand_suffix()), "name": name,
            "arguments": input.to_string(), "status": "completed"})
        }
        Step::Text(said) => json!({"type": "message", "id": format!("msg_{}", rand_suffix()),
            "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": said.as_ref(), "annotations": []}]}),
    };
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
            "usage": {"input_tokens": input, "input_tokens_details": {"cached_tokens": cached},
                "output_tokens": output,
                "output_tokens_details": {"reasoning_tokens": reasoning},
                "total_tokens": input + output}}}),
    )
}

/// A short suffix that differs between calls, for ids.
fn rand_suffix() -> String {
    use std::sync::atomic::AtomicU64;
    use std::sync::atomic::Ordering;
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("{:08x}", NEXT.fetch_add(1, Ordering::Relaxed))
}
