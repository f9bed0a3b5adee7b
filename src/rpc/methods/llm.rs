//! `compat.describe`: the OpenAI-compatible compat-flag vocabulary for host settings UIs.

use std::sync::Arc;

use crate::app::App;
use crate::rpc::dispatch::Call;
use crate::rpc::error::{Outcome, reply};

pub async fn compat_describe(_app: Arc<App>, _call: Call) -> Outcome {
    reply(&crate::llm::compat::describe())
}
