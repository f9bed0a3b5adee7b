//! The file tools' reads and writes through the host (`hostFs` of a turn): an editor's
//! unsaved buffers are what the model reads, and its writes land in them. Everything else
//! stays ours: containment and blocked paths are checked on the disk path first, versions
//! are the sha256 of the text the host gave, and the read-before-write rules apply as ever.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::fail;
use crate::tools::{ToolContext, ToolResult};

/// How long one host read or write may take.
pub const HOST_FS_TIMEOUT: Duration = Duration::from_secs(30);

/// Waits for a host call from a file tool, which runs on the blocking pool.
fn call(ctx: &ToolContext, method: &str, params: Value) -> Result<Value, String> {
    let Some(host) = ctx.host.clone() else {
        return Err(format!(
            "hostFs is set but no host is connected to answer {method}"
        ));
    };
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return Err(format!("{method}: no runtime to wait on the host from"));
    };
    rt.block_on(host.call(method, params, HOST_FS_TIMEOUT, &ctx.cancel))
        .map_err(|e| e.to_string())
}

fn context(ctx: &ToolContext) -> Value {
    let mut c = ctx.host_context.clone();
    c.insert("callId".into(), json!(ctx.call_id));
    Value::Object(c)
}

/// The file's text from the host, when reads go through it (`None`: read the disk).
pub fn read(
    ctx: &ToolContext,
    abs: &Path,
    shown: &str,
    max_bytes: u64,
) -> Option<Result<Vec<u8>, ToolResult>> {
    if !ctx.host_fs.read {
        return None;
    }
    let params = json!({"path": abs, "context": context(ctx)});
    Some(match call(ctx, "fs.read_text", params) {
        Ok(v) => match v.get("content").and_then(Value::as_str) {
            Some(text) if text.len() as u64 > max_bytes => Err(fail(
                "too_large",
                format!(
                    "{shown} is {} bytes in the editor, over the {max_bytes}-byte limit (config max_read_bytes)",
                    text.len()
                ),
            )),
            Some(text) => Ok(text.as_bytes().to_vec()),
            None => Err(fail(
                "io",
                format!("the host's answer to fs.read_text for {shown} has no content string"),
            )),
        },
        Err(e) => Err(fail(
            "io",
            format!("cannot read {shown} through the host: {e}"),
        )),
    })
}

/// Writes the file through the host, when writes go through it (`None`: write the disk).
pub fn write(
    ctx: &ToolContext,
    abs: &Path,
    shown: &str,
    bytes: &[u8],
) -> Option<Result<(), ToolResult>> {
    if !ctx.host_fs.write {
        return None;
    }
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Some(Err(fail(
            "io",
            format!("cannot write {shown} through the host: not UTF-8"),
        )));
    };
    let params = json!({"path": abs, "content": text, "context": context(ctx)});
    Some(
        call(ctx, "fs.write_text", params)
            .map(|_| ())
            .map_err(|e| fail("io", format!("cannot write {shown} through the host: {e}"))),
    )
}
