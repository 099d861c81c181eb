//! Each kernel against a plain scalar reference on random inputs.

use super::color::{self, Layout};
use super::{idct_fast, idct_int, idct_red, upsample};
use mozjpeg_sys as ffi;

/// SplitMix64: small, seeded, good enough for test inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn byte(&mut self) -> u8 {
        self.next() as u8
    }
}

fn have_avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

/// A random block and table of one of several kinds, from realistic to hostile.
fn random_block(rng: &mut Rng, kind: u64) -> ([i32; 64], [i16; 64]) {
    let mut table = [0i32; 64];
    let mut coef = [0i16; 64];
    for i in 0..64 {
        table[i] = match kind {
            // libjpeg's IFAST/ISLOW multipliers for 8-bit tables: quantval * aanscale >> 12, up to ~1400.
            0..=2 => 1 + rng.below(1400) as i32,
            // Anything, including values whose low 16 bits differ from the int (16-bit DQT entries).
            _ => rng.next() as i32,
        };
        coef[i] = match kind {
            0 => {
                // Sparse, small: the usual photo block.
                if i < 10 || rng.below(8) == 0 {
                    rng.below(64) as i16 - 32
                } else {
                    0
                }
            }
            1 => rng.below(2048) as i16 - 1024, // dense, full baseline range
            2 => {
                // DC only (or row 0 only): the kernels' shortcut.
                if i == 0 || (i < 8 && rng.below(2) == 0) {
                    rng.next() as i16
                } else {
                    0
                }
            }
            _ => rng.next() as i16, // anything
        };
    }
    (table, coef)
}

type Kernel = unsafe fn(*const i32, *const i16, *mut *mut u8, usize);

/// Runs an IDCT kernel with an N x N output into a buffer of N rows at column 8 and checks
/// that nothing around the block changed.
fn run_idct_n<const N: usize>(kernel: Kernel, table: &[i32; 64], coef: &[i16; 64]) -> [[u8; N]; N] {
    let mut rows = vec![[0xA5u8; 24]; N];
    let mut ptrs: Vec<*mut u8> = rows.iter_mut().map(|r| r.as_mut_ptr()).collect();
    // SAFETY: 64 table entries and coefficients; N rows of 24 bytes, written at 8..8 + N.
    unsafe { kernel(table.as_ptr(), coef.as_ptr(), ptrs.as_mut_ptr(), 8) };
    let mut out = [[0u8; N]; N];
    for (r, row) in rows.iter().enumerate() {
        assert!(row[..8].iter().chain(&row[8 + N..]).all(|&b| b == 0xA5), "IDCT wrote outside its block");
        out[r].copy_from_slice(&row[8..8 + N]);
    }
    out
}

fn run_idct(kernel: Kernel, table: &[i32; 64], coef: &[i16; 64]) -> [[u8; 8]; 8] {
    run_idct_n::<8>(kernel, table, coef)
}

#[test]
fn idct_ifast_matches_sse2_lane_arithmetic() {
    let mut rng = Rng(1);
    let mut wrapped = 0;
    for n in 0..40_000 {
        let (table, coef) = random_block(&mut rng, n % 4);
        idct_fast::WRAPPED.with(|w| w.set(false));
        let want = idct_fast::idct_ifast_reference(&table, &coef);
        wrapped += idct_fast::WRAPPED.with(|w| w.get()) as u32;
        let got = run_idct(idct_fast::idct_ifast_sse2, &table, &coef);
        assert_eq!(got, want, "block {n}: table {table:?} coef {coef:?}");
    }
    // The hostile kinds must really exercise 16-bit wrap-around.
    assert!(wrapped > 10_000, "only {wrapped} blocks overflowed 16 bits");
}

#[test]
fn idct_ifast_overflowing_block() {
    // A checker-like block at quality 100 (all multipliers small) with large AC terms: the
    // butterflies exceed 16 bits and the SSE2 kernel's lanes wrap.
    let table = [4i32; 64];
    let mut coef = [0i16; 64];
    for (i, c) in coef.iter_mut().enumerate() {
        *c = if (i / 8 + i % 8) % 2 == 0 { 2000 } else { -2000 };
    }
    idct_fast::WRAPPED.with(|w| w.set(false));
    let want = idct_fast::idct_ifast_reference(&table, &coef);
    assert!(idct_fast::WRAPPED.with(|w| w.get()));
    assert_eq!(run_idct(idct_fast::idct_ifast_sse2, &table, &coef), want);
}

#[test]
fn idct_islow_matches_sse2_lane_arithmetic() {
    let mut rng = Rng(2);
    for n in 0..40_000 {
        let (table, coef) = random_block(&mut rng, n % 4);
        let want = idct_int::idct_islow_reference(&table, &coef);
        let got = run_idct(idct_int::idct_islow_sse2, &table, &coef);
        assert_eq!(got, want, "block {n}: table {table:?} coef {coef:?}");
    }
}

