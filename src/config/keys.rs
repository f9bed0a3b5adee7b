//! The defaults table. It doubles as the schema: every layer is checked against it.

use serde_json::{Value, json};

/// What a key accepts. Env strings are coerced to this type before the check.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// One of a fixed set of strings.
    Choice(&'static [&'static str]),
    /// A string, or `null` for "unset".
    OptPath,
    /// A non-empty string, or `null` for "unset".
    OptText,
    /// An integer within `[min, max]` (max is the key's ceiling).
    Int { min: i64, max: i64 },
    /// A number within `[min, max]`.
    Float { min: f64, max: f64 },
    /// A list of non-empty strings (paths). Env: a JSON array or a `:`-separated list.
    PathList,
    /// `true` / `false`. Env: 1/0, true/false, yes/no, on/off.
    Bool,
    /// `mcp_servers`: a list of MCP server entries (`crate::mcp::entry`). Env: JSON.
    McpServers,
    /// A web tools setting, taken as given: `tools::web::config` checks it and a bad value
    /// turns the web pair off instead of stopping boot (the spec's rule for this optional
    /// feature). The text says what is expected.
    Web(&'static str),
}

impl Kind {
    pub fn describe(&self) -> String {
        match self {
            Kind::Choice(c) => format!("one of {}", c.join(", ")),
            Kind::OptPath => "a string (a path) or null".to_string(),
            Kind::OptText => "a non-empty string or null".to_string(),
            Kind::Int { min, max } => format!("an integer from {min} to {max}"),
            Kind::Float { min, max } => format!("a number from {min} to {max}"),
            Kind::PathList => "a list of non-empty strings (paths)".to_string(),
            Kind::Bool => "true or false".to_string(),
            Kind::McpServers => "a list of MCP server entries: {name?, command, args?, env?, cwd?} or {name, url, headers?}".to_string(),
            Kind::Web(what) => what.to_string(),
        }
    }

    /// Checks a JSON value against the kind.
    pub fn check(&self, v: &Value) -> bool {
        match self {
            Kind::Choice(c) => v.as_str().is_some_and(|s| c.contains(&s)),
            Kind::OptPath | Kind::OptText => {
                v.is_null() || v.as_str().is_some_and(|s| !s.is_empty())
            }
            Kind::Int { min, max } => v.as_i64().is_some_and(|n| n >= *min && n <= *max),
            Kind::Float { min, max } => v
                .as_f64()
                .is_some_and(|n| n.is_finite() && n >= *min && n <= *max),
            Kind::PathList => v
                .as_array()
                .is_some_and(|a| a.iter().all(|x| x.as_str().is_some_and(|s| !s.is_empty()))),
            Kind::Bool => v.is_boolean(),
            Kind::McpServers => crate::mcp::entry::parse_configured(v).is_ok(),
            Kind::Web(_) => true,
        }
    }

    /// Coerces an environment string to this kind's JSON type (the check follows).
    pub fn coerce_env(&self, s: &str) -> Value {
        let t = s.trim();
        match self {
            // Choices are case-insensitive in env, like on the command line.
            Kind::Choice(c) => Value::String(
                c.iter()
                    .find(|x| x.eq_ignore_ascii_case(t))
                    .map_or_else(|| s.to_string(), |x| x.to_string()),
            ),
            Kind::OptPath | Kind::OptText => {
                if t.is_empty() || t.eq_ignore_ascii_case("null") {
                    Value::Null
                } else {
                    Value::String(s.to_string())
                }
            }
            Kind::Int { .. } => t
                .parse::<i64>()
                .map(Value::from)
                .unwrap_or_else(|_| Value::String(s.to_string())),
            Kind::Float { .. } => t
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .map(|f| json!(f))
                .unwrap_or_else(|| Value::String(s.to_string())),
            Kind::PathList if t.starts_with('[') => {
                serde_json::from_str(t).unwrap_or_else(|_| Value::String(s.to_string()))
            }
            Kind::PathList => Value::Array(
                t.split(':')
                    .filter(|p| !p.is_empty())
                    .map(|p| Value::String(p.to_string()))
                    .collect(),
            ),
            Kind::McpServers => {
                serde_json::from_str(t).unwrap_or_else(|_| Value::String(s.to_string()))
            }
            Kind::Web(_) => Value::String(s.to_string()),
            Kind::Bool => match t.to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => Value::Bool(true),
                "0" | "false" | "no" | "off" => Value::Bool(false),
                _ => Value::String(s.to_string()),
            },
        }
    }
}

