//! `compat.describe`: the OpenAI-compatible compat-flag vocabulary for host settings UIs.

use std::sync::Arc;

use crate::app::App;
use crate::rpc::dispatch::Call;
use crate::rpc::error::{Outcome, reply};
use crate::strict::NoParams;

pub async fn compat_describe(_app: Arc<App>, call: Call) -> Outcome {
    let _: NoParams = call.params()?;
    reply(&crate::llm::compat::describe())
}
