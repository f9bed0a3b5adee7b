//! The tool, plugin, skill, harness, sandbox and workspace methods: `tool.list`,
//! `tool.invoke` (params; its result is `ToolResult`), `plugin.tools.describe`, `plugin.*`,
//! `skills.list`, `harness.describe`, `sandbox.describe`, `workspace.apply_edits`. The
//! handlers in `rpc/methods/` decode these params and build these results; module rows
//! (router entries, plugin rows, skill rows, edit outcomes) are converted into them there.

use std::path::PathBuf;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use crate::sandbox::ExecSandboxRequest;

/// A tool's mode and tier are the tool runtime's own types (one definition for the router
/// and the wire).
pub use crate::tools::{Exposure as ToolExposure, ToolMode};

/// Always `function` (the OpenAI tool descriptor's `type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ToolDescriptorKind {
    Function,
}

/// The `function` member of a tool descriptor.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ToolFunctionSpec<'a> {
    pub name: &'a str,
    pub description: &'a str,
    /// The tool's arguments as a JSON Schema (an object schema).
    pub parameters: &'a crate::tools::Schema,
}

// Borrowed from the router's entry: a 10,000-tool list is written without copying each row.
/// One `tool.list` row: the OpenAI function descriptor plus mode and exposure.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ToolDescriptor<'a> {
    #[serde(rename = "type")]
    pub kind: ToolDescriptorKind,
    pub function: ToolFunctionSpec<'a>,
    pub mode: ToolMode,
    pub exposure: ToolExposure,
}

impl<'a> ToolDescriptor<'a> {
    pub fn of(e: &'a crate::tools::router::Entry) -> ToolDescriptor<'a> {
        ToolDescriptor {
            kind: ToolDescriptorKind::Function,
            function: ToolFunctionSpec {
                name: &e.name,
                description: &e.description,
                parameters: &e.parameters,
            },
            mode: e.mode,
            exposure: e.exposure,
        }
    }
}

// Holds the router's shared entries; each row is serialised from its entry as it is written.
/// `tool.list` result: every registered tool whatever its tier, sorted by name.
#[derive(JsonSchema)]
#[schemars(transparent)]
pub struct ToolList(
    #[schemars(with = "Vec<ToolDescriptor<'static>>")] pub Vec<Arc<crate::tools::router::Entry>>,
);

impl Serialize for ToolList {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|e| ToolDescriptor::of(e)))
    }
}

// Written by hand: serde spent most of a 10,000-tool list's time escaping the same seven keys
// per row (`tool.list`'s profile: `format_escaped_str` and the map's entries ~45 %).
impl super::JsonText for ToolList {
    fn write_json(&self, out: &mut Vec<u8>) {
        let rows: usize = self
            .0
            .iter()
            .map(|e| e.name.len() + e.description.len() + e.parameters.text().len() + 120)
            .sum();
        out.reserve(rows + 2);
        out.push(b'[');
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(br#"{"type":"function","function":{"name":"#);
            super::write_json_str(out, &e.name);
            out.extend_from_slice(br#","description":"#);
            super::write_json_str(out, &e.description);
            out.extend_from_slice(br#","parameters":"#);
            out.extend_from_slice(e.parameters.text().as_bytes());
            out.extend_from_slice(br#"},"mode":""#);
            out.extend_from_slice(e.mode.as_str().as_bytes());
            out.extend_from_slice(br#"","exposure":""#);
            out.extend_from_slice(e.exposure.as_str().as_bytes());
            out.extend_from_slice(br#""}"#);
        }
        out.push(b']');
    }
}

/// The context of one `tool.invoke` call. Open on purpose: hosts put their own keys
/// (`chatId`, …) in it, as they do in a turn's `toolContext`; they are accepted and unused.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolInvokeContext {
    /// The absolute workspace directory the tool runs in (never `/`). Default: config
    /// `workspace_root`, else the process's cwd unless that is `/` or `$HOME` (then refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The sandbox posture for the commands this call runs (see `bash` in docs/protocol.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec_sandbox: Option<ExecSandboxRequest>,
    /// Any other key (`chatId`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `tool.invoke` params: run one tool by name (deferred and hidden tools too).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolInvokeParams {
    /// A registered tool name.
    pub name: String,
    /// The tool's arguments: an object, validated against the tool's schema (`null` or
    /// absent reads as `{}`; anything else is a `success: false` result).
    #[serde(default)]
    pub arguments: Value,
    /// The call id the tool sees (default: `call_<n>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Required (`true`) for a tool whose mode is `local`; without it the call is refused
    /// with -32002.
    #[serde(default)]
    pub consent_granted: bool,
    #[serde(default)]
    pub context: ToolInvokeContext,
}

/// One `plugin.tools.describe` row: everything the router knows about a registered tool.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegisteredTool {
    pub name: String,
    pub description: String,
    /// The tool's arguments as a JSON Schema.
    pub schema: crate::tools::Schema,
    pub mode: ToolMode,
    pub exposure: ToolExposure,
    /// Whether `tool.invoke` needs `consentGranted: true`.
    pub require_consent: bool,
    /// Whether the loop may run it beside other calls of the same round.
    pub concurrency_safe: bool,
    /// The plugin that registered it; `null` for built-ins (always present).
    pub plugin: Option<String>,
}

/// `plugin.tools.describe` result: every registered tool, sorted by name.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PluginToolsDescribeResult {
    pub tools: Vec<RegisteredTool>,
}

/// A loaded plugin (`plugin.list`, `plugin.enable`, …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PluginInfo {
    pub name: String,
    /// The manifest file's path.
    pub origin: String,
    /// The tool names the manifest declares.
    pub tools: Vec<String>,
    /// Whether its tools are registered now.
    pub enabled: bool,
    pub reloadable: bool,
}

/// `plugin.list` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PluginListResult {
    pub plugins: Vec<PluginInfo>,
}

