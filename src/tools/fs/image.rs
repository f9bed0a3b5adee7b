//! `view_image`: a workspace image the model can see. The file is decoded (PNG, JPEG, GIF,
//! WebP, BMP), cropped, scaled and re-encoded here; the loop takes the encoded image out of
//! the result (`data._image`) and sends it to the model as an image part of the next
//! request. Also what `read_file` says about an image instead of a UTF-8 error.

#![allow(clippy::result_large_err)] // the failure is the result handed back

use std::io::Cursor;
use std::sync::Arc;

use base64::Engine as _;
use image::{DynamicImage, ImageFormat, ImageReader, Limits};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::read::load_disk_bytes;
use super::state::version_of;
use super::{FsEnv, FsTool, fail};
use crate::tools::{ToolContext, ToolMode, ToolResult};

pub const NAME: &str = "view_image";
/// The largest source file decoded.
pub const MAX_SOURCE_BYTES: u64 = 10 << 20;
/// The largest encoded image sent to the model.
pub const MAX_ENCODED_BYTES: usize = 5 << 20;
/// `maxEdge` default (what vision models take without scaling it down themselves) and ceiling.
pub const DEFAULT_MAX_EDGE: u32 = 1568;
pub const MAX_EDGE_CEILING: u32 = 4096;
/// Decoder bounds: a small file that claims huge dimensions is refused, not allocated.
const MAX_DECODE_DIMENSION: u32 = 16_384;
const MAX_DECODE_ALLOC: u64 = 512 << 20;
/// JPEG qualities tried in turn until the image fits `MAX_ENCODED_BYTES`.
const JPEG_QUALITIES: [u8; 4] = [85, 70, 55, 40];
/// The data key the loop takes the encoded image from (never shown to the model as text).
pub const IMAGE_KEY: &str = "_image";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Region {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ViewArgs {
    /// Image file path, relative to the workspace root or absolute.
    pub path: String,
    /// Crop first: `{x, y, w, h}` in pixels, or all four as 0–1 fractions of the size.
    #[serde(default)]
    pub region: Option<Region>,
    /// Longest edge after scaling, 1–4096 (default 1568). Images are never scaled up.
    #[serde(default)]
    #[schemars(range(min = 1, max = 4096))]
    pub max_edge: Option<u32>,
    /// `png` or `jpeg` (default: jpeg for a JPEG source, else png).
    #[serde(default)]
    pub format: Option<OutFormat>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OutFormat {
    Png,
    Jpeg,
}

const DESCRIPTION: &str = "Look at an image file in the workspace (PNG, JPEG, GIF, WebP or BMP, up to 10 MiB): \
a screenshot, a plot, a diagram. The image is shown to you with the next step. \
`region` {x, y, w, h} crops first (pixels, or all four as 0-1 fractions); \
`maxEdge` (default 1568) bounds the longer side after scaling; `format` is png or jpeg. \
Returns the size sent (`width`, `height`) and the source's.";

pub fn tool(env: Arc<FsEnv>) -> FsTool<ViewArgs> {
    FsTool::new(
        NAME,
        DESCRIPTION.to_string(),
        ToolMode::Read,
        env,
        view_image,
    )
}

fn media_type(f: OutFormat) -> &'static str {
    match f {
        OutFormat::Png => "image/png",
        OutFormat::Jpeg => "image/jpeg",
    }
}

/// The formats decoded, by what the bytes look like.
fn sniff(bytes: &[u8]) -> Option<ImageFormat> {
    image::guess_format(bytes).ok().filter(|f| {
        matches!(
            f,
            ImageFormat::Png
                | ImageFormat::Jpeg
                | ImageFormat::Gif
                | ImageFormat::WebP
                | ImageFormat::Bmp
        )
    })
}

fn mime_of(f: ImageFormat) -> &'static str {
    f.to_mime_type()
}

/// `read_file` on an image: what it is, and how to look at it. `None` when not an image.
pub fn describe(bytes: &[u8], shown: &str) -> Option<ToolResult> {
    let format = sniff(bytes)?;
    let reader = ImageReader::with_format(Cursor::new(bytes), format);
    let (w, h) = reader.into_dimensions().ok()?;
    Some(
        ToolResult::ok(Map::new())
            .with_data("path", shown)
            .with_data("mediaType", mime_of(format))
            .with_data("width", w)
            .with_data("height", h)
            .with_data(
                "hint",
                format!("{shown} is an image ({w}x{h}); call view_image to see it"),
            ),
    )
}

/// One image for the model, as a result carries it under `data._image` (an object, or a
/// list of them): what the loop stores and sends.
fn entry(media: &str, width: u32, height: u32, encoded: &[u8]) -> Value {
    json!({
        "mediaType": media,
        "width": width,
        "height": height,
        "sha256": version_of(encoded),
        "data": base64::engine::general_purpose::STANDARD.encode(encoded),
    })
}

