//! `harness.describe`.

use std::sync::Arc;

use crate::app::App;
use crate::rpc::dispatch::Call;
use crate::rpc::error::{Outcome, reply};

pub async fn describe(_app: Arc<App>, _call: Call) -> Outcome {
    reply(&crate::harness::describe())
}
