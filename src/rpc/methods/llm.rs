//! `compat.describe`: the OpenAI-compatible compat-flag vocabulary for host settings UIs.

use std::sync::Arc;

use crate::app::App;
use crate::llm::compat::{self, FlagDoc};
use crate::protocol::NoParams;
use crate::protocol::catalog::{CompatDescribeResult, CompatFlagDoc};
use crate::rpc::error::RpcError;

impl From<FlagDoc> for CompatFlagDoc {
    fn from(f: FlagDoc) -> Self {
        CompatFlagDoc {
            key: f.key.to_string(),
            field: f.field.to_string(),
            kind: f.kind.to_string(),
            default: f.default,
            description: f.description.to_string(),
        }
    }
}

pub async fn compat_describe(_: Arc<App>, _: NoParams) -> Result<CompatDescribeResult, RpcError> {
    Ok(CompatDescribeResult {
        flags: compat::describe()
            .into_iter()
            .map(CompatFlagDoc::from)
            .collect(),
    })
}
