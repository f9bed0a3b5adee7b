//! `outrigger acp`: the agent side of the Agent Client Protocol (v1) over stdio, for editors
//! (docs/acp.md). Like `outrigger run` it is a host of a child sidecar: each
//! `session/prompt` is one `agent.chat.stream` turn on the session's record, its chunks become
//! `session/update`s, and the sidecar's `approval.request`s become
//! `session/request_permission`.

mod elicit;
mod turn;
pub mod updates;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use acp::v1::schema::{
    CancelNotification, InitializeRequest, InitializeResponse, LoadSessionRequest,
    LoadSessionResponse, NewSessionRequest, NewSessionResponse, PromptRequest, PromptResponse,
};
use agent_client_protocol as acp;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::headless::sidecar::{Incoming, Sidecar, SpawnOpts};
use crate::headless::{Globals, ProviderFlags};

#[derive(Debug, Clone, clap::Args)]
pub struct AcpArgs {
    #[command(flatten)]
    pub model: ProviderFlags,
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
    /// The provider part of every turn's params.
    base: Map<String, Value>,
    sessions: Mutex<HashMap<String, Session>>,
    /// Where the sidecar's frames for a running stream go.
    routes: Mutex<HashMap<String, mpsc::UnboundedSender<Incoming>>>,
    /// The client offers form elicitation: `ask_user` is offered to the model.
    elicitation: std::sync::atomic::AtomicBool,
    /// The client reads (`fs/read_text_file`) and writes (`fs/write_text_file`) files: the
    /// turns' `hostFs`.
    fs: Mutex<Value>,
}

/// Parses wire JSON into one of the crate's types (our mappings build the wire shape).
pub(crate) fn typed<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, acp::Error> {
    serde_json::from_value(v).map_err(|e| acp::Error::internal_error().data(json!(e.to_string())))
}

fn wire<T: serde::Serialize>(t: &T) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}

fn invalid(msg: String) -> acp::Error {
    acp::Error::invalid_params().data(json!(msg))
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
    rt.block_on(serve(model.params, globals))
}

async fn serve(base: Map<String, Value>, globals: Globals) -> i32 {
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
    let state = Arc::new(State {
        sc: Arc::clone(&sc),
        base,
        sessions: Mutex::default(),
        routes: Mutex::default(),
        elicitation: std::sync::atomic::AtomicBool::new(false),
        fs: Mutex::new(json!({"read": false, "write": false})),
    });
    tokio::spawn(route(Arc::clone(&state), incoming));
    let result = connect(Arc::clone(&state)).await;
    sc.shutdown(std::time::Duration::from_secs(10)).await;
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("outrigger acp: {e}");
            1
        }
    }
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

async fn connect(state: Arc<State>) -> Result<(), acp::Error> {
    let s_init = Arc::clone(&state);
    let s_new = Arc::clone(&state);
    let s_load = Arc::clone(&state);
    let s_prompt = Arc::clone(&state);
    let s_cancel = Arc::clone(&state);
    acp::Agent
        .v1()
        .name("outrigger")
        .on_receive_request(
            async move |req: InitializeRequest, responder: acp::v1::Responder<InitializeResponse>, _cx| {
                let offered = wire(&req.client_capabilities);
                let form = offered.pointer("/elicitation/form").is_some();
                s_init.elicitation.store(form, std::sync::atomic::Ordering::Relaxed);
                let fs = json!({
                    "read": offered.pointer("/fs/readTextFile") == Some(&json!(true)),
                    "write": offered.pointer("/fs/writeTextFile") == Some(&json!(true)),
                });
                if let Ok(mut f) = s_init.fs.lock() {
                    *f = fs;
                }
                responder.respond_with_result(typed(json!({
                    "protocolVersion": 1,
                    "agentCapabilities": {
                        "loadSession": true,
                        "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
                        "mcpCapabilities": {"http": false, "sse": false},
                    },
                    "agentInfo": {"name": "outrigger", "title": "Outrigger", "version": env!("CARGO_PKG_VERSION")},
                    "authMethods": [],
                })))
            },
            acp::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: NewSessionRequest, responder: acp::v1::Responder<NewSessionResponse>, _cx| {
                let req = wire(&req);
                let id = format!("acp_{}", crate::store::ids::random_hex(16));
                match open_session(&s_new, &id, &req, false) {
                    Ok(()) => responder.respond_with_result(typed(json!({"sessionId": id}))),
                    Err(e) => responder.respond_with_error(e),
                }
            },
            acp::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: LoadSessionRequest, responder: acp::v1::Responder<LoadSessionResponse>, cx: acp::v1::ConnectionTo<acp::Client>| {
                let state = Arc::clone(&s_load);
                let req = wire(&req);
                // Off the dispatch loop: reading the record waits on the sidecar.
                tokio::spawn(async move {
                    let answer = turn::load(&state, &cx, &req).await;
                    let _ = responder.respond_with_result(answer.and_then(|()| typed(json!({}))));
                });
                Ok(())
            },
            acp::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: PromptRequest, responder: acp::v1::Responder<PromptResponse>, cx: acp::v1::ConnectionTo<acp::Client>| {
                let state = Arc::clone(&s_prompt);
                let req = wire(&req);
                tokio::spawn(async move {
                    let answer = turn::prompt(&state, &cx, &req).await;
                    let _ = responder.respond_with_result(
                        answer.and_then(|stop| typed(json!({"stopReason": stop}))),
                    );
                });
                Ok(())
            },
            acp::on_receive_request!(),
        )
        .on_receive_notification(
            async move |n: CancelNotification, _cx| {
                let n = wire(&n);
                let sid = n["sessionId"].as_str().unwrap_or("");
                let stream = s_cancel
                    .sessions
                    .lock()
                    .ok()
                    .and_then(|s| s.get(sid).and_then(|s| s.stream.clone()));
                if let Some(stream) = stream {
                    let sc = Arc::clone(&s_cancel.sc);
                    tokio::spawn(async move {
                        let _ = sc.request("agent.chat.cancel", json!({"streamId": stream})).await;
                    });
                }
                Ok(())
            },
            acp::on_receive_notification!(),
        )
        .connect_to(acp::Stdio::new())
        .await
}

/// Registers a session from `session/new` or `session/load` params.
fn open_session(state: &State, id: &str, req: &Value, started: bool) -> Result<(), acp::Error> {
    let cwd = req["cwd"].as_str().unwrap_or("");
    let cwd = PathBuf::from(cwd);
    if !cwd.is_absolute() || !cwd.is_dir() {
        return Err(invalid(format!(
            "cwd must be an absolute path to a directory; got {:?}",
            req["cwd"]
        )));
    }
    let mut mcp = Vec::new();
    for s in req["mcpServers"].as_array().into_iter().flatten() {
        let name = s["name"].as_str().unwrap_or("");
        let Some(command) = s.get("command").and_then(Value::as_str) else {
            return Err(invalid(format!(
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
