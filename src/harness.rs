//! The harness vocabulary `harness.describe` serves: the dimensions a turn's behaviour is
//! assembled from, listing only the implementations this binary actually has. It grows as
//! features land; nothing here is advertised before it exists.

use serde_json::{Value, json};

use crate::tools::router::{Entry, Router};
use crate::tools::tool_search::ToolSearch;
use std::sync::Arc;

/// How the model's tool list is chosen from the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolsStrategy {
    /// The direct tier (plus `tool_search` when a deferred tool exists).
    Full,
    /// Only the core file and shell tools.
    Minimal,
    /// The direct tier plus `tool_search`, always: the rest is discovered on demand.
    Progressive,
}

/// `minimal`'s allow-list.
pub const MINIMAL_TOOLS: &[&str] = &["bash", "read_file", "write_file", "edit_file"];

impl ToolsStrategy {
    pub fn parse(s: &str) -> Option<ToolsStrategy> {
        match s {
            "full" => Some(ToolsStrategy::Full),
            "minimal" => Some(ToolsStrategy::Minimal),
            "progressive" => Some(ToolsStrategy::Progressive),
            _ => None,
        }
    }

    /// The tools a model is offered under this strategy.
    pub fn select(self, router: &Router) -> Vec<Arc<Entry>> {
        match self {
            ToolsStrategy::Full => router.describe_model(),
            ToolsStrategy::Minimal => router
                .describe()
                .into_iter()
                .filter(|e| MINIMAL_TOOLS.contains(&e.name.as_str()))
                .collect(),
            ToolsStrategy::Progressive => {
                let mut offered: Vec<Arc<Entry>> = router
                    .describe_model()
                    .into_iter()
                    .filter(|e| e.name != ToolSearch::NAME)
                    .collect();
                offered.extend(router.get(ToolSearch::NAME));
                offered
            }
        }
    }
}

struct Impl {
    name: &'static str,
    assumes: &'static str,
}

const TOOLS: &[Impl] = &[
    Impl {
        name: "full",
        assumes: "the model can handle every direct-tier tool in one list; deferred tools are found with tool_search",
    },
    Impl {
        name: "minimal",
        assumes: "a small model or a tight context: only bash, read_file, write_file and edit_file are offered",
    },
    Impl {
        name: "progressive",
        assumes: "a large inventory: the direct tier plus tool_search is offered and the rest is discovered on demand",
    },
];

const MEMORY: &[Impl] = &[Impl {
    name: "stateless",
    assumes: "nothing is carried between sessions beyond the durable record the host resumes",
}];

const ORCHESTRATION: &[Impl] = &[Impl {
    name: "single",
    assumes: "one agent loop per turn; no sub-agents",
}];

fn available(list: &[Impl]) -> Value {
    Value::Array(
        list.iter()
            .map(|i| json!({"impl": i.name, "assumes": i.assumes}))
            .collect(),
    )
}

fn default_of(list: &[Impl], name: &str) -> Value {
    list.iter().find(|i| i.name == name).map_or(
        Value::Null,
        |i| json!({"impl": i.name, "params": {}, "assumes": i.assumes}),
    )
}

/// The `harness.describe` reply.
pub fn describe() -> Value {
    json!({
        "default": {
            "context": [],
            "retry": [],
            "validator": [],
            "tools": default_of(TOOLS, "full"),
            "memory": default_of(MEMORY, "stateless"),
            "orchestration": default_of(ORCHESTRATION, "single"),
        },
        "available": {
            "context": [],
            "retry": [],
            "validator": [],
            "tools": available(TOOLS),
            "memory": available(MEMORY),
            "orchestration": available(ORCHESTRATION),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::router::Registration;
    use crate::tools::{Exposure, Tool, ToolContext, ToolFuture, ToolResult};
    use serde_json::Map;

    struct T(&'static str, Exposure);
    impl Tool for T {
        fn name(&self) -> &str {
            self.0
        }
        fn description(&self) -> &str {
            "t"
        }
        fn parameters(&self) -> Value {
            json!({"type": "object"})
        }
        fn exposure(&self) -> Exposure {
            self.1
        }
        fn call(self: Arc<Self>, _c: ToolContext, _a: Map<String, Value>) -> ToolFuture {
            Box::pin(async { ToolResult::ok(Map::new()) })
        }
    }

    fn names(v: Vec<Arc<Entry>>) -> Vec<String> {
        v.iter().map(|e| e.name.clone()).collect()
    }

    #[test]
    fn strategies_select_from_the_registry() {
        let r = Router::new();
        for (n, e) in [
            ("bash", Exposure::Direct),
            ("get_x", Exposure::Direct),
            ("read_file", Exposure::Direct),
        ] {
            r.register(Registration::new(Arc::new(T(n, e)))).unwrap();
        }
        assert_eq!(
            names(ToolsStrategy::Full.select(&r)),
            vec!["bash", "get_x", "read_file"]
        );
        assert_eq!(
            names(ToolsStrategy::Minimal.select(&r)),
            vec!["bash", "read_file"]
        );
        assert_eq!(
            names(ToolsStrategy::Progressive.select(&r)),
            vec!["bash", "get_x", "read_file", "tool_search"]
        );
        r.register(Registration::new(Arc::new(T("get_y", Exposure::Deferred))))
            .unwrap();
        assert_eq!(
            names(ToolsStrategy::Full.select(&r)),
            vec!["bash", "get_x", "read_file", "tool_search"]
        );
    }

    #[test]
    fn describe_lists_only_what_exists() {
        let d = describe();
        assert_eq!(d["default"]["tools"]["impl"], "full");
        let tools: Vec<&str> = d["available"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["impl"].as_str().unwrap())
            .collect();
        assert_eq!(tools, vec!["full", "minimal", "progressive"]);
        assert_eq!(d["available"]["context"], json!([]));
    }
}
