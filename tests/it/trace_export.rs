//! `trace.export`: a real chat turn's trace (scripted provider, `read_file` calls) sent as
//! OTLP/HTTP protobuf to a loopback receiver (`tests/fixtures/otlp/receiver.py`, which
//! decodes it with the official `opentelemetry-proto` package and prints one JSON line per
//! request). Covers the span tree and GenAI attributes, both privacy modes (checked on the
//! decoded message and on the raw body bytes), config endpoint and headers, collectors that
//! are down, refusing or slow, the error cases, and a trace read back from the store.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};

use crate::common::{Opts, Sidecar, line_channel, on_db, write_file};
use crate::support::chat_helpers::*;
use crate::support::mcp_deps::mcp_venv_python;

/// In the file `read_file` reads (so in its result).
const FILE_SECRET: &str = "FILESECRET-7f3a9c";
/// In the path of the `read_file` call that fails (so in its argument and its error text).
const ARG_SECRET: &str = "ARGSECRET-51be0d";
/// In the user prompt.
const PROMPT_SECRET: &str = "PROMPTSECRET-c04e2d";
/// In the model's final answer.
const ANSWER_SECRET: &str = "ANSWERSECRET-9ad611";
const SECRETS: [&str; 4] = [FILE_SECRET, ARG_SECRET, PROMPT_SECRET, ANSWER_SECRET];

/// How long a receiver line may take to show up once the export was sent.
const RECV: Duration = Duration::from_secs(10);

/// The loopback OTLP receiver (one Python process), killed on drop.
struct Collector {
    child: Child,
    port: u16,
    lines: Receiver<String>,
}

impl Collector {
    /// Answers 200 at once.
    fn start() -> Collector {
        Collector::with(&[])
    }

