//! `outrigger acp`: the agent side of the Agent Client Protocol (v1) over stdio, for editors
//! (docs/acp.md). Like `outrigger run` it is a host of a child sidecar: each
//! `session/prompt` is one `agent.chat.stream` turn on the session's record, its chunks become
//! `session/update`s, and the sidecar's `approval.request`s become
//! `session/request_permission`. The editor is a JSON-RPC peer over our stdin/stdout
//! (`headless::peer`, shared with the sidecar link).

mod elicit;
mod turn;
pub mod updates;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::headless::peer::Peer;
use crate::headless::sidecar::{Incoming, Sidecar, SpawnOpts};
use crate::headless::{Globals, ProviderFlags};
use crate::protocol::chat::HostFsParam;

/// The ACP protocol version spoken.
pub const PROTOCOL_VERSION: u64 = 1;

#[derive(Debug, Clone, clap::Args)]
pub struct AcpArgs {
    #[command(flatten)]
    pub model: ProviderFlags,
}

/// The editor, over our stdin/stdout.
pub(crate) type Editor = Peer<tokio::io::Stdout>;

/// A JSON-RPC error for the editor.
#[derive(Debug, Clone)]
pub(crate) struct Fail {
    code: i64,
    message: &'static str,
    data: Option<Value>,
}

impl Fail {
    pub(crate) fn invalid(msg: String) -> Fail {
        Fail {
            code: -32602,
            message: "Invalid params",
            data: Some(json!(msg)),
        }
    }
    pub(crate) fn internal(msg: String) -> Fail {
        Fail {
            code: -32603,
            message: "Internal error",
            data: Some(json!(msg)),
        }
    }
    /// ACP's "resource not found" (-32002) for an unknown session.
    pub(crate) fn not_found(sid: &str) -> Fail {
        Fail {
            code: -32002,
            message: "Resource not found",
            data: Some(json!(format!("session {sid}"))),
        }
    }
}

/// One ACP session: a durable record the sidecar's turns continue.
struct Session {
    cwd: PathBuf,
    /// The session's stdio MCP servers, as the turn's `mcp` param.
    mcp: Vec<Value>,
    /// The record has messages: later turns continue it (`fromRecord`).
    started: bool,
    /// The running turn's stream id.
    stream: Option<String>,
}

/// What the handlers share.
pub(crate) struct State {
    sc: Arc<Sidecar>,
    editor: Arc<Editor>,
    /// The provider part of every turn's params.
    base: Map<String, Value>,
    sessions: Mutex<HashMap<String, Session>>,
    /// Where the sidecar's frames for a running stream go.
    routes: Mutex<HashMap<String, mpsc::UnboundedSender<Incoming>>>,
    /// What the client offered at `initialize`: form elicitation (`ask_user` is offered to the
    /// model) and `fs` reads and writes (what of the turns' `hostFs` the client serves).
    elicitation: std::sync::atomic::AtomicBool,
    fs: Mutex<HostFsParam>,
    /// The sidecar store's `images/`, where the images shown to the model are kept.
    images_dir: PathBuf,
    /// The most the adapter reads of a file for the sidecar (the sidecar's `max_read_bytes`).
    max_read_bytes: u64,
}

pub fn run(args: AcpArgs, globals: Globals, config: &crate::config::Config) -> i32 {
    let model = match args.model.resolve(config) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("outrigger acp: {e}");
            return crate::headless::EXIT_USAGE;
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("outrigger acp: cannot start the runtime: {e}");
            return 1;
        }
    };
    let store = globals
        .storage_path
        .clone()
        .unwrap_or_else(|| config.settings().storage_path);
    let images_dir = crate::agent::images::dir_for(&store);
    let max_read_bytes = config.settings().max_read_bytes;
    let code = rt.block_on(serve(model.params, globals, images_dir, max_read_bytes));
    // The stdin reader may sit in a blocking read: do not wait for it.
    rt.shutdown_timeout(std::time::Duration::from_millis(100));
    code
}

