//! The harness vocabulary `harness.describe` serves: the dimensions a turn's behaviour is
//! assembled from (reference §3.12), every implementation the reference names, each flagged
//! `implemented` only when this binary really does it. The default is the reference's
//! bundled default restricted to what is implemented.

use serde_json::{Map, Value, json};

use crate::protocol::tools::{
    HarnessAvailable, HarnessChoice, HarnessDefault, HarnessDescription, HarnessImpl,
};
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

/// One implementation of a dimension: its name, what it assumes, and whether this binary
/// really does it.
struct Impl {
    name: &'static str,
    assumes: &'static str,
    implemented: bool,
}

/// The implementations the default assembly uses.
const PRESSURE_COMPACTION: Impl = Impl {
    name: "pressure_compaction",
    assumes: "The transcript can outgrow the window, so when the estimated prompt nears the window (or the provider reports an overflow) old tool results are folded and the middle of the conversation is summarized.",
    implemented: true,
};
const SPILL: Impl = Impl {
    name: "spill",
    assumes: "One oversized tool output is better read on demand, so output past the inline limit is written to a file and the model sees a preview and the file's path.",
    implemented: true,
};
const SIMPLE_RETRY: Impl = Impl {
    name: "simple",
    assumes: "Provider failures are mostly transient, so a retryable error (network, timeout, 408, 409, 429 or 5xx) is retried with capped exponential backoff and jitter, up to max_attempts attempts in all.",
    implemented: true,
};
const NULL_VALIDATOR: Impl = Impl {
    name: "null",
    assumes: "The model's final answer is accepted as given, with no separate check before the turn ends.",
    implemented: true,
};
const FULL_TOOLS: Impl = Impl {
    name: "full",
    assumes: "The model can handle every direct-tier tool in one list, and it finds deferred tools with tool_search.",
    implemented: true,
};
const STATELESS: Impl = Impl {
    name: "stateless",
    assumes: "Nothing carries over between sessions except the durable record the host resumes.",
    implemented: true,
};
const SINGLE: Impl = Impl {
    name: "single",
    assumes: "One agent loop handles the whole turn without spawning sub-agents.",
    implemented: true,
};

/// Reference §3.12's `context` implementations. Pressure compaction (with overflow
/// recovery) and spill live in `agent::compaction`; nothing can switch them off, and there
/// is no separate aging of observations.
const CONTEXT: &[Impl] = &[
    Impl {
        name: "null",
        assumes: "The whole turn fits in the model's window, so the transcript is never folded, summarized or spilled.",
        implemented: false,
    },
    PRESSURE_COMPACTION,
    Impl {
        name: "observation_aging",
        assumes: "Old tool observations lose value as a turn goes on, so they are shortened by age every round whatever the context pressure.",
        implemented: false,
    },
    SPILL,
];

/// `retry`: only the simple backoff policy of `llm::retry` exists.
const RETRY: &[Impl] = &[
    Impl {
        name: "none",
        assumes: "Provider request errors are final, so a failed request ends the turn without another attempt.",
        implemented: false,
    },
    SIMPLE_RETRY,
    Impl {
        name: "informed_backtrack",
        assumes: "A failed request says something about what went wrong, so the loop steps back to the last good state and tries again with the failure's cause in view instead of repeating the same request.",
        implemented: false,
    },
];

/// `validator`: no validator exists, so `null` is what the binary does.
const VALIDATOR: &[Impl] = &[
    NULL_VALIDATOR,
    Impl {
        name: "self_critique",
        assumes: "The model catches its own mistakes when asked, so a critique pass reviews the answer before the turn ends and can send it back for another round.",
        implemented: false,
    },
];

/// `tools`: all three are [`ToolsStrategy`] values (`toolsStrategy` on a chat request).
const TOOLS: &[Impl] = &[
    FULL_TOOLS,
    Impl {
        name: "minimal",
        assumes: "A small model or a tight context does best with only bash, read_file, write_file and edit_file on offer.",
        implemented: true,
    },
    Impl {
        name: "progressive",
        assumes: "A large tool inventory is best discovered on demand, so only the direct tier plus tool_search is offered up front.",
        implemented: true,
    },
];

const MEMORY: &[Impl] = &[
    STATELESS,
    Impl {
        name: "filesystem",
        assumes: "Notes the agent writes to files in the workspace are worth reading back in later sessions.",
        implemented: false,
    },
];

const SUBAGENT: Impl = Impl {
    name: "subagent",
    assumes: "Parts of a task can be delegated to child agent loops that work in their own context and report back.",
    implemented: true,
};