#[derive(Debug)]
pub struct KeySpec {
    pub name: &'static str,
    pub kind: Kind,
    pub default: fn() -> Value,
    pub doc: &'static str,
}

pub const LOG_LEVELS: &[&str] = &["DEBUG", "INFO", "WARNING", "ERROR"];

/// One gibibyte: the ceiling of `max_frame_bytes`.
pub const MAX_FRAME_CEILING: i64 = 1 << 30;

pub static KEYS: &[KeySpec] = &[
    KeySpec {
        name: "log_level",
        kind: Kind::Choice(LOG_LEVELS),
        default: || json!("INFO"),
        doc: "stderr log level",
    },
    KeySpec {
        name: "grace_period_seconds",
        kind: Kind::Float {
            min: 0.0,
            max: 300.0,
        },
        default: || json!(5.0),
        doc: "how long a graceful shutdown waits for in-flight work",
    },
    KeySpec {
        name: "storage_path",
        kind: Kind::OptPath,
        default: || Value::Null,
        doc: "SQLite store path; null means $OUTRIGGER_HOME/outrigger.db",
    },
    KeySpec {
        name: "storage_sync",
        kind: Kind::Choice(&["normal", "full"]),
        default: || json!("normal"),
        doc: "SQLite synchronous level: normal survives a process crash, full also power loss",
    },
    KeySpec {
        name: "max_frame_bytes",
        kind: Kind::Int {
            min: 1024,
            max: MAX_FRAME_CEILING,
        },
        default: || json!(64 * 1024 * 1024),
        doc: "longest accepted stdin line; longer lines are discarded and refused",
    },
    KeySpec {
        name: "max_inflight_requests",
        kind: Kind::Int {
            min: 16,
            max: 1_000_000,
        },
        default: || json!(1024),
        doc: "requests (other than control methods) whose handlers run at once",
    },
    KeySpec {
        name: "max_queued_requests",
        kind: Kind::Int {
            min: 0,
            max: 1_000_000,
        },
        default: || json!(1024),
        doc: "requests waiting for an in-flight slot; when full, stdin is not read (back-pressure)",
    },
    KeySpec {
        name: "max_output_queue_bytes",
        kind: Kind::Int {
            min: 1 << 20,
            max: MAX_FRAME_CEILING,
        },
        default: || json!(64 * 1024 * 1024),
        doc: "bytes of frames waiting for a host that stopped reading stdout; past it, stdin is not read",
    },
    KeySpec {
        name: "transcript_cache_bytes",
        kind: Kind::Int {
            min: 0,
            max: 1 << 30,
        },
        default: || json!(32 << 20),
        doc: "bytes of recent records' transcripts kept in memory, so a follow-up turn does not re-read and re-parse its whole history",
    },
    KeySpec {
        name: "trace_memory_bytes",
        kind: Kind::Int {
            min: 0,
            max: 1 << 30,
        },
        default: || json!(super::DEFAULT_TRACE_MEMORY_BYTES),
        doc: "bytes of finished traces kept in memory once they are in the store; older ones are read back from the store by trace.fetch",
    },
    KeySpec {
        name: "trace_retention_days",
        kind: Kind::Int { min: 1, max: 3650 },
        default: || json!(30),
        doc: "stored traces older than this many days are removed (with the process's first stored trace, then every 64th)",
    },
    KeySpec {
        name: "trace_max_stored",
        kind: Kind::Int {
            min: 1,
            max: 10_000_000,
        },
        default: || json!(10_000),
        doc: "the most traces kept in the store; the oldest beyond it are removed (same schedule as trace_retention_days)",
    },
    KeySpec {
        name: "otlp_endpoint",
        kind: Kind::OptText,
        default: || Value::Null,
        doc: "the OpenTelemetry collector trace.export sends to when the call names none (OTLP/HTTP protobuf; http://host:4318 gets /v1/traces)",
    },
    KeySpec {
        name: "otlp_headers",
        kind: Kind::OptText,
        default: || Value::Null,
        doc: "headers for the configured collector (otlp_endpoint only), as name=value pairs separated by commas (the OTEL_EXPORTER_OTLP_HEADERS format); a call's headers win",
    },
    KeySpec {
        name: "otlp_auto_export",
        kind: Kind::Bool,
        default: || json!(false),
        doc: "send every finished turn's trace to otlp_endpoint in the background (failures are logged, never slow a turn)",
    },
    KeySpec {
        name: "otlp_privacy_mode",
        kind: Kind::Choice(&["metadata", "full"]),
        default: || json!("metadata"),
        doc: "what otlp_auto_export sends, and trace.export when the call names no privacyMode: metadata (no message, argument or result text) or full",
    },
    KeySpec {
        name: "otlp_timeout_ms",
        kind: Kind::Int {
            min: 100,
            max: 60_000,
        },
        default: || json!(10_000),
        doc: "how long trace.export waits for the collector before answering status failed",
    },
    KeySpec {
        name: "max_inflight_control_requests",
        kind: Kind::Int {
            min: 16,
            max: 1_000_000,
        },
        default: || json!(1024),
        doc: "control methods (ping, shutdown, cancels, steer, compact) running at once",
    },
    KeySpec {
        name: "plugin_max_output_bytes",
        kind: Kind::Int {
            min: 1024,
            max: 64 * 1024 * 1024,
        },
        default: || json!(1024 * 1024),
        doc: "bytes of a plugin call's stdout (and stderr) kept; more stdout fails the call",
    },
    // Model providers (src/llm).
    KeySpec {
        name: "llm_connect_timeout_ms",
        kind: Kind::Int {
            min: 100,
            max: 300_000,
        },
        default: || json!(10_000),
        doc: "TCP/TLS connect timeout of model provider requests",
    },
    KeySpec {
        name: "llm_idle_timeout_ms",
        kind: Kind::Int {
            min: 1_000,
            max: 3_600_000,
        },
        default: || json!(300_000),
        doc: "a provider stream that sends no byte for this long fails (retryable)",
    },
    KeySpec {
        name: "llm_retry_base_ms",
        kind: Kind::Int {
            min: 1,
            max: 60_000,
        },
        default: || json!(200),
        doc: "first provider retry delay; doubles per attempt, jittered ±20 %",
    },
    KeySpec {
        name: "llm_retry_max_ms",
        kind: Kind::Int {
            min: 1,
            max: 600_000,
        },
        default: || json!(5_000),
        doc: "longest provider retry delay (before jitter)",
    },
    KeySpec {
        name: "llm_max_attempts",
        kind: Kind::Int { min: 1, max: 10 },
        default: || json!(3),
        doc: "provider request attempts in all, the first included",
    },
    KeySpec {
        name: "workspace_root",
        kind: Kind::OptPath,
        default: || Value::Null,
        doc: "workspace of a call that names none (tool.invoke context.cwd, chat cwd); never /",
    },
    KeySpec {
        name: "readable_roots",
        kind: Kind::PathList,
        default: || json!([]),
        doc: "directories file tools may read besides the workspace root (and writable_roots)",
    },
    KeySpec {
        name: "writable_roots",
        kind: Kind::PathList,
        default: || json!([]),
        doc: "directories file tools may write besides the workspace root",
    },
    KeySpec {
        name: "blocked_paths",
        kind: Kind::PathList,
        default: || json!([]),
        doc: "paths file tools refuse and sandboxed commands cannot read, besides the built-in credential list; `~/` and `$OUTRIGGER_HOME` expand",
    },
    KeySpec {
        name: "max_output_chars",
        kind: Kind::Int {
            min: 1000,
            max: MAX_OUTPUT_CHARS_CEILING,
        },
        default: || json!(100_000),
        doc: "characters of a tool's text output kept (head 20 % + tail 80 %)",
    },
    KeySpec {
        name: "max_read_bytes",
        kind: Kind::Int {
            min: 1024,
            max: MAX_READ_BYTES_CEILING,
        },
        default: || json!(10 * 1024 * 1024),
        doc: "largest text file read_file/edit_file load; bigger files are refused",
    },
    KeySpec {
        name: "require_read_before_write",
        kind: Kind::Bool,
        default: || json!(true),
        doc: "refuse overwriting or editing an existing file the session has not read",
    },
    KeySpec {
        name: "max_walk_entries",
        kind: Kind::Int {
            min: 1000,
            max: MAX_WALK_ENTRIES_CEILING,
        },
        default: || json!(500_000),
        doc: "directory entries glob/grep visit per call; the walk stops there and says so",
    },
    // Approvals (agent.chat.stream `approval`).
    KeySpec {
        name: "approval_mode",
        kind: Kind::Choice(&["auto", "host"]),
        default: || json!("auto"),
        doc: "host: local and destructive calls wait for the host's approval.request answer; a managed host pins it",
    },
    KeySpec {
        name: "approval_timeout_ms",
        kind: Kind::Int {
            min: 1,
            max: 86_400_000,
        },
        default: || json!(300_000),
        doc: "how long an approval.request waits for the host before the call is denied",
    },
    // Sandbox launcher and bash.
    KeySpec {
        name: "sandbox_enabled",
        kind: Kind::Bool,
        default: || json!(true),
        doc: "run bash and plugin executables through the sandbox launcher",
    },
    KeySpec {
        name: "sandbox_network",
        kind: Kind::Bool,
        default: || json!(false),
        doc: "let sandboxed commands use the network (enforcement then reads partial)",
    },
    KeySpec {
        name: "sandbox_writable_roots",
        kind: Kind::PathList,
        default: || json!([]),
        doc: "directories sandboxed commands may write besides the workspace and their temp dir",
    },
    KeySpec {
        name: "sandbox_max_processes",
        kind: Kind::Int {
            min: 8,
            max: MAX_PROCESSES_CEILING,
        },
        default: || json!(256),
        doc: "processes (and threads) one bash command or plugin call may have at once, launcher included",
    },
    KeySpec {
        name: "sandbox_warm_idle_ms",
        kind: Kind::Int {
            min: 0,
            max: 3_600_000,
        },
        default: || json!(300_000),
        doc: "how long a pre-started process for the next bash command or plugin call waits before it is let go (it takes the spawn and cgroup cost off the call); 0 starts every command cold",
    },
    KeySpec {
        name: "sandbox_warm_spares",
        kind: Kind::Int {
            min: 0,
            max: MAX_WARM_SPARES,
        },
        default: || json!(2),
        doc: "how many pre-started processes wait for the next bash commands or plugin calls: with two, commands back to back or in pairs never wait for a spare's cgroup move; 0 starts every command cold",
    },
    KeySpec {
        name: "run_code",
        kind: Kind::Bool,
        default: || json!(false),
        doc: "register run_code (a Python program whose tool calls run in one round, in the sandbox); a turn can also ask for it with runCode: true",
    },
    KeySpec {
        name: "run_code_python",
        kind: Kind::OptPath,
        default: || Value::Null,
        doc: "the Python 3 interpreter run_code programs run with (default: python3 on PATH)",
    },
    KeySpec {
        name: "run_code_timeout_ms",
        kind: Kind::Int {
            min: 1000,
            max: 600_000,
        },
        default: || json!(60_000),
        doc: "how long one run_code program may run; past it the program and everything it started are killed",
    },
    KeySpec {
        name: "web_tools",
        kind: Kind::Bool,
        default: || json!(true),
        doc: "register web_fetch (and web_search when a backend is configured); false removes both",
    },
    KeySpec {
        name: "web_fetch_timeout_ms",
        kind: Kind::Web("an integer from 1 to 600000"),
        default: || json!(30_000),
        doc: "web_fetch: the whole fetch, redirects included",
    },
    KeySpec {
        name: "web_fetch_max_bytes",
        kind: Kind::Web("an integer from 1 to 100000000"),
        default: || json!(1_000_000),
        doc: "web_fetch: bytes of a body read; past it reading stops and the result says truncated",
    },
    KeySpec {
        name: "web_fetch_max_redirects",
        kind: Kind::Web("an integer from 0 to 20"),
        default: || json!(5),
        doc: "web_fetch: same-origin redirects followed",
    },
    KeySpec {
        name: "web_search_timeout_ms",
        kind: Kind::Web("an integer from 1 to 600000"),
        default: || json!(30_000),
        doc: "web_search: one search",
    },
    KeySpec {
        name: "web_search_max_results",
        kind: Kind::Web("an integer from 1 to 20"),
        default: || json!(8),
        doc: "web_search: results returned at most (and the default)",
    },
    KeySpec {
        name: "web_session_search_cap",
        kind: Kind::Web("an integer from 0 to 1000000"),
        default: || json!(200),
        doc: "web_search calls per sidecar process; 0 = no cap",
    },
    KeySpec {
        name: "web_session_fetch_cap",
        kind: Kind::Web("an integer from 0 to 1000000"),
        default: || json!(0),
        doc: "web_fetch calls per sidecar process; 0 = no cap",
    },
    KeySpec {
        name: "web_allowed_domains",
        kind: Kind::Web("a list of host names (env: comma-separated, or a JSON list)"),
        default: || json!([]),
        doc: "hosts (each with its subdomains) web_fetch may reach and web_search may return; empty = every public host",
    },
    KeySpec {
        name: "web_blocked_domains",
        kind: Kind::Web("a list of host names (env: comma-separated, or a JSON list)"),
        default: || json!([]),
        doc: "hosts (each with its subdomains) web_fetch refuses and web_search drops; wins over web_allowed_domains",
    },
    KeySpec {
        name: "web_private_hosts",
        kind: Kind::Web("a list of host names, addresses or CIDRs"),
        default: || json!([]),
        doc: "hosts or networks exempt from web_fetch's public-address rule (intranet docs servers)",
    },
    KeySpec {
        name: "web_dns_overrides",
        kind: Kind::Web("an object {\"host\": [\"ip\", …]}"),
        default: || json!({}),
        doc: "answers used instead of DNS for the listed names (still checked); a list of lists is taken in turn, one set per lookup",
    },
    KeySpec {
        name: "web_search_provider",
        kind: Kind::Web("tavily, ddg, host, or null"),
        default: || Value::Null,
        doc: "web_search backend: tavily (needs OUTRIGGER_WEB_SEARCH_API_KEY or TAVILY_API_KEY; the default when a key is set), ddg (DuckDuckGo lite) or host (the host runs it over tool.invoke); unset without a key: no web_search",
    },
    KeySpec {
        name: "web_search_base_url",
        kind: Kind::Web("an http(s) URL, or null"),
        default: || Value::Null,
        doc: "the search backend's base URL (default: Tavily's or DuckDuckGo's)",
    },
    KeySpec {
        name: "provider",
        kind: Kind::OptText,
        default: || Value::Null,
        doc: "`outrigger run` / `acp`: the provider when no --provider is given (default openai_compat)",
    },
    KeySpec {
        name: "model",
        kind: Kind::OptText,
        default: || Value::Null,
        doc: "`outrigger run` / `acp`: the model when no --model is given",
    },
    KeySpec {
        name: "base_url",
        kind: Kind::OptText,
        default: || Value::Null,
        doc: "`outrigger run` / `acp`: the OpenAI-compatible endpoint when no --base-url is given",
    },
    KeySpec {
        name: "mcp_servers",
        kind: Kind::McpServers,
        default: || json!([]),
        doc: "MCP servers whose tools every turn gets: stdio {name?, command, args?, env?, cwd?} or Streamable HTTP {name, url, headers?}; started on first use, kept for the sidecar's life",
    },
    KeySpec {
        name: "mcp_startup_timeout_ms",
        kind: Kind::Int {
            min: 100,
            max: 600_000,
        },
        default: || json!(30_000),
        doc: "how long an MCP server may take to start, answer initialize and list its tools",
    },
    KeySpec {
        name: "mcp_direct_tool_limit",
        kind: Kind::Int {
            min: 0,
            max: 10_000,
        },
        default: || json!(40),
        doc: "more mounted MCP tools than this go to the deferred tier (found through tool_search) instead of the model's tool list",
    },
    KeySpec {
        name: "mcp_max_tools",
        kind: Kind::Int {
            min: 1,
            max: 10_000,
        },
        default: || json!(1000),
        doc: "tools kept per MCP server (the rest are ignored, with a log line)",
    },
    KeySpec {
        name: "bash_timeout_ms",
        kind: Kind::Int {
            min: 1000,
            max: BASH_TIMEOUT_CEILING_MS,
        },
        default: || json!(120_000),
        doc: "bash timeout when a call gives none (capped by bash_max_timeout_ms)",
    },
    KeySpec {
        name: "bash_max_timeout_ms",
        kind: Kind::Int {
            min: 1000,
            max: BASH_TIMEOUT_CEILING_MS,
        },
        default: || json!(600_000),
        doc: "the longest timeoutMs a bash call may ask for; a longer one is clamped to it",
    },
    KeySpec {
        name: "bash_max_output_bytes",
        kind: Kind::Int {
            min: 1024,
            max: 32_768,
        },
        default: || json!(12_288),
        doc: "bytes of bash output returned (start and end kept around an omitted-bytes marker)",
    },
    KeySpec {
        name: "bash_max_sessions",
        kind: Kind::Int { min: 1, max: 64 },
        default: || json!(8),
        doc: "bash_session terminals live at once per chat; starting one more is refused naming the idlest",
    },
    KeySpec {
        name: "bash_session_buffer_bytes",
        kind: Kind::Int {
            min: 16_384,
            max: 16_777_216,
        },
        default: || json!(1_048_576),
        doc: "output a bash_session keeps between calls; past it the oldest bytes are dropped and the next result says how many",
    },
    KeySpec {
        name: "bash_raw_output",
        kind: Kind::Bool,
        default: || json!(false),
        doc: "return bash output as is: no ANSI removal, OSC 8 rewriting or CRLF folding",
    },
    KeySpec {
        name: "bash_env_deny",
        kind: Kind::PathList,
        default: || json!([]),
        doc: "environment variable name patterns (`*` wildcard, any case) removed from the environment of bash and plugin executables, besides the built-in secret patterns",
    },
    KeySpec {
        name: "bash_env_inherit",
        kind: Kind::Choice(crate::sandbox::secrets::EnvInherit::CHOICES),
        default: || json!("all"),
        doc: "which of the sidecar's environment variables bash and plugin executables start from: all, core (PATH, HOME, USER, SHELL, LANG, LC_*, TERM, TMPDIR, TZ) or none",
    },
    KeySpec {
        name: "bash_env_allow",
        kind: Kind::PathList,
        default: || json!([]),
        doc: "environment variable name patterns kept whatever bash_env_inherit, bash_env_deny and the built-in secret patterns say",
    },
];

