//! `skills.list`.

use std::sync::Arc;

use crate::app::App;
use crate::rpc::dispatch::Call;
use crate::rpc::error::{Outcome, RpcError, reply};
use crate::tools::skills::{SkillsQuery, list_skills};

pub async fn list(_app: Arc<App>, call: Call) -> Outcome {
    let q: SkillsQuery = call.params()?;
    // Reading skill files is blocking disk work: keep it off the async workers.
    let listing = tokio::task::spawn_blocking(move || list_skills(&q))
        .await
        .map_err(|e| RpcError::internal(format!("skills scan failed: {e}")))?
        .map_err(|e| RpcError::invalid_params(e.to_string()))?;
    reply(&listing)
}
