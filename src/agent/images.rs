//! Images the model is shown (`view_image` results): stored once per content under the
//! store's directory (`images/<sha256>.<ext>`) and referenced from the record as
//! `outrigger-image:<file>`, so records stay small and a resumed turn shows the model the
//! same image again.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::llm::Message;

/// The URL scheme of a stored image part.
pub const SCHEME: &str = "outrigger-image:";

fn ext(media: &str) -> &'static str {
    match media {
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        _ => "png",
    }
}

/// Writes the image (base64 `data`) under `dir` unless it is there; returns its reference.
pub fn store(dir: &Path, media: &str, data: &str) -> Result<String, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| format!("not base64: {e}"))?;
    let name = format!("{}.{}", hex::encode(Sha256::digest(&bytes)), ext(media));
    let path = dir.join(&name);
    if !path.is_file() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        // Write beside, then rename: a reader never sees half an image.
        let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        std::fs::write(&tmp, &bytes).map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(format!("{SCHEME}{name}"))
}

/// The file a reference names, if it is one of ours (a plain file name, nothing else).
fn file_of(dir: &Path, url: &str) -> Option<PathBuf> {
    let name = url.strip_prefix(SCHEME)?;
    let ok = !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '.')
        && !name.starts_with('.');
    ok.then(|| dir.join(name))
}

/// Fills the data of stored image parts from their files (a turn seeded from the record).
/// A missing file leaves the part as it is; the provider request then carries no image.
pub fn hydrate(dir: &Path, items: &mut [Message]) {
    for m in items.iter_mut() {
        for p in m
            .parts
            .iter_mut()
            .filter(|p| p.kind == "image" && p.data.is_none())
        {
            let Some(file) = p.url.as_deref().and_then(|u| file_of(dir, u)) else {
                continue;
            };
            match std::fs::read(&file) {
                Ok(bytes) => {
                    p.data = Some(base64::engine::general_purpose::STANDARD.encode(bytes));
                }
                Err(e) => tracing::warn!("stored image {}: {e}", file.display()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Role;
    use crate::llm::types::Part;

    #[test]
    fn stored_once_and_hydrated_back() {
        let d = tempfile::tempdir().unwrap();
        let data = base64::engine::general_purpose::STANDARD.encode(b"png bytes");
        let url = store(d.path(), "image/png", &data).unwrap();
        assert_eq!(store(d.path(), "image/png", &data).unwrap(), url);
        let mut m = Message::new(Role::User, "");
        m.parts.push(Part {
            kind: "image".into(),
            text: None,
            url: Some(url),
            data: None,
            media_type: Some("image/png".into()),
        });
        let mut items = vec![m];
        hydrate(d.path(), &mut items);
        assert_eq!(items[0].parts[0].data.as_deref(), Some(data.as_str()));
        assert!(file_of(d.path(), "outrigger-image:../x").is_none());
        assert!(file_of(d.path(), "https://x/y.png").is_none());
    }
}
