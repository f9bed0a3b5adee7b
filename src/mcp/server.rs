//! `outrigger mcp`: a stdio MCP server exposing our file tools and `bash` to editors.
//!
//! The tools are the sidecar's own (`serve::builtin_tools`), dispatched through the same
//! router, so arguments are validated, paths contained, bash sandboxed and writes CAS-checked
//! exactly as in a turn. stdio carries one MCP connection per process, so the process holds
//! one read-before-write session: a client must `read_file` before it overwrites a file.
//! stdout carries only MCP frames; logs go to stderr.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool as McpTool, ToolAnnotations,
};
use rmcp::service::{QuitReason, RequestContext, RoleServer, ServerInitializeError};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, ReadBuf};

use crate::config::{Config, SharedConfig};
use crate::lifecycle::Lifecycle;
use crate::protocol::VERSION;
use crate::tools::router::Entry;
use crate::tools::{Router, ToolContext, ToolMode, ToolResult};

/// The tools served, in this order, when registered (`web_fetch` unless the web tools are off).
pub const EXPOSED: &[&str] = &[
    "read_file",
    "write_file",
    "edit_file",
    "apply_patch",
    "ls",
    "glob",
    "grep",
    "bash",
    "web_fetch",
];

/// How often we look for a parent that went away without closing our stdin.
const PARENT_POLL: Duration = Duration::from_millis(500);

const INSTRUCTIONS: &str = "Outrigger's workspace tools. Paths are relative to the workspace \
    root. Read a file with read_file before you overwrite or edit it: writers check the \
    version you read (compare-and-swap) and refuse a file this session has not read. bash runs \
    sandboxed: it can write only inside the workspace and a private temp dir, and the network \
    is off by default.";

/// Runs the server until the client closes stdin (exit 0), a signal arrives (exit 0) or the
/// transport fails (exit 1). A `--root` that is not a directory exits 2 before serving.
pub fn run(config: Config, root: Option<PathBuf>) -> i32 {
    let root = match resolve_root(root.as_deref()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("outrigger mcp: {e}");
            return 2;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("outrigger-mcp")
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start the async runtime: {e}");
            return 70;
        }
    };
    let shared = SharedConfig::new(config.clone());
    let builtins = crate::serve::builtin_tools(&config, &shared);
    // Only the stop channel's sender is used (nothing here asks to stop).
    let (lifecycle, _stop_rx) = Lifecycle::new();
    let lifecycle = Arc::new(lifecycle);
    let server = McpServer::new(builtins.router, root.clone(), lifecycle.clone());
    tracing::info!(
        "outrigger mcp serving {} tool(s) rooted at {}",
        server.tools().len(),
        root.display()
    );
    let code = runtime.block_on(serve(server));
    // Whatever was in flight dies with us: bash's process groups first, then the sandbox's
    // spare launcher and cgroups.
    lifecycle.cancel_work();
    lifecycle.kill_children();
    crate::sandbox::spare::discard();
    crate::sandbox::cgroup::flush_removals(Duration::from_secs(1));
    // A blocking stdin read (stdin not a pipe) would hold a plain drop forever.
    runtime.shutdown_timeout(Duration::from_millis(500));
    code
}