async fn serve(
    base: Map<String, Value>,
    globals: Globals,
    images_dir: PathBuf,
    max_read_bytes: u64,
) -> i32 {
    let opts = SpawnOpts {
        storage_path: globals.storage_path,
        no_web_tools: globals.no_web_tools,
        log_level: globals.log_level.unwrap_or_else(|| "WARNING".into()),
    };
    let (sc, incoming) = match Sidecar::spawn(&opts) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("outrigger acp: cannot start the sidecar: {e}");
            return 1;
        }
    };
    // The editor's frames are the only thing on our stdout.
    let (editor, from_editor) = Peer::new(tokio::io::stdout(), tokio::io::stdin()); // stdout-ok
    let state = Arc::new(State {
        sc: Arc::clone(&sc),
        editor: Arc::new(editor),
        base,
        sessions: Mutex::default(),
        routes: Mutex::default(),
        elicitation: std::sync::atomic::AtomicBool::new(false),
        fs: Mutex::new(HostFsParam::default()),
        images_dir,
        max_read_bytes,
    });
    tokio::spawn(route(Arc::clone(&state), incoming));
    dispatch(Arc::clone(&state), from_editor).await;
    sc.shutdown(std::time::Duration::from_secs(10)).await;
    0
}

/// Sends each frame of a running stream to its turn; refuses reverse requests nobody owns.
async fn route(state: Arc<State>, mut incoming: mpsc::UnboundedReceiver<Incoming>) {
    while let Some(msg) = incoming.recv().await {
        let stream = match &msg {
            Incoming::Notification { params, .. } | Incoming::Request { params, .. } => params
                .get("streamId")
                .or_else(|| params.pointer("/context/streamId"))
                .and_then(Value::as_str)
                .map(str::to_string),
        };
        let tx = stream.and_then(|s| state.routes.lock().ok()?.get(&s).cloned());
        match (tx, msg) {
            (Some(tx), msg) => {
                let _ = tx.send(msg);
            }
            (None, Incoming::Request { id, method, .. }) => {
                state
                    .sc
                    .respond_error(
                        id,
                        -32601,
                        &format!("outrigger acp does not handle {method} here"),
                    )
                    .await;
            }
            (None, Incoming::Notification { .. }) => {}
        }
    }
    // The sidecar is gone: every running turn learns it (its channel closes).
    if let Ok(mut r) = state.routes.lock() {
        r.clear();
    }
}

/// Answers a request of the editor's with `answer`'s outcome.
async fn reply(editor: &Editor, id: Value, answer: Result<Value, Fail>) {
    match answer {
        Ok(v) => editor.respond(id, v).await,
        Err(f) => editor.respond_error(id, f.code, f.message, f.data).await,
    }
}

/// The editor's requests and notifications, until it closes our stdin.
async fn dispatch(state: Arc<State>, mut from_editor: mpsc::UnboundedReceiver<Incoming>) {
    let mut initialized = false;
    while let Some(msg) = from_editor.recv().await {
        match msg {
            Incoming::Request { id, method, params } => {
                if method != "initialize" && !initialized {
                    let f = Fail {
                        code: -32600,
                        message: "Invalid request",
                        data: Some(json!(format!(
                            "ACP initialization must complete before `{method}` can be used"
                        ))),
                    };
                    reply(&state.editor, id, Err(f)).await;
                    continue;
                }
                match method.as_str() {
                    "initialize" => {
                        initialized = true;
                        let answer = initialize(&state, &params);
                        reply(&state.editor, id, Ok(answer)).await;
                    }
                    "session/new" => {
                        let sid = format!("acp_{}", crate::store::ids::random_hex(16));
                        let answer = open_session(&state, &sid, &params, false)
                            .map(|()| json!({"sessionId": sid}));
                        reply(&state.editor, id, answer).await;
                    }
                    // Off the dispatch loop: both wait on the sidecar (and prompts on the
                    // editor's answers to our requests, which this loop delivers).
                    "session/load" => {
                        let state = Arc::clone(&state);
                        tokio::spawn(async move {
                            let answer = turn::load(&state, &params).await.map(|()| json!({}));
                            reply(&state.editor, id, answer).await;
                        });
                    }
                    "session/prompt" => {
                        let state = Arc::clone(&state);
                        tokio::spawn(async move {
                            let answer = turn::prompt(&state, &params)
                                .await
                                .map(|stop| json!({"stopReason": stop}));
                            reply(&state.editor, id, answer).await;
                        });
                    }
                    _ => {
                        let f = Fail {
                            code: -32601,
                            message: "Method not found",
                            data: Some(json!(format!("outrigger acp does not implement {method}"))),
                        };
                        reply(&state.editor, id, Err(f)).await;
                    }
                }
            }
            Incoming::Notification { method, params } => {
                if method == "session/cancel" {
                    cancel(&state, &params);
                }
            }
        }
    }
}

