//! The tool list a turn offered, kept for the next turn built from the same inputs. Building
//! it parses every offered tool's schema into a `Value`, and a new list is serialised again
//! for the request body (`openai::body` keeps the text per list): ~3.5 % of a ten-round turn
//! of small rounds, and a one-round turn's whole share (perf).

use std::sync::{Arc, Mutex, Weak};

use serde_json::Value;

use crate::harness::ToolsStrategy;
use crate::tools::Router;

/// What a list is built from besides the router's generation. The router is held `Weak`:
/// its allocation stays reserved while the key lives, so no later router can take the same
/// address and match. The sub-agent is keyed by its descriptor, since each turn parses its
/// own sub-agent configuration.
pub struct Key {
    pub router: Weak<Router>,
    pub generation: u64,
    pub strategy: ToolsStrategy,
    pub ask_user: bool,
    pub subagent: Option<Value>,
    pub orchestration: bool,
    pub filter: Option<Arc<[String]>>,
}

impl PartialEq for Key {
    fn eq(&self, o: &Key) -> bool {
        self.router.ptr_eq(&o.router)
            && self.generation == o.generation
            && self.strategy == o.strategy
            && self.ask_user == o.ask_user
            && self.subagent == o.subagent
            && self.orchestration == o.orchestration
            && self.filter == o.filter
    }
}

/// The last list offered and its key (one slot: turns on one agent mostly share inputs).
#[derive(Default)]
pub struct Offered(Mutex<Option<(Key, Arc<[Value]>)>>);

impl Offered {
    /// The kept list when `key` matches, else `build`'s, kept for the next turn.
    pub fn get_or_build(&self, key: Key, build: impl FnOnce() -> Vec<Value>) -> Arc<[Value]> {
        let slot = || self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((k, list)) = slot().as_ref()
            && *k == key
        {
            return list.clone();
        }
        let list: Arc<[Value]> = build().into();
        *slot() = Some((key, list.clone()));
        list
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(router: &Arc<Router>, generation: u64, filter: Option<&[&str]>) -> Key {
        Key {
            router: Arc::downgrade(router),
            generation,
            strategy: ToolsStrategy::Full,
            ask_user: false,
            subagent: None,
            orchestration: false,
            filter: filter.map(|f| f.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn a_list_is_reused_only_for_the_same_router_generation_and_inputs() {
        let offered = Offered::default();
        let (a, b) = (Router::new(), Router::new());
        let built = std::cell::Cell::new(0);
        let build = || {
            built.set(built.get() + 1);
            vec![json!({"n": built.get()})]
        };
        let first = offered.get_or_build(key(&a, 0, None), build);
        let again = offered.get_or_build(key(&a, 0, None), build);
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(built.get(), 1);
        offered.get_or_build(key(&a, 1, None), build);
        assert_eq!(built.get(), 2, "a new generation");
        offered.get_or_build(key(&b, 1, None), build);
        assert_eq!(built.get(), 3, "another router");
        offered.get_or_build(key(&b, 1, Some(&["read_file"])), build);
        assert_eq!(built.get(), 4, "a tool filter");
        let kept = offered.get_or_build(key(&b, 1, Some(&["read_file"])), build);
        assert_eq!(built.get(), 4);
        assert_eq!(kept[0]["n"], 4);
        // Sub-agents parsed per turn match by what they offer.
        let with_sub = |d: &str| Key {
            subagent: Some(json!({"description": d})),
            ..key(&b, 1, None)
        };
        offered.get_or_build(with_sub("general"), build);
        offered.get_or_build(with_sub("general"), build);
        assert_eq!(built.get(), 5);
        offered.get_or_build(with_sub("general, reviewer"), build);
        assert_eq!(built.get(), 6);
    }
}
