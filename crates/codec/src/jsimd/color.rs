//! YCbCr -> RGB (jdcolor.c's `ycc_rgb_convert`) with AVX2, 32 pixels per step.
//!
//! The arithmetic is `jdcolext-avx2.asm`'s, which equals the C tables exactly:
//! - R - Y = `((pmulhw(2 Cr, FIX(0.402)) + 1) >> 1) + Cr`
//!   = `(FIX(1.402) Cr + ONE_HALF) >> 16` (C's `Cr_r_tab`), because
//!   `floor((floor(a / 2^16) + 1) / 2) = floor((a + 2^16) / 2^17)`;
//! - B - Y = `((pmulhw(2 Cb, -FIX(0.228)) + 1) >> 1) + 2 Cb` (`Cb_b_tab`), likewise;
//! - G - Y = `((-FIX(0.34414) Cb + (FIX(1) - FIX(0.71414)) Cr + ONE_HALF) >> 16) - Cr`, in
//!   32 bits with `pmaddwd` (`(Cb_g_tab[cb] + Cr_g_tab[cr]) >> 16`);
//!
//! then `Y +` each with unsigned saturation (`range_limit`). The unit tests check all 65536
//! (Cb, Cr) pairs against the C formulas.

use mozjpeg_sys as ffi;
use std::arch::x86_64::*;

const SCALEBITS: i32 = 16;
const F_0_344: i32 = 22554; // FIX(0.34414)
const F_0_714: i32 = 46802; // FIX(0.71414)
const F_1_402: i32 = 91881; // FIX(1.40200)
const F_1_772: i32 = 116130; // FIX(1.77200)
const F_0_402: i32 = F_1_402 - 65536;
const F_0_285: i32 = 65536 - F_0_714;
const F_0_228: i32 = 131072 - F_1_772;

/// Where R, G and B go in an output pixel, and its size (jmorecfg.h's `rgb_red`, ...
/// tables); 4-byte layouts get 0xFF in the remaining byte, as the C does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Layout {
    pub red: usize,
    pub green: usize,
    pub blue: usize,
    pub size: usize,
}

impl Layout {
    /// The layouts jdcolor.c sends to `jsimd_ycc_rgb_convert`: JCS_RGB and the JCS_EXT_*
    /// spaces.
    pub(super) fn of(space: ffi::J_COLOR_SPACE) -> Option<Layout> {
        use ffi::J_COLOR_SPACE::*;
        let (red, green, blue, size) = match space {
            JCS_RGB | JCS_EXT_RGB => (0, 1, 2, 3),
            JCS_EXT_RGBX | JCS_EXT_RGBA => (0, 1, 2, 4),
            JCS_EXT_BGR => (2, 1, 0, 3),
            JCS_EXT_BGRX | JCS_EXT_BGRA => (2, 1, 0, 4),
            JCS_EXT_XBGR | JCS_EXT_ABGR => (3, 2, 1, 4),
            JCS_EXT_XRGB | JCS_EXT_ARGB => (1, 2, 3, 4),
            _ => return None,
        };
        Some(Layout { red, green, blue, size })
    }
}

/// Pixels per vector step.
const STEP: usize = 32;

/// Converts one row of `width` pixels.
///
/// # Safety
/// AVX2 must be available; `y`, `cb`, `cr` must have `width` readable samples and `out`
/// `width * layout.size` writable bytes.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn ycc_rgb_row_avx2(
    width: usize,
    y: *const u8,
    cb: *const u8,
    cr: *const u8,
    out: *mut u8,
    layout: Layout,
) {
    let mut col = 0;
    while col + STEP <= width {
        convert32(y.add(col), cb.add(col), cr.add(col), out.add(col * layout.size), layout);
        col += STEP;
    }
    let rest = width - col;
    if rest > 0 {
        // The tail through stack buffers, so nothing outside the rows is touched.
        let (mut ty, mut tcb, mut tcr) = ([0u8; STEP], [0u8; STEP], [0u8; STEP]);
        let mut tout = [0u8; STEP * 4];
        std::ptr::copy_nonoverlapping(y.add(col), ty.as_mut_ptr(), rest);
        std::ptr::copy_nonoverlapping(cb.add(col), tcb.as_mut_ptr(), rest);
        std::ptr::copy_nonoverlapping(cr.add(col), tcr.as_mut_ptr(), rest);
        convert32(ty.as_ptr(), tcb.as_ptr(), tcr.as_ptr(), tout.as_mut_ptr(), layout);
        std::ptr::copy_nonoverlapping(tout.as_ptr(), out.add(col * layout.size), rest * layout.size);
    }
}