/// `initialize`: what the client offers, and what we do.
fn initialize(state: &State, params: &Value) -> Value {
    let offered = &params["clientCapabilities"];
    let form = offered.pointer("/elicitation/form").is_some();
    state
        .elicitation
        .store(form, std::sync::atomic::Ordering::Relaxed);
    let fs = HostFsParam {
        read: offered.pointer("/fs/readTextFile") == Some(&json!(true)),
        write: offered.pointer("/fs/writeTextFile") == Some(&json!(true)),
    };
    if let Ok(mut f) = state.fs.lock() {
        *f = fs;
    }
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": true,
            "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
            "mcpCapabilities": {"http": false, "sse": false},
        },
        "agentInfo": {"name": "outrigger", "title": "Outrigger", "version": env!("CARGO_PKG_VERSION")},
        "authMethods": [],
    })
}

/// `session/cancel`: cancels the session's running turn.
fn cancel(state: &State, params: &Value) {
    let sid = params["sessionId"].as_str().unwrap_or("");
    let stream = state
        .sessions
        .lock()
        .ok()
        .and_then(|s| s.get(sid).and_then(|s| s.stream.clone()));
    if let Some(stream) = stream {
        let sc = Arc::clone(&state.sc);
        tokio::spawn(async move {
            let _ = sc
                .request("agent.chat.cancel", json!({"streamId": stream}))
                .await;
        });
    }
}
/// Registers a session from `session/new` or `session/load` params.
fn open_session(state: &State, id: &str, req: &Value, started: bool) -> Result<(), Fail> {
    let cwd = req["cwd"].as_str().unwrap_or("");
    let cwd = PathBuf::from(cwd);
    if !cwd.is_absolute() || !cwd.is_dir() {
        return Err(Fail::invalid(format!(
            "cwd must be an absolute path to a directory; got {:?}",
            req["cwd"]
        )));
    }
    let mut mcp = Vec::new();
    for s in req["mcpServers"].as_array().into_iter().flatten() {
        let name = s["name"].as_str().unwrap_or("");
        let Some(command) = s.get("command").and_then(Value::as_str) else {
            return Err(Fail::invalid(format!(
                "mcpServers: {name} is not a stdio server; Outrigger starts stdio MCP servers only (mcpCapabilities http and sse are false)"
            )));
        };
        let env: Map<String, Value> = s["env"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| Some((e["name"].as_str()?.to_string(), e["value"].clone())))
            .collect();
        let mut entry = json!({"name": name, "command": command, "args": s["args"].as_array().cloned().unwrap_or_default()});
        if !env.is_empty() {
            entry["env"] = Value::Object(env);
        }
        mcp.push(entry);
    }
    if let Ok(mut sessions) = state.sessions.lock() {
        sessions.insert(
            id.to_string(),
            Session {
                cwd,
                mcp,
                started,
                stream: None,
            },
        );
    }
    Ok(())
}
