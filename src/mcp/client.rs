//! One connection to an MCP server, behind our own [`McpClient`] trait so `rmcp` (pinned; its
//! API churns between minors) stays inside this file. A stdio server runs through the
//! sandbox launcher with no layers: its own process group, a death signal that takes the
//! whole group down if the sidecar dies (SIGKILL included), registration with the lifecycle
//! so shutdown kills it, stderr drained into a bounded ring and the log.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, JsonRpcMessage,
    ServerNotification,
};
use rmcp::service::{RoleClient, RunningService, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport as RmcpTransport;
use rmcp::{ClientHandler, Peer, ServiceError, ServiceExt};
use serde_json::{Map, Value};
use tokio::io::AsyncBufReadExt;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::entry::{ServerEntry, Transport};
use crate::lifecycle::Lifecycle;
use crate::sandbox::policy::LaunchSpec;
use crate::sandbox::spawn::{self, Group, SpawnSpec, Stdin};

/// The stderr a server keeps for error reports (the ACP SDK keeps the same).
const STDERR_RING_BYTES: usize = 64 * 1024;
/// The stderr tail quoted in a failure.
const STDERR_TAIL_BYTES: usize = 2048;
/// A stderr line longer than this is cut in the log.
const STDERR_LOG_LINE: usize = 1024;
/// Shutdown: stdin closed, then TERM to the group after this, then KILL after as long again
/// (the recipe of the ACP SDK: servers such as server-everything ignore EOF).
const CLOSE_GRACE: Duration = Duration::from_secs(1);
const TERM_GRACE: Duration = Duration::from_secs(2);
/// How long a closed stdio connection waits for the server's exit status.
const EXIT_STATUS_WAIT: Duration = Duration::from_secs(1);
/// The longest incoming MCP line: a bigger result is dropped by the transport, not buffered.
const MAX_LINE_BYTES: usize = 64 << 20;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A tool a server offers, as we keep it.
#[derive(Debug, Clone)]
pub struct RemoteTool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    pub read_only: bool,
    pub destructive: bool,
}

/// Why a call produced no `CallToolResult`.
#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    /// The server answered with a JSON-RPC error (unknown tool, malformed request).
    Refused(String),
    /// The connection is gone: the server exited (its status) or the transport failed.
    Closed(String),
}

/// What the rest of the process needs from an MCP connection.
pub trait McpClient: Send + Sync {
    /// All tools (pagination followed), at most `max`.
    fn list_tools(&self, max: usize) -> BoxFuture<'_, Result<Vec<RemoteTool>, String>>;
    /// `tools/call`; the result is the `CallToolResult` as JSON.
    fn call_tool(
        &self,
        name: &str,
        args: Map<String, Value>,
    ) -> BoxFuture<'_, Result<Value, CallError>>;
    /// Whether the server said its tool list changed since the last call (and clears it).
    fn take_tools_changed(&self) -> bool;
    /// `Some(description)` once the connection is gone (a stdio server's exit status).
    fn exited(&self) -> Option<String>;
    /// Waits until the connection is gone.
    fn wait_exit(&self) -> BoxFuture<'_, String>;
    /// The last bytes the server wrote on stderr.
    fn stderr_tail(&self) -> String;
    /// Closes politely, then TERM, then KILL (stdio); idempotent.
    fn close(&self) -> BoxFuture<'_, ()>;
}

/// Why a server did not start: the message, with its stderr tail when it has one.
#[derive(Debug, Clone)]
pub struct StartError {
    pub message: String,
    pub stderr: String,
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.stderr.trim().is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(
                f,
                "{}; its stderr ends with: {}",
                self.message,
                self.stderr.trim_end()
            )
        }
    }
}

/// What starting a server needs from the caller.
pub struct ConnectCtx<'a> {
    /// Relative `cwd` entries resolve against this.
    pub cwd: &'a std::path::Path,
    pub lifecycle: Option<Arc<Lifecycle>>,
    /// Our own executable (the launcher); `None` runs the server directly (unit tests).
    pub launcher: Option<std::path::PathBuf>,
    pub startup_timeout: Duration,
    pub cancel: &'a CancellationToken,
}

