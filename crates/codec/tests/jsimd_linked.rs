//! The decoder runs this crate's `jsimd_*` functions, not libjpeg-turbo's `jsimd_none.c`: the
//! symbols libjpeg's C calls answer "SIMD available", and a file on which the portable C IDCT
//! gives other pixels than TensorFlow decodes to TensorFlow's pixels.
#![cfg(target_arch = "x86_64")]

use ferroflow_codec::jpeg::{decode_jpeg, DctMethod, DecodeOptions};
use std::path::Path;

extern "C" {
    // The same symbols libjpeg's C calls (jsimd.h, jsimddct.h).
    fn jsimd_can_idct_ifast() -> std::ffi::c_int;
    fn jsimd_can_idct_islow() -> std::ffi::c_int;
    fn jsimd_can_idct_4x4() -> std::ffi::c_int;
    fn jsimd_can_ycc_rgb() -> std::ffi::c_int;
    fn jsimd_can_h2v2_fancy_upsample() -> std::ffi::c_int;
    fn jsimd_can_rgb_ycc() -> std::ffi::c_int;
}

const PORTABLE: bool = cfg!(ferroflow_portable_jpeg);

#[test]
fn c_sees_the_rust_jsimd_functions() {
    let avx2 = std::arch::is_x86_feature_detected!("avx2") && !PORTABLE;
    // SAFETY: argument-less functions returning an int.
    unsafe {
        assert_eq!(jsimd_can_idct_ifast(), !PORTABLE as i32);
        assert_eq!(jsimd_can_idct_islow(), !PORTABLE as i32);
        assert_eq!(jsimd_can_idct_4x4(), !PORTABLE as i32);
        assert_eq!(jsimd_can_ycc_rgb(), avx2 as i32);
        assert_eq!(jsimd_can_h2v2_fancy_upsample(), avx2 as i32);
        assert_eq!(jsimd_can_rgb_ycc(), 0);
    }
    let report = ferroflow_codec::simd_report();
    assert!(report.contains(if PORTABLE { "portable C" } else { "Rust SIMD (idct_ifast sse2" }), "{report}");
}

/// The quality-100 checker overflows the 16-bit IFAST IDCT: TF's pixels (SSE2, wrapped lanes)
/// differ from the portable C's by up to 255.
#[test]
fn overflowing_idct_gives_tensorflows_pixels() {
    if PORTABLE {
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/codec");
    for (file, dct, expected) in [
        ("jpeg_simd_checker_q100_420.jpg", DctMethod::IntegerFast, "jpeg_simd_checker_q100_420__c0.npy"),
        ("jpeg_simd_dqt255_420.jpg", DctMethod::IntegerFast, "jpeg_simd_dqt255_420__c0.npy"),
        ("jpeg_simd_dqt255_420.jpg", DctMethod::IntegerAccurate, "jpeg_simd_dqt255_420__c0_accurate.npy"),
    ] {
        let bytes = std::fs::read(dir.join(file)).unwrap();
        let opts = DecodeOptions::default().with_dct_method(dct);
        let (pixels, shape) = decode_jpeg(&bytes, &opts).unwrap();
        let tf = ferroflow_tensor::npy::read_npy(&dir.join(expected)).unwrap();
        assert_eq!(tf.dims(), &shape[..], "{file}");
        assert_eq!(tf.as_bytes().unwrap(), &pixels[..], "{file} ({dct:?}) differs from TensorFlow's decode");
    }
}
