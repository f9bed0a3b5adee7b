//! The method table: every JSON-RPC method name and the handler that owns it.
//! `docs/protocol.md` documents each one (a test checks it lists them all).

mod approval;
mod catalog;
mod chat;
mod config;
mod debug;
mod harness;
mod llm;
mod plugins;
mod request;
mod sandbox;
mod sessions;
mod skills;
mod system;
mod tools;
mod trace;
mod workspace;

use super::dispatch::{Handler, HandlerFuture};

macro_rules! h {
    ($f:path) => {
        (|app, call| Box::pin($f(app, call)) as HandlerFuture) as Handler
    };
}

/// Methods every host can call.
pub fn table() -> &'static [(&'static str, Handler)] {
    static TABLE: std::sync::OnceLock<Vec<(&'static str, Handler)>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        vec![
            ("system.ping", h!(system::ping)),
            ("system.shutdown", h!(system::shutdown)),
            ("system.shutdown_now", h!(system::shutdown_now)),
            ("request.cancel", h!(request::cancel)),
            ("config.get", h!(config::get)),
            ("config.set", h!(config::set)),
            ("tool.list", h!(tools::list)),
            ("tool.invoke", h!(tools::invoke)),
            ("plugin.tools.describe", h!(tools::describe)),
            ("plugin.list", h!(plugins::list)),
            ("plugin.enable", h!(plugins::enable)),
            ("plugin.disable", h!(plugins::disable)),
            ("plugin.reload", h!(plugins::reload)),
            ("skills.list", h!(skills::list)),
            ("harness.describe", h!(harness::describe)),
            ("catalog.describe", h!(catalog::describe_catalog)),
            ("presets.describe", h!(catalog::describe_presets)),
            ("presets.resolve", h!(catalog::resolve_preset)),
            ("models.list", h!(catalog::list_models)),
            ("sandbox.describe", h!(sandbox::describe)),
            ("compat.describe", h!(llm::compat_describe)),
            ("workspace.apply_edits", h!(workspace::apply_edits)),
            ("agent.session.create", h!(sessions::create)),
            ("agent.session.resume", h!(sessions::resume)),
            ("agent.session.list", h!(sessions::list)),
            ("agent.session.messages", h!(sessions::messages)),
            ("agent.session.fork", h!(sessions::fork)),
            ("agent.session.branches", h!(sessions::branches)),
            ("agent.session.tree", h!(sessions::tree)),
            ("agent.chat.stream", h!(chat::stream)),
            ("agent.chat.cancel", h!(chat::cancel)),
            ("agent.chat.steer", h!(chat::steer)),
            ("agent.chat.compact", h!(chat::compact)),
            ("agent.chat.fork", h!(chat::fork)),
            ("trace.fetch", h!(trace::fetch)),
            ("approval.list", h!(approval::list)),
            ("approval.clear", h!(approval::clear)),
        ]
    })
}

/// Diagnostics for host test suites, registered only with `OUTRIGGER_DEBUG_METHODS=1`.
pub fn debug_table() -> &'static [(&'static str, Handler)] {
    static TABLE: std::sync::OnceLock<Vec<(&'static str, Handler)>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        vec![
            ("debug.sleep", h!(debug::sleep)),
            ("debug.echo", h!(debug::echo)),
            ("debug.reverse", h!(debug::reverse)),
            ("debug.record.append", h!(debug::record_append)),
        ]
    })
}

pub fn find(method: &str, with_debug: bool) -> Option<Handler> {
    let hit = |t: &'static [(&'static str, Handler)]| {
        t.iter().find(|(n, _)| *n == method).map(|(_, h)| *h)
    };
    hit(table()).or_else(|| if with_debug { hit(debug_table()) } else { None })
}

#[cfg(test)]
mod tests {
    use crate::protocol::table::{DEBUG_METHODS, METHODS, NOTIFICATIONS, REVERSE_REQUESTS};

    /// The handlers serve exactly the methods the protocol table declares.
    #[test]
    fn handlers_match_the_protocol_table() {
        let names = |t: &[(&'static str, super::Handler)]| {
            let mut v: Vec<&str> = t.iter().map(|(n, _)| *n).collect();
            v.sort_unstable();
            v
        };
        let declared = |t: &[crate::protocol::table::Call]| {
            let mut v: Vec<&str> = t.iter().map(|c| c.name).collect();
            v.sort_unstable();
            v
        };
        assert_eq!(names(super::table()), declared(METHODS));
        assert_eq!(names(super::debug_table()), declared(DEBUG_METHODS));
    }

    #[test]
    fn every_table_entry_is_documented() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/protocol.md"))
            .expect("docs/protocol.md exists");
        let all = METHODS
            .iter()
            .chain(DEBUG_METHODS)
            .chain(REVERSE_REQUESTS)
            .map(|c| c.name)
            .chain(NOTIFICATIONS.iter().map(|n| n.name));
        for name in all {
            assert!(
                doc.contains(&format!("`{name}`")),
                "docs/protocol.md does not document `{name}`"
            );
        }
    }
}