/// `--root` (default: the current directory), canonicalised: a directory, never `/`, and
/// not `$HOME` by default. Editors often start servers in `/` or the user's home, and a
/// workspace there would let the file tools and bash write anywhere (the sidecar refuses the
/// same defaults; an explicit `--root ~` is taken at its word).
fn resolve_root(root: Option<&Path>) -> Result<PathBuf, String> {
    let (given, label) = match root {
        Some(r) => (r.to_path_buf(), "--root"),
        None => (
            std::env::current_dir()
                .map_err(|e| format!("cannot read the current directory ({e}); pass --root DIR"))?,
            "the current directory (no --root given)",
        ),
    };
    let canon =
        std::fs::canonicalize(&given).map_err(|e| format!("{label} {}: {e}", given.display()))?;
    if !canon.is_dir() {
        return Err(format!(
            "{label} {} is not a directory: pass the project directory the tools work in",
            given.display()
        ));
    }
    if canon.parent().is_none() {
        return Err(format!(
            "{label} {} is the filesystem root: the whole filesystem cannot be a workspace; pass --root with a project directory",
            given.display()
        ));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .and_then(|h| std::fs::canonicalize(h).ok());
    if root.is_none() && home.as_deref() == Some(canon.as_path()) {
        return Err(format!(
            "{label} {} is the home directory, which is no safe default workspace; pass --root with a project directory",
            given.display()
        ));
    }
    Ok(canon)
}

/// Serves stdin/stdout until the client goes away or a signal arrives; returns the exit code.
async fn serve(server: McpServer) -> i32 {
    use tokio::signal::unix::{SignalKind, signal};
    let (mut sigterm, mut sigint) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(t), Ok(i)) => (t, i),
        (Err(e), _) | (_, Err(e)) => {
            tracing::error!("cannot install signal handlers: {e}");
            return 70;
        }
    };
    let parent = nix::unistd::getppid();
    let parent_gone = async move {
        let mut poll = tokio::time::interval(PARENT_POLL);
        loop {
            poll.tick().await;
            if nix::unistd::getppid() != parent {
                tracing::info!("client went away; shutting down");
                return;
            }
        }
    };
    tokio::pin!(parent_gone);
    // Non-blocking pipes when the client gave us pipes (the usual case), so no reader thread
    // is left blocked on stdin at exit.
    let (stdin, stdout) = rmcp::transport::io::stdio_pipes();
    let lifecycle = server.lifecycle.clone();
    let stdin = EofCancels {
        inner: stdin,
        lifecycle: lifecycle.clone(),
    };
    let transport = (stdin, stdout);
    let running = tokio::select! {
        r = server.serve(transport) => r,
        _ = sigterm.recv() => return 0,
        _ = sigint.recv() => return 0,
        () = &mut parent_gone => return 0,
    };
    let running = match running {
        Ok(r) => r,
        // stdin closed before the handshake: nothing was asked of us.
        Err(ServerInitializeError::ConnectionClosed(_)) => return 0,
        Err(e) => {
            tracing::error!("MCP handshake failed: {e}");
            return 1;
        }
    };
    let token = running.cancellation_token();
    let waiting = running.waiting();
    tokio::pin!(waiting);
    let stopped = tokio::select! {
        r = &mut waiting => Some(r),
        _ = sigterm.recv() => None,
        _ = sigint.recv() => None,
        () = &mut parent_gone => None,
    };
    match stopped {
        Some(Ok(QuitReason::JoinError(e))) | Some(Err(e)) => {
            tracing::error!("the MCP service failed: {e}");
            1
        }
        Some(Ok(_)) => 0,
        None => {
            // Calls in flight end first (bash's groups killed), so their answers go out.
            lifecycle.cancel_work();
            token.cancel();
            let _ = tokio::time::timeout(Duration::from_secs(2), waiting).await;
            0
        }
    }
}

/// stdin that cancels in-flight calls at EOF: the client is gone, so a running bash is
/// stopped (its process group killed) instead of running on while rmcp waits for its
/// response, and we exit promptly.
struct EofCancels<R> {
    inner: R,
    lifecycle: Arc<Lifecycle>,
}

impl<R: AsyncRead + Unpin> AsyncRead for EofCancels<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        // A ready read that added nothing to a buffer with room is end of file.
        if matches!(polled, Poll::Ready(Ok(())))
            && buf.filled().len() == before
            && buf.remaining() > 0
        {
            tracing::debug!("stdin closed; cancelling in-flight calls");
            this.lifecycle.cancel_work();
        }
        polled
    }
}

/// The handler: our router's exposed tools, one workspace root, one read-before-write session.
pub struct McpServer {
    router: Arc<Router>,
    root: PathBuf,
    lifecycle: Arc<Lifecycle>,
    /// The read-before-write session of this connection (one per process on stdio).
    session_id: String,
    calls: AtomicU64,
}

impl McpServer {
    pub fn new(router: Arc<Router>, root: PathBuf, lifecycle: Arc<Lifecycle>) -> McpServer {
        McpServer {
            router,
            root,
            lifecycle,
            session_id: format!("mcp_{}", crate::store::ids::session_id()),
            calls: AtomicU64::new(1),
        }
    }

    /// The exposed tools that are registered, in `EXPOSED` order.
    fn tools(&self) -> Vec<McpTool> {
        EXPOSED
            .iter()
            .filter_map(|name| self.router.get(name))
            .map(|e| mcp_tool(&e))
            .collect()
    }

    fn exposed(&self, name: &str) -> Option<Arc<Entry>> {
        if EXPOSED.contains(&name) {
            self.router.get(name)
        } else {
            None
        }
    }