/// `plugin.enable` / `plugin.disable` / `plugin.reload` params.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PluginNameParams {
    /// A loaded plugin's name (`plugin.list`).
    pub name: String,
}

/// `plugin.enable` / `plugin.disable` / `plugin.reload` result: the plugin afterwards.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PluginResult {
    pub plugin: PluginInfo,
}

/// `skills.list` params.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkillsListParams {
    /// Directories holding skill folders (each with a `SKILL.md`): 1 to 32, each must exist.
    /// Later roots override earlier ones by skill name.
    pub roots: Vec<PathBuf>,
    /// The request's conditions, matched against each skill's `conditions`.
    #[serde(default)]
    pub conditions: Vec<String>,
    /// Skill names to leave out.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// List every skill whatever its conditions.
    #[serde(default)]
    pub ignore_conditions: bool,
}

/// How a skill's `conditions` are matched against the request's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SkillMatch {
    /// One of them is enough.
    Any,
    /// All of them are needed.
    All,
}

/// Whether a skill is injected up front or only listed in the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SkillLayer {
    /// Declared so, or priority ≥ 850.
    Eager,
    Catalog,
}

/// One `skills.list` row.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkillInfo {
    pub name: String,
    /// `name` when the front-matter has none.
    pub display_name: String,
    pub description: String,
    /// Default 500; rows are ordered by priority, highest first, then by name.
    pub priority: i64,
    pub tags: Vec<String>,
    pub conditions: Vec<String>,
    #[serde(rename = "match")]
    pub match_mode: SkillMatch,
    pub layer: SkillLayer,
    pub model_invocable: bool,
    /// The body after the front-matter, with `{scripts}` replaced by the skill's `scripts`
    /// directory.
    pub content: String,
    /// The skill's directory name within its root.
    pub dir_name: String,
    /// The absolute root the skill came from.
    pub skills_dir: String,
}

/// `skills.list` result: the selected skills plus one line per skill that was skipped or
/// is suspicious.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SkillsListResult {
    pub skills: Vec<SkillInfo>,
    pub warnings: Vec<String>,
}

/// One implementation of a harness dimension.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HarnessImpl {
    #[serde(rename = "impl")]
    pub name: String,
    /// One sentence: what the implementation assumes.
    pub assumes: String,
    /// True only for what this binary really does.
    pub implemented: bool,
}

/// One implementation chosen in the default assembly.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HarnessChoice {
    #[serde(rename = "impl")]
    pub name: String,
    /// The implementation's parameters (`{}` when it has none).
    pub params: Map<String, Value>,
    pub assumes: String,
}

/// The default assembly, restricted to what is implemented. `context`, `retry` and
/// `validator` produce hooks (lists); the others have one implementation each.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HarnessDefault {
    pub context: Vec<HarnessChoice>,
    pub retry: Vec<HarnessChoice>,
    pub validator: Vec<HarnessChoice>,
    pub tools: HarnessChoice,
    pub memory: HarnessChoice,
    pub orchestration: HarnessChoice,
}

