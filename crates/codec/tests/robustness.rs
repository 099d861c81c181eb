//! Error paths, limits, round trips and corrupted inputs: every call must return, never panic.

use ferroflow_codec::jpeg::{self, DecodeOptions, EncodeOptions, JpegFormat};
use ferroflow_codec::png::{self, PngDecodeOptions, PngDtype, PngPixels};
use ferroflow_codec::CodecError;
use std::path::Path;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/codec").join(name)).unwrap()
}

use ferroflow_tensor::rng::Rng;

fn gradient(h: usize, w: usize, c: usize) -> Vec<u8> {
    (0..h * w * c).map(|i| ((i / c % w) * 200 / w + (i / c / w) * 2 + i % c * 20).min(255) as u8).collect()
}

#[test]
fn jpeg_errors_are_clear() {
    let d = DecodeOptions::default();
    let e = jpeg::decode_jpeg(&[], &d).unwrap_err();
    assert!(matches!(e, CodecError::NotFormat(_)) && e.to_string() == "empty JPEG input", "{e}");
    let e = jpeg::decode_jpeg(&fixture("png_rgb8.png"), &d).unwrap_err();
    assert!(matches!(e, CodecError::NotFormat(_)), "{e:?}");
    assert!(e.to_string().starts_with("not a JPEG file: starts with 89 50 4e 47"), "{e}");
    let e = jpeg::decode_jpeg(b"\xff\xd8\xff", &d).unwrap_err();
    assert!(matches!(e, CodecError::Truncated(_)) && e.to_string().starts_with("truncated JPEG"), "{e}");
    let e = jpeg::decode_jpeg(b"\xff\xd8\xff\xe0\x00\x02garbage", &d).unwrap_err();
    assert!(matches!(e, CodecError::Invalid(_) | CodecError::Truncated(_)), "{e:?}");
    let e = jpeg::decode_jpeg(&fixture("jpeg_baseline420.jpg"), &d.clone().with_ratio(3)).unwrap_err();
    assert!(matches!(e, CodecError::Argument(_)) && e.to_string().contains("ratio"), "{e}");
    let e = jpeg::decode_jpeg(&fixture("jpeg_baseline420.jpg"), &d.clone().with_channels(4)).unwrap_err();
    assert!(matches!(e, CodecError::Argument(_)) && e.to_string().contains("channels"), "{e}");
    assert!(matches!(jpeg::DctMethod::from_tf("FLOAT"), Err(CodecError::Argument(_))));
    // CMYK to gray is not a libjpeg conversion; TF fails too.
    let e = jpeg::decode_jpeg(&fixture("jpeg_cmyk_adobe.jpg"), &d.with_channels(1)).unwrap_err();
    assert!(matches!(e, CodecError::Invalid(_)) && e.to_string().starts_with("invalid JPEG"), "{e}");
}

#[test]
fn jpeg_truncation() {
    let data = fixture("jpeg_truncated420.jpg");
    let d = DecodeOptions::default();
    assert!(matches!(jpeg::decode_jpeg(&data, &d), Err(CodecError::Truncated(_))));
    let (px, shape) = jpeg::decode_jpeg(&data, &d.with_try_recover_truncated(true)).unwrap();
    assert_eq!(shape, [29, 37, 3]);
    assert_eq!(px.len(), 29 * 37 * 3);
}

/// Cut right after a 0xFF inside the headers: with try_recover_truncated TF 2.21 loops forever on it; we fail.
#[test]
fn jpeg_recover_does_not_loop_forever() {
    let data = fixture("regress_recover_loop.jpg");
    let opts = DecodeOptions::default().with_try_recover_truncated(true);
    let e = jpeg::decode_jpeg(&data, &opts).unwrap_err();
    assert!(matches!(e, CodecError::Truncated(_)), "{e:?}");
}

