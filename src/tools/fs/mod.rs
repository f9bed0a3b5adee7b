//! Workspace file tools: path containment, read-before-write state, `read_file`,
//! `write_file`, `edit_file`, `apply_patch`, and the edit algorithm they share.

pub mod edit;
pub mod glob;
pub mod grep;
pub mod host_io;
pub mod image;
pub mod ls;
pub mod patch;
pub mod paths;
pub mod read;
pub mod root;
pub mod state;
pub mod walk;
pub mod write;

use std::sync::{Arc, Mutex};

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::config::Settings;
use crate::tools::router::{Registration, Router};
use crate::tools::schema::Schema;
use crate::tools::{ToolContext, ToolFuture, ToolMode, ToolResult};
use paths::Workspace;
use state::ReadState;

/// Where the file tools read the current settings (config can change at runtime).
pub type SettingsFn = Arc<dyn Fn() -> Arc<Settings> + Send + Sync>;

/// What the file tools share: settings, the read-before-write state and the write lock.
pub struct FsEnv {
    pub state: ReadState,
    settings: SettingsFn,
    /// Held from the CAS check to the rename so two calls in this process cannot interleave
    /// on a file (the check would pass for both and one write would be lost).
    write_lock: Mutex<()>,
    /// Recently resolved workspaces (see `workspace`).
    resolved: Mutex<Vec<Resolved>>,
}

/// How long a resolved workspace is reused. Resolving canonicalizes the root and every
/// blocked path (a readlink per component: ~10 % of a tool round's CPU when done per call);
/// a model round's calls come within milliseconds of each other.
const RESOLVED_TTL: std::time::Duration = std::time::Duration::from_secs(1);
/// Workspaces (root and settings) kept resolved at once.
const RESOLVED_KEPT: usize = 8;

struct Resolved {
    at: std::time::Instant,
    root: std::path::PathBuf,
    key: WorkspaceKey,
    ws: Arc<Workspace>,
}

/// The settings a workspace is resolved from.
#[derive(PartialEq)]
struct WorkspaceKey {
    writable: Vec<std::path::PathBuf>,
    readable: Vec<std::path::PathBuf>,
    blocked: Vec<std::path::PathBuf>,
    max_walk: usize,
}

impl WorkspaceKey {
    fn of(s: &Settings) -> WorkspaceKey {
        WorkspaceKey {
            writable: s.writable_roots.clone(),
            readable: s.readable_roots.clone(),
            blocked: s.blocked_paths.clone(),
            max_walk: s.max_walk_entries,
        }
    }
}

impl FsEnv {
    pub fn new(settings: SettingsFn) -> Arc<FsEnv> {
        Arc::new(FsEnv {
            state: ReadState::new(),
            settings,
            write_lock: Mutex::new(()),
            resolved: Mutex::new(Vec::new()),
        })
    }

    pub fn settings(&self) -> Arc<Settings> {
        (self.settings)()
    }

    /// The call's workspace, resolved (or reused when the same root and settings were
    /// resolved within `RESOLVED_TTL`).
    pub fn workspace(
        &self,
        ctx: &ToolContext,
        settings: &Settings,
    ) -> Result<Arc<Workspace>, String> {
        let key = WorkspaceKey::of(settings);
        let now = std::time::Instant::now();
        {
            let mut kept = self.resolved.lock().unwrap_or_else(|e| e.into_inner());
            kept.retain(|r| now.duration_since(r.at) < RESOLVED_TTL);
            if let Some(r) = kept
                .iter()
                .find(|r| r.root == ctx.workspace_root && r.key == key)
            {
                return Ok(r.ws.clone());
            }
        }
        let ws =
            Arc::new(Workspace::new(&ctx.workspace_root, settings).map_err(|e| e.to_string())?);
        let mut kept = self.resolved.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() >= RESOLVED_KEPT {
            kept.remove(0);
        }
        kept.push(Resolved {
            at: now,
            root: ctx.workspace_root.clone(),
            key,
            ws: ws.clone(),
        });
        Ok(ws)
    }