/// Ceiling of `sandbox_max_processes`.
pub const MAX_PROCESSES_CEILING: i64 = 4096;
/// Ceiling of `sandbox_warm_spares`: each waiting spare is a process (~2 MiB of its own) and a
/// cgroup; more than a few only help hosts that run that many commands at once.
pub const MAX_WARM_SPARES: i64 = 4;
/// Ceiling of `bash_timeout_ms` and `bash_max_timeout_ms` (a day).
pub const BASH_TIMEOUT_CEILING_MS: i64 = 86_400_000;
/// Credential locations always refused by the file tools and hidden from sandboxed commands;
/// `blocked_paths` adds to them.
pub const BUILTIN_BLOCKED_PATHS: &[&str] = &[
    "~/.git-credentials",
    "~/.netrc",
    "~/.docker/config.json",
    "~/.kube/config",
    "~/.config/gh/hosts.yml",
    "~/.ssh",
    "~/.aws",
    "~/.gnupg",
    "~/.npmrc",
    "~/.pypirc",
    "~/.cargo/credentials",
    "~/.cargo/credentials.toml",
    "~/.config/gcloud",
    "~/.azure",
    "~/.mozilla",
    "~/.config/google-chrome",
    "~/.config/chromium",
    "~/.config/BraveSoftware",
    "~/.config/microsoft-edge",
    "~/.password-store",
    "~/.local/share/keyrings",
    "~/.pgpass",
    "~/.vault-token",
    "$OUTRIGGER_HOME/secrets",
    "$OUTRIGGER_HOME/credentials",
];

/// Ceiling of `max_output_chars`.
pub const MAX_OUTPUT_CHARS_CEILING: i64 = 1_000_000;
/// Ceiling of `max_read_bytes` (256 MiB): a text read is held in memory whole.
pub const MAX_READ_BYTES_CEILING: i64 = 256 * 1024 * 1024;
/// Ceiling of `max_walk_entries`: a walk's accepted paths are held in memory to sort them.
pub const MAX_WALK_ENTRIES_CEILING: i64 = 20_000_000;

pub fn spec(name: &str) -> Option<&'static KeySpec> {
    KEYS.iter().find(|k| k.name == name)
}

pub fn names() -> Vec<&'static str> {
    KEYS.iter().map(|k| k.name).collect()
}
