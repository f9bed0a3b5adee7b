//! `approval.list` / `approval.clear`: the permanent approval rules (`allow_always`,
//! `deny_always`) the host's answers stored; the decisions themselves are the approval
//! layer's (`agent/approval.rs`).

use std::sync::Arc;

use crate::protocol::host::{
    ApprovalClearParams, ApprovalClearResult, ApprovalListParams, ApprovalListResult, ApprovalRule,
};

use crate::agent::persist;
use crate::app::App;
use crate::rpc::error::RpcError;

pub async fn list(app: Arc<App>, _: ApprovalListParams) -> Result<ApprovalListResult, RpcError> {
    let rows = persist::call(&app.store, |s| s.list_approval_rules()).await?;
    let rules = rows
        .into_iter()
        .map(|r| ApprovalRule {
            tool_name: r.tool_name,
            category: r.category,
            decision: r.decision,
            created_at: r.created_at,
        })
        .collect();
    Ok(ApprovalListResult { rules })
}

pub async fn clear(app: Arc<App>, p: ApprovalClearParams) -> Result<ApprovalClearResult, RpcError> {
    let cleared = persist::call(&app.store, move |s| {
        s.clear_approval_rules(p.tool_name.as_deref(), p.category.as_deref())
    })
    .await?;
    Ok(ApprovalClearResult { cleared })
}