    /// `args`: `[status [delay_ms]]`.
    fn with(args: &[&str]) -> Collector {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/otlp/receiver.py");
        let mut child = Command::new(mcp_venv_python())
            .arg(script)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the OTLP receiver");
        let lines = line_channel(child.stdout.take().unwrap());
        let first = lines
            .recv_timeout(Duration::from_secs(20))
            .expect("the OTLP receiver prints its port");
        let port = first.trim().parse().expect("port line");
        Collector { child, port, lines }
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The next request it received, decoded.
    fn next(&self) -> Request {
        let line = self
            .lines
            .recv_timeout(RECV)
            .expect("the collector received an export");
        let v: Value = serde_json::from_str(&line).expect("receiver line is JSON");
        assert!(v.get("decodeError").is_none(), "undecodable body: {v}");
        Request(v)
    }

    /// Asserts nothing arrived (after the calls that must not send anything have answered).
    fn assert_quiet(&self) {
        if let Ok(l) = self.lines.recv_timeout(Duration::from_millis(200)) {
            panic!("the collector received an unexpected request: {l}");
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One received export request.
struct Request(Value);

impl Request {
    fn path(&self) -> &str {
        self.0["path"].as_str().unwrap()
    }

    /// Every value of header `name` (any case), in order.
    fn header(&self, name: &str) -> Vec<String> {
        self.0["headers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|h| h[0].as_str().unwrap().eq_ignore_ascii_case(name))
            .map(|h| h[1].as_str().unwrap().to_string())
            .collect()
    }

    fn raw(&self) -> Vec<u8> {
        base64::engine::general_purpose::STANDARD
            .decode(self.0["raw"].as_str().unwrap())
            .unwrap()
    }

    /// Everything decoded (spans, attributes, events, the MessageToDict form), as JSON text.
    fn decoded_text(&self) -> String {
        let mut v = self.0.clone();
        v.as_object_mut().unwrap().remove("raw");
        v.to_string()
    }

    fn spans(&self) -> Vec<Value> {
        self.0["spans"].as_array().unwrap().clone()
    }

    fn root(&self) -> Value {
        let roots: Vec<Value> = self
            .spans()
            .into_iter()
            .filter(|s| s["parentSpanIdHex"] == "")
            .collect();
        assert_eq!(roots.len(), 1, "exactly one root span: {}", self.0);
        roots[0].clone()
    }

    fn named(&self, name: &str) -> Vec<Value> {
        self.spans()
            .into_iter()
            .filter(|s| s["name"] == name)
            .collect()
    }

    /// The `execute_tool` span of call `id`.
    fn tool(&self, id: &str) -> Value {
        let found: Vec<Value> = self
            .spans()
            .into_iter()
            .filter(|s| s["attrs"]["gen_ai.tool.call.id"] == id)
            .collect();
        assert_eq!(found.len(), 1, "one span for call {id}: {}", self.0);
        found[0].clone()
    }
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// A finished chat turn: the tool round reads a file holding `FILE_SECRET` and fails to read
/// a path holding `ARG_SECRET` (usage reported), then the model answers with
/// `ANSWER_SECRET` (no usage); the prompt holds `PROMPT_SECRET`.
struct Turn {
    trace_id: String,
    _dir: tempfile::TempDir,
}

fn turn(s: &mut Sidecar, chat_id: &str) -> Turn {
    let dir = tempfile::tempdir().unwrap();
    write_file(
        dir.path(),
        "secret.txt",
        &format!("the file says {FILE_SECRET}\n"),
    );
    let script = json!([
        {"toolCalls": [
            {"id": "c_read", "name": "read_file", "arguments": {"path": "secret.txt"}},
            {"id": "c_missing", "name": "read_file",
             "arguments": {"path": format!("missing-{ARG_SECRET}.txt")}}
         ],
         "usage": {"promptTokens": 11, "completionTokens": 7}},
        {"text": format!("The answer is {ANSWER_SECRET}.")}
    ]);
    let r = run(
        s,
        merge(
            scripted(script, &format!("please look, {PROMPT_SECRET}")),
            json!({"cwd": dir.path(), "chatId": chat_id}),
        ),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    assert!(r.text().contains(ANSWER_SECRET), "{:?}", r.frames);
    let trace_id = r.done["traceId"]
        .as_str()
        .expect("stream.done carries traceId")
        .to_string();
    Turn {
        trace_id,
        _dir: dir,
    }
}

/// A sidecar whose `$OUTRIGGER_HOME/config.json` is `config`.
fn with_config(config: Value) -> Sidecar {
    let home = tempfile::tempdir().unwrap();
    write_file(home.path(), "config.json", &config.to_string());
    Sidecar::start_with(Opts {
        home: Some(home),
        ..Opts::default()
    })
}

fn export(s: &mut Sidecar, params: Value) -> Value {
    s.ok("trace.export", params)
}

#[test]
fn a_turn_exports_as_one_invoke_agent_root_with_chat_and_tool_children() {
    let c = Collector::start();
    let mut s = Sidecar::start();
    let t = turn(&mut s, "chat_export_tree");
    let fetched = s.ok("trace.fetch", json!({"traceId": t.trace_id}));
    assert_eq!(fetched["spans"].as_array().unwrap().len(), 4, "{fetched}");

    let r = export(&mut s, json!({"traceId": t.trace_id, "endpoint": c.base()}));
    assert_eq!(
        r,
        json!({"status": "exported", "traceId": t.trace_id, "privacyMode": "metadata", "spans": 5})
    );
    let q = c.next();
    assert_eq!(q.path(), "/v1/traces");
    assert_eq!(q.0["method"], "POST");
    assert_eq!(q.header("content-type"), ["application/x-protobuf"]);
    assert_eq!(q.0["resource"]["service.name"], "outrigger", "{}", q.0);
    assert_eq!(q.0["scope"]["name"], "outrigger");
    let spans = q.spans();
    assert_eq!(spans.len(), 5, "{}", q.0);

    // One trace id (16 bytes) for all, distinct 8-byte span ids, every child under the root.
    let root = q.root();
    let trace_hex = root["traceIdHex"].as_str().unwrap();
    assert_eq!(trace_hex.len(), 32);
    assert_ne!(trace_hex, "0".repeat(32));
    let ids: BTreeSet<&str> = spans
        .iter()
        .map(|s| s["spanIdHex"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 5, "span ids are distinct: {ids:?}");
    for sp in &spans {
        assert_eq!(sp["traceIdHex"], trace_hex, "{sp}");
        assert_eq!(sp["spanIdHex"].as_str().unwrap().len(), 16, "{sp}");
        if sp["spanIdHex"] != root["spanIdHex"] {
            assert_eq!(sp["parentSpanIdHex"], root["spanIdHex"], "{sp}");
        }
        let (start, end) = (sp["start"].as_u64().unwrap(), sp["end"].as_u64().unwrap());
        assert!(start > 0 && end >= start, "{sp}");
        assert!(
            start >= root["start"].as_u64().unwrap() && end <= root["end"].as_u64().unwrap(),
            "children lie within the root: {sp}\nroot {root}"
        );
    }

    // The root: invoke_agent, the model, the conversation, the trace's counters.
    assert_eq!(root["name"], "invoke_agent outrigger");
    let a = &root["attrs"];
    assert_eq!(a["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(a["gen_ai.request.model"], "scripted-model");
    assert_eq!(a["gen_ai.conversation.id"], "chat_export_tree");
    assert_eq!(a["outrigger.trace_id"], t.trace_id.as_str());
    assert_eq!(a["outrigger.span_count"], 4);
    assert_eq!(a["outrigger.event_count"], fetched["trace"]["eventCount"]);
    assert_eq!(a["outrigger.total_tokens"], 18);
    assert!(a.get("error.type").is_none(), "{root}");
    assert_eq!(root["status"]["code"], 1, "STATUS_CODE_OK: {root}");
    assert_eq!(root["events"], json!([]), "no events under metadata");

    // One chat span per provider request (CLIENT); usage only where the provider gave it.
    let chats = q.named("chat scripted-model");
    assert_eq!(chats.len(), 2, "{}", q.0);
    for ch in &chats {
        assert_eq!(ch["kind"], 3, "SPAN_KIND_CLIENT: {ch}");
        assert_eq!(ch["attrs"]["gen_ai.operation.name"], "chat");
        assert_eq!(ch["attrs"]["gen_ai.request.model"], "scripted-model");
        assert_eq!(ch["status"]["code"], 1);
    }
    let (first, second): (Vec<&Value>, Vec<&Value>) = chats
        .iter()
        .partition(|c| c["attrs"]["outrigger.round"] == 0);
    assert_eq!((first.len(), second.len()), (1, 1), "{chats:?}");
    assert_eq!(first[0]["attrs"]["gen_ai.usage.input_tokens"], 11);
    assert_eq!(first[0]["attrs"]["gen_ai.usage.output_tokens"], 7);
    let second_keys: Vec<&String> = second[0]["attrs"].as_object().unwrap().keys().collect();
    assert!(
        !second_keys.iter().any(|k| k.starts_with("gen_ai.usage.")),
        "no usage was reported for round 1: {second_keys:?}"
    );

    // One execute_tool span per tool execution, the failed one marked by type only.
    assert_eq!(q.named("execute_tool read_file").len(), 2);
    for (id, ok) in [("c_read", true), ("c_missing", false)] {
        let sp = q.tool(id);
        assert_eq!(sp["name"], "execute_tool read_file");
        assert_eq!(sp["attrs"]["gen_ai.operation.name"], "execute_tool");
        assert_eq!(sp["attrs"]["gen_ai.tool.name"], "read_file");
        if ok {
            assert_eq!(sp["status"]["code"], 1, "{sp}");
            assert!(sp["attrs"].get("error.type").is_none(), "{sp}");
        } else {
            assert_eq!(sp["status"]["code"], 2, "STATUS_CODE_ERROR: {sp}");
            assert_eq!(sp["attrs"]["error.type"], "tool_error", "{sp}");
            assert_eq!(sp["status"]["message"], "", "{sp}");
        }
    }

    // The same trace exports the same bytes (ids derived from ours, not random).
    let again = export(&mut s, json!({"traceId": t.trace_id, "endpoint": c.base()}));
    assert_eq!(again["status"], "exported");
    assert_eq!(c.next().raw(), q.raw());
}

#[test]
fn metadata_sends_no_text_and_full_sends_what_the_trace_recorded() {
    let c = Collector::start();
    let mut s = Sidecar::start();
    let t = turn(&mut s, "chat_export_privacy");
    let fetched = s.ok("trace.fetch", json!({"traceId": t.trace_id}));
    let fetched_text = fetched.to_string();
    // Where the secrets are in the recorded trace: the file's text in the read's result
    // preview, the failing path in its arguments and error. The prompt and the answer are
    // not recorded (only their sizes).
    assert!(fetched_text.contains(FILE_SECRET) && fetched_text.contains(ARG_SECRET));

    // metadata: none of the text, neither decoded nor anywhere in the raw protobuf.
    let r = export(
        &mut s,
        json!({"traceId": t.trace_id, "endpoint": c.base(), "privacyMode": "metadata"}),
    );
    assert_eq!(r["status"], "exported", "{r}");
    assert_eq!(r["privacyMode"], "metadata");
    let meta = c.next();
    let (decoded, raw) = (meta.decoded_text(), meta.raw());
    for secret in SECRETS.iter().chain(&["secret.txt", "no such file"]) {
        assert!(
            !decoded.contains(secret),
            "metadata leaks {secret}: {decoded}"
        );
        assert!(!contains(&raw, secret), "metadata raw body leaks {secret}");
    }
    // Only names, ids, counts and statuses: every attribute key is one of these.
    let allowed = |k: &str| {
        k.starts_with("gen_ai.")
            || k == "error.type"
            || [
                "outrigger.trace_id",
                "outrigger.stream_id",
                "outrigger.span_count",
                "outrigger.event_count",
                "outrigger.total_tokens",
                "outrigger.model",
                "outrigger.round",
                "outrigger.messages",
                "outrigger.callId",
                "outrigger.parentCallId",
                "outrigger.tools",
            ]
            .contains(&k)
    };
    for sp in meta.spans() {
        for k in sp["attrs"].as_object().unwrap().keys() {
            assert!(allowed(k), "metadata span {} carries {k}: {sp}", sp["name"]);
        }
        assert_eq!(sp["status"]["message"], "", "{sp}");
        assert_eq!(sp["events"], json!([]), "{sp}");
    }

    // full: the spans' other attributes and the trace's events, exactly as recorded.
    let r = export(
        &mut s,
        json!({"traceId": t.trace_id, "endpoint": c.base(), "privacyMode": "full"}),
    );
    assert_eq!(
        r,
        json!({"status": "exported", "traceId": t.trace_id, "privacyMode": "full", "spans": 5})
    );
    let full = c.next();
    let (decoded, raw) = (full.decoded_text(), full.raw());
    for secret in SECRETS {
        assert_eq!(
            decoded.contains(secret),
            fetched_text.contains(secret),
            "full carries {secret} exactly when the trace recorded it"
        );
        assert_eq!(
            contains(&raw, secret),
            fetched_text.contains(secret),
            "{secret}"
        );
    }
    // Same ids in both modes.
    let ids = |q: &Request| -> Vec<(String, String)> {
        q.spans()
            .iter()
            .map(|s| (s["name"].to_string(), s["spanIdHex"].to_string()))
            .collect()
    };
    assert_eq!(ids(&meta), ids(&full));

    // The failed call: its error text as outrigger.error and as the status message.
    let recorded_error = fetched["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["attrs"]["callId"] == "c_missing")
        .unwrap()["attrs"]["error"]
        .clone();
    assert!(
        recorded_error.as_str().unwrap().contains(ARG_SECRET),
        "{recorded_error}"
    );
    let missing = full.tool("c_missing");
    assert_eq!(missing["attrs"]["outrigger.error"], recorded_error);
    assert_eq!(missing["status"]["message"], recorded_error);
    assert_eq!(missing["attrs"]["error.type"], "tool_error");
    assert_eq!(missing["attrs"]["outrigger.callId"], "c_missing");
    let read = full.tool("c_read");
    assert!(read["attrs"].get("outrigger.error").is_none(), "{read}");
    assert_eq!(read["status"]["message"], "");
    // Usage stays as gen_ai.usage.* (not repeated as outrigger.usage).
    for ch in full.named("chat scripted-model") {
        assert!(ch["attrs"].get("outrigger.usage").is_none(), "{ch}");
        assert_eq!(ch["attrs"]["outrigger.model"], "scripted-model");
    }

    // The root carries every recorded event, in order: name, kind and the payload's JSON.
    let root = full.root();
    let events = root["events"].as_array().unwrap();
    let recorded = fetched["events"].as_array().unwrap();
    assert_eq!(events.len(), recorded.len(), "{root}");
    for (e, want) in events.iter().zip(recorded) {
        assert_eq!(e["name"], want["name"], "{e}");
        assert_eq!(e["attrs"]["outrigger.event.kind"], want["kind"], "{e}");
        assert_eq!(
            e["time"].as_u64().unwrap(),
            want["timestampMs"].as_u64().unwrap() * 1_000_000
        );
        match want.get("payload") {
            Some(p) => {
                let sent: Value =
                    serde_json::from_str(e["attrs"]["outrigger.event.payload"].as_str().unwrap())
                        .unwrap();
                assert_eq!(&sent, p, "{e}");
            }
            None => assert!(e["attrs"].get("outrigger.event.payload").is_none(), "{e}"),
        }
    }
    let payload_of = |kind: &str, id: &str| -> String {
        events
            .iter()
            .map(|e| &e["attrs"])
            .find(|a| {
                a["outrigger.event.kind"] == kind
                    && a["outrigger.event.payload"]
                        .as_str()
                        .and_then(|p| serde_json::from_str::<Value>(p).ok())
                        .is_some_and(|p| p["id"] == id)
            })
            .unwrap_or_else(|| panic!("no {kind} event for {id}: {root}"))["outrigger.event.payload"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(payload_of("tool_call_result", "c_read").contains(FILE_SECRET));
    assert!(payload_of("tool_call_start", "c_missing").contains(ARG_SECRET));
    assert!(payload_of("tool_error", "c_missing").contains(ARG_SECRET));
}

#[test]
fn config_endpoint_and_headers_apply_and_call_headers_win() {
    let a = Collector::start();
    let b = Collector::start();
    let mut s = with_config(json!({
        "otlp_endpoint": a.base(),
        "otlp_headers": "x-api-key=cfg%20key, x-tenant=acme%2Cco ,Authorization=Bearer%20from-config"
    }));
    let t = turn(&mut s, "chat_export_config");

    // No endpoint, no headers: config's, values percent-decoded (a %2C stays in the value).
    let r = export(&mut s, json!({"traceId": t.trace_id}));
    assert_eq!(r["status"], "exported", "{r}");
    assert_eq!(r["spans"], 5);
    let q = a.next();
    assert_eq!(q.path(), "/v1/traces");
    assert_eq!(q.header("x-api-key"), ["cfg key"]);
    assert_eq!(q.header("x-tenant"), ["acme,co"]);
    assert_eq!(q.header("authorization"), ["Bearer from-config"]);

    // The call's headers win (names compared without case); the others stay.
    let r = export(
        &mut s,
        json!({"traceId": t.trace_id,
               "headers": {"authorization": "Bearer from-call", "x-extra": "1"}}),
    );
    assert_eq!(r["status"], "exported", "{r}");
    let q = a.next();
    assert_eq!(q.header("authorization"), ["Bearer from-call"]);
    assert_eq!(q.header("x-api-key"), ["cfg key"]);
    assert_eq!(q.header("x-extra"), ["1"]);

    // The call's endpoint wins over config's, and config's headers (its key) stay with the
    // configured collector: a call-named endpoint gets only the call's.
    let r = export(
        &mut s,
        json!({"traceId": t.trace_id, "endpoint": b.base(), "headers": {"x-extra": "2"}}),
    );
    assert_eq!(r["status"], "exported", "{r}");
    let q = b.next();
    assert_eq!(q.path(), "/v1/traces");
    assert!(q.header("x-api-key").is_empty(), "config key leaked");
    assert!(q.header("authorization").is_empty(), "config key leaked");
    assert_eq!(q.header("x-extra"), ["2"]);
    a.assert_quiet();

    // The exporter's own headers cannot be replaced.
    let r = s.call(
        "trace.export",
        json!({"traceId": t.trace_id, "headers": {"Content-Type": "text/plain"}}),
    );
    assert_eq!(code(&r), -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("content-type"),
        "{r}"
    );
    a.assert_quiet();
}

#[test]
fn an_endpoint_is_completed_with_v1_traces_unless_it_ends_in_it() {
    let c = Collector::start();
    let mut s = Sidecar::start();
    let t = turn(&mut s, "chat_export_paths");
    let base = c.base();
    for (endpoint, path) in [
        (format!("{base}/v1/traces"), "/v1/traces"),
        (format!("{base}/"), "/v1/traces"),
        (format!("{base}/otlp"), "/otlp/v1/traces"),
        (format!("{base}/custom/v1/traces"), "/custom/v1/traces"),
    ] {
        let r = export(&mut s, json!({"traceId": t.trace_id, "endpoint": endpoint}));
        assert_eq!(r["status"], "exported", "{endpoint}: {r}");
        assert_eq!(c.next().path(), path, "{endpoint}");
    }
    for bad in [
        format!("127.0.0.1:{}", c.port),
        format!("ftp://127.0.0.1:{}", c.port),
    ] {
        let r = s.call(
            "trace.export",
            json!({"traceId": t.trace_id, "endpoint": bad}),
        );
        assert_eq!(code(&r), -32602, "{bad}: {r}");
        assert!(
            r["error"]["message"].as_str().unwrap().contains("http://"),
            "{r}"
        );
    }
    c.assert_quiet();
}

/// A port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn a_collector_that_is_down_fails_the_export_and_the_sidecar_keeps_serving() {
    let mut s = Sidecar::start();
    let t = turn(&mut s, "chat_export_down");
    let port = closed_port();
    let r = export(
        &mut s,
        json!({"traceId": t.trace_id, "endpoint": format!("http://127.0.0.1:{port}"),
               "privacyMode": "full"}),
    );
    assert_eq!(r["status"], "failed", "{r}");
    assert_eq!(r["spans"], 0, "{r}");
    assert_eq!(r["traceId"], t.trace_id.as_str());
    assert_eq!(r["privacyMode"], "full");
    let e = r["error"].as_str().expect("a reason").to_string();
    assert!(
        e.contains("cannot reach") && e.contains(&format!("http://127.0.0.1:{port}/v1/traces")),
        "{e}"
    );
    assert_eq!(s.ok("system.ping", json!({}))["status"], "ok");

    // A collector that comes up later gets the same trace.
    let c = Collector::start();
    let r = export(&mut s, json!({"traceId": t.trace_id, "endpoint": c.base()}));
    assert_eq!(r["status"], "exported", "{r}");
    assert!(r.get("error").is_none(), "{r}");
    assert_eq!(c.next().spans().len(), 5);

    // The reason is the one the OS gave (nothing listens: the connection was refused), not
    // only that sending failed.
    assert!(
        e.to_ascii_lowercase().contains("connection refused"),
        "the error names no reason: {e}"
    );
}

#[test]
fn a_collector_answering_503_fails_the_export_with_its_status() {
    let c = Collector::with(&["503"]);
    let mut s = Sidecar::start();
    let t = turn(&mut s, "chat_export_503");
    let r = export(&mut s, json!({"traceId": t.trace_id, "endpoint": c.base()}));
    assert_eq!(r["status"], "failed", "{r}");
    assert_eq!(r["spans"], 0);
    assert_eq!(r["privacyMode"], "metadata");
    let e = r["error"].as_str().expect("a reason");
    assert!(e.contains("HTTP 503"), "{e}");
    assert!(e.contains("receiver says 503"), "the collector's body: {e}");
    // It was sent (and decodes) all the same.
    assert_eq!(c.next().spans().len(), 5);
    assert_eq!(s.ok("system.ping", json!({}))["status"], "ok");
}

#[test]
fn a_slow_collector_fails_after_otlp_timeout_ms() {
    let c = Collector::with(&["200", "5000"]);
    let mut s = Sidecar::start_with(Opts {
        env: vec![
            ("OUTRIGGER_OTLP_ENDPOINT".into(), c.base()),
            ("OUTRIGGER_OTLP_TIMEOUT_MS".into(), "300".into()),
        ],
        ..Opts::default()
    });
    let t = turn(&mut s, "chat_export_slow");
    let started = Instant::now();
    let r = export(&mut s, json!({"traceId": t.trace_id}));
    let took = started.elapsed();
    assert_eq!(r["status"], "failed", "{r}");
    assert_eq!(r["spans"], 0);
    let e = r["error"].as_str().expect("a reason");
    assert!(e.contains("300 ms") && e.contains("otlp_timeout_ms"), "{e}");
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(2),
        "answered after {took:?}"
    );
    // The request did reach the (env-configured) collector before it gave up.
    assert_eq!(c.next().path(), "/v1/traces");
    assert_eq!(s.ok("system.ping", json!({}))["status"], "ok");
}

#[test]
fn other_requests_are_answered_while_an_export_waits_for_the_collector() {
    const HOLD_MS: u64 = 1500;
    let c = Collector::with(&["200", &HOLD_MS.to_string()]);
    let mut s = Sidecar::start();
    let t = turn(&mut s, "chat_export_busy");
    s.send(
        &json!({"jsonrpc": "2.0", "id": "exp-1", "method": "trace.export",
                   "params": {"traceId": t.trace_id, "endpoint": c.base()}}),
    );
    // The collector now holds the request for HOLD_MS.
    assert_eq!(c.next().path(), "/v1/traces");
    let held = Instant::now();
    assert_eq!(s.ok("system.ping", json!({}))["status"], "ok");
    assert!(
        held.elapsed() < Duration::from_millis(HOLD_MS),
        "ping waited for the export: {:?}",
        held.elapsed()
    );
    let r = s.response(&json!("exp-1"));
    assert_eq!(r["result"]["status"], "exported", "{r}");
    assert_eq!(r["result"]["spans"], 5, "{r}");
}

#[test]
fn unknown_traces_missing_endpoints_and_bad_params_are_errors() {
    let c = Collector::start();
    let mut s = Sidecar::start();
    let t = turn(&mut s, "chat_export_errors");

    let r = s.call(
        "trace.export",
        json!({"traceId": "trace_nope", "endpoint": c.base()}),
    );
    assert_eq!(code(&r), -32004, "{r}");
    let m = r["error"]["message"].as_str().unwrap();
    assert!(
        m.contains("trace not found") && m.contains("trace_nope"),
        "{m}"
    );

    // No endpoint and none configured.
    let r = s.call("trace.export", json!({"traceId": t.trace_id}));
    assert_eq!(code(&r), -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("otlp_endpoint"),
        "{r}"
    );
    let r = s.call(
        "trace.export",
        json!({"traceId": t.trace_id, "endpoint": ""}),
    );
    assert_eq!(code(&r), -32602, "an empty endpoint is none: {r}");

    for mode in ["everything", "FULL", ""] {
        let r = s.call(
            "trace.export",
            json!({"traceId": t.trace_id, "endpoint": c.base(), "privacyMode": mode}),
        );
        assert_eq!(code(&r), -32602, "{mode}: {r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("privacyMode"),
            "{r}"
        );
    }
    let r = s.call(
        "trace.export",
        json!({"traceId": t.trace_id, "endpoint": c.base(), "privacy": "full"}),
    );
    assert_eq!(code(&r), -32602, "unknown field: {r}");
    let r = s.call(
        "trace.export",
        json!({"traceId": t.trace_id, "endpoint": c.base(), "headers": {"bad name": "x"}}),
    );
    assert_eq!(code(&r), -32602, "{r}");
    let r = s.call("trace.export", json!({"endpoint": c.base()}));
    assert_eq!(code(&r), -32602, "traceId is required: {r}");
    c.assert_quiet();
    assert_eq!(s.ok("system.ping", json!({}))["status"], "ok");
}

#[test]
fn a_trace_exports_the_same_after_a_restart_from_the_store() {
    let c = Collector::start();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("export.db");
    let mut s = on_db(&db);
    let t = turn(&mut s, "chat_export_restart");
    let mut before = Vec::new();
    for mode in ["metadata", "full"] {
        let r = export(
            &mut s,
            json!({"traceId": t.trace_id, "endpoint": c.base(), "privacyMode": mode}),
        );
        assert_eq!(r["status"], "exported", "{r}");
        before.push(c.next());
    }
    s.ok("system.shutdown_now", json!({}));
    assert!(s.wait_exit(Duration::from_secs(10)).success());
    drop(s);

    let mut s = on_db(&db);
    for (mode, was) in ["metadata", "full"].into_iter().zip(&before) {
        let r = export(
            &mut s,
            json!({"traceId": t.trace_id, "endpoint": c.base(), "privacyMode": mode}),
        );
        assert_eq!(
            r,
            json!({"status": "exported", "traceId": t.trace_id, "privacyMode": mode, "spans": 5})
        );
        let now = c.next();
        assert_eq!(
            now.spans(),
            was.spans(),
            "{mode}: the stored trace exports as the live one"
        );
        assert_eq!(now.raw(), was.raw(), "{mode}");
    }
}

#[test]
fn a_failed_turns_error_text_leaves_only_under_full() {
    const ERR_SECRET: &str = "ERRSECRET-30d7b1";
    let c = Collector::start();
    let mut s = Sidecar::start();
    let script = json!([{"error": {"kind": "http", "status": 400,
                                   "message": format!("bad request near {ERR_SECRET}")}}]);
    let r = run(
        &mut s,
        merge(
            scripted(script, "hi"),
            json!({"chatId": "chat_export_failed"}),
        ),
    );
    assert_eq!(r.done["status"], "failed", "{:?}", r.frames);
    let reason = r.done["reason"].as_str().unwrap().to_string();
    assert!(reason.contains(ERR_SECRET), "{reason}");
    let trace_id = r.done["traceId"].as_str().unwrap().to_string();

    let r = export(&mut s, json!({"traceId": trace_id, "endpoint": c.base()}));
    assert_eq!(r["status"], "exported", "{r}");
    assert_eq!(r["spans"], 2);
    let meta = c.next();
    assert!(!meta.decoded_text().contains(ERR_SECRET), "{}", meta.0);
    assert!(!contains(&meta.raw(), ERR_SECRET));
    let root = meta.root();
    assert_eq!(root["status"], json!({"code": 2, "message": ""}), "{root}");
    assert_eq!(root["attrs"]["error.type"], "failed");
    let chat = &meta.named("chat scripted-model")[0];
    assert_eq!(chat["status"], json!({"code": 2, "message": ""}), "{chat}");
    assert_eq!(chat["attrs"]["error.type"], "provider_error");

    let r = export(
        &mut s,
        json!({"traceId": trace_id, "endpoint": c.base(), "privacyMode": "full"}),
    );
    assert_eq!(r["status"], "exported", "{r}");
    let full = c.next();
    let root = full.root();
    assert_eq!(root["status"]["code"], 2);
    assert_eq!(root["status"]["message"], reason.as_str(), "{root}");
    let chat = &full.named("chat scripted-model")[0];
    let msg = chat["status"]["message"].as_str().unwrap();
    assert!(msg.contains(ERR_SECRET), "{chat}");
    assert_eq!(chat["attrs"]["outrigger.error"], msg, "{chat}");
    assert!(
        root["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "error"
                && e["attrs"]["outrigger.event.payload"]
                    .as_str()
                    .is_some_and(|p| p.contains(ERR_SECRET))),
        "{root}"
    );
}

#[test]
fn a_compaction_request_is_a_chat_span_of_the_turns_model() {
    // Context pressure (maxContextTokens) makes the turn summarize with its own provider
    // first: two provider requests, two `chat {model}` spans.
    let c = Collector::start();
    let mut s = Sidecar::start();
    let mut messages = Vec::new();
    for i in 0..8 {
        messages
            .push(json!({"role": "user", "content": format!("question {i} {}", "q".repeat(300))}));
        messages.push(
            json!({"role": "assistant", "content": format!("answer {i} {}", "a".repeat(300))}),
        );
    }
    messages.push(json!({"role": "user", "content": "the current question"}));
    let r = run(
        &mut s,
        json!({"provider": "scripted", "model": "scripted-model", "chatId": "chat_export_cmp",
               "script": [{"text": "SUMMARY"}, {"text": "answered"}],
               "maxContextTokens": 400, "messages": messages}),
    );
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    assert_eq!(r.notices("hook_action")[0]["summary"], "provider");
    let trace_id = r.done["traceId"].as_str().unwrap().to_string();
    let r = export(&mut s, json!({"traceId": trace_id, "endpoint": c.base()}));
    assert_eq!(r["spans"], 3, "{r}");
    let q = c.next();
    let chats: Vec<Value> = q
        .spans()
        .into_iter()
        .filter(|s| s["attrs"]["gen_ai.operation.name"] == "chat")
        .collect();
    assert_eq!(chats.len(), 2, "{}", q.0);
    for ch in &chats {
        assert_eq!(ch["name"], "chat scripted-model", "{ch}");
        assert_eq!(
            ch["attrs"]["gen_ai.request.model"], "scripted-model",
            "{ch}"
        );
    }
}

#[test]
fn otlp_config_is_checked() {
    // otlp_timeout_ms outside 100..=60000 stops the boot, naming the key.
    let home = tempfile::tempdir().unwrap();
    for bad in ["99", "60001", "soon"] {
        let (status, out, err) =
            crate::common::run_once(home.path(), &[], &[("OUTRIGGER_OTLP_TIMEOUT_MS", bad)], b"");
        assert_eq!(status.code(), Some(2), "{bad}: stdout {out} stderr {err}");
        assert!(err.contains("otlp_timeout_ms"), "{bad}: {err}");
    }
    // otlp_headers that are not name=value pairs fail the export as bad params, naming it.
    let c = Collector::start();
    let mut s = Sidecar::start_with(Opts {
        env: vec![
            ("OUTRIGGER_OTLP_ENDPOINT".into(), c.base()),
            ("OUTRIGGER_OTLP_HEADERS".into(), "x-ok=1,novalue".into()),
        ],
        ..Opts::default()
    });
    let t = turn(&mut s, "chat_export_cfgcheck");
    let r = s.call("trace.export", json!({"traceId": t.trace_id}));
    assert_eq!(code(&r), -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("otlp_headers"),
        "{r}"
    );
    c.assert_quiet();
}

/// `otlp_auto_export`: every finished turn reaches the configured collector on its own,
/// with `otlp_privacy_mode`, which is also `trace.export`'s default.
#[test]
fn finished_turns_are_exported_on_their_own_when_auto_export_is_on() {
    let c = Collector::start();
    let mut s = with_config(json!({
        "otlp_endpoint": c.base(),
        "otlp_headers": "x-api-key=k1",
        "otlp_auto_export": true,
        "otlp_privacy_mode": "full"
    }));
    let t = turn(&mut s, "chat_auto_export");
    let q = c.next();
    assert_eq!(q.path(), "/v1/traces");
    assert_eq!(q.header("x-api-key"), ["k1"]);
    assert_eq!(q.root()["attrs"]["outrigger.trace_id"], t.trace_id.as_str());
    // Full: the recorded events ride on the root, the file's text among them.
    assert!(
        q.decoded_text().contains(FILE_SECRET),
        "{}",
        q.decoded_text()
    );
    // The config's mode is trace.export's default too.
    let r = export(&mut s, json!({"traceId": t.trace_id}));
    assert_eq!(r["privacyMode"], "full", "{r}");
    assert!(c.next().decoded_text().contains(FILE_SECRET));
}

/// A collector that is down never touches the turn: it completes, and the sidecar serves on.
#[test]
fn auto_export_to_a_dead_collector_leaves_the_turn_alone() {
    let mut s = with_config(json!({
        "otlp_endpoint": format!("http://127.0.0.1:{}", closed_port()),
        "otlp_auto_export": true
    }));
    turn(&mut s, "chat_auto_dead_1");
    turn(&mut s, "chat_auto_dead_2");
    assert_eq!(s.ok("system.ping", json!({}))["status"], "ok");
}