/// An image another tool returned (an MCP result's image block, base64) as a `data._image`
/// entry, when it is one the model can take: PNG, JPEG, GIF or WebP within 5 MiB whose
/// header gives its size. `None` otherwise (it stays a described block).
pub fn attachment(mime: &str, b64: &str) -> Option<Value> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    if bytes.len() > MAX_ENCODED_BYTES {
        return None;
    }
    let format = sniff(&bytes).filter(|f| *f != ImageFormat::Bmp)?;
    if mime_of(format) != mime {
        return None;
    }
    let (w, h) = ImageReader::with_format(Cursor::new(&bytes), format)
        .into_dimensions()
        .ok()?;
    Some(entry(mime, w, h, &bytes))
}

/// The crop rectangle in pixels, clipped to the image.
fn crop_rect(r: &Region, w: u32, h: u32) -> Result<(u32, u32, u32, u32), String> {
    let vals = [r.x, r.y, r.w, r.h];
    if vals.iter().any(|v| !v.is_finite()) {
        return Err("region values must be finite numbers".into());
    }
    if r.w <= 0.0 || r.h <= 0.0 {
        return Err("region w and h must be greater than 0".into());
    }
    let fractions = vals.iter().all(|v| *v <= 1.0);
    let (fw, fh) = (f64::from(w), f64::from(h));
    let (x0, y0, x1, y1) = if fractions {
        (r.x * fw, r.y * fh, (r.x + r.w) * fw, (r.y + r.h) * fh)
    } else {
        (r.x, r.y, r.x + r.w, r.y + r.h)
    };
    let clamp = |v: f64, max: f64| v.round().clamp(0.0, max);
    let (x0, y0, x1, y1) = (clamp(x0, fw), clamp(y0, fh), clamp(x1, fw), clamp(y1, fh));
    if x1 - x0 < 1.0 || y1 - y0 < 1.0 {
        return Err(format!(
            "region {{x: {}, y: {}, w: {}, h: {}}} lies outside the {w}x{h} image",
            r.x, r.y, r.w, r.h
        ));
    }
    // Clamped to the image's u32 size above, so the casts are exact.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Ok((x0 as u32, y0 as u32, (x1 - x0) as u32, (y1 - y0) as u32))
}

/// The size with the longer edge at most `max_edge`, aspect kept; never larger.
pub fn fit(w: u32, h: u32, max_edge: u32) -> (u32, u32) {
    let long = w.max(h);
    if long <= max_edge {
        return (w, h);
    }
    let scale = f64::from(max_edge) / f64::from(long);
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let sized = |v: u32| ((f64::from(v) * scale).round() as u32).max(1);
    (sized(w), sized(h))
}

fn encode(img: &DynamicImage, format: OutFormat, quality: u8) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    match format {
        OutFormat::Png => img
            .write_to(&mut Cursor::new(&mut out), ImageFormat::Png)
            .map_err(|e| e.to_string())?,
        OutFormat::Jpeg => {
            // JPEG has no alpha: flatten to RGB first.
            let rgb = DynamicImage::ImageRgb8(img.to_rgb8());
            let enc = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality);
            rgb.write_with_encoder(enc).map_err(|e| e.to_string())?;
        }
    }
    Ok(out)
}

/// Encodes within `MAX_ENCODED_BYTES`: PNG, else JPEG at falling quality, else smaller.
fn encode_within(
    mut img: DynamicImage,
    format: OutFormat,
) -> Result<(Vec<u8>, OutFormat, DynamicImage), String> {
    if format == OutFormat::Png {
        let png = encode(&img, OutFormat::Png, 0)?;
        if png.len() <= MAX_ENCODED_BYTES {
            return Ok((png, OutFormat::Png, img));
        }
    }
    loop {
        for q in JPEG_QUALITIES {
            let jpeg = encode(&img, OutFormat::Jpeg, q)?;
            if jpeg.len() <= MAX_ENCODED_BYTES {
                return Ok((jpeg, OutFormat::Jpeg, img));
            }
        }
        let (w, h) = (img.width(), img.height());
        if w <= 1 && h <= 1 {
            return Err("the image does not fit 5 MiB even at 1x1".into());
        }
        img = img.resize_exact(
            (w / 2).max(1),
            (h / 2).max(1),
            image::imageops::FilterType::Triangle,
        );
    }
}

