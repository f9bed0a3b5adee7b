//! The ToolMode classifier of `tools.md`: five modes from name prefixes, `external` otherwise.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A tool's mode (its posture): what calling it can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolMode {
    /// Pure inspection.
    Read,
    /// Bounded mutation.
    SafeWrite,
    /// Irreversible.
    Destructive,
    /// Touches the user's machine; needs consent on `tool.invoke`.
    Local,
    /// Calls outside services.
    External,
}

impl ToolMode {
    pub fn parse(s: &str) -> Option<ToolMode> {
        match s {
            "read" => Some(ToolMode::Read),
            "safe_write" => Some(ToolMode::SafeWrite),
            "destructive" => Some(ToolMode::Destructive),
            "local" => Some(ToolMode::Local),
            "external" => Some(ToolMode::External),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ToolMode::Read => "read",
            ToolMode::SafeWrite => "safe_write",
            ToolMode::Destructive => "destructive",
            ToolMode::Local => "local",
            ToolMode::External => "external",
        }
    }
}

const PREFIXES: &[(&str, ToolMode)] = &[
    ("get_", ToolMode::Read),
    ("list_", ToolMode::Read),
    ("read_", ToolMode::Read),
    ("search_", ToolMode::Read),
    ("create_", ToolMode::SafeWrite),
    ("update_", ToolMode::SafeWrite),
    ("add_", ToolMode::SafeWrite),
    ("set_", ToolMode::SafeWrite),
    ("delete_", ToolMode::Destructive),
    ("remove_", ToolMode::Destructive),
    ("archive_", ToolMode::Destructive),
    ("drop_", ToolMode::Destructive),
    ("local_", ToolMode::Local),
    ("shell_", ToolMode::Local),
    ("exec_", ToolMode::Local),
];

/// Infers a mode from a tool name (lowercased first). `web_search` and `web_fetch`, by exact
/// name, are `read`: a future write-flavoured `web_*` tool must not inherit that posture.
pub fn classify(name: &str) -> ToolMode {
    let lower = name.to_ascii_lowercase();
    if lower == "web_search" || lower == "web_fetch" {
        return ToolMode::Read;
    }
    PREFIXES
        .iter()
        .find(|(p, _)| lower.starts_with(p))
        .map_or(ToolMode::External, |(_, m)| *m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifier_table() {
        let cases = [
            ("get_weather", ToolMode::Read),
            ("list_repos", ToolMode::Read),
            ("read_file", ToolMode::Read),
            ("search_issues", ToolMode::Read),
            ("GET_Thing", ToolMode::Read),
            ("create_event", ToolMode::SafeWrite),
            ("update_event", ToolMode::SafeWrite),
            ("add_label", ToolMode::SafeWrite),
            ("set_title", ToolMode::SafeWrite),
            ("delete_event", ToolMode::Destructive),
            ("remove_user", ToolMode::Destructive),
            ("archive_chat", ToolMode::Destructive),
            ("drop_table", ToolMode::Destructive),
            ("local_exec_shell", ToolMode::Local),
            ("shell_run", ToolMode::Local),
            ("exec_command", ToolMode::Local),
            ("web_search", ToolMode::Read),
            ("web_fetch", ToolMode::Read),
            ("web_post", ToolMode::External),
            ("getter", ToolMode::External),
            ("send_email", ToolMode::External),
            ("mcp__github__create_issue", ToolMode::External),
            ("", ToolMode::External),
        ];
        for (name, want) in cases {
            assert_eq!(classify(name), want, "{name}");
        }
    }
}
