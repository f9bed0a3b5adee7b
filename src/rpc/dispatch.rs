//! From a parsed line to handler tasks and responses. Every request runs as its own task,
//! so a slow handler never delays another request. Control methods (`CONTROL_METHODS`) and
//! responses to our reverse requests run at once; every other request takes one of
//! `max_inflight_requests` slots or waits in the bounded queue (`intake`), and when both are
//! full the dispatcher stops taking lines (the back-pressure `server` relies on).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::oneshot;

use super::error::{ErrorKind, Outcome, RpcError};
use super::frame::{Incoming, Line, RawId, parse_line};
use super::intake::{Intake, Ticket, id_key};
use super::methods;
use super::writer::{Frame, Out, encode_response};
use crate::app::App;
use crate::catch_panic::CatchPanic;

pub type HandlerFuture = Pin<Box<dyn Future<Output = Outcome> + Send>>;
pub type Handler = fn(Arc<App>, Call) -> HandlerFuture;

/// Methods that never wait behind the in-flight limit or the queue: they answer at once and
/// are how a host regains control while every slot is busy.
pub const CONTROL_METHODS: &[&str] = &[
    "system.ping",
    "system.shutdown",
    "system.shutdown_now",
    "agent.chat.cancel",
    "agent.chat.steer",
    "agent.chat.compact",
    "request.cancel",
];

/// A request admitted but not yet started.
pub struct Job {
    handler: Handler,
    params: Value,
    messages: Option<Box<RawValue>>,
    replier: Replier,
}

/// Slots, queue and cancel-by-id registry of the requests that are not control methods.
pub type Requests = Intake<Job>;

/// Where a request's single response goes.
enum Target {
    Direct {
        id: RawId,
        out: Out,
    },
    /// Inside a batch: the encoded response is collected into the batch array.
    Collect {
        id: RawId,
        tx: oneshot::Sender<Frame>,
    },
}

/// Sends a request's response exactly once, whoever sends first (the handler early, or the
/// dispatcher when the handler returns). Notifications have no target.
#[derive(Clone)]
pub struct Replier(Arc<Mutex<Option<Target>>>);

impl Replier {
    fn new(target: Option<Target>) -> Self {
        Replier(Arc::new(Mutex::new(target)))
    }

    pub fn send(&self, result: Outcome) {
        let target = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        match target {
            Some(Target::Direct { id, out }) => out.respond(Some(&id), result),
            Some(Target::Collect { id, tx }) => {
                let _ = tx.send(encode_response(Some(&id), result));
            }
            None => {}
        }
    }
}

/// One call as a handler sees it.
pub struct Call {
    pub params: Value,
    /// `messages` of a chat method's params, kept as text (`frame::SPLIT_MESSAGES`).
    pub messages: Option<Box<RawValue>>,
    replier: Replier,
}

impl Call {
    /// Params as an object type; omitted params read as `{}`. Unknown fields and type errors
    /// are refused naming the field (`crate::strict`).
    pub fn params<T: DeserializeOwned>(&self) -> Result<T, RpcError> {
        match &self.params {
            Value::Null => crate::strict::decode(&Value::Object(Default::default())),
            Value::Object(_) => crate::strict::decode(&self.params),
            _ => return Err(RpcError::invalid_params("params must be an object")),
        }
        .map_err(RpcError::invalid_params)
    }

    /// Answers now, before the handler finishes (e.g. a stream id, or shutdown's `null`),
    /// so notifications sent afterwards follow the response on the wire.
    pub fn reply_now(&self, result: Outcome) {
        self.replier.send(result);
    }
}

fn lookup(app: &App, method: &str) -> Option<Handler> {
    methods::find(method, app.debug_methods)
}

/// Handles one line from stdin. Called on the reader thread inside the runtime context.
pub async fn dispatch_line(app: &Arc<App>, line: &[u8]) {
    match parse_line(line) {
        Line::ParseError(msg) => app
            .out
            .respond(None, Err(RpcError::new(ErrorKind::Parse, msg))),
        Line::EmptyBatch => app.out.respond(
            None,
            Err(RpcError::invalid_request(
                "Invalid request: an empty batch array",
            )),
        ),
        Line::Single(incoming) => {
            let out = app.out.clone();
            handle(app, incoming, |id| Target::Direct { id, out }).await;
        }
        Line::Batch(items) => dispatch_batch(app, items).await,
    }
}

/// Refuses an over-limit line (already discarded by the reader).
pub fn refuse_too_long(app: &App, len: usize, limit: usize) {
    app.out.respond(
        None,
        Err(RpcError::invalid_request(format!(
            "Invalid request: frame of {len} bytes exceeds max_frame_bytes ({limit}); send smaller \
             frames or raise max_frame_bytes (ceiling 1073741824)"
        ))
        .with("limit", limit)
        .with("length", len)),
    );
}

async fn dispatch_batch(app: &Arc<App>, items: Vec<Incoming>) {
    let mut slots = Vec::new();
    for item in items {
        let (tx, rx) = oneshot::channel();
        // A sender never used (notification, response) is dropped: its slot is skipped.
        handle(app, item, move |id| Target::Collect { id, tx }).await;
        slots.push(rx);
    }
    let out = app.out.clone();
    app.lifecycle.spawn(async move {
        let mut parts = Vec::new();
        for rx in slots {
            if let Ok(bytes) = rx.await {
                parts.push(bytes);
            }
        }
        if parts.is_empty() {
            return;
        }
        let mut frame =
            Vec::with_capacity(parts.iter().map(|p| p.bytes().len() + 1).sum::<usize>() + 2);
        frame.push(b'[');
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                frame.push(b',');
            }
            frame.extend_from_slice(p.bytes());
        }
        frame.push(b']');
        out.send_bytes(frame);
    });
}

