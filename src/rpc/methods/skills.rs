//! `skills.list`.

use std::sync::Arc;

use crate::app::App;
use crate::protocol::tools::{
    SkillInfo, SkillLayer, SkillMatch, SkillsListParams, SkillsListResult,
};
use crate::rpc::error::RpcError;
use crate::tools::skills::{Layer, MatchMode, SkillRow, SkillsQuery, list_skills};

fn info(row: SkillRow) -> SkillInfo {
    SkillInfo {
        name: row.name,
        display_name: row.display_name,
        description: row.description,
        priority: row.priority,
        tags: row.tags,
        conditions: row.conditions,
        match_mode: match row.match_mode {
            MatchMode::Any => SkillMatch::Any,
            MatchMode::All => SkillMatch::All,
        },
        layer: match row.layer {
            Layer::Eager => SkillLayer::Eager,
            Layer::Catalog => SkillLayer::Catalog,
        },
        model_invocable: row.model_invocable,
        content: row.content,
        dir_name: row.dir_name,
        skills_dir: row.skills_dir,
    }
}

pub async fn list(_: Arc<App>, p: SkillsListParams) -> Result<SkillsListResult, RpcError> {
    let q = SkillsQuery {
        roots: p.roots,
        conditions: p.conditions,
        exclude: p.exclude,
        ignore_conditions: p.ignore_conditions,
    };
    // Reading skill files is blocking disk work: keep it off the async workers.
    let listing = tokio::task::spawn_blocking(move || list_skills(&q))
        .await
        .map_err(|e| RpcError::internal(format!("skills scan failed: {e}")))??;
    Ok(SkillsListResult {
        skills: listing.skills.into_iter().map(info).collect(),
        warnings: listing.warnings,
    })
}