/// Every implementation of every dimension.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HarnessAvailable {
    pub context: Vec<HarnessImpl>,
    pub retry: Vec<HarnessImpl>,
    pub validator: Vec<HarnessImpl>,
    pub tools: Vec<HarnessImpl>,
    pub memory: Vec<HarnessImpl>,
    pub orchestration: Vec<HarnessImpl>,
}

/// `harness.describe` result: the vocabulary a turn's behaviour is assembled from.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HarnessDescription {
    pub default: HarnessDefault,
    pub available: HarnessAvailable,
}

/// `sandbox.describe` params: the egress to assess.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SandboxDescribeParams {
    /// Default: the config's `sandbox_network`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<bool>,
    /// Reported only: hosts are not enforced one by one, so any network is `partial`.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Accepted and ignored (the Linux backend does not depend on the shell).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<Value>,
    /// Accepted and ignored: enforcement depends on egress alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writable_roots: Option<Value>,
}

/// `sandbox.describe` result: the `data._sandbox` marker a command run now with that egress
/// would carry, and what keeps it from `full`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SandboxDescription {
    /// `landlock` or `none`.
    pub backend: String,
    /// `full`, `partial` or `none`.
    pub enforcement: String,
    /// Empty when `enforcement` is `full`.
    pub missing: Vec<String>,
    /// How `sandbox_max_processes` is enforced for each command.
    #[serde(rename = "processLimit")]
    pub process_limit: ProcessLimitDescription,
}

/// `sandbox.describe` `processLimit`: how a command's process count is bounded.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessLimitDescription {
    /// `cgroup_v2` or `cgroup_v1` (a per-command pids cgroup, `pids.max`), `rlimit`
    /// (`RLIMIT_NPROC` in the command's user namespace) or `none`.
    pub mechanism: String,
    /// `sandbox_max_processes`: processes and threads at once, the launcher's included.
    pub max: u32,
}

/// One replacement of `workspace.apply_edits`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TextEdit {
    /// Text to find: non-empty, matching exactly one place (or every exact occurrence under
    /// `replaceAll`).
    pub old_text: String,
    /// Replacement text, inserted verbatim.
    pub new_text: String,
}

/// `workspace.apply_edits` params: the edit algorithm of `edit_file` over a string.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApplyEditsParams {
    pub content: String,
    pub edits: Vec<TextEdit>,
    /// The diff's label (`a/<path>`, `b/<path>`); default `file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_path: Option<String>,
    #[serde(default)]
    pub replace_all: bool,
}

/// The level at which an edit was located.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EditMatchLevel {
    /// An exact substring.
    Exact,
    /// Line by line, each line's surrounding whitespace ignored.
    Trim,
    /// With typographic quotes, dashes, `…`, `·` and NBSP folded to ASCII.
    Unicode,
}

/// Where one replacement landed.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EditMatch {
    pub level: EditMatchLevel,
    /// 0-based line index of the match start.
    pub start_line: usize,
    pub old_line_count: usize,
}