/// Answers the server: our identity, no roots/sampling/elicitation advertised (rmcp refuses
/// such requests for us).
#[derive(Clone)]
struct Handler;

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("outrigger", crate::protocol::VERSION),
        )
    }
}

/// A transport that notes `tools/list_changed` as the message is read. rmcp hands
/// notifications to a task of their own while responses go straight to the caller, so a flag
/// set by the handler could lag the call's result that followed the notification on the wire,
/// and the next round would miss the new tool.
struct Watched<T> {
    inner: T,
    changed: Arc<AtomicBool>,
    server: Arc<str>,
}

impl<T: RmcpTransport<RoleClient>> RmcpTransport<RoleClient> for Watched<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        let changed = self.changed.clone();
        let server = self.server.clone();
        let next = self.inner.receive();
        async move {
            let m = next.await;
            if let Some(JsonRpcMessage::Notification(n)) = &m
                && matches!(
                    n.notification,
                    ServerNotification::ToolListChangedNotification(_)
                )
            {
                tracing::debug!("mcp {server}: tools/list_changed");
                changed.store(true, Ordering::SeqCst);
            }
            m
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// The stdio server's process: its group (killed when this drops) and stderr ring.
struct Process {
    /// Shared (weakly) with the reaper, which disarms it once the leader is reaped.
    group: Arc<Mutex<Option<Group<'static>>>>,
    pgid: i32,
    lifecycle: Option<Arc<Lifecycle>>,
    stderr: Arc<Mutex<VecDeque<u8>>>,
}

impl Process {
    fn signal(&self, sig: nix::sys::signal::Signal) {
        if let Some(g) = self
            .group
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            g.signal(sig);
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // Dropping the group SIGKILLs it.
        drop(self.group.lock().unwrap_or_else(|e| e.into_inner()).take());
        if let Some(l) = &self.lifecycle {
            l.unregister_child_group(self.pgid);
        }
    }
}

/// A live connection.
pub struct Connection {
    server: Arc<str>,
    peer: Peer<RoleClient>,
    service: tokio::sync::Mutex<Option<RunningService<RoleClient, Handler>>>,
    changed: Arc<AtomicBool>,
    exit: watch::Receiver<Option<String>>,
    process: Option<Process>,
}

/// Starts `entry` and runs the MCP handshake within the startup timeout.
pub async fn connect(
    entry: &ServerEntry,
    ctx: &ConnectCtx<'_>,
) -> Result<Arc<Connection>, StartError> {
    let server: Arc<str> = entry.name.as_str().into();
    let changed = Arc::new(AtomicBool::new(false));
    let handler = Handler;
    let (exit_tx, exit) = watch::channel(None);
    let fail = |message: String, process: Option<&Process>| StartError {
        message,
        stderr: process
            .map(|p| tail(&p.stderr, STDERR_TAIL_BYTES))
            .unwrap_or_default(),
    };
    let (handshake, process) = match &entry.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let (process, stdout, stdin) =
                start_process(&server, command, args, env, cwd, ctx, exit_tx)
                    .await
                    .map_err(|m| fail(m, None))?;
            let transport = Watched {
                inner: rmcp::transport::async_rw::AsyncRwTransport::new_client(stdout, stdin)
                    .with_max_line_length(MAX_LINE_BYTES),
                changed: changed.clone(),
                server: server.clone(),
            };
            let fut: BoxFuture<'_, _> = Box::pin(handler.serve(transport));
            (fut, Some(process))
        }
        Transport::Http { url, headers } => {
            let transport = Watched {
                inner: http_transport(url, headers).map_err(|m| fail(m, None))?,
                changed: changed.clone(),
                server: server.clone(),
            };
            // No process: the connection is gone when the service ends (watched below).
            drop(exit_tx);
            let fut: BoxFuture<'_, _> = Box::pin(handler.serve(transport));
            (fut, None)
        }
    };
    let mut exit_wait = exit.clone();
    let exited = async move {
        loop {
            if let Some(d) = exit_wait.borrow().clone() {
                return d;
            }
            if exit_wait.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    };
    let mut exit_late = exit.clone();
    let service = tokio::select! {
        r = handshake => match r {
            Ok(s) => s,
            Err(e) => {
                // A server that died says more by its exit status than by the closed pipe.
                let died = tokio::time::timeout(
                    Duration::from_millis(250),
                    exit_late.wait_for(Option::is_some),
                )
                .await
                .ok()
                .and_then(|r| r.ok().and_then(|d| d.clone()));
                let message = match died {
                    Some(d) => format!("the server {d} before answering initialize"),
                    None => format!("the MCP handshake failed: {e}"),
                };
                return Err(fail(message, process.as_ref()));
            }
        },
        _ = tokio::time::sleep(ctx.startup_timeout) => {
            return Err(fail(format!(
                "no answer to initialize within mcp_startup_timeout_ms={}",
                ctx.startup_timeout.as_millis()
            ), process.as_ref()));
        }
        d = exited => {
            // Let the stderr reader catch up with what the server said before it died.
            tokio::time::sleep(Duration::from_millis(50)).await;
            return Err(fail(format!("the server {d} before answering initialize"), process.as_ref()));
        }
        _ = ctx.cancel.cancelled() => return Err(fail("cancelled while starting".into(), process.as_ref())),
    };
    let peer = service.peer().clone();
    Ok(Arc::new(Connection {
        server,
        peer,
        service: tokio::sync::Mutex::new(Some(service)),
        changed,
        exit,
        process,
    }))
}

