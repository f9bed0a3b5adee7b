//! The method table: every JSON-RPC method name and the handler that owns it.
//! `docs/protocol.md` documents each one (a test checks it lists them all).

mod approval;
mod catalog;
mod chat;
mod config;
mod debug;
mod harness;
mod llm;
mod mcp;
mod plugins;
mod request;
mod sandbox;
mod sessions;
mod skills;
mod system;
mod tools;
mod trace;
mod workspace;

use std::future::Future;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::dispatch::{Call, Handler, HandlerFuture};
use super::error::{Outcome, RpcError, reply, reply_text};
use crate::app::App;

/// One method: its name and the handler that serves it.
pub struct Entry {
    pub name: &'static str,
    pub handler: Handler,
    /// The params and result types the handler decodes and encodes, as schemas; checked
    /// against `protocol::table` (`None` where the handler has no such type).
    #[cfg(test)]
    schemas: tests::Schemas,
}

/// Runs a typed handler: params decoded by `Call::params` (omitted params read as `{}`,
/// unknown fields and type errors are refused naming the field), the result encoded by
/// `reply`.
async fn typed<P, R, Fut>(app: Arc<App>, call: Call, f: impl FnOnce(Arc<App>, P) -> Fut) -> Outcome
where
    P: DeserializeOwned,
    R: Serialize,
    Fut: Future<Output = Result<R, RpcError>>,
{
    let p = call.params()?;
    reply(&f(app, p).await?)
}

/// `typed` for a result that writes its own JSON text (`JsonText`).
async fn written<P, R, Fut>(
    app: Arc<App>,
    call: Call,
    f: impl FnOnce(Arc<App>, P) -> Fut,
) -> Outcome
where
    P: DeserializeOwned,
    R: crate::protocol::JsonText,
    Fut: Future<Output = Result<R, RpcError>>,
{
    let p = call.params()?;
    reply_text(&f(app, p).await?)
}

/// Runs a handler that takes no params and does not look at any it is sent.
async fn unchecked<R, Fut>(app: Arc<App>, f: impl FnOnce(Arc<App>) -> Fut) -> Outcome
where
    R: Serialize,
    Fut: Future<Output = Result<R, RpcError>>,
{
    reply(&f(app).await?)
}

/// `async fn(Arc<App>, P) -> Result<R, RpcError>`: the usual form.
macro_rules! t {
    ($name:literal, $f:path) => {
        Entry {
            name: $name,
            handler: (|app, call| Box::pin(typed(app, call, $f)) as HandlerFuture) as Handler,
            #[cfg(test)]
            schemas: tests::Schemas::typed(&$f),
        }
    };
}

/// `t!` for a result that writes its own JSON text (`written`).
macro_rules! w {
    ($name:literal, $f:path) => {
        Entry {
            name: $name,
            handler: (|app, call| Box::pin(written(app, call, $f)) as HandlerFuture) as Handler,
            #[cfg(test)]
            schemas: tests::Schemas::typed(&$f),
        }
    };
}

/// `async fn(Arc<App>) -> Result<R, RpcError>`: params are not decoded, so none is refused.
macro_rules! u {
    ($name:literal, $f:path) => {
        Entry {
            name: $name,
            handler: (|app, _call| Box::pin(unchecked(app, $f)) as HandlerFuture) as Handler,
            #[cfg(test)]
            schemas: tests::Schemas::unchecked(&$f),
        }
    };
}

/// `async fn(Arc<App>, Call) -> Outcome`: only for handlers that answer before they finish
/// (`Call::reply_now`).
macro_rules! h {
    ($name:literal, $f:path) => {
        Entry {
            name: $name,
            handler: (|app, call| Box::pin($f(app, call)) as HandlerFuture) as Handler,
            #[cfg(test)]
            schemas: tests::Schemas::NONE,
        }
    };
}