/// `workspace.apply_edits` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplyEditsResult {
    /// The content after every edit.
    pub content: String,
    /// Unified diff, 3 context lines.
    pub diff: String,
    /// Number of edits applied (each counts once, even under `replaceAll`).
    pub applied: usize,
    /// In file order.
    pub matches: Vec<EditMatch>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skills_params_require_roots_and_reject_unknown_fields() {
        let err = serde_json::from_str::<SkillsListParams>(r#"{"conditions":[]}"#).unwrap_err();
        assert!(err.to_string().contains("roots"), "{err}");
        let err =
            serde_json::from_str::<SkillsListParams>(r#"{"roots":[],"mode":"x"}"#).unwrap_err();
        assert!(err.to_string().contains("mode"), "{err}");
        let q: SkillsListParams = serde_json::from_str(
            r#"{"roots":["/a","b"],"conditions":["tool:x"],"exclude":["e"],"ignoreConditions":true}"#,
        )
        .unwrap();
        assert_eq!(q.roots, [PathBuf::from("/a"), PathBuf::from("b")]);
        assert_eq!(q.conditions, ["tool:x"]);
        assert_eq!(q.exclude, ["e"]);
        assert!(q.ignore_conditions);
    }

    struct Named(String);

    impl crate::tools::Tool for Named {
        fn name(&self) -> &str {
            &self.0
        }
        fn description(&self) -> &str {
            "unused: each registration names its own"
        }
        fn parameters(&self) -> Value {
            serde_json::json!({"type": "object", "properties": {"q": {"type": "string", "description": "a \"quoted\" \u{2028} word"}}})
        }
        fn call(
            self: Arc<Self>,
            _: crate::tools::ToolContext,
            _: Map<String, Value>,
        ) -> crate::tools::ToolFuture {
            Box::pin(async { crate::tools::ToolResult::ok(Map::new()) })
        }
    }

    /// The hand-written `tool.list` text is byte for byte what serde writes, whatever the
    /// names, descriptions, modes and tiers.
    #[test]
    fn tool_list_text_is_what_serde_writes() {
        use crate::protocol::JsonText;
        use crate::tools::router::{Registration, Router};
        let router = Router::new();
        let descriptions = [
            "",
            "plain words",
            "quote \" and backslash \\ and tab \t and nul \u{0}",
            "line\nbreak, U+2028 \u{2028}, DEL \u{7f}, é and 🦀",
        ];
        let modes = [
            ToolMode::Read,
            ToolMode::SafeWrite,
            ToolMode::Destructive,
            ToolMode::Local,
            ToolMode::External,
        ];
        let tiers = [
            ToolExposure::Direct,
            ToolExposure::Deferred,
            ToolExposure::Hidden,
        ];
        for i in 0..24 {
            let mut reg = Registration::new(Arc::new(Named(format!("tool_{i:02}"))));
            reg.description = Some(descriptions[i % descriptions.len()].to_string());
            reg.mode = Some(modes[i % modes.len()]);
            reg.exposure = Some(tiers[i % tiers.len()]);
            router.register(reg).unwrap();
        }
        for list in [ToolList(Vec::new()), ToolList(router.describe())] {
            let mut text = Vec::new();
            list.write_json(&mut text);
            assert_eq!(
                String::from_utf8(text).unwrap(),
                serde_json::to_string(&list).unwrap()
            );
        }
    }

    proptest::proptest! {
        /// Any string is escaped exactly as serde_json escapes it.
        #[test]
        fn json_strings_are_escaped_as_serde_does(s in "\\PC*|[\\x00-\\x7f]*") {
            let mut text = b"x".to_vec();
            crate::protocol::write_json_str(&mut text, &s);
            let want = serde_json::to_string(&s).unwrap();
            proptest::prop_assert_eq!(&text[1..], want.as_bytes());
        }
    }

    #[test]
    fn invoke_context_keeps_host_keys() {
        let p: ToolInvokeParams = serde_json::from_value(serde_json::json!({
            "name": "t",
            "context": {"cwd": "/w", "chatId": "c1", "execSandbox": {"network": false}}
        }))
        .unwrap();
        assert_eq!(p.context.cwd, Some(PathBuf::from("/w")));
        assert_eq!(p.context.extra["chatId"], "c1");
        assert_eq!(p.context.exec_sandbox.and_then(|s| s.network), Some(false));
        assert!(p.arguments.is_null());
        let bad = serde_json::json!({"name": "t", "context": {"execSandbox": {"netwrk": true}}});
        assert!(serde_json::from_value::<ToolInvokeParams>(bad).is_err());
    }
}

/// `mcp.list` params.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpListParams {
    /// Start the configured servers that have not started yet before listing (they
    /// otherwise start with the first turn).
    #[serde(default)]
    pub start: bool,
}

/// A configured MCP server (`mcp_servers`) as `mcp.list` reports it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerInfo {
    pub name: String,
    /// `stdio` or `http` (Streamable HTTP).
    pub transport: String,
    /// The command (stdio) or the URL (http).
    pub target: String,
    /// `idle` (not started yet), `starting`, `running`, `failed` or `closed`.
    pub state: String,
    /// Restarts after crashes so far (at most one).
    pub restarts: u32,
    /// Why it failed, or how it last crashed.
    pub error: Option<String>,
    /// Its tools as registered (empty unless running).
    pub tools: Vec<McpToolInfo>,
}

/// One tool of a configured MCP server.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct McpToolInfo {
    /// Our name, `mcp__<server>__<tool>`.
    pub name: String,
    pub description: String,
    pub mode: crate::tools::ToolMode,
    pub exposure: crate::tools::Exposure,
}

/// `mcp.list` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct McpListResult {
    pub servers: Vec<McpServerInfo>,
}