type Pipes = (
    Process,
    tokio::process::ChildStdout,
    tokio::process::ChildStdin,
);

async fn start_process(
    server: &Arc<str>,
    command: &str,
    args: &[String],
    env: &std::collections::BTreeMap<String, String>,
    cwd: &Option<std::path::PathBuf>,
    ctx: &ConnectCtx<'_>,
    exit_tx: watch::Sender<Option<String>>,
) -> Result<Pipes, String> {
    let dir = match cwd {
        Some(c) => ctx.cwd.join(c),
        None => ctx.cwd.to_path_buf(),
    };
    if !dir.is_dir() {
        return Err(format!("cwd {} is not a directory", dir.display()));
    }
    // Secrets are never inherited implicitly: an entry passes what its server needs in `env`.
    let base = crate::sandbox::secrets::scrub_env(
        std::env::vars_os(),
        crate::sandbox::secrets::EnvInherit::All,
        &[],
        &[],
    );
    let launch = ctx.launcher.as_ref().map(|_| LaunchSpec {
        parent: std::process::id() as i32,
        ..Default::default()
    });
    let spec = SpawnSpec {
        program: command.into(),
        args: args.iter().map(Into::into).collect(),
        cwd: dir,
        env: Some(base),
        extra_env: env.iter().map(|(k, v)| (k.into(), v.into())).collect(),
        stdin: Stdin::Piped,
        launch,
        launcher: ctx.launcher.clone(),
        cgroup: None,
        warm: None,
        terminal: None,
    };
    let spawned = spawn::spawn(spec, None)
        .await
        .map_err(|e| format!("cannot start {command}: {e}"))?;
    let mut child = spawned.child;
    let group = spawned.group;
    let pgid = group.pgid();
    if let Some(l) = &ctx.lifecycle {
        l.register_child_group(pgid);
    }
    let (Some(stdout), Some(stdin), Some(stderr)) =
        (child.stdout.take(), child.stdin.take(), child.stderr.take())
    else {
        return Err(format!("cannot start {command}: its pipes are missing"));
    };
    let ring = Arc::new(Mutex::new(VecDeque::new()));
    tokio::spawn(drain_stderr(server.clone(), stderr, ring.clone()));
    let process = Process {
        group: Arc::new(Mutex::new(Some(group))),
        pgid,
        lifecycle: ctx.lifecycle.clone(),
        stderr: ring,
    };
    tokio::spawn(reap(child, exit_tx, Arc::downgrade(&process.group)));
    Ok((process, stdout, stdin))
}

