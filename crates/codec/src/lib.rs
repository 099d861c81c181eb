//! Image codecs with TensorFlow 2.21's exact behaviour: `decode_jpeg` (fast integer IDCT by
//! default, fancy upsampling, TF's CMYK conversion and truncated-file recovery),
//! `extract_jpeg_shape`, `encode_jpeg` (byte-identical to TF's), `decode_png` (8/16 bit, TF's
//! channel conversions) and `encode_png`. Every size is checked from the header against a
//! caller's byte limit before anything image-sized is allocated, and no input makes them
//! panic or abort (libjpeg's fatal errors unwind back to an `Err`; this needs
//! `panic = "unwind"`, Rust's default).
//!
//! Parity with TensorFlow is tested byte for byte on fixtures TensorFlow wrote
//! (`scripts/make_codec_fixtures.py` → `fixtures/codec/`).
mod error;
pub mod jpeg;
pub mod png;

pub use error::CodecError;

/// What an image file holds, from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `FF D8 FF`.
    Jpeg,
    /// `89 'PNG' 0D 0A 1A 0A`.
    Png,
    /// `GIF87a` / `GIF89a`.
    Gif,
    /// `BM`.
    Bmp,
}

/// The format of `bytes` by signature (what `tf.io.decode_image` dispatches on).
/// Asked while a decode runs (JPEG: every row of every scan; PNG: every row): `true` stops it
/// with [`CodecError::Stopped`] (a step's cancellation or deadline).
#[derive(Clone)]
pub struct Stop(pub std::sync::Arc<dyn Fn() -> bool + Send + Sync>);

impl Stop {
    /// `Err(Stopped)` once asked to stop.
    pub fn check(stop: &Option<Stop>) -> Result<(), CodecError> {
        match stop {
            Some(s) if (s.0)() => Err(CodecError::Stopped),
            _ => Ok(()),
        }
    }
}

impl std::fmt::Debug for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Stop(..)")
    }
}

pub fn sniff(bytes: &[u8]) -> Option<Format> {
    if bytes.starts_with(b"\xff\xd8\xff") {
        Some(Format::Jpeg)
    } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(Format::Png)
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some(Format::Gif)
    } else if bytes.starts_with(b"BM") {
        Some(Format::Bmp)
    } else {
        None
    }
}
