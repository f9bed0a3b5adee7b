//! `harness.describe`.

use std::sync::Arc;

use crate::app::App;
use crate::protocol::NoParams;
use crate::protocol::tools::HarnessDescription;
use crate::rpc::error::RpcError;

pub async fn describe(_: Arc<App>, _: NoParams) -> Result<HarnessDescription, RpcError> {
    Ok(crate::harness::describe())
}