/// R, G, B of 16 pixels (16-bit lanes) from Y, Cb - 128, Cr - 128 (16-bit lanes).
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn rgb16(y: __m256i, cb: __m256i, cr: __m256i) -> (__m256i, __m256i, __m256i) {
    let one = _mm256_set1_epi16(1);
    // R - Y = 0.402 Cr + Cr
    let r = _mm256_mulhi_epi16(_mm256_add_epi16(cr, cr), _mm256_set1_epi16(F_0_402 as i16));
    let r = _mm256_add_epi16(_mm256_srai_epi16::<1>(_mm256_add_epi16(r, one)), cr);
    // B - Y = -0.228 Cb + Cb + Cb
    let b = _mm256_mulhi_epi16(_mm256_add_epi16(cb, cb), _mm256_set1_epi16(-F_0_228 as i16));
    let b = _mm256_add_epi16(_mm256_add_epi16(_mm256_srai_epi16::<1>(_mm256_add_epi16(b, one)), cb), cb);
    // G - Y = -0.344 Cb + 0.285 Cr - Cr
    let k = _mm256_set1_epi32(((F_0_285 as u32) << 16 | (-F_0_344 as u16) as u32) as i32);
    let half = _mm256_set1_epi32(1 << (SCALEBITS - 1));
    let glo = _mm256_madd_epi16(_mm256_unpacklo_epi16(cb, cr), k);
    let ghi = _mm256_madd_epi16(_mm256_unpackhi_epi16(cb, cr), k);
    let glo = _mm256_srai_epi32::<SCALEBITS>(_mm256_add_epi32(glo, half));
    let ghi = _mm256_srai_epi32::<SCALEBITS>(_mm256_add_epi32(ghi, half));
    let g = _mm256_sub_epi16(_mm256_packs_epi32(glo, ghi), cr);
    (_mm256_add_epi16(y, r), _mm256_add_epi16(y, g), _mm256_add_epi16(y, b))
}

/// Byte-shuffle masks that interleave three 16-byte channels into 48 bytes: `MASKS[k][c]`
/// picks, for output block `k` (bytes 16k..16k+16), the bytes that come from channel `c`.
static MASKS: [[[i8; 16]; 3]; 3] = {
    let mut m = [[[-1i8; 16]; 3]; 3];
    let mut g = 0;
    while g < 48 {
        m[g / 16][g % 3][g % 16] = (g / 3) as i8;
        g += 1;
    }
    m
};

#[target_feature(enable = "avx2")]
#[inline]
unsafe fn mask(k: usize, c: usize) -> __m256i {
    let m = _mm_loadu_si128(MASKS[k][c].as_ptr() as *const __m128i);
    _mm256_broadcastsi128_si256(m)
}