#[test]
fn idct_islow_dc_shortcut_wraps() {
    // DC-only block whose dequantised DC << PASS1_BITS exceeds 16 bits: the asm's shortcut
    // wraps (psllw) where its full pass would saturate; the port must do the same.
    let mut table = [1i32; 64];
    table[0] = 10_000;
    let mut coef = [0i16; 64];
    coef[0] = 1;
    let got = run_idct(idct_int::idct_islow_sse2, &table, &coef);
    assert_eq!(got, idct_int::idct_islow_reference(&table, &coef));
    // 40000 wraps to -25536, descaled to -25536 >> 5 = -798 -> saturated -128 -> 0.
    assert_eq!(got, [[0u8; 8]; 8]);
    coef[8] = 1; // an AC term: the full pass, which saturates to +32767 -> 255
    let full = run_idct(idct_int::idct_islow_sse2, &table, &coef);
    assert_eq!(full, idct_int::idct_islow_reference(&table, &coef));
    assert!(full.iter().flatten().all(|&v| v == 255));
}

#[test]
fn idct_reduced_match_sse2_lane_arithmetic() {
    let mut rng = Rng(6);
    for n in 0..40_000 {
        let (table, mut coef) = random_block(&mut rng, n % 4);
        if n % 8 == 2 {
            // Only row 4 besides row 0: the 4x4 kernel's shortcut still applies.
            coef[32..40].copy_from_slice(&[7, -300, 0, 5, 30000, 0, 1, 2]);
        }
        let got = run_idct_n::<4>(idct_red::idct_4x4_sse2, &table, &coef);
        assert_eq!(got, idct_red::idct_4x4_reference(&table, &coef), "4x4 block {n}: table {table:?} coef {coef:?}");
        let got = run_idct_n::<2>(idct_red::idct_2x2_sse2, &table, &coef);
        assert_eq!(got, idct_red::idct_2x2_reference(&table, &coef), "2x2 block {n}: table {table:?} coef {coef:?}");
    }
}

const SPACES: [ffi::J_COLOR_SPACE; 11] = {
    use ffi::J_COLOR_SPACE::*;
    [
        JCS_RGB,
        JCS_EXT_RGB,
        JCS_EXT_RGBX,
        JCS_EXT_BGR,
        JCS_EXT_BGRX,
        JCS_EXT_XBGR,
        JCS_EXT_XRGB,
        JCS_EXT_RGBA,
        JCS_EXT_BGRA,
        JCS_EXT_ABGR,
        JCS_EXT_ARGB,
    ]
};

/// Converts one row with the kernel and checks that nothing past `width` pixels is written.
fn convert_row(y: &[u8], cb: &[u8], cr: &[u8], layout: Layout) -> Vec<u8> {
    let width = y.len();
    let mut out = vec![0x5Au8; width * layout.size + 64];
    // SAFETY: AVX2 checked by the callers; rows of `width` samples and an output of more than
    // `width * size` bytes.
    unsafe { color::ycc_rgb_row_avx2(width, y.as_ptr(), cb.as_ptr(), cr.as_ptr(), out.as_mut_ptr(), layout) };
    assert!(out[width * layout.size..].iter().all(|&b| b == 0x5A), "wrote past the row");
    out.truncate(width * layout.size);
    out
}

fn expected_row(y: &[u8], cb: &[u8], cr: &[u8], layout: Layout) -> Vec<u8> {
    let mut out = vec![0xFFu8; y.len() * layout.size];
    for i in 0..y.len() {
        let [r, g, b] = color::ycc_rgb_reference(y[i], cb[i], cr[i]);
        let px = &mut out[i * layout.size..(i + 1) * layout.size];
        px[layout.red] = r;
        px[layout.green] = g;
        px[layout.blue] = b;
    }
    out
}

#[test]
fn ycc_rgb_all_chroma_pairs() {
    if !have_avx2() {
        return;
    }
    // All 65536 (Cb, Cr) pairs, each with a few luma values (extremes included), in rows
    // whose length is not a multiple of 32.
    let mut rng = Rng(3);
    let layout = Layout::of(ffi::J_COLOR_SPACE::JCS_RGB).unwrap();
    for cb0 in 0..256usize {
        let mut y = Vec::new();
        let mut cb = Vec::new();
        let mut cr = Vec::new();
        for crv in 0..256usize {
            for yv in [0u8, 255, rng.byte(), 16, 235] {
                y.push(yv);
                cb.push(cb0 as u8);
                cr.push(crv as u8);
            }
        }
        assert_eq!(convert_row(&y, &cb, &cr, layout), expected_row(&y, &cb, &cr, layout), "Cb = {cb0}");
    }
}

