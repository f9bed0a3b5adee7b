//! `workspace.apply_edits`: the pure edit algorithm (the one `edit_file` and `apply_patch`
//! use) over a string, for hosts that hold the file themselves.

use std::sync::Arc;

use serde::Deserialize;

use crate::app::App;
use crate::rpc::dispatch::Call;
use crate::rpc::error::{ErrorKind, Outcome, RpcError, reply};
use crate::tools::fs::edit::{Edit, apply_edits as apply};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ApplyEditsParams {
    content: String,
    edits: Vec<Edit>,
    #[serde(default)]
    file_path: Option<String>,
    #[serde(default)]
    replace_all: bool,
}

pub async fn apply_edits(_app: Arc<App>, call: Call) -> Outcome {
    let p: ApplyEditsParams = call.params()?;
    let path = p.file_path.unwrap_or_else(|| "file".to_string());
    // Matching and diffing a large buffer is CPU work: keep it off the async workers.
    let outcome =
        tokio::task::spawn_blocking(move || apply(&p.content, &p.edits, &path, p.replace_all))
            .await
            .map_err(|e| RpcError::internal(format!("apply_edits failed: {e}")))?;
    match outcome {
        Ok(o) => reply(&o),
        Err(e) => {
            let mut err =
                RpcError::new(ErrorKind::EditFailed, e.message).with("code", e.code.as_str());
            if let Some(i) = e.edit {
                err = err.with("edit", i);
            }
            Err(err)
        }
    }
}
