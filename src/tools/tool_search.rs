//! `tool_search`: the deferred tier's discovery tool. BM25 over the deferred inventory
//! (`search.rs`), or an exact load by name; matches carry full schemas so they are callable
//! the next round.

use std::sync::{Arc, Weak};

use serde_json::{Map, Value, json};

use super::router::Router;
use super::search::{MAX_RESULTS_CEILING, clamp_max_results};
use super::{Exposure, Tool, ToolContext, ToolFuture, ToolMode, ToolResult};

/// Most names one `names` load may ask for.
const MAX_NAMES: usize = MAX_RESULTS_CEILING;

pub struct ToolSearch {
    router: Weak<Router>,
}

impl ToolSearch {
    pub const NAME: &'static str = "tool_search";

    pub fn new(router: Weak<Router>) -> ToolSearch {
        ToolSearch { router }
    }
}

fn row(router: &Router, name: &str, score: Option<f64>) -> Option<Value> {
    let e = router.get(name)?;
    let mut m = Map::new();
    m.insert("name".into(), json!(e.name));
    m.insert("description".into(), json!(e.description));
    m.insert("parameters".into(), e.parameters.value());
    if let Some(s) = score {
        m.insert("score".into(), json!(s));
    }
    Some(Value::Object(m))
}

fn search(router: &Router, args: &Map<String, Value>) -> ToolResult {
    let deferred = router.deferred_index();
    let deferred_count = deferred.names.len();
    if let Some(names) = args.get("names").and_then(Value::as_array) {
        if names.is_empty() || names.len() > MAX_NAMES {
            return ToolResult::recoverable(format!("names must list 1 to {MAX_NAMES} tool names"));
        }
        let mut matches = Vec::new();
        for n in names {
            let name = n.as_str().unwrap_or_default();
            let visible = router
                .get(name)
                .is_some_and(|e| e.exposure != Exposure::Hidden);
            match row(router, name, None).filter(|_| visible) {
                Some(r) => matches.push(r),
                None => {
                    return ToolResult::recoverable(format!(
                        "Unknown tool name '{name}' in names; search with query instead to find it"
                    ));
                }
            }
        }
        let note = "Loaded the named tools; call them by name.";
        return ToolResult::ok(Map::new())
            .with_data("matches", Value::Array(matches))
            .with_data("deferredCount", deferred_count)
            .with_data("note", note);
    }
    let Some(query) = args.get("query").and_then(Value::as_str) else {
        return ToolResult::recoverable(
            "tool_search needs either query (words describing the tool you need) or names (exact tool names to load)",
        );
    };
    let limit = clamp_max_results(args.get("max_results").and_then(Value::as_i64));
    let matches: Vec<Value> = deferred
        .index
        .search(query, limit)
        .iter()
        .filter_map(|h| row(router, h.name, Some(h.score)))
        .collect();
    let note = if matches.is_empty() {
        "No deferred tools matched; try different search terms.".to_string()
    } else {
        format!(
            "{} of {deferred_count} deferred tools matched; call them by name.",
            matches.len()
        )
    };
    ToolResult::ok(Map::new())
        .with_data("matches", Value::Array(matches))
        .with_data("deferredCount", deferred_count)
        .with_data("note", note)
}