#[test]
fn jpeg_size_limits_apply_before_decoding() {
    let data = fixture("jpeg_baseline420.jpg");
    let small = DecodeOptions::default().with_max_bytes(29 * 37 * 3 - 1);
    assert!(matches!(jpeg::decode_jpeg(&data, &small), Err(CodecError::TooLarge(_))));
    let exact = DecodeOptions::default().with_max_bytes(29 * 37 * 3);
    assert!(jpeg::decode_jpeg(&data, &exact).is_ok());
    // Claim 65000x65000 in the SOF header: rejected by TF's 2^29 limit without touching the scan data.
    let mut huge = data.clone();
    let sof = huge.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
    huge[sof + 5..sof + 9].copy_from_slice(&[0xFD, 0xE8, 0xFD, 0xE8]);
    let e = jpeg::decode_jpeg(&huge, &DecodeOptions::default().with_max_bytes(usize::MAX)).unwrap_err();
    assert!(matches!(e, CodecError::TooLarge(_)) && e.to_string().contains("2^29"), "{e}");
    assert_eq!(jpeg::jpeg_shape(&huge).unwrap(), [65000, 65000, 3]);
}

#[test]
fn jpeg_encode_round_trip_and_validation() {
    let (h, w) = (23, 41);
    for (c, format) in [(1, JpegFormat::Auto), (3, JpegFormat::Auto), (1, JpegFormat::Grayscale), (3, JpegFormat::Rgb)]
    {
        for progressive in [false, true] {
            let px = gradient(h, w, c);
            let opts = EncodeOptions::default().with_format(format).with_progressive(progressive).with_quality(100);
            let enc = jpeg::encode_jpeg(&px, h, w, c, &opts).unwrap();
            assert_eq!(jpeg::jpeg_shape(&enc).unwrap(), [h, w, c]);
            let (back, shape) = jpeg::decode_jpeg(&enc, &DecodeOptions::default()).unwrap();
            assert_eq!(shape, [h, w, c]);
            let max = px.iter().zip(&back).map(|(a, b)| a.abs_diff(*b)).max().unwrap();
            assert!(max <= 8, "round trip max diff {max}");
        }
    }
    let px = gradient(4, 4, 3);
    let d = EncodeOptions::default();
    assert!(jpeg::encode_jpeg(&px, 4, 4, 3, &d.clone().with_quality(101)).is_err());
    assert!(jpeg::encode_jpeg(&px, 4, 4, 3, &d.clone().with_format(JpegFormat::Grayscale)).is_err());
    assert!(jpeg::encode_jpeg(&px[..47], 4, 4, 3, &d).is_err());
    assert!(jpeg::encode_jpeg(&gradient(4, 4, 4), 4, 4, 4, &d).is_err());
    assert!(jpeg::encode_jpeg(&[], 0, 4, 3, &d).is_err());
}

#[test]
fn jpeg_corrupted_inputs_never_panic() {
    let mut rng = Rng::new(0x9E3779B97F4A7C15);
    let files =
        ["jpeg_baseline420.jpg", "jpeg_progressive420.jpg", "jpeg_cmyk_adobe.jpg", "jpeg_gray.jpg", "jpeg_pil422.jpg"];
    let (mut ok, mut err) = (0, 0);
    for name in files {
        let orig = fixture(name);
        for i in 0..400 {
            let mut data = orig.clone();
            for _ in 0..1 + rng.below(8) {
                let at = 3 + rng.below(data.len() - 3);
                data[at] = rng.next_u64() as u8;
            }
            if i % 5 == 0 {
                data.truncate(3 + rng.below(data.len() - 3));
            }
            let opts = DecodeOptions::default()
                .with_channels([0, 1, 3][rng.below(3)])
                .with_ratio([1, 2, 4, 8][rng.below(4)])
                .with_try_recover_truncated(rng.below(2) == 0)
                .with_acceptable_fraction(0.5)
                .with_fancy_upscaling(rng.below(2) == 0);
            match jpeg::decode_jpeg(&data, &opts) {
                Ok((px, s)) => {
                    assert_eq!(px.len(), s[0] * s[1] * s[2]);
                    ok += 1
                }
                Err(_) => err += 1,
            }
            let _ = jpeg::jpeg_shape(&data);
        }
    }
    assert!(ok > 0 && err > 0, "ok {ok} err {err}");
}

