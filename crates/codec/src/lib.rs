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
//!
//! JPEG decoding on x86-64 runs libjpeg-turbo's C with this crate's own SIMD kernels in place
//! of libjpeg-turbo's assembly (`jsimd`, see [`simd_report`]): the same pixels as TensorFlow's
//! SIMD build, with no assembler needed to build.
#![warn(missing_docs)]
mod error;
pub mod jpeg;
#[cfg(all(feature = "jpeg", target_arch = "x86_64"))]
mod jsimd;
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

/// Which SIMD paths the JPEG codec uses on this machine, and the CPU features seen, e.g.
/// `jpeg: libjpeg-turbo 2.x C (mozjpeg-sys 2.2.3) + Rust SIMD (idct_ifast sse2, idct_islow sse2,
/// ycc_rgb avx2, h2v2/h2v1 fancy upsample avx2); cpu: sse2 ssse3 sse4.1 avx avx2 fma avx512f`.
pub fn simd_report() -> String {
    #[cfg(all(feature = "jpeg", target_arch = "x86_64"))]
    {
        jsimd::report()
    }
    #[cfg(all(feature = "jpeg", not(target_arch = "x86_64")))]
    {
        "jpeg: libjpeg-turbo 2.x portable C (mozjpeg-sys 2.2.3; no SIMD on this architecture, \
         IFAST pixels may differ from TensorFlow's x86-64 build where its 16-bit IDCT overflows)"
            .to_string()
    }
    #[cfg(not(feature = "jpeg"))]
    {
        "jpeg: not built (the `jpeg` feature is off)".to_string()
    }
}

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

/// The format of `bytes` by signature (what `tf.io.decode_image` dispatches on).
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

#[cfg(all(test, not(feature = "jpeg")))]
mod without_jpeg {
    use super::*;

    #[test]
    fn jpeg_calls_say_the_feature_is_off_and_png_still_works() {
        let jpeg = b"\xff\xd8\xff\xe0 not decoded";
        let e = jpeg::decode_jpeg(jpeg, &jpeg::DecodeOptions::default()).unwrap_err();
        assert!(matches!(e, CodecError::NotBuilt(_)) && e.to_string().contains("`jpeg` feature"), "{e}");
        assert!(matches!(jpeg::jpeg_shape(jpeg), Err(CodecError::NotBuilt(_))));
        let e = jpeg::encode_jpeg(&[0; 3], 1, 1, 3, &jpeg::EncodeOptions::default()).unwrap_err();
        assert!(matches!(e, CodecError::NotBuilt(_)));
        // Not a JPEG at all: still the format error.
        assert!(matches!(jpeg::decode_jpeg(b"GIF89a", &Default::default()), Err(CodecError::NotFormat(_))));
        let png = png::encode_png(&png::PngPixels::U8(vec![1, 2, 3]), 1, 1, 3, -1).unwrap();
        let (pixels, shape) = png::decode_png(&png, &Default::default()).unwrap();
        assert_eq!((pixels, shape), (png::PngPixels::U8(vec![1, 2, 3]), [1, 1, 3]));
    }
}
