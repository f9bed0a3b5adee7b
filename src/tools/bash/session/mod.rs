//! Long-running and interactive commands (mode `local`): `bash_session` starts a command on a
//! pseudo-terminal in the sandbox and returns what it printed so far, or lists the chat's
//! sessions; `write_stdin` types into one; `bash_session_kill` ends one. A session outlives
//! the call and the turn; it ends when its command exits, when killed, when a turn of its
//! chat is cancelled, or when the sidecar exits.

mod registry;
mod terminal;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use self::registry::Terminals;
use self::terminal::{Collected, Terminal, summary};
use super::{output, saved, with_marker};
use crate::sandbox::Sandbox;
use crate::tools::router::{Registration, Router};
use crate::tools::{Tool, ToolContext, ToolFuture, ToolMode, ToolResult};

pub const NAME: &str = "bash_session";
pub const WRITE: &str = "write_stdin";
pub const KILL: &str = "bash_session_kill";

/// `yieldMs` when a call gives none, and its ceiling.
const YIELD_DEFAULT_MS: u64 = 1_000;
const YIELD_CEILING_MS: u64 = 30_000;
/// `maxOutput`'s range (its default is `bash_max_output_bytes`).
const MAX_OUTPUT_FLOOR: u64 = 256;
const MAX_OUTPUT_CEILING: u64 = 32_768;
/// The most a `write_stdin` may type at once.
const CHARS_CEILING: usize = 65_536;

/// Registers the three tools on `router`, sharing one set of terminals, and ends a chat's
/// terminals when a turn of that chat is cancelled.
pub fn register(router: &Router, sandbox: Arc<Sandbox>) {
    let terminals = Arc::new(Terminals::default());
    let tools: [Arc<dyn Tool>; 3] = [
        Arc::new(BashSession {
            sandbox: sandbox.clone(),
            terminals: terminals.clone(),
        }),
        Arc::new(WriteStdin {
            sandbox: sandbox.clone(),
            terminals: terminals.clone(),
        }),
        Arc::new(BashSessionKill {
            sandbox,
            terminals: terminals.clone(),
        }),
    ];
    for t in tools {
        let name = t.name().to_string();
        if let Err(e) = router.register(Registration::new(t)) {
            tracing::error!("cannot register {name}: {e}");
        }
    }
    router.on_chat_cancelled(Arc::new(move |chat: &str| {
        let n = terminals.end_chat(chat);
        if n > 0 {
            tracing::debug!("ended {n} bash session(s) of a cancelled turn");
        }
    }));
}

/// The chat a call belongs to.
fn chat_of(ctx: &ToolContext) -> String {
    ctx.session_id.clone().unwrap_or_default()
}

fn yield_of(args: &Map<String, Value>) -> Duration {
    let ms = args
        .get("yieldMs")
        .and_then(Value::as_u64)
        .unwrap_or(YIELD_DEFAULT_MS)
        .min(YIELD_CEILING_MS);
    Duration::from_millis(ms)
}

/// How a result reads output: bound and cleaning.
struct View {
    max_output: usize,
    raw: bool,
}

fn view_of(sandbox: &Sandbox, args: &Map<String, Value>) -> View {
    let settings = sandbox.settings();
    let default = settings
        .as_ref()
        .map_or(12_288, |s| s.bash_max_output_bytes);
    let max_output = args
        .get("maxOutput")
        .and_then(Value::as_u64)
        .map(|n| n.clamp(MAX_OUTPUT_FLOOR, MAX_OUTPUT_CEILING) as usize)
        .unwrap_or(default);
    let raw = args
        .get("raw_output")
        .and_then(Value::as_bool)
        .unwrap_or_else(|| settings.as_ref().is_some_and(|s| s.bash_raw_output));
    View { max_output, raw }
}

