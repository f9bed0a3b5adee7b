//! `agent.chat.stream` / `cancel` / `steer` / `compact` / `fork`: parse the params, let the
//! agent prepare the turn, answer `{streamId}` at once, then launch it (so every notification
//! follows the answer on the wire). The turn itself lives in `agent::chat`.

use std::sync::Arc;

use crate::protocol::chat::{CompactResult, SteerParams, SteerResult, StreamRef};

use crate::agent::chat;
use crate::agent::params::{self, Method};
use crate::app::App;
use crate::llm::{self, LlmSettings, Message};
use crate::rpc::dispatch::Call;
use crate::rpc::error::{Outcome, RpcError, reply};
use crate::rpc::frame;
use crate::strict::Invalid;
use serde_json::Value;
use serde_json::value::RawValue;

/// Why steer/compact did not reach a turn.
const NOT_ACTIVE: &str = "stream_not_active";

// Raw `Call` form: answers `{streamId}` (`reply_now`) before the turn's first notification.
pub async fn stream(app: Arc<App>, call: Call) -> Outcome {
    start(app, call, Method::Stream).await
}

// Raw `Call` form: answers `{streamId}` (`reply_now`) before the turn's first notification.
pub async fn fork(app: Arc<App>, call: Call) -> Outcome {
    start(app, call, Method::Fork).await
}

async fn start(app: Arc<App>, call: Call, method: Method) -> Outcome {
    let all = app.settings();
    let settings = LlmSettings::from_settings(&all);
    let messages = call.messages.as_deref().map(messages).transpose()?;
    let p = params::parse(
        &call.params,
        messages,
        settings,
        method,
        all.workspace_root.as_deref(),
    )?;
    let prepared = chat::prepare(&app.agent, p, method).await?;
    call.reply_now(reply(&prepared.started));
    let answer = reply(&prepared.started);
    prepared.launch();
    answer
}

/// `messages` kept as text by the frame: straight into messages when that settles them,
/// else through a `Value` as every other member is decoded (an undecodable value answers
/// -32602 naming its field, as in any params; what is wrong with a message is reported in
/// the params' checking order).
fn messages(raw: &RawValue) -> Result<Result<Vec<Message>, Invalid>, RpcError> {
    if let Some(list) = llm::parse_messages_text(raw.get()) {
        return Ok(Ok(list));
    }
    let member = "params.messages";
    match frame::decode_member(raw) {
        Ok(Value::Null) => Ok(Ok(Vec::new())),
        Ok(v) => Ok(llm::parse_messages(&v)),
        Err(bad) => {
            Err(RpcError::invalid_params(bad.message(member)).with("field", bad.field(member)))
        }
    }
}

pub async fn cancel(app: Arc<App>, p: StreamRef) -> Result<(), RpcError> {
    // Unknown or finished streams answer null, as the reference does.
    if let Some(h) = app.agent.streams.get(&p.stream_id) {
        h.cancel.cancel();
    }
    Ok(())
}

pub async fn steer(app: Arc<App>, p: SteerParams) -> Result<SteerResult, RpcError> {
    if p.content.trim().is_empty() {
        return Err(RpcError::invalid_params(
            "content must not be blank: send the message to steer with",
        ));
    }
    if p.exec_policy.is_some_and(|v| !v.is_null()) {
        return Err(RpcError::invalid_params(
            "execPolicy is not supported by this sidecar (approval decisions come from approval.request); remove it",
        ));
    }
    match app.agent.streams.get(&p.stream_id) {
        Some(h) if !h.cancel.is_cancelled() => {
            h.steer(p.content);
            Ok(SteerResult {
                accepted: true,
                reason: None,
            })
        }
        _ => Ok(SteerResult {
            accepted: false,
            reason: Some(NOT_ACTIVE.into()),
        }),
    }
}

pub async fn compact(app: Arc<App>, p: StreamRef) -> Result<CompactResult, RpcError> {
    match app.agent.streams.get(&p.stream_id) {
        Some(h) if !h.cancel.is_cancelled() => {
            h.request_compact();
            Ok(CompactResult {
                ok: true,
                reason: None,
            })
        }
        _ => Ok(CompactResult {
            ok: false,
            reason: Some(NOT_ACTIVE.into()),
        }),
    }
}