#[test]
fn png_errors_and_limits() {
    let d = PngDecodeOptions::default();
    let e = png::decode_png(&fixture("jpeg_gray.jpg"), &d).unwrap_err();
    assert!(matches!(e, CodecError::NotFormat(_)), "{e:?}");
    assert!(e.to_string().starts_with("not a PNG file: starts with ff d8 ff"), "{e}");
    let e = png::decode_png(&fixture("png_truncated.png"), &d).unwrap_err();
    assert!(matches!(e, CodecError::Truncated(_) | CodecError::Invalid(_)) && e.to_string().contains("PNG"), "{e}");
    let e = png::decode_png(&fixture("png_rgb8.png"), &d.clone().with_channels(2));
    assert!(matches!(e, Err(CodecError::Argument(_))));
    let small = d.with_max_bytes(29 * 37 * 3 - 1);
    let e = png::decode_png(&fixture("png_rgb8.png"), &small).unwrap_err();
    assert!(matches!(e, CodecError::TooLarge(_)) && e.to_string().starts_with("PNG too large"), "{e}");
}

#[test]
fn png_round_trip() {
    let (h, w) = (13, 17);
    for c in 1..=4 {
        let px8 = gradient(h, w, c);
        let px16: Vec<u16> = px8.iter().enumerate().map(|(i, &v)| v as u16 * 251 + i as u16 % 7).collect();
        for (pixels, dtype) in [(PngPixels::U8(px8.clone()), PngDtype::U8), (PngPixels::U16(px16), PngDtype::U16)] {
            for level in [-1, 0, 1, 6, 9] {
                let enc = png::encode_png(&pixels, h, w, c, level).unwrap();
                let opts = PngDecodeOptions::default().with_dtype(dtype);
                let (back, shape) = png::decode_png(&enc, &opts).unwrap();
                assert_eq!(shape, [h, w, c]);
                assert_eq!(back, pixels);
            }
        }
    }
    assert!(png::encode_png(&PngPixels::U8(vec![0; 12]), 2, 2, 3, 10).is_err());
    assert!(png::encode_png(&PngPixels::U8(vec![0; 11]), 2, 2, 3, 1).is_err());
}

#[test]
fn png_corrupted_inputs_never_panic() {
    let mut rng = Rng::new(0xD1B54A32D192ED03);
    for name in ["png_rgb8.png", "png_palette4_trns.png", "png_graya16.png", "png_gray1.png"] {
        let orig = fixture(name);
        for i in 0..300 {
            let mut data = orig.clone();
            for _ in 0..1 + rng.below(4) {
                let at = 8 + rng.below(data.len() - 8);
                data[at] = rng.next_u64() as u8;
            }
            if i % 4 == 0 {
                data.truncate(8 + rng.below(data.len() - 8));
            }
            let opts = PngDecodeOptions::default()
                .with_channels([0, 1, 3, 4][rng.below(4)])
                .with_dtype(if rng.below(2) == 0 { PngDtype::U8 } else { PngDtype::U16 });
            let _ = png::decode_png(&data, &opts);
        }
    }
}

/// An Adam7-interlaced PNG (13×11 RGB, written by hand: every pass's rows unfiltered) decodes
/// to the pixels it encodes, through the row-by-row path that checks for a stop before each row.
#[test]
fn an_interlaced_png_decodes_row_by_row() {
    let (px, shape) = png::decode_png(&fixture("png_rgb8_interlaced.png"), &PngDecodeOptions::default()).unwrap();
    assert_eq!(shape, [11, 13, 3]);
    let want: Vec<u8> = (0..11usize)
        .flat_map(|y| {
            (0..13usize).flat_map(move |x| [(x * 19 % 256) as u8, (y * 23 % 256) as u8, ((x + y) * 7 % 256) as u8])
        })
        .collect();
    assert_eq!(px, PngPixels::U8(want));
    // A decode asked to stop stops before its first row.
    let stop = ferroflow_codec::Stop(std::sync::Arc::new(|| true));
    let opts = PngDecodeOptions::default().with_stop(Some(stop));
    let e = png::decode_png(&fixture("png_rgb8.png"), &opts).unwrap_err();
    assert!(matches!(e, ferroflow_codec::CodecError::Stopped), "{e}");
}