impl Tool for ToolSearch {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn description(&self) -> &str {
        "Search for additional tools not in the initial tool list. Pass query (a few words \
         describing what you need) to rank the available deferred tools, or names (exact \
         tool names) to load them. Matches come back with their full parameter schemas and \
         can be called by name right away."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words describing the tool you need."},
                "names": {"type": "array", "items": {"type": "string"}, "description": "Exact tool names to load."},
                "max_results": {"type": "integer", "description": "How many matches to return (default 8, at most 20)."}
            },
            "additionalProperties": false
        })
    }

    fn mode(&self) -> ToolMode {
        ToolMode::Read
    }

    fn call(self: Arc<Self>, _ctx: ToolContext, args: Map<String, Value>) -> ToolFuture {
        Box::pin(async move {
            match self.router.upgrade() {
                Some(router) => search(&router, &args),
                None => ToolResult::recoverable("the tool registry is gone"),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::router::Registration;

    struct Stub(String, String, Exposure);

    impl Tool for Stub {
        fn name(&self) -> &str {
            &self.0
        }
        fn description(&self) -> &str {
            &self.1
        }
        fn parameters(&self) -> Value {
            json!({"type": "object"})
        }
        fn exposure(&self) -> Exposure {
            self.2
        }
        fn call(self: Arc<Self>, _ctx: ToolContext, _a: Map<String, Value>) -> ToolFuture {
            Box::pin(async { ToolResult::ok(Map::new()) })
        }
    }

    fn router(tools: &[(&str, &str, Exposure)]) -> Arc<Router> {
        let r = Router::new();
        for (n, d, e) in tools {
            r.register(Registration::new(Arc::new(Stub(
                n.to_string(),
                d.to_string(),
                *e,
            ))))
            .unwrap();
        }
        r
    }

    async fn run(r: &Router, args: Value) -> ToolResult {
        r.dispatch("tool_search", args, ToolContext::new(std::env::temp_dir()))
            .await
    }

    fn names(res: &ToolResult) -> Vec<String> {
        res.data.as_ref().unwrap()["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap().to_string())
            .collect()
    }

    #[tokio::test]
    async fn ranks_deferred_only() {
        let r = router(&[
            ("create_issue", "Create an issue", Exposure::Deferred),
            (
                "createGitLabIssue",
                "Open a GitLab ticket",
                Exposure::Deferred,
            ),
            ("issue_direct", "Issue things", Exposure::Direct),
            ("issue_hidden", "Issue things", Exposure::Hidden),
        ]);
        let res = run(&r, json!({"query": "issue"})).await;
        assert!(res.success);
        assert_eq!(names(&res), vec!["create_issue", "createGitLabIssue"]);
        let data = res.data.unwrap();
        assert_eq!(data["deferredCount"], 2);
        assert!(data["matches"][0]["score"].as_f64().unwrap() > 0.0);
        assert!(data["matches"][0]["parameters"].is_object());
    }

    #[tokio::test]
    async fn off_vocabulary_is_empty_and_ceiling_holds() {
        let tools: Vec<(String, String)> = (0..25)
            .map(|i| (format!("get_widget_{i:02}"), "widget lookup".to_string()))
            .collect();
        let spec: Vec<(&str, &str, Exposure)> = tools
            .iter()
            .map(|(n, d)| (n.as_str(), d.as_str(), Exposure::Deferred))
            .collect();
        let r = router(&spec);
        let res = run(&r, json!({"query": "zebra"})).await;
        assert!(res.success && names(&res).is_empty());
        assert!(
            res.data.unwrap()["note"]
                .as_str()
                .unwrap()
                .starts_with("No deferred tools")
        );
        let res = run(&r, json!({"query": "widget", "max_results": 50})).await;
        assert_eq!(names(&res).len(), 20);
        let res = run(&r, json!({"query": "widget"})).await;
        assert_eq!(names(&res).len(), 8);
    }

    #[tokio::test]
    async fn names_load_exactly_and_refuse_unknown_or_hidden() {
        let r = router(&[
            ("a_tool", "A", Exposure::Deferred),
            ("b_tool", "B", Exposure::Direct),
            ("c_tool", "C", Exposure::Hidden),
        ]);
        let res = run(&r, json!({"names": ["b_tool", "a_tool"]})).await;
        assert_eq!(names(&res), vec!["b_tool", "a_tool"]);
        for bad in ["c_tool", "nope"] {
            let res = run(&r, json!({"names": [bad]})).await;
            assert!(!res.success);
            assert!(res.error.unwrap().contains(bad));
        }
        let res = run(&r, json!({})).await;
        assert!(!res.success && res.error.unwrap().contains("query"));
    }

    #[tokio::test]
    async fn index_follows_registry_changes() {
        let r = router(&[("get_alpha", "alpha", Exposure::Deferred)]);
        assert_eq!(names(&run(&r, json!({"query": "beta"})).await).len(), 0);
        r.register(Registration::new(Arc::new(Stub(
            "get_beta".into(),
            "beta".into(),
            Exposure::Deferred,
        ))))
        .unwrap();
        assert_eq!(
            names(&run(&r, json!({"query": "beta"})).await),
            vec!["get_beta"]
        );
        r.unregister("get_beta");
        assert_eq!(names(&run(&r, json!({"query": "beta"})).await).len(), 0);
    }
}