fn props_yield_output() -> Map<String, Value> {
    let v = json!({
        "yieldMs": {
            "type": "integer", "minimum": 0, "maximum": YIELD_CEILING_MS,
            "description": "Wait this long for output before returning (default 1000); the call returns sooner when the command exits. 0 returns what is there now."
        },
        "maxOutput": {
            "type": "integer", "minimum": MAX_OUTPUT_FLOOR, "maximum": MAX_OUTPUT_CEILING,
            "description": "Bytes of output returned (default 12288); past it the newest output is kept and the whole of it saved to data.file_path."
        },
        "raw_output": {
            "type": "boolean",
            "description": "true returns the output as the terminal produced it: ANSI escapes and CRLF kept."
        }
    });
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn schema(extra: Value, required: &[&str]) -> Value {
    let mut props = match extra {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    props.extend(props_yield_output());
    json!({
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": false
    })
}

/// The result for output `c` of terminal `t`: cleaned, bounded to the newest `maxOutput`
/// bytes (the whole saved), the drop marker first, and the sandbox marker.
fn render(t: &Terminal, c: Collected, view: &View, ctx: &ToolContext) -> ToolResult {
    let s = String::from_utf8_lossy(&c.bytes);
    let mut text = if view.raw {
        s.into_owned()
    } else {
        output::clean(&s)
    };
    let mut data = Map::new();
    data.insert("sessionId".into(), json!(t.id));
    data.insert("running".into(), json!(c.exit.is_none()));
    data.insert("exitCode".into(), json!(c.exit));
    let drop_note = if c.dropped > 0 {
        data.insert("droppedBytes".into(), json!(c.dropped));
        format!(
            "[{} bytes dropped: more output came between calls than the session keeps (bash_session_buffer_bytes); the oldest went]\n",
            c.dropped
        )
    } else {
        String::new()
    };
    let mut truncated = false;
    if drop_note.len() + text.len() > view.max_output {
        truncated = true;
        let note = match saved::save(&t.workspace, &ctx.call_id, &(drop_note.clone() + &text), "") {
            Ok(p) => {
                data.insert("file_path".into(), json!(p.display().to_string()));
                "; all of it is in data.file_path"
            }
            Err(e) => {
                tracing::warn!("bash_session: cannot save the full output: {e}");
                ""
            }
        };
        text = output::fit_tail(&text, view.max_output.saturating_sub(drop_note.len()), note).text;
    }
    let text = drop_note + &text;
    data.insert("output".into(), json!(text));
    data.insert("truncated".into(), json!(truncated));
    if !c.cleanup.is_empty() {
        data.insert("protectedCleanup".into(), json!(c.cleanup));
    }
    let mut r = ToolResult::ok(data);
    if c.cancelled {
        r = r.with_data("cancelled", true);
    }
    with_marker(r, &t.marker)
}

/// The error for an id this chat does not have, naming the ones it has.
fn unknown(terminals: &Terminals, chat: &str, id: &str) -> ToolResult {
    let live: Vec<String> = terminals.list(chat).iter().map(|t| t.id.clone()).collect();
    let known = if live.is_empty() {
        "this chat has no bash sessions; start one with bash_session {command}".to_string()
    } else {
        format!("this chat's sessions: {}", live.join(", "))
    };
    ToolResult::recoverable(format!(
        "no bash session '{id}' (it may have ended and its last output been returned already); {known}"
    ))
    .with_data("kind", "unknown_session")
}

/// Collects `t`'s output, forgetting it once its end has been returned.
async fn read(
    terminals: &Terminals,
    chat: &str,
    t: &Terminal,
    wait: Duration,
    view: &View,
    ctx: &ToolContext,
) -> ToolResult {
    let c = t.collect(wait, &ctx.cancel).await;
    if c.exit.is_some() {
        terminals.remove(chat, &t.id);
    }
    render(t, c, view, ctx)
}

fn session_id_arg(args: &Map<String, Value>) -> Option<&str> {
    args.get("sessionId").and_then(Value::as_str)
}

pub struct BashSession {
    sandbox: Arc<Sandbox>,
    terminals: Arc<Terminals>,
}

impl Tool for BashSession {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        "Run a command that keeps going or needs input (a dev server, a watcher, a REPL, a \
         prompt) on a terminal in the workspace, with the same sandbox as bash. With command: \
         starts it and returns its output after yieldMs with a sessionId and running. With \
         sessionId: returns the output produced since the last call. With neither: lists this \
         chat's sessions. Type into a session with write_stdin; end one with \
         bash_session_kill. Output is cleaned like bash's; when long, the newest part is kept."
    }

    fn parameters(&self) -> Value {
        schema(
            json!({
                "command": {"type": "string", "description": "The bash command line to start in a new session."},
                "sessionId": {"type": "string", "description": "A running session to read new output from."}
            }),
            &[],
        )
    }

    fn mode(&self) -> ToolMode {
        ToolMode::Local
    }

    fn call(self: Arc<Self>, ctx: ToolContext, args: Map<String, Value>) -> ToolFuture {
        Box::pin(async move { self.run(ctx, args).await })
    }
}

impl BashSession {
    async fn run(&self, ctx: ToolContext, args: Map<String, Value>) -> ToolResult {
        let chat = chat_of(&ctx);
        let view = view_of(&self.sandbox, &args);
        let command = args.get("command").and_then(Value::as_str);
        match (command, session_id_arg(&args)) {
            (Some(_), Some(_)) => ToolResult::recoverable(
                "pass command to start a new session or sessionId to read one, not both (type into a session with write_stdin)",
            ),
            (None, None) => {
                let list: Vec<Value> = self
                    .terminals
                    .list(&chat)
                    .iter()
                    .map(|t| summary(t))
                    .collect();
                let mut data = Map::new();
                data.insert("sessions".into(), Value::Array(list));
                ToolResult::ok(data)
            }
            (None, Some(id)) => match self.terminals.get(&chat, id) {
                Some(t) => read(&self.terminals, &chat, &t, yield_of(&args), &view, &ctx).await,
                None => unknown(&self.terminals, &chat, id),
            },
            (Some(command), None) => self.start(ctx, &chat, command, &args, &view).await,
        }
    }

    async fn start(
        &self,
        ctx: ToolContext,
        chat: &str,
        command: &str,
        args: &Map<String, Value>,
        view: &View,
    ) -> ToolResult {
        if command.trim().is_empty() {
            return ToolResult::recoverable(
                "command is empty: pass the bash command line to start in `command`",
            );
        }
        if ctx.exec_sandbox.as_ref().is_some_and(|r| r.host_spawn) {
            return ToolResult::recoverable(
                "bash_session cannot run under execSandbox.hostSpawn (the host runs commands, and keeps no terminals for us); use bash",
            );
        }
        let Some(settings) = self.sandbox.settings() else {
            return ToolResult::recoverable("bash_session: the configuration cannot be read");
        };
        let max = settings.bash_max_sessions;
        if let Err(full) = self.terminals.admit(chat, max) {
            return full_error(&full.idlest, full.max);
        }
        let id = self.terminals.next_id();
        let t = match Terminal::start(id, command, &ctx, &self.sandbox, &settings).await {
            Ok(t) => Arc::new(t),
            Err(r) => return r,
        };
        if let Err(t) = self.terminals.insert(chat, t.clone(), max) {
            t.end();
            let idlest = self
                .terminals
                .list(chat)
                .into_iter()
                .max_by_key(|t| t.idle());
            return full_error(&idlest, max);
        }
        read(&self.terminals, chat, &t, yield_of(args), view, &ctx)
            .await
            .with_data("command", command)
    }
}

fn full_error(idlest: &Option<Arc<Terminal>>, max: usize) -> ToolResult {
    let hint = match idlest {
        Some(t) => format!(
            "; the idlest is {} (`{}`, idle {} s): end it with bash_session_kill {{\"sessionId\": \"{}\"}}",
            t.id,
            t.command,
            t.idle().as_secs(),
            t.id
        ),
        None => String::new(),
    };
    let mut r = ToolResult::recoverable(format!(
        "{max} bash sessions are running in this chat, the most allowed (bash_max_sessions){hint}"
    ))
    .with_data("kind", "session_cap")
    .with_data("max", max);
    if let Some(t) = idlest {
        r = r.with_data("idlest", t.id.as_str());
    }
    r
}

pub struct WriteStdin {
    sandbox: Arc<Sandbox>,
    terminals: Arc<Terminals>,
}

impl Tool for WriteStdin {
    fn name(&self) -> &str {
        WRITE
    }

    fn description(&self) -> &str {
        "Type into a bash_session's terminal and return the output that follows (after yieldMs, \
         or sooner if the command exits). chars is sent as typed: end a line with \\n; control \
         characters work (\\u0003 is Ctrl-C, \\u0004 Ctrl-D). The terminal echoes what is typed."
    }

    fn parameters(&self) -> Value {
        schema(
            json!({
                "sessionId": {"type": "string", "description": "The session to type into (from bash_session)."},
                "chars": {"type": "string", "maxLength": CHARS_CEILING, "description": "What to type, e.g. \"yes\\n\" or \"\\u0003\"."}
            }),
            &["sessionId", "chars"],
        )
    }

    fn mode(&self) -> ToolMode {
        ToolMode::Local
    }

    fn call(self: Arc<Self>, ctx: ToolContext, args: Map<String, Value>) -> ToolFuture {
        Box::pin(async move {
            let chat = chat_of(&ctx);
            let id = session_id_arg(&args).unwrap_or("");
            let chars = args.get("chars").and_then(Value::as_str).unwrap_or("");
            if chars.len() > CHARS_CEILING {
                return ToolResult::recoverable(format!(
                    "chars is {} bytes; at most {CHARS_CEILING} may be typed at once: send it in parts",
                    chars.len()
                ));
            }
            let Some(t) = self.terminals.get(&chat, id) else {
                return unknown(&self.terminals, &chat, id);
            };
            let view = view_of(&self.sandbox, &args);
            let typed = {
                let _typing = t.typing.lock().await;
                t.write(chars.as_bytes(), &ctx.cancel).await
            };
            if let Err(e) = typed {
                // What the command printed still reaches the model, with the reason.
                let r = read(&self.terminals, &chat, &t, Duration::ZERO, &view, &ctx).await;
                return ToolResult {
                    success: false,
                    needs_followup: Some(true),
                    error: Some(format!("write_stdin to {id}: {e}")),
                    ..r
                };
            }
            read(&self.terminals, &chat, &t, yield_of(&args), &view, &ctx).await
        })
    }
}

pub struct BashSessionKill {
    sandbox: Arc<Sandbox>,
    terminals: Arc<Terminals>,
}

impl Tool for BashSessionKill {
    fn name(&self) -> &str {
        KILL
    }

    fn description(&self) -> &str {
        "End a bash_session: its command and everything it started get SIGHUP and SIGTERM, \
         then SIGKILL after 2 s. Returns its last output and exit code."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "sessionId": {"type": "string", "description": "The session to end."}
            },
            "required": ["sessionId"],
            "additionalProperties": false
        })
    }

    fn mode(&self) -> ToolMode {
        ToolMode::Local
    }

    fn call(self: Arc<Self>, ctx: ToolContext, args: Map<String, Value>) -> ToolFuture {
        Box::pin(async move {
            let chat = chat_of(&ctx);
            let id = session_id_arg(&args).unwrap_or("");
            let Some(t) = self.terminals.remove(&chat, id) else {
                return unknown(&self.terminals, &chat, id);
            };
            let running = t.running();
            let c = t.kill().await;
            let view = view_of(&self.sandbox, &Map::new());
            // A command that had already exited was not killed: its own exit code stands.
            render(&t, c, &view, &ctx).with_data("killed", running)
        })
    }
}