/// 32 pixels: reads 32 samples of each plane, writes `32 * layout.size` bytes.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn convert32(y: *const u8, cb: *const u8, cr: *const u8, out: *mut u8, layout: Layout) {
    let zero = _mm256_setzero_si256();
    let center = _mm256_set1_epi16(128);
    let yv = _mm256_loadu_si256(y as *const __m256i);
    let cbv = _mm256_loadu_si256(cb as *const __m256i);
    let crv = _mm256_loadu_si256(cr as *const __m256i);
    // Lane-wise unpacks (pixels 0-7,16-23 / 8-15,24-31), undone by the lane-wise packs.
    let widen = |v: __m256i| (_mm256_unpacklo_epi8(v, zero), _mm256_unpackhi_epi8(v, zero));
    let (ylo, yhi) = widen(yv);
    let (cblo, cbhi) = widen(cbv);
    let (crlo, crhi) = widen(crv);
    let (rlo, glo, blo) = rgb16(ylo, _mm256_sub_epi16(cblo, center), _mm256_sub_epi16(crlo, center));
    let (rhi, ghi, bhi) = rgb16(yhi, _mm256_sub_epi16(cbhi, center), _mm256_sub_epi16(crhi, center));
    let r = _mm256_packus_epi16(rlo, rhi);
    let g = _mm256_packus_epi16(glo, ghi);
    let b = _mm256_packus_epi16(blo, bhi);

    let mut ch = [_mm256_set1_epi8(-1); 4];
    ch[layout.red] = r;
    ch[layout.green] = g;
    ch[layout.blue] = b;
    if layout.size == 3 {
        // Per 128-bit lane (16 pixels): three 16-byte blocks of interleaved bytes.
        let block = |k: usize| {
            _mm256_or_si256(
                _mm256_or_si256(_mm256_shuffle_epi8(ch[0], mask(k, 0)), _mm256_shuffle_epi8(ch[1], mask(k, 1))),
                _mm256_shuffle_epi8(ch[2], mask(k, 2)),
            )
        };
        let (b0, b1, b2) = (block(0), block(1), block(2));
        let o = out as *mut __m256i;
        _mm256_storeu_si256(o, _mm256_permute2x128_si256::<0x20>(b0, b1));
        _mm256_storeu_si256(o.add(1), _mm256_permute2x128_si256::<0x30>(b2, b0));
        _mm256_storeu_si256(o.add(2), _mm256_permute2x128_si256::<0x31>(b1, b2));
    } else {
        let lo01 = _mm256_unpacklo_epi8(ch[0], ch[1]); // pixels 0-7 | 16-23
        let hi01 = _mm256_unpackhi_epi8(ch[0], ch[1]); // 8-15 | 24-31
        let lo23 = _mm256_unpacklo_epi8(ch[2], ch[3]);
        let hi23 = _mm256_unpackhi_epi8(ch[2], ch[3]);
        let a = _mm256_unpacklo_epi16(lo01, lo23); // 0-3 | 16-19
        let b = _mm256_unpackhi_epi16(lo01, lo23); // 4-7 | 20-23
        let c = _mm256_unpacklo_epi16(hi01, hi23); // 8-11 | 24-27
        let d = _mm256_unpackhi_epi16(hi01, hi23); // 12-15 | 28-31
        let o = out as *mut __m256i;
        _mm256_storeu_si256(o, _mm256_permute2x128_si256::<0x20>(a, b));
        _mm256_storeu_si256(o.add(1), _mm256_permute2x128_si256::<0x20>(c, d));
        _mm256_storeu_si256(o.add(2), _mm256_permute2x128_si256::<0x31>(a, b));
        _mm256_storeu_si256(o.add(3), _mm256_permute2x128_si256::<0x31>(c, d));
    }
}

/// jdcolor.c's `ycc_rgb_convert` for one pixel, with its tables' formulas (the reference).
#[cfg(test)]
pub(super) fn ycc_rgb_reference(y: u8, cb: u8, cr: u8) -> [u8; 3] {
    const ONE_HALF: i64 = 1 << (SCALEBITS - 1);
    let (xb, xr) = (cb as i64 - 128, cr as i64 - 128);
    let cr_r = (F_1_402 as i64 * xr + ONE_HALF) >> SCALEBITS;
    let cb_b = (F_1_772 as i64 * xb + ONE_HALF) >> SCALEBITS;
    let cr_g = -(F_0_714 as i64) * xr;
    let cb_g = -(F_0_344 as i64) * xb + ONE_HALF;
    let y = y as i64;
    let clamp = |v: i64| v.clamp(0, 255) as u8;
    [clamp(y + cr_r), clamp(y + ((cb_g + cr_g) >> SCALEBITS)), clamp(y + cb_b)]
}
