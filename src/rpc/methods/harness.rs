//! `harness.describe`.

use std::sync::Arc;

use crate::app::App;
use crate::protocol::NoParams;
use crate::rpc::dispatch::Call;
use crate::rpc::error::{Outcome, reply};

pub async fn describe(_app: Arc<App>, call: Call) -> Outcome {
    let _: NoParams = call.params()?;
    reply(&crate::harness::describe())
}
