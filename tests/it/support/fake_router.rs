//! A fake OpenAI-compatible chat-completions server on loopback whose reply to each request
//! is chosen by a closure over the request body: a final text answer, tool calls, or an HTTP
//! error, streamed as real OpenAI SSE chunks (HTTP/1.1, one reply per connection). Every
//! chat-completions request is recorded with when it arrived and when its reply was sent,
//! so tests can see which requests overlapped.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// What one reply says.
#[derive(Clone, Debug)]
pub enum Answer {
    /// A final text answer (`finish_reason: "stop"`).
    Text(String),
    /// Tool calls `(name, arguments)` (`finish_reason: "tool_calls"`).
    ToolCalls(Vec<(String, Value)>),
    /// A non-200 status with a JSON error body.
    HttpError(u16),
}

/// The reply to one request: its answer, a delay before the first byte, and its usage.
#[derive(Clone, Debug)]
pub struct RouterReply {
    pub answer: Answer,
    pub delay: Duration,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// Usage each reply reports unless set with `RouterReply::usage`.
pub const PROMPT_TOKENS: u64 = 10;
pub const COMPLETION_TOKENS: u64 = 5;

impl RouterReply {
    fn of(answer: Answer) -> RouterReply {
        RouterReply {
            answer,
            delay: Duration::ZERO,
            prompt_tokens: PROMPT_TOKENS,
            completion_tokens: COMPLETION_TOKENS,
        }
    }

    /// A final text answer.
    pub fn text(t: impl Into<String>) -> RouterReply {
        Self::of(Answer::Text(t.into()))
    }

    /// Several tool calls in one assistant turn.
    pub fn tool_calls(calls: Vec<(&str, Value)>) -> RouterReply {
        Self::of(Answer::ToolCalls(
            calls.into_iter().map(|(n, a)| (n.to_string(), a)).collect(),
        ))
    }

    /// One tool call.
    pub fn tool(name: &str, args: Value) -> RouterReply {
        Self::tool_calls(vec![(name, args)])
    }

    /// An HTTP error status instead of a stream.
    pub fn http_error(status: u16) -> RouterReply {
        Self::of(Answer::HttpError(status))
    }

    /// Waits this long before sending the first byte.
    pub fn delay(mut self, d: Duration) -> RouterReply {
        self.delay = d;
        self
    }

    /// The usage the final chunk reports.
    pub fn usage(mut self, prompt: u64, completion: u64) -> RouterReply {
        self.prompt_tokens = prompt;
        self.completion_tokens = completion;
        self
    }
}

/// One chat-completions request the server received.
#[derive(Clone, Debug)]
pub struct RouterRequest {
    /// Arrival order, from 0.
    pub n: usize,
    pub path: String,
    pub body: Value,
    /// When the request (headers and body) had been read.
    pub arrived: Instant,
    /// When the reply started (after the delay, before its first byte).
    pub replied: Option<Instant>,
    /// When the reply's last byte was written.
    pub completed: Option<Instant>,
}

impl RouterRequest {
    pub fn first_user(&self) -> Option<String> {
        first_user(&self.body)
    }
    pub fn last_message(&self) -> Option<(String, String)> {
        last_message(&self.body)
    }
    pub fn offers(&self, tool: &str) -> bool {
        offers(&self.body, tool)
    }
    pub fn tool_names(&self) -> Vec<String> {
        tool_names(&self.body)
    }
    pub fn system(&self) -> Option<String> {
        system(&self.body)
    }
    pub fn messages(&self) -> Vec<Value> {
        messages(&self.body)
    }
    /// The offered tool definition (`{type, function: {name, description, parameters}}`).
    pub fn tool(&self, name: &str) -> Option<Value> {
        tool(&self.body, name)
    }
    /// The `tool` role messages' contents, in order.
    pub fn tool_results(&self) -> Vec<String> {
        tool_results(&self.body)
    }
}

/// A message's content as text (a string, or the text parts of a content list).
pub fn content_text(m: &Value) -> String {
    match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

pub fn messages(body: &Value) -> Vec<Value> {
    body["messages"].as_array().cloned().unwrap_or_default()
}

/// The first `user` message's content.
pub fn first_user(body: &Value) -> Option<String> {
    messages(body)
        .iter()
        .find(|m| m["role"] == "user")
        .map(content_text)
}

/// The last message's role and content.
pub fn last_message(body: &Value) -> Option<(String, String)> {
    messages(body).last().map(|m| {
        (
            m["role"].as_str().unwrap_or_default().to_string(),
            content_text(m),
        )
    })
}

/// The offered tools' names, in order.
pub fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

pub fn offers(body: &Value, tool: &str) -> bool {
    tool_names(body).iter().any(|n| n == tool)
}

pub fn tool(body: &Value, name: &str) -> Option<Value> {
    body["tools"]
        .as_array()?
        .iter()
        .find(|t| t["function"]["name"] == name)
        .cloned()
}

/// The `system` message's content (the first one).
pub fn system(body: &Value) -> Option<String> {
    messages(body)
        .iter()
        .find(|m| m["role"] == "system")
        .map(content_text)
}

pub fn tool_results(body: &Value) -> Vec<String> {
    messages(body)
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(content_text)
        .collect()
}

type Route = Arc<dyn Fn(&Value) -> RouterReply + Send + Sync>;

pub struct FakeRouter {
    pub port: u16,
    requests: Arc<Mutex<Vec<RouterRequest>>>,
    stop: Arc<AtomicBool>,
}

impl FakeRouter {
    pub fn start(route: impl Fn(&Value) -> RouterReply + Send + Sync + 'static) -> FakeRouter {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let route: Route = Arc::new(route);
        let counter = Arc::new(AtomicUsize::new(0));
        let (reqs, stop2) = (requests.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (reqs, route, counter) = (reqs.clone(), route.clone(), counter.clone());
                std::thread::spawn(move || serve(conn, route, reqs, counter));
            }
        });
        FakeRouter {
            port,
            requests,
            stop,
        }
    }