    pub(crate) fn lock_writes(&self) -> std::sync::MutexGuard<'_, ()> {
        self.write_lock.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A file tool: arguments parsed into `A` (whose schema is the tool's), then `run` on the
/// blocking pool, since every file tool does disk work, unless `inline` says this call's
/// work is small enough to do in place.
pub struct FsTool<A> {
    name: &'static str,
    description: String,
    mode: ToolMode,
    env: Arc<FsEnv>,
    run: fn(&FsEnv, &ToolContext, A) -> ToolResult,
    inline: Option<fn(&ToolContext, &A) -> bool>,
}

impl<A> FsTool<A> {
    pub fn new(
        name: &'static str,
        description: String,
        mode: ToolMode,
        env: Arc<FsEnv>,
        run: fn(&FsEnv, &ToolContext, A) -> ToolResult,
    ) -> FsTool<A> {
        FsTool {
            name,
            description,
            mode,
            env,
            run,
            inline: None,
        }
    }

    /// Calls for which `small` holds run on the calling worker: a blocking-pool hop costs two
    /// thread wake-ups, more than a small read. `small` is a hint (it must be cheap and
    /// never wait on anything but the local disk); the tool checks everything again.
    pub fn inline_when(mut self, small: fn(&ToolContext, &A) -> bool) -> FsTool<A> {
        self.inline = Some(small);
        self
    }
}

impl<A> crate::tools::Tool for FsTool<A>
where
    A: DeserializeOwned + schemars::JsonSchema + Send + 'static,
{
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn parameters(&self) -> Value {
        schema_of::<A>()
    }
    fn schema(&self) -> Schema {
        Schema::lazy(schema_of::<A>)
    }
    fn mode(&self) -> ToolMode {
        self.mode
    }
    fn call(self: Arc<Self>, ctx: ToolContext, args: Map<String, Value>) -> ToolFuture {
        Box::pin(async move {
            let args: A = match parse_args(args) {
                Ok(a) => a,
                Err(r) => return r,
            };
            if self.inline.is_some_and(|small| small(&ctx, &args)) {
                return (self.run)(&self.env, &ctx, args);
            }
            blocking(move || (self.run)(&self.env, &ctx, args)).await
        })
    }
}

/// Registers `read_file`, `view_image`, `write_file`, `edit_file`, `apply_patch`, `ls`, `glob` and `grep`
/// on the router.
pub fn register(router: &Router, env: &Arc<FsEnv>) {
    let tools: Vec<Arc<dyn crate::tools::Tool>> = vec![
        Arc::new(read::tool(env.clone())),
        Arc::new(image::tool(env.clone())),
        Arc::new(write::write_tool(env.clone())),
        Arc::new(write::edit_tool(env.clone())),
        Arc::new(patch::tool(env.clone())),
        Arc::new(ls::tool(env.clone())),
        Arc::new(glob::tool(env.clone())),
        Arc::new(grep::tool(env.clone())),
    ];
    for t in tools {
        let name = t.name().to_string();
        if let Err(e) = router.register(Registration::new(t)) {
            tracing::error!("cannot register built-in tool {name}: {e}");
        }
    }
}

/// Clips text to `max_chars` characters: the head 20 % and the tail 80 % joined by
/// `\n...[N chars truncated]...\n`. Returns the text and how many characters were cut.
pub fn clip(text: &str, max_chars: usize) -> (String, usize) {
    let total = text.chars().count();
    if total <= max_chars {
        return (text.to_string(), 0);
    }
    let head = max_chars / 5;
    let tail = max_chars - head;
    let cut = total - head - tail;
    let head_end = text.char_indices().nth(head).map_or(text.len(), |(i, _)| i);
    let tail_start = text
        .char_indices()
        .nth(total - tail)
        .map_or(text.len(), |(i, _)| i);
    (
        format!(
            "{}\n...[{cut} chars truncated]...\n{}",
            &text[..head_end],
            &text[tail_start..]
        ),
        cut,
    )
}

/// The JSON Schema of an argument struct, as a tool's `parameters`.
pub(crate) fn schema_of<T: schemars::JsonSchema>() -> Value {
    let mut v = serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        // Hosts and providers want a bare object schema; the dialect marker adds nothing.
        m.remove("$schema");
        m.remove("title");
    }
    v
}

#[allow(clippy::result_large_err)] // the failure is the result handed back
pub(crate) fn parse_args<T: DeserializeOwned>(args: Map<String, Value>) -> Result<T, ToolResult> {
    serde_json::from_value(Value::Object(args))
        .map_err(|e| ToolResult::recoverable(format!("invalid arguments: {e}")))
}

/// Runs blocking file work off the async workers.
pub(crate) async fn blocking(f: impl FnOnce() -> ToolResult + Send + 'static) -> ToolResult {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) => ToolResult::recoverable(format!("file operation failed: {e}")),
    }
}