#[test]
fn ycc_rgb_every_layout_and_tail() {
    if !have_avx2() {
        return;
    }
    let mut rng = Rng(4);
    for space in SPACES {
        let layout = Layout::of(space).unwrap();
        for width in [1usize, 2, 5, 16, 31, 32, 33, 63, 64, 65, 100, 500] {
            let row = |rng: &mut Rng| (0..width).map(|_| rng.byte()).collect::<Vec<u8>>();
            let (y, cb, cr) = (row(&mut rng), row(&mut rng), row(&mut rng));
            assert_eq!(
                convert_row(&y, &cb, &cr, layout),
                expected_row(&y, &cb, &cr, layout),
                "{space:?}, width {width}"
            );
        }
    }
    assert_eq!(Layout::of(ffi::J_COLOR_SPACE::JCS_RGB565), None);
    assert_eq!(Layout::of(ffi::J_COLOR_SPACE::JCS_CMYK), None);
}

#[test]
fn fancy_upsample_rows() {
    if !have_avx2() {
        return;
    }
    let mut rng = Rng(5);
    for width in (3..80).chain([100, 127, 128, 129, 250, 251]) {
        for _ in 0..20 {
            let row = |rng: &mut Rng| (0..width).map(|_| rng.byte()).collect::<Vec<u8>>();
            let (near, far) = (row(&mut rng), row(&mut rng));
            let mut out = vec![0x3Cu8; 2 * width + 64];
            // SAFETY: AVX2 checked; rows of `width` samples, output of more than 2 * width.
            unsafe { upsample::h2v2_fancy_row_avx2(width, near.as_ptr(), far.as_ptr(), out.as_mut_ptr()) };
            assert!(out[2 * width..].iter().all(|&b| b == 0x3C), "h2v2 wrote past the row");
            assert_eq!(out[..2 * width], upsample::h2v2_fancy_reference(&near, &far, width)[..], "h2v2, width {width}");

            let mut out = vec![0x3Cu8; 2 * width + 64];
            // SAFETY: as above.
            unsafe { upsample::h2v1_fancy_row_avx2(width, near.as_ptr(), out.as_mut_ptr()) };
            assert!(out[2 * width..].iter().all(|&b| b == 0x3C), "h2v1 wrote past the row");
            assert_eq!(out[..2 * width], upsample::h2v1_fancy_reference(&near, width)[..], "h2v1, width {width}");
        }
    }
}

#[test]
fn capabilities_and_report() {
    let on = super::ON as i32;
    assert_eq!(super::jsimd_can_idct_ifast(), on);
    assert_eq!(super::jsimd_can_idct_islow(), on);
    assert_eq!(super::jsimd_can_idct_4x4(), on);
    assert_eq!(super::jsimd_can_idct_2x2(), on);
    assert_eq!(super::jsimd_can_ycc_rgb(), on & have_avx2() as i32);
    assert_eq!(super::jsimd_can_h2v2_fancy_upsample(), on & have_avx2() as i32);
    assert_eq!(super::jsimd_can_h2v1_fancy_upsample(), on & have_avx2() as i32);
    for can in [
        super::jsimd_can_rgb_ycc,
        super::jsimd_can_rgb_gray,
        super::jsimd_can_ycc_rgb565,
        super::jsimd_c_can_null_convert,
        super::jsimd_can_h2v2_downsample,
        super::jsimd_can_h2v1_downsample,
        super::jsimd_can_h2v2_smooth_downsample,
        super::jsimd_can_h2v2_upsample,
        super::jsimd_can_h2v1_upsample,
        super::jsimd_can_int_upsample,
        super::jsimd_can_h1v2_fancy_upsample,
        super::jsimd_can_h2v2_merged_upsample,
        super::jsimd_can_h2v1_merged_upsample,
        super::jsimd_can_convsamp,
        super::jsimd_can_convsamp_float,
        super::jsimd_can_fdct_islow,
        super::jsimd_can_fdct_ifast,
        super::jsimd_can_fdct_float,
        super::jsimd_can_quantize,
        super::jsimd_can_quantize_float,
        super::jsimd_can_idct_6x6,
        super::jsimd_can_idct_12x12,
        super::jsimd_can_idct_float,
        super::jsimd_can_huff_encode_one_block,
        super::jsimd_can_encode_mcu_AC_first_prepare,
        super::jsimd_can_encode_mcu_AC_refine_prepare,
    ] {
        assert_eq!(can(), 0);
    }
    let report = super::report();
    assert!(report.contains(if super::ON { "idct_ifast sse2" } else { "portable C" }), "{report}");
    assert!(report.contains("cpu: sse2"), "{report}");
}