    /// `http://127.0.0.1:PORT/v1`
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Every chat-completions request so far, in arrival order.
    pub fn requests(&self) -> Vec<RouterRequest> {
        let mut v = self.requests.lock().unwrap().clone();
        v.sort_by_key(|r| r.n);
        v
    }

    /// The requests whose first user message is `task` (one agent loop's requests).
    pub fn requests_for(&self, task: &str) -> Vec<RouterRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.first_user().as_deref() == Some(task))
            .collect()
    }
}

impl Drop for FakeRouter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// The SSE body of one reply.
fn sse(reply: &RouterReply, n: usize) -> String {
    let id = format!("chatcmpl-router-{n}");
    let chunk = |choices: Value, usage: Value| {
        let mut c = json!({"id": id, "object": "chat.completion.chunk", "created": 1,
                           "model": "fake-router", "choices": choices});
        if !usage.is_null() {
            c["usage"] = usage;
        }
        format!("data: {c}\n\n")
    };
    let mut out = String::new();
    out.push_str(&chunk(
        json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]),
        Value::Null,
    ));
    let finish = match &reply.answer {
        Answer::Text(t) => {
            // Two deltas, so the client accumulates.
            let cut = t
                .char_indices()
                .nth(t.chars().count() / 2)
                .map(|(i, _)| i)
                .unwrap_or(0);
            for piece in [&t[..cut], &t[cut..]] {
                if !piece.is_empty() {
                    out.push_str(&chunk(
                        json!([{"index": 0, "delta": {"content": piece}, "finish_reason": null}]),
                        Value::Null,
                    ));
                }
            }
            "stop"
        }
        Answer::ToolCalls(calls) => {
            for (i, (name, args)) in calls.iter().enumerate() {
                let args = args.to_string();
                let cut = args.len() / 2;
                let cut = (0..=cut).rev().find(|c| args.is_char_boundary(*c)).unwrap();
                out.push_str(&chunk(
                    json!([{"index": 0, "delta": {"tool_calls": [{"index": i, "id": format!("call_{n}_{i}"),
                        "type": "function", "function": {"name": name, "arguments": &args[..cut]}}]},
                        "finish_reason": null}]),
                    Value::Null,
                ));
                out.push_str(&chunk(
                    json!([{"index": 0, "delta": {"tool_calls": [{"index": i,
                        "function": {"arguments": &args[cut..]}}]}, "finish_reason": null}]),
                    Value::Null,
                ));
            }
            "tool_calls"
        }
        Answer::HttpError(_) => unreachable!(),
    };
    out.push_str(&chunk(
        json!([{"index": 0, "delta": {}, "finish_reason": finish}]),
        json!({"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
               "total_tokens": reply.prompt_tokens + reply.completion_tokens,
               "prompt_tokens_details": {"cached_tokens": 0}}),
    ));
    out.push_str("data: [DONE]\n\n");
    out
}

fn serve(
    conn: TcpStream,
    route: Route,
    reqs: Arc<Mutex<Vec<RouterRequest>>>,
    counter: Arc<AtomicUsize>,
) {
    let Some(req) = super::fake_openai::read_request(&conn) else {
        return;
    };
    let (path, body) = (req.path, req.body);
    let mut w = conn;
    if !path.ends_with("/chat/completions") {
        let _ = w
            .write_all(b"HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
        return;
    }
    let n = counter.fetch_add(1, Ordering::SeqCst);
    let arrived = Instant::now();
    let idx = {
        let mut g = reqs.lock().unwrap();
        g.push(RouterRequest {
            n,
            path,
            body: body.clone(),
            arrived,
            replied: None,
            completed: None,
        });
        g.len() - 1
    };
    let reply = route(&body);
    if !reply.delay.is_zero() {
        std::thread::sleep(reply.delay);
    }
    reqs.lock().unwrap()[idx].replied = Some(Instant::now());
    let ok = match &reply.answer {
        Answer::HttpError(status) => {
            let err = format!("{{\"error\":{{\"message\":\"fake router error {status}\"}}}}");
            let head = format!(
                "HTTP/1.1 {status} Fake\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                err.len()
            );
            w.write_all(head.as_bytes())
                .and_then(|_| w.write_all(err.as_bytes()))
                .and_then(|_| w.flush())
                .is_ok()
        }
        _ => {
            let head = "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n";
            let text = sse(&reply, n);
            w.write_all(head.as_bytes()).is_ok()
                && text.split_inclusive("\n\n").all(|event| {
                    w.write_all(event.as_bytes())
                        .and_then(|_| w.flush())
                        .is_ok()
                })
        }
    };
    if ok {
        reqs.lock().unwrap()[idx].completed = Some(Instant::now());
    }
    let _ = w.shutdown(std::net::Shutdown::Both);
}
