//! Images the model is shown (`view_image` results): stored once per content under the
//! store's directory (`images/<sha256>.<ext>`) and referenced from the record as
//! `outrigger-image:<file>`, so records stay small and a resumed turn shows the model the
//! same image again.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::llm::Message;

/// Where a store's images are kept: `images/` beside its database file.
pub fn dir_for(store: &Path) -> PathBuf {
    store
        .parent()
        .map_or_else(|| PathBuf::from("images"), |d| d.join("images"))
}

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
pub fn file_of(dir: &Path, url: &str) -> Option<PathBuf> {
    let name = url.strip_prefix(SCHEME)?;
    let ok = !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '.')
        && !name.starts_with('.');
    ok.then(|| dir.join(name))
}

/// Readies a turn's seeded items (from the record, or a host's history) for its model: stored
/// image parts get their bytes back from their files; a part whose file is gone, and every
/// image part when the model takes no images, becomes a text part saying so (a reference
/// must never reach a provider, and a text-only model must not be sent pixels).
pub fn hydrate(dir: &Path, items: &mut [Message], model_takes_images: bool) {
    for m in items.iter_mut() {
        for p in m.parts.iter_mut().filter(|p| p.kind == "image") {
            let note = if !model_takes_images {
                Some("[an image was here; this model does not take images]".to_string())
            } else if p.data.is_some() {
                None
            } else {
                match p
                    .url
                    .as_deref()
                    .and_then(|u| file_of(dir, u).map(|f| (u, f)))
                {
                    None => None,
                    Some((url, file)) => match std::fs::read(&file) {
                        Ok(bytes) => {
                            p.data = Some(base64::engine::general_purpose::STANDARD.encode(bytes));
                            None
                        }
                        Err(e) => {
                            tracing::warn!("stored image {}: {e}", file.display());
                            Some(format!("[image {url} is no longer stored]"))
                        }
                    },
                }
            };
            if let Some(text) = note {
                p.kind = "text".into();
                p.text = Some(text);
                p.url = None;
                p.data = None;
                p.media_type = None;
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
        let mut text_only = items.clone();
        hydrate(d.path(), &mut items, true);
        assert_eq!(items[0].parts[0].data.as_deref(), Some(data.as_str()));
        hydrate(d.path(), &mut text_only, false);
        assert_eq!(text_only[0].parts[0].kind, "text");
        std::fs::remove_dir_all(d.path()).unwrap();
        let mut gone = items.clone();
        gone[0].parts[0].data = None;
        hydrate(d.path(), &mut gone, true);
        assert_eq!(
            gone[0].parts[0].kind, "text",
            "a missing file is no reference"
        );
        assert!(file_of(d.path(), "outrigger-image:../x").is_none());
        assert!(file_of(d.path(), "https://x/y.png").is_none());
    }
}
