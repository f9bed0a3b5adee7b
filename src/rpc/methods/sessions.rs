//! `agent.session.*`: sessions (create/resume/list) and durable-record branches
//! (fork/branches/tree/messages). Thin: parse params, call the store off the async
//! workers, map the error.

use std::sync::Arc;

use crate::agent::persist;
use crate::app::App;
use crate::protocol::session::{
    AgentSession, BranchNode, BranchPoint, RecordRef, SessionBranchesResult, SessionCreateParams,
    SessionForkParams, SessionListParams, SessionListResult, SessionMessagesResult,
    SessionResumeParams, SessionTreeResult, TreeNode,
};
use crate::rpc::error::{ErrorKind, RpcError};
use crate::store::{
    self, CutPoint, ForkRequest, NewSession, SessionFilter, Store, StoreError,
    branches::ROOT_LABEL, ids,
};

/// Runs a store call on the blocking pool (rusqlite blocks), as the loop does.
pub async fn with_store<T, F>(app: &Arc<App>, f: F) -> Result<T, RpcError>
where
    T: Send + 'static,
    F: FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
{
    Ok(crate::agent::persist::call(&app.store, f).await?)
}

fn non_empty(name: &str, v: &str) -> Result<(), RpcError> {
    if v.trim().is_empty() {
        return Err(RpcError::invalid_params(format!(
            "{name} must not be empty"
        )));
    }
    Ok(())
}

impl From<store::AgentSession> for AgentSession {
    fn from(s: store::AgentSession) -> Self {
        AgentSession {
            session_id: s.session_id,
            user_id: s.user_id,
            project_id: s.project_id,
            chat_id: s.chat_id,
            current_stage: s.current_stage,
            next_stage: s.next_stage,
            scenario: s.scenario,
            stage_data: s.stage_data,
            is_active: s.is_active,
            created_at: s.created_at,
            updated_at: s.updated_at,
        }
    }
}

impl From<store::BranchPoint> for BranchPoint {
    fn from(b: store::BranchPoint) -> Self {
        BranchPoint {
            record_id: b.record_id,
            source_record_id: b.source_record_id,
            source_until_seq: b.source_until_seq,
            label: b.label,
            seed_messages: b.seed_messages,
        }
    }
}

impl From<store::BranchNode> for BranchNode {
    fn from(n: store::BranchNode) -> Self {
        BranchNode {
            record_id: n.record_id,
            source_record_id: n.source_record_id,
            source_until_seq: n.source_until_seq,
            label: n.label,
            depth: n.depth,
        }
    }
}

impl From<store::TreeNode> for TreeNode {
    fn from(t: store::TreeNode) -> Self {
        let n = t.node;
        TreeNode {
            record_id: n.record_id,
            source_record_id: n.source_record_id,
            source_until_seq: n.source_until_seq,
            label: n.label,
            depth: n.depth,
            children: t.children.into_iter().map(TreeNode::from).collect(),
        }
    }
}

impl From<store::Tree> for SessionTreeResult {
    fn from(t: store::Tree) -> Self {
        SessionTreeResult {
            record_id: t.record_id,
            tree: t.tree.into(),
            node_count: t.node_count,
            truncated: t.truncated,
        }
    }
}

pub async fn create(app: Arc<App>, p: SessionCreateParams) -> Result<AgentSession, RpcError> {
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
    let row = with_store(&app, move |st| st.upsert_session(&s)).await?;
    Ok(AgentSession::from(row))
}

pub async fn resume(app: Arc<App>, p: SessionResumeParams) -> Result<AgentSession, RpcError> {
    let row = with_store(&app, move |st| st.get_session(&p.session_id)).await?;
    Ok(AgentSession::from(row))
}

pub async fn list(app: Arc<App>, p: SessionListParams) -> Result<SessionListResult, RpcError> {
    let filter = SessionFilter {
        user_id: p.user_id,
        chat_id: p.chat_id,
        active_only: p.active_only,
    };
    let rows = with_store(&app, move |st| st.list_sessions(&filter)).await?;
    Ok(SessionListResult(
        rows.into_iter().map(AgentSession::from).collect(),
    ))
}

/// Precedence: `untilSeq` > `beforeUserIndex` > `beforeLastUser` > whole record.
fn cut(p: &SessionForkParams) -> CutPoint {
    match (p.until_seq, p.before_user_index, p.before_last_user) {
        (Some(n), _, _) => CutPoint::UntilSeq(n),
        (None, Some(i), _) => CutPoint::BeforeUserIndex(i),
        (None, None, true) => CutPoint::BeforeLastUser,
        (None, None, false) => CutPoint::Whole,
    }
}

pub async fn fork(app: Arc<App>, p: SessionForkParams) -> Result<BranchPoint, RpcError> {
    non_empty("recordId", &p.record_id)?;
    if let Some(id) = &p.new_record_id {
        non_empty("newRecordId", id)?;
    }
    let req = ForkRequest {
        cut: cut(&p),
        source: p.record_id,
        new_record_id: p.new_record_id,
        label: p.label,
    };
    let point = with_store(&app, move |st| st.fork(&req)).await?;
    Ok(BranchPoint::from(point))
}

pub async fn branches(app: Arc<App>, p: RecordRef) -> Result<SessionBranchesResult, RpcError> {
    let id = p.record_id.clone();
    let found = with_store(&app, move |st| {
        let lineage = st.lineage(&id)?;
        let depth = lineage.nodes.len();
        let children = st.children(&id, depth)?;
        Ok((lineage, children))
    })
    .await;
    match found {
        Ok((lineage, children)) => Ok(SessionBranchesResult {
            lineage: lineage.nodes.into_iter().map(BranchNode::from).collect(),
            children: children.into_iter().map(BranchNode::from).collect(),
            truncated: lineage.truncated,
        }),
        // The reference answers an unknown record with a lone root and no children.
        Err(e) if e.kind == ErrorKind::NotFound => {
            let root = BranchNode {
                record_id: p.record_id,
                source_record_id: None,
                source_until_seq: None,
                label: ROOT_LABEL.into(),
                depth: 0,
            };
            Ok(SessionBranchesResult {
                lineage: vec![root],
                children: Vec::new(),
                truncated: false,
            })
        }
        Err(e) => Err(e),
    }
}

pub async fn tree(app: Arc<App>, p: RecordRef) -> Result<SessionTreeResult, RpcError> {
    let tree = with_store(&app, move |st| st.tree(&p.record_id)).await?;
    Ok(SessionTreeResult::from(tree))
}

pub async fn messages(app: Arc<App>, p: RecordRef) -> Result<SessionMessagesResult, RpcError> {
    let id = p.record_id.clone();
    let projected = with_store(&app, move |st| st.projection(&id)).await?;
    Ok(persist::transcript(p.record_id, projected))
}