fn view_image(env: &FsEnv, ctx: &ToolContext, args: ViewArgs) -> ToolResult {
    let settings = env.settings();
    let ws = match env.workspace(ctx, &settings) {
        Ok(ws) => ws,
        Err(e) => return fail("io", e),
    };
    let max_edge = args.max_edge.unwrap_or(DEFAULT_MAX_EDGE);
    if !(1..=MAX_EDGE_CEILING).contains(&max_edge) {
        return ToolResult::recoverable(format!(
            "invalid arguments: maxEdge must be 1..{MAX_EDGE_CEILING}, got {max_edge}"
        ));
    }
    // From disk even under `hostFs`: an editor's buffers are text.
    let (bytes, real) = match load_disk_bytes(&ws, &args.path, MAX_SOURCE_BYTES) {
        Ok(x) => x,
        Err(r) if r.data.as_ref().and_then(|d| d.get("code")) == Some(&json!("too_large")) => {
            return fail(
                "too_large",
                format!(
                    "{} is over the {} MiB view_image reads; crop or shrink it with a shell command first",
                    args.path,
                    MAX_SOURCE_BYTES >> 20
                ),
            );
        }
        Err(r) => return r,
    };
    let shown = ws.display(&real);
    let Some(source_format) = sniff(&bytes) else {
        return fail(
            "not_image",
            format!(
                "{shown} is not a PNG, JPEG, GIF, WebP or BMP image; read text files with read_file"
            ),
        );
    };
    let mut reader = ImageReader::with_format(Cursor::new(&bytes), source_format);
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_DECODE_DIMENSION);
    limits.max_image_height = Some(MAX_DECODE_DIMENSION);
    limits.max_alloc = Some(MAX_DECODE_ALLOC);
    reader.limits(limits);
    let img = match reader.decode() {
        Ok(i) => i,
        Err(e) => {
            return fail(
                "decode_failed",
                format!("cannot decode {shown} as {}: {e}", mime_of(source_format)),
            );
        }
    };
    let (sw, sh) = (img.width(), img.height());
    let img = match &args.region {
        None => img,
        Some(r) => match crop_rect(r, sw, sh) {
            Ok((x, y, w, h)) => img.crop_imm(x, y, w, h),
            Err(e) => return fail("bad_region", e),
        },
    };
    let (tw, th) = fit(img.width(), img.height(), max_edge);
    let img = if (tw, th) == (img.width(), img.height()) {
        img
    } else {
        // An area-averaging downscale: as sharp as Lanczos for shrinking, a fraction of its time
        // and memory on a 12-megapixel screenshot (docs/benchmarks.md).
        img.thumbnail_exact(tw, th)
    };
    let format = args
        .format
        .unwrap_or(if source_format == ImageFormat::Jpeg {
            OutFormat::Jpeg
        } else {
            OutFormat::Png
        });
    let (encoded, format, img) = match encode_within(img, format) {
        Ok(x) => x,
        Err(e) => return fail("encode_failed", format!("cannot encode {shown}: {e}")),
    };
    let sha = version_of(&encoded);
    let image = entry(media_type(format), img.width(), img.height(), &encoded);
    ToolResult::ok(Map::new())
        .with_data("path", shown)
        .with_data("sourcePath", Value::String(real.display().to_string()))
        .with_data("width", img.width())
        .with_data("height", img.height())
        .with_data("sourceWidth", sw)
        .with_data("sourceHeight", sh)
        .with_data("mediaType", media_type(format))
        .with_data("bytes", encoded.len())
        .with_data("sha256", sha)
        // Set by the loop when it shows the image to a model; a direct call shows it to none.
        .with_data("imageSent", false)
        .with_data(IMAGE_KEY, image)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_scales_down_only_and_keeps_the_aspect() {
        assert_eq!(fit(4000, 3000, 1568), (1568, 1176));
        assert_eq!(fit(100, 50, 1568), (100, 50));
        assert_eq!(fit(5000, 1, 100), (100, 1));
    }

    #[test]
    fn attachments_are_real_images_of_the_stated_type() {
        let mut png = Vec::new();
        DynamicImage::new_rgb8(3, 2)
            .write_to(&mut Cursor::new(&mut png), ImageFormat::Png)
            .unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(&png);
        let a = attachment("image/png", &b64).unwrap();
        assert_eq!(
            (a["width"].as_u64(), a["height"].as_u64()),
            (Some(3), Some(2))
        );
        assert!(
            attachment("image/jpeg", &b64).is_none(),
            "a PNG claiming to be a JPEG"
        );
        assert!(
            attachment("image/png", "iVBORw0KGgo=").is_none(),
            "a bare signature"
        );
    }

    #[test]
    fn regions_in_pixels_and_fractions() {
        let r = |x, y, w, h| Region { x, y, w, h };
        assert_eq!(
            crop_rect(&r(0.5, 0.0, 0.5, 1.0), 200, 100),
            Ok((100, 0, 100, 100))
        );
        assert_eq!(
            crop_rect(&r(10.0, 10.0, 500.0, 20.0), 200, 100),
            Ok((10, 10, 190, 20))
        );
        assert!(crop_rect(&r(300.0, 0.0, 10.0, 10.0), 200, 100).is_err());
        assert!(crop_rect(&r(0.0, 0.0, 0.0, 1.0), 200, 100).is_err());
    }
}
