//! `agent.session.*`: sessions (create/resume/list) and durable-record branches
//! (fork/branches/tree/messages). Thin: parse params, call the store off the async
//! workers, map the error.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::agent::persist;
use crate::app::App;
use crate::llm::Message;
use crate::rpc::dispatch::Call;
use crate::rpc::error::{ErrorKind, Outcome, RpcError, reply};
use crate::store::{
    BranchNode, CutPoint, ForkRequest, NewSession, SessionFilter, Store, StoreError,
    branches::ROOT_LABEL, ids,
};

pub fn store_error(e: StoreError) -> RpcError {
    e.into()
}

/// Runs a store call on the blocking pool (rusqlite blocks).
pub async fn with_store<T, F>(app: &Arc<App>, f: F) -> Result<T, RpcError>
where
    T: Send + 'static,
    F: FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
{
    let store = app.store.clone();
    tokio::task::spawn_blocking(move || f(&store))
        .await
        .map_err(|e| RpcError::internal(format!("the store task failed: {e}")))?
        .map_err(store_error)
}

fn non_empty(name: &str, v: &str) -> Result<(), RpcError> {
    if v.trim().is_empty() {
        return Err(RpcError::invalid_params(format!(
            "{name} must not be empty"
        )));
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CreateParams {
    chat_id: String,
    session_id: Option<String>,
    user_id: Option<String>,
    project_id: Option<String>,
    current_stage: Option<String>,
    next_stage: Option<String>,
    scenario: Option<String>,
    stage_data: Option<Value>,
    is_active: Option<bool>,
}

pub async fn create(app: Arc<App>, call: Call) -> Outcome {
    let p: CreateParams = call.params()?;
    non_empty("chatId", &p.chat_id)?;
    if let Some(id) = &p.session_id {
        non_empty("sessionId", id)?;
    }
    let s = NewSession {
        session_id: p.session_id.unwrap_or_else(ids::session_id),
        user_id: p.user_id.unwrap_or_else(|| "local".into()),
        project_id: p.project_id,
        chat_id: p.chat_id,
        current_stage: p.current_stage.unwrap_or_else(|| "plan".into()),
        next_stage: p.next_stage,
        scenario: Some(p.scenario.unwrap_or_else(|| "agent-entry".into())),
        stage_data: p.stage_data,
        is_active: p.is_active.unwrap_or(true),
    };
    reply(&with_store(&app, move |st| st.upsert_session(&s)).await?)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ResumeParams {
    session_id: String,
}

pub async fn resume(app: Arc<App>, call: Call) -> Outcome {
    let p: ResumeParams = call.params()?;
    reply(&with_store(&app, move |st| st.get_session(&p.session_id)).await?)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListParams {
    user_id: Option<String>,
    chat_id: Option<String>,
    #[serde(default)]
    active_only: bool,
}

pub async fn list(app: Arc<App>, call: Call) -> Outcome {
    let p: ListParams = call.params()?;
    let filter = SessionFilter {
        user_id: p.user_id,
        chat_id: p.chat_id,
        active_only: p.active_only,
    };
    reply(&with_store(&app, move |st| st.list_sessions(&filter)).await?)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RecordParams {
    record_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ForkParams {
    record_id: String,
    until_seq: Option<i64>,
    before_user_index: Option<u64>,
    #[serde(default)]
    before_last_user: bool,
    new_record_id: Option<String>,
    label: Option<String>,
}

impl ForkParams {
    /// Precedence: `untilSeq` > `beforeUserIndex` > `beforeLastUser` > whole record.
    fn cut(&self) -> CutPoint {
        match (
            self.until_seq,
            self.before_user_index,
            self.before_last_user,
        ) {
            (Some(n), _, _) => CutPoint::UntilSeq(n),
            (None, Some(i), _) => CutPoint::BeforeUserIndex(i),
            (None, None, true) => CutPoint::BeforeLastUser,
            (None, None, false) => CutPoint::Whole,
        }
    }
}

pub async fn fork(app: Arc<App>, call: Call) -> Outcome {
    let p: ForkParams = call.params()?;
    non_empty("recordId", &p.record_id)?;
    if let Some(id) = &p.new_record_id {
        non_empty("newRecordId", id)?;
    }
    let req = ForkRequest {
        cut: p.cut(),
        source: p.record_id,
        new_record_id: p.new_record_id,
        label: p.label,
    };
    reply(&with_store(&app, move |st| st.fork(&req)).await?)
}

pub async fn branches(app: Arc<App>, call: Call) -> Outcome {
    let p: RecordParams = call.params()?;
    let id = p.record_id.clone();
    let found = with_store(&app, move |st| {
        let lineage = st.lineage(&id)?;
        let depth = lineage.nodes.len();
        let children = st.children(&id, depth)?;
        Ok((lineage, children))
    })
    .await;
    match found {
        Ok((lineage, children)) => reply(&json!({
            "lineage": lineage.nodes,
            "children": children,
            "truncated": lineage.truncated,
        })),
        // The reference answers an unknown record with a lone root and no children.
        Err(e) if e.kind == ErrorKind::NotFound => {
            let root = BranchNode {
                record_id: p.record_id,
                source_record_id: None,
                source_until_seq: None,
                label: ROOT_LABEL.into(),
                depth: 0,
            };
            reply(&json!({"lineage": [root], "children": [], "truncated": false}))
        }
        Err(e) => Err(e),
    }
}

pub async fn tree(app: Arc<App>, call: Call) -> Outcome {
    let p: RecordParams = call.params()?;
    reply(&with_store(&app, move |st| st.tree(&p.record_id)).await?)
}

pub async fn messages(app: Arc<App>, call: Call) -> Outcome {
    let p: RecordParams = call.params()?;
    let id = p.record_id.clone();
    let projected = with_store(&app, move |st| st.projection(&id)).await?;
    // The shape `agent.chat.stream` takes as `messages` (camelCase, `seq` in front), so a
    // host can send the history back unchanged; entries that are no chat message (an
    // unknown role) are left out, as the loop leaves them out of its transcript.
    let messages: Vec<Message> = projected
        .into_iter()
        .filter_map(|e| match persist::from_record(&e.message) {
            Some(mut m) => {
                m.seq = Some(e.seq);
                Some(m)
            }
            None => {
                tracing::warn!(
                    "agent.session.messages: skipping record {} seq {}: role {:?} is not a chat role",
                    p.record_id,
                    e.seq,
                    e.role()
                );
                None
            }
        })
        .collect();
    reply(&json!({"recordId": p.record_id, "messages": messages}))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DebugAppendParams {
    record_id: String,
    role: String,
    content: Value,
    /// Entry kind when it differs from the role (`steer.inject`, `loop.*`, …).
    kind: Option<String>,
    #[serde(default)]
    token_estimate: u64,
}

/// `debug.record.append`: writes one message to a record the way the CoreLoop will, so
/// host tests can build records before the loop exists.
pub async fn debug_append(app: Arc<App>, call: Call) -> Outcome {
    use crate::store::ItemKind;
    let p: DebugAppendParams = call.params()?;
    non_empty("recordId", &p.record_id)?;
    let kind = match &p.kind {
        Some(k) => ItemKind::parse(k),
        None => ItemKind::for_role(&p.role),
    }
    .ok_or_else(|| {
        RpcError::invalid_params(format!(
            "invalid role/kind {:?}: use system, user, assistant, tool, steer.inject, \
             skills.catalog or loop.<name>",
            p.kind.as_deref().unwrap_or(&p.role)
        ))
    })?;
    let message = json!({"role": p.role, "content": p.content});
    let id = p.record_id;
    let seq = with_store(&app, move |st| {
        st.append(&id, kind, &message, p.token_estimate)
    })
    .await?;
    reply(&json!({"seq": seq}))
}