    async fn call(
        &self,
        name: &str,
        args: Value,
        request_ct: tokio_util::sync::CancellationToken,
    ) -> ToolResult {
        // Cancelled by the client's `notifications/cancelled` or by our shutdown; bash kills
        // its process group on either.
        let cancel = self.lifecycle.token();
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        let ctx = ToolContext {
            workspace_root: self.root.clone(),
            cancel: cancel.clone(),
            // Names bash's saved-output file: unique across servers sharing a workspace.
            call_id: format!("mcp_{}_{n}", std::process::id()),
            session_id: Some(self.session_id.clone()),
            lifecycle: Some(self.lifecycle.clone()),
            exec_sandbox: None,
            host: None,
            host_context: Map::new(),
            host_fs: Default::default(),
        };
        let fut = self.router.dispatch(name, args, ctx);
        tokio::pin!(fut);
        tokio::select! {
            r = &mut fut => r,
            () = request_ct.cancelled() => {
                cancel.cancel();
                fut.await
            }
        }
    }
}

/// A router entry as an MCP tool: its schema, description and mode as annotations.
fn mcp_tool(e: &Entry) -> McpTool {
    let schema: JsonObject = match e.parameters.value() {
        Value::Object(m) => m,
        // Our tools' schemas are objects; MCP requires one, so never send anything else.
        _ => Map::from_iter([("type".to_string(), json!("object"))]),
    };
    McpTool::new(e.name.clone(), e.description.clone(), Arc::new(schema))
        .with_annotations(annotations(e.mode))
}

/// Modes as MCP hints. MCP reads an absent `destructiveHint` as true, so it is always set
/// for tools that may write.
fn annotations(mode: ToolMode) -> ToolAnnotations {
    match mode {
        ToolMode::Read => ToolAnnotations::new().read_only(true),
        ToolMode::Destructive => ToolAnnotations::new().read_only(false).destructive(true),
        ToolMode::SafeWrite | ToolMode::Local | ToolMode::External => {
            ToolAnnotations::new().read_only(false).destructive(false)
        }
    }
}

/// Our result as MCP's: the model's text as content, the whole result (with `_sandbox`) as
/// structured content, and a failure as `isError`.
pub fn call_tool_result(r: &ToolResult) -> CallToolResult {
    // A `ToolResult` is a struct of strings, bools and JSON maps: it always serialises.
    let structured = serde_json::to_value(r).unwrap_or_else(|_| json!({"success": r.success}));
    let mut out = if r.success {
        CallToolResult::structured(structured)
    } else {
        CallToolResult::structured_error(structured)
    };
    out.content = vec![ContentBlock::text(r.model_text())];
    out
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("outrigger", VERSION).with_title("Outrigger workspace tools"),
            )
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    fn get_tool(&self, name: &str) -> Option<McpTool> {
        self.exposed(name).map(|e| mcp_tool(&e))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.as_ref();
        if self.exposed(name).is_none() {
            let names: Vec<String> = self
                .tools()
                .into_iter()
                .map(|t| t.name.into_owned())
                .collect();
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool '{name}': this server has {}",
                    names.join(", ")
                ),
                None,
            ));
        }
        let args = request.arguments.map_or(Value::Null, Value::Object);
        let result = self.call(name, args, context.ct.clone()).await;
        Ok(call_tool_result(&result).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_drops_the_marker_and_structured_keeps_it() {
        let r = ToolResult::recoverable("exit 1")
            .with_data("stdout", "hi\n")
            .with_data(
                "_sandbox",
                json!({"backend": "landlock", "enforcement": "full"}),
            );
        let out = serde_json::to_value(call_tool_result(&r)).unwrap();
        assert_eq!(out["isError"], true);
        let text: Value =
            serde_json::from_str(out["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(
            text,
            json!({"success": false, "error": "exit 1", "data": {"stdout": "hi\n"}})
        );
        assert_eq!(
            out["structuredContent"]["data"]["_sandbox"]["backend"],
            "landlock"
        );
        assert_eq!(out["structuredContent"]["needsFollowup"], true);
    }

    #[test]
    fn modes_map_to_hints() {
        let read = serde_json::to_value(annotations(ToolMode::Read)).unwrap();
        assert_eq!(read, json!({"readOnlyHint": true}));
        let local = serde_json::to_value(annotations(ToolMode::Local)).unwrap();
        assert_eq!(
            local,
            json!({"readOnlyHint": false, "destructiveHint": false})
        );
        let d = serde_json::to_value(annotations(ToolMode::Destructive)).unwrap();
        assert_eq!(d, json!({"readOnlyHint": false, "destructiveHint": true}));
    }

    #[test]
    fn root_must_be_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        assert!(
            resolve_root(Some(&file))
                .unwrap_err()
                .contains("not a directory")
        );
        assert!(resolve_root(Some(&dir.path().join("missing"))).is_err());
        assert_eq!(
            resolve_root(Some(dir.path())).unwrap(),
            std::fs::canonicalize(dir.path()).unwrap()
        );
        let e = resolve_root(Some(Path::new("/"))).unwrap_err();
        assert!(e.contains("filesystem root"), "{e}");
    }
}