async fn handle(app: &Arc<App>, incoming: Incoming, target: impl FnOnce(RawId) -> Target) {
    match incoming {
        Incoming::Request {
            id,
            method,
            params,
            messages,
        } => {
            // Only requests that can wait in the intake are cancellable by id.
            let key = (!CONTROL_METHODS.contains(&method.as_str())).then(|| id_key(id.get()));
            let replier = Replier::new(Some(target(id)));
            match lookup(app, &method) {
                None => replier.send(Err(RpcError::method_not_found(&method))),
                Some(h) => run(app, &method, key, h, (params, messages), replier).await,
            }
        }
        Incoming::Notification {
            method,
            params,
            messages,
        } => match lookup(app, &method) {
            Some(h) => {
                let params = (params, messages);
                run(app, &method, None, h, params, Replier::new(None)).await
            }
            None => tracing::debug!("ignoring notification for unknown method '{method}'"),
        },
        Incoming::BadParams {
            id,
            method,
            message,
            field,
        } => match (id, lookup(app, &method)) {
            (Some(id), None) => {
                Replier::new(Some(target(id))).send(Err(RpcError::method_not_found(&method)))
            }
            (Some(id), Some(_)) => Replier::new(Some(target(id)))
                .send(Err(RpcError::invalid_params(message).with("field", field))),
            (None, _) => tracing::debug!("dropping notification '{method}': {message}"),
        },
        Incoming::Response { id, outcome } => {
            if !app.reverse.resolve(&id, outcome) {
                tracing::debug!("dropping response for unknown reverse id '{id}'");
            }
        }
        Incoming::Invalid { id, message } => {
            let err = Err(RpcError::invalid_request(message));
            match id {
                Some(id) => Replier::new(Some(target(id))).send(err),
                None => {
                    let null = serde_json::value::RawValue::from_string("null".into());
                    match null {
                        Ok(null) => Replier::new(Some(target(null))).send(err),
                        Err(_) => app.out.respond(None, err),
                    }
                }
            }
        }
    }
}

/// Runs a control method at once; anything else once an in-flight slot is free, waiting
/// here (and so holding up the next line) only while slots and queue are both full.
async fn run(
    app: &Arc<App>,
    method: &str,
    key: Option<String>,
    handler: Handler,
    (params, messages): (Value, Option<Box<RawValue>>),
    replier: Replier,
) {
    if CONTROL_METHODS.contains(&method) {
        let slot = app.requests.control_slot().await;
        let mut fut = CatchPanic(handler(
            app.clone(),
            Call {
                params,
                messages,
                replier: replier.clone(),
            },
        ));
        // Most control methods finish on their first poll (a ping, a cancel): answered here,
        // without a task of their own, whose spawn and worker wake-ups were most of what a
        // pipelined ping cost. One still pending moves into a task, which polls it again
        // with a real waker.
        if let Poll::Ready(result) =
            Pin::new(&mut fut).poll(&mut Context::from_waker(Waker::noop()))
        {
            replier.send(result.unwrap_or_else(|p| Err(panicked(&p))));
            drop(slot);
            return;
        }
        app.lifecycle.spawn(async move {
            let result = fut.await.unwrap_or_else(|p| Err(panicked(&p)));
            replier.send(result);
            drop(slot);
        });
        return;
    }
    let job = Job {
        handler,
        params,
        messages,
        replier,
    };
    if let Some((ticket, job)) = app.requests.admit_waiting(key, job).await {
        start(app, ticket, job);
    }
}

fn panicked(p: &str) -> RpcError {
    RpcError::internal(format!("handler panicked: {p}"))
}

/// What a request cancelled by `request.cancel` answers.
pub fn cancelled() -> RpcError {
    RpcError::new(
        ErrorKind::Cancelled,
        "cancelled by request.cancel before it finished",
    )
}

/// Runs an admitted job in its slot. A cancel drops the handler future at once (tools' process
/// groups die with their guards) and answers `cancelled`; either way the slot goes to the
/// oldest waiting job.
fn start(app: &Arc<App>, ticket: Ticket, job: Job) {
    let Job {
        handler,
        params,
        messages,
        replier,
    } = job;
    let fut = CatchPanic(handler(
        app.clone(),
        Call {
            params,
            messages,
            replier: replier.clone(),
        },
    ));
    let owner = app.clone();
    app.lifecycle.spawn(async move {
        let result = tokio::select! {
            biased;
            _ = ticket.cancel.cancelled() => Err(cancelled()),
            r = fut => r.unwrap_or_else(|p| Err(panicked(&p))),
        };
        // Forget the id before answering, so a cancel racing the answer reports `false`.
        let next = owner.requests.finish(&ticket);
        replier.send(result);
        if let Some((ticket, job)) = next {
            start(&owner, ticket, job);
        }
    });
}

/// `request.cancel`: cancels the queued or running requests with this id (canonical text, see
/// `intake::id_key`). Returns whether there was one.
pub fn cancel_request(app: &App, key: &str) -> bool {
    let c = app.requests.cancel(key);
    for job in c.removed {
        job.replier.send(Err(cancelled()));
    }
    c.found
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_control_method_is_in_the_table() {
        for name in super::CONTROL_METHODS {
            assert!(
                super::methods::find(name, false).is_some(),
                "control method `{name}` is not in the method table"
            );
        }
    }
}
