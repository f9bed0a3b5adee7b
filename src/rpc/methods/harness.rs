//! `harness.describe`.

use std::sync::Arc;

use crate::app::App;
use crate::rpc::dispatch::Call;
use crate::rpc::error::{Outcome, reply};
use crate::strict::NoParams;

pub async fn describe(_app: Arc<App>, call: Call) -> Outcome {
    let _: NoParams = call.params()?;
    reply(&crate::harness::describe())
}