/// Waits for the launcher, records how it ended, and kills what is left in its group.
async fn reap(
    mut child: tokio::process::Child,
    tx: watch::Sender<Option<String>>,
    group: Weak<Mutex<Option<Group<'static>>>>,
) {
    let desc = match child.wait().await {
        Ok(s) => describe_exit(s),
        Err(e) => format!("could not be waited for ({e})"),
    };
    // Stragglers the server left in its group go with it; then the id is never used again.
    if let Some(g) = group.upgrade()
        && let Some(g) = g.lock().unwrap_or_else(|e| e.into_inner()).as_mut()
    {
        g.kill();
        g.disarm();
    }
    let _ = tx.send(Some(desc));
}

fn describe_exit(s: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(sig)) => format!("was killed by signal {sig}"),
        _ => "exited".into(),
    }
}

async fn drain_stderr(
    server: Arc<str>,
    stderr: tokio::process::ChildStderr,
    ring: Arc<Mutex<VecDeque<u8>>>,
) {
    let mut lines = tokio::io::BufReader::new(stderr);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match lines.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        {
            let mut r = ring.lock().unwrap_or_else(|e| e.into_inner());
            r.extend(buf.iter().copied());
            let excess = r.len().saturating_sub(STDERR_RING_BYTES);
            r.drain(..excess);
        }
        let line = String::from_utf8_lossy(&buf[..buf.len().min(STDERR_LOG_LINE)]);
        tracing::debug!("mcp {server} stderr: {}", line.trim_end());
    }
}

fn tail(ring: &Mutex<VecDeque<u8>>, n: usize) -> String {
    let r = ring.lock().unwrap_or_else(|e| e.into_inner());
    let start = r.len().saturating_sub(n);
    let bytes: Vec<u8> = r.range(start..).copied().collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The HTTP client MCP connections share, built on first use.
fn http_client() -> Result<reqwest::Client, String> {
    static CLIENT: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            crate::llm::install_crypto();
            reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                .build()
                .map_err(|e| format!("cannot build the HTTP client: {e}"))
        })
        .clone()
}

fn http_transport(
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
) -> Result<rmcp::transport::StreamableHttpClientTransport<reqwest::Client>, String> {
    use reqwest::header::{HeaderName, HeaderValue};
    let mut map = std::collections::HashMap::new();
    for (k, v) in headers {
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|e| format!("header {k}: {e}"))?;
        let value = HeaderValue::from_str(v).map_err(|e| format!("header {k}: {e}"))?;
        map.insert(name, value);
    }
    let config =
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            url.to_string(),
        )
        .custom_headers(map);
    Ok(rmcp::transport::StreamableHttpClientTransport::with_client(
        http_client()?,
        config,
    ))
}

impl Connection {
    fn gone(&self) -> Option<String> {
        if let Some(d) = self.exit.borrow().clone() {
            return Some(d);
        }
        if self.peer.is_transport_closed() {
            return Some("closed the connection".into());
        }
        None
    }

    fn service_error(&self, e: ServiceError) -> CallError {
        match e {
            ServiceError::McpError(e) => CallError::Refused(e.message.to_string()),
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => CallError::Closed(
                self.gone()
                    .unwrap_or_else(|| format!("connection failed ({e})")),
            ),
            other => CallError::Refused(other.to_string()),
        }
    }
}

