//! `request.cancel`: cancel a queued or running request by its JSON-RPC id.

use std::sync::Arc;

use crate::protocol::{RequestCancelParams, RequestCancelResult};

use crate::app::App;
use crate::rpc::dispatch::cancel_request;
use crate::rpc::error::RpcError;
use crate::rpc::intake::id_key;

pub async fn cancel(
    app: Arc<App>,
    p: RequestCancelParams,
) -> Result<RequestCancelResult, RpcError> {
    // Only ids a request can carry; anything else could never match.
    if !(p.id.is_string() || p.id.is_number() || p.id.is_null()) {
        return Err(RpcError::invalid_params(
            "id must be the string, number or null id of the request to cancel",
        )
        .with("field", "id"));
    }
    let cancelled = cancel_request(&app, &id_key(&p.id.to_string()));
    Ok(RequestCancelResult { cancelled })
}