/// Methods every host can call.
pub fn table() -> &'static [Entry] {
    static TABLE: std::sync::OnceLock<Vec<Entry>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        vec![
            // Ignores params on purpose: a liveness probe answers whatever it carries.
            u!("system.ping", system::ping),
            // Answers `null` before it stops the process (`reply_now`).
            h!("system.shutdown", system::shutdown),
            // Answers `null` before it stops the process (`reply_now`).
            h!("system.shutdown_now", system::shutdown_now),
            t!("request.cancel", request::cancel),
            t!("config.get", config::get),
            t!("config.set", config::set),
            w!("tool.list", tools::list),
            t!("tool.invoke", tools::invoke),
            t!("plugin.tools.describe", tools::describe),
            t!("plugin.list", plugins::list),
            t!("mcp.list", mcp::list),
            t!("plugin.enable", plugins::enable),
            t!("plugin.disable", plugins::disable),
            t!("plugin.reload", plugins::reload),
            t!("skills.list", skills::list),
            t!("harness.describe", harness::describe),
            t!("catalog.describe", catalog::describe_catalog),
            t!("presets.describe", catalog::describe_presets),
            t!("presets.resolve", catalog::resolve_preset),
            t!("models.list", catalog::list_models),
            t!("sandbox.describe", sandbox::describe),
            t!("compat.describe", llm::compat_describe),
            t!("workspace.apply_edits", workspace::apply_edits),
            t!("agent.session.create", sessions::create),
            t!("agent.session.resume", sessions::resume),
            t!("agent.session.list", sessions::list),
            t!("agent.session.messages", sessions::messages),
            t!("agent.session.fork", sessions::fork),
            t!("agent.session.branches", sessions::branches),
            t!("agent.session.tree", sessions::tree),
            // Answers `{streamId}` before the turn's notifications (`reply_now`).
            h!("agent.chat.stream", chat::stream),
            t!("agent.chat.cancel", chat::cancel),
            t!("agent.chat.steer", chat::steer),
            t!("agent.chat.compact", chat::compact),
            // Answers `{streamId}` before the turn's notifications (`reply_now`).
            h!("agent.chat.fork", chat::fork),
            t!("trace.fetch", trace::fetch),
            t!("trace.export", trace::export),
            t!("approval.list", approval::list),
            t!("approval.clear", approval::clear),
        ]
    })
}

/// Diagnostics for host test suites, registered only with `OUTRIGGER_DEBUG_METHODS=1`.
pub fn debug_table() -> &'static [Entry] {
    static TABLE: std::sync::OnceLock<Vec<Entry>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        vec![
            t!("debug.sleep", debug::sleep),
            t!("debug.echo", debug::echo),
            t!("debug.reverse", debug::reverse),
            t!("debug.record.append", debug::record_append),
        ]
    })
}

pub fn find(method: &str, with_debug: bool) -> Option<Handler> {
    let hit = |t: &'static [Entry]| t.iter().find(|e| e.name == method).map(|e| e.handler);
    hit(table()).or_else(|| if with_debug { hit(debug_table()) } else { None })
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::sync::Arc;

    use schemars::{JsonSchema, Schema, schema_for};

    use super::Entry;
    use crate::app::App;
    use crate::protocol::table::{DEBUG_METHODS, METHODS, NOTIFICATIONS, REVERSE_REQUESTS};
    use crate::rpc::error::RpcError;

    fn schema<T: JsonSchema>() -> Schema {
        schema_for!(T)
    }

    /// The schemas of the types a handler's signature names.
    pub struct Schemas {
        params: Option<fn() -> Schema>,
        result: Option<fn() -> Schema>,
    }

    impl Schemas {
        pub const NONE: Schemas = Schemas {
            params: None,
            result: None,
        };

        pub fn typed<F, P, R, Fut>(_: &F) -> Schemas
        where
            F: FnOnce(Arc<App>, P) -> Fut,
            Fut: Future<Output = Result<R, RpcError>>,
            P: JsonSchema,
            R: JsonSchema,
        {
            Schemas {
                params: Some(schema::<P>),
                result: Some(schema::<R>),
            }
        }

        pub fn unchecked<F, R, Fut>(_: &F) -> Schemas
        where
            F: FnOnce(Arc<App>) -> Fut,
            Fut: Future<Output = Result<R, RpcError>>,
            R: JsonSchema,
        {
            Schemas {
                params: None,
                result: Some(schema::<R>),
            }
        }
    }

    /// A typed handler's params and result are the types the protocol table declares, so a
    /// handler cannot drift from the schemas hosts generate their types from.
    #[test]
    fn handler_types_match_the_protocol_table() {
        let pairs = [
            (super::table(), METHODS),
            (super::debug_table(), DEBUG_METHODS),
        ];
        let mut checked = 0;
        for (handlers, declared) in pairs {
            for e in handlers {
                let Some(call) = declared.iter().find(|c| c.name == e.name) else {
                    panic!("`{}` is not in the protocol table", e.name);
                };
                if let Some(params) = e.schemas.params {
                    assert_eq!(
                        params().as_value(),
                        (call.params)().as_value(),
                        "`{}`: the handler's params type differs from the table's",
                        e.name
                    );
                    checked += 1;
                }
                if let Some(result) = e.schemas.result {
                    assert_eq!(
                        result().as_value(),
                        (call.result)().as_value(),
                        "`{}`: the handler's result type differs from the table's",
                        e.name
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 60, "only {checked} types were checked");
    }

    /// The handlers serve exactly the methods the protocol table declares.
    #[test]
    fn handlers_match_the_protocol_table() {
        let names = |t: &[Entry]| {
            let mut v: Vec<&str> = t.iter().map(|e| e.name).collect();
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