/// A recoverable failure carrying a machine-readable `data.code`.
pub(crate) fn fail(code: &str, msg: impl Into<String>) -> ToolResult {
    ToolResult::recoverable(msg).with_data("code", code)
}

/// The default settings with no home to read, for the file tools' unit tests.
#[cfg(test)]
pub(crate) fn test_settings() -> crate::config::Settings {
    let inputs = crate::config::Inputs {
        home: std::path::PathBuf::from("/nonexistent-home"),
        ..Default::default()
    };
    crate::config::Config::load(&inputs)
        .expect("defaults load")
        .settings()
}

/// An environment over [`test_settings`].
#[cfg(test)]
pub(crate) fn test_env() -> Arc<FsEnv> {
    let settings = Arc::new(test_settings());
    FsEnv::new(Arc::new(move || settings.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_keeps_head_and_tail() {
        let text: String = "0123456789".repeat(100);
        let (out, cut) = clip(&text, 100);
        assert_eq!(cut, 900);
        assert!(out.starts_with(&text[..20]));
        assert!(out.ends_with(&text[920..]));
        assert!(out.contains("\n...[900 chars truncated]...\n"));
        assert_eq!(clip("short", 100), ("short".to_string(), 0));
        // Characters, not bytes.
        let (out, cut) = clip(&"中".repeat(20), 10);
        assert_eq!(cut, 10);
        assert!(out.starts_with("中中\n"));
    }

    /// Answers the id of the thread it ran on.
    fn where_run(_: &FsEnv, _: &ToolContext, _: Map<String, Value>) -> ToolResult {
        let mut m = Map::new();
        let id = format!("{:?}", std::thread::current().id());
        m.insert("thread".into(), Value::String(id));
        ToolResult::ok(m)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn small_calls_run_in_place_and_the_rest_on_the_blocking_pool() {
        use crate::tools::Tool;
        let here = format!("{:?}", std::thread::current().id());
        let ctx = ToolContext::new(std::env::temp_dir());
        let args = |big: bool| {
            let mut m = Map::new();
            m.insert("big".into(), Value::Bool(big));
            m
        };
        let tool = Arc::new(
            FsTool::new(
                "probe",
                String::new(),
                ToolMode::Read,
                test_env(),
                where_run,
            )
            .inline_when(|_, a: &Map<String, Value>| a["big"] == Value::Bool(false)),
        );
        let thread = |r: &ToolResult| r.data.as_ref().unwrap()["thread"].clone();
        let small = tool.clone().call(ctx.clone(), args(false)).await;
        assert_eq!(thread(&small), Value::String(here.clone()));
        let big = tool.call(ctx, args(true)).await;
        assert_ne!(thread(&big), Value::String(here));
    }

    #[test]
    fn read_file_runs_in_place_only_for_a_small_regular_file_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("small.txt"), "alpha\n").unwrap();
        let big = std::fs::File::create(dir.path().join("big.txt")).unwrap();
        big.set_len(read::INLINE_READ_BYTES + 1).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let mut ctx = ToolContext::new(dir.path().to_path_buf());
        let a = |p: &str| read::ReadArgs {
            path: p.into(),
            offset: None,
            limit: None,
            line_numbers: None,
        };
        assert!(read::small_local_read(&ctx, &a("small.txt")));
        let abs = dir.path().join("small.txt").display().to_string();
        assert!(read::small_local_read(&ctx, &a(&abs)));
        assert!(!read::small_local_read(&ctx, &a("big.txt")));
        assert!(!read::small_local_read(&ctx, &a("sub")));
        assert!(!read::small_local_read(&ctx, &a("missing.txt")));
        // Through the host: its answer is awaited, so never in place.
        ctx.host_fs.read = true;
        assert!(!read::small_local_read(&ctx, &a("small.txt")));
    }
}