impl McpClient for Connection {
    fn list_tools(&self, max: usize) -> BoxFuture<'_, Result<Vec<RemoteTool>, String>> {
        Box::pin(async move {
            let tools = self
                .peer
                .list_all_tools()
                .await
                .map_err(|e| format!("tools/list failed: {e}"))?;
            if tools.len() > max {
                tracing::warn!(
                    "mcp {}: {} tools offered; keeping the first {max} (mcp_max_tools)",
                    self.server,
                    tools.len()
                );
            }
            Ok(tools
                .into_iter()
                .take(max)
                .filter_map(|t| remote_tool(serde_json::to_value(t).ok()?))
                .collect())
        })
    }

    fn call_tool(
        &self,
        name: &str,
        args: Map<String, Value>,
    ) -> BoxFuture<'_, Result<Value, CallError>> {
        let params = CallToolRequestParams::new(name.to_string()).with_arguments(args);
        Box::pin(async move {
            if let Some(d) = self.gone() {
                return Err(CallError::Closed(d));
            }
            let call = self.peer.call_tool(params);
            let r = tokio::select! {
                r = call => r,
                d = self.wait_exit() => return Err(CallError::Closed(d)),
            };
            match r {
                Ok(result) => serde_json::to_value(result)
                    .map_err(|e| CallError::Refused(format!("unreadable result: {e}"))),
                Err(e @ (ServiceError::TransportClosed | ServiceError::TransportSend(_)))
                    if self.process.is_some() =>
                {
                    // The pipe closes before the exit is reaped: its status says more.
                    let status = tokio::time::timeout(EXIT_STATUS_WAIT, self.wait_exit()).await;
                    Err(CallError::Closed(
                        status.unwrap_or_else(|_| format!("closed the connection ({e})")),
                    ))
                }
                Err(e) => Err(self.service_error(e)),
            }
        })
    }

    fn take_tools_changed(&self) -> bool {
        self.changed.swap(false, Ordering::Relaxed)
    }

    fn exited(&self) -> Option<String> {
        self.gone()
    }

    fn wait_exit(&self) -> BoxFuture<'_, String> {
        let mut rx = self.exit.clone();
        Box::pin(async move {
            loop {
                if let Some(d) = rx.borrow().clone() {
                    return d;
                }
                if rx.changed().await.is_err() {
                    // No process (HTTP): gone when the transport closes.
                    loop {
                        if self.peer.is_transport_closed() {
                            return "closed the connection".into();
                        }
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            }
        })
    }

    fn stderr_tail(&self) -> String {
        self.process
            .as_ref()
            .map(|p| tail(&p.stderr, STDERR_TAIL_BYTES))
            .unwrap_or_default()
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let service = self.service.lock().await.take();
            let Some(mut service) = service else {
                return;
            };
            // Closing the service drops the transport: the server's stdin reaches EOF.
            let _ = tokio::time::timeout(CLOSE_GRACE, service.close()).await;
            let Some(p) = &self.process else {
                return;
            };
            let mut rx = self.exit.clone();
            let exited = |rx: &mut watch::Receiver<Option<String>>| {
                let mut rx = rx.clone();
                async move {
                    let _ = rx.wait_for(Option::is_some).await;
                }
            };
            if tokio::time::timeout(CLOSE_GRACE, exited(&mut rx))
                .await
                .is_ok()
            {
                return;
            }
            p.signal(nix::sys::signal::Signal::SIGTERM);
            if tokio::time::timeout(TERM_GRACE, exited(&mut rx))
                .await
                .is_ok()
            {
                return;
            }
            p.signal(nix::sys::signal::Signal::SIGKILL);
        })
    }
}

/// Our view of an rmcp `Tool` (read from its JSON, so field renames in rmcp cannot reach us).
fn remote_tool(v: Value) -> Option<RemoteTool> {
    let name = v.get("name")?.as_str()?.to_string();
    let description = v
        .get("description")
        .and_then(Value::as_str)
        .or_else(|| v.get("title").and_then(Value::as_str))
        .unwrap_or_default()
        .to_string();
    let mut input_schema = v
        .get("inputSchema")
        .cloned()
        .unwrap_or_else(|| serde_json::json!({}));
    if !input_schema.is_object() {
        input_schema = serde_json::json!({"type": "object"});
    }
    let hint = |k: &str| {
        v.get("annotations")
            .and_then(|a| a.get(k))
            .and_then(Value::as_bool)
    };
    Some(RemoteTool {
        name,
        description,
        input_schema,
        read_only: hint("readOnlyHint") == Some(true),
        destructive: hint("destructiveHint") == Some(true),
    })
}