/// `orchestration`: `delegate_subagent` is on by default (`subagent: false` turns it off).
const ORCHESTRATION: &[Impl] = &[SINGLE, SUBAGENT];

/// Every dimension, in reference order, with its implementations.
#[cfg(test)]
const DIMENSIONS: &[(&str, &[Impl])] = &[
    ("context", CONTEXT),
    ("retry", RETRY),
    ("validator", VALIDATOR),
    ("tools", TOOLS),
    ("memory", MEMORY),
    ("orchestration", ORCHESTRATION),
];

fn available(list: &[Impl]) -> Vec<HarnessImpl> {
    list.iter()
        .map(|i| HarnessImpl {
            name: i.name.to_string(),
            assumes: i.assumes.to_string(),
            implemented: i.implemented,
        })
        .collect()
}

/// A default entry `{impl, params, assumes}` (a test guards that every default is an
/// implemented row of its dimension).
fn chosen(i: &Impl, params: Map<String, Value>) -> HarnessChoice {
    HarnessChoice {
        name: i.name.to_string(),
        params,
        assumes: i.assumes.to_string(),
    }
}

/// The `harness.describe` reply: every implementation reference §3.12 names, flagged by
/// whether this binary does it, and the reference's bundled default restricted to what is
/// implemented (its `informed_backtrack` retry is left out).
pub fn describe() -> HarnessDescription {
    let max_attempts = crate::llm::RetryPolicy::default().max_attempts;
    let mut retry_params = Map::new();
    retry_params.insert("max_attempts".into(), json!(max_attempts));
    HarnessDescription {
        default: HarnessDefault {
            context: vec![
                chosen(&PRESSURE_COMPACTION, Map::new()),
                chosen(&SPILL, Map::new()),
            ],
            retry: vec![chosen(&SIMPLE_RETRY, retry_params)],
            validator: vec![chosen(&NULL_VALIDATOR, Map::new())],
            tools: chosen(&FULL_TOOLS, Map::new()),
            memory: chosen(&STATELESS, Map::new()),
            orchestration: chosen(&SUBAGENT, Map::new()),
        },
        available: HarnessAvailable {
            context: available(CONTEXT),
            retry: available(RETRY),
            validator: available(VALIDATOR),
            tools: available(TOOLS),
            memory: available(MEMORY),
            orchestration: available(ORCHESTRATION),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::router::Registration;
    use crate::tools::{Exposure, Tool, ToolContext, ToolFuture, ToolResult};

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
    fn tools_flags_follow_the_strategies() {
        for t in TOOLS {
            assert_eq!(
                ToolsStrategy::parse(t.name).is_some(),
                t.implemented,
                "{}",
                t.name
            );
        }
    }

    #[test]
    fn default_is_the_bundled_default_restricted_to_what_is_implemented() {
        let d = serde_json::to_value(describe()).unwrap();
        let def = &d["default"];
        let names = |dim: &str| -> Vec<String> {
            def[dim]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["impl"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(names("context"), ["pressure_compaction", "spill"]);
        assert_eq!(names("retry"), ["simple"]);
        assert_eq!(names("validator"), ["null"]);
        assert_eq!(def["retry"][0]["params"], json!({"max_attempts": 3}));
        assert_eq!(def["tools"]["impl"], "full");
        assert_eq!(def["memory"]["impl"], "stateless");
        assert_eq!(def["orchestration"]["impl"], "subagent");
        // The advertised attempt count is what the loop runs with by default.
        let key = crate::config::keys::spec("llm_max_attempts").unwrap();
        assert_eq!((key.default)(), def["retry"][0]["params"]["max_attempts"]);
        // Every default entry is an implemented row, with params and its assumes sentence.
        for (dim, list) in DIMENSIONS {
            let entries = match &def[*dim] {
                Value::Array(a) => a.clone(),
                one => vec![one.clone()],
            };
            for e in entries {
                let row = list.iter().find(|i| i.name == e["impl"]).unwrap();
                assert!(row.implemented, "{dim}.{}", row.name);
                assert_eq!(e["assumes"], row.assumes);
                assert!(e["params"].is_object(), "{e}");
            }
            // `available` lists the dimension's table, in order.
            let listed: Vec<&str> = d["available"][*dim]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["impl"].as_str().unwrap())
                .collect();
            let table: Vec<&str> = list.iter().map(|i| i.name).collect();
            assert_eq!(listed, table, "{dim}");
        }
        assert_eq!(d["available"].as_object().unwrap().len(), DIMENSIONS.len());
    }
}
