//! `jsimd_idct_islow_sse2` (libjpeg-turbo simd/x86_64/jidctint-sse2.asm), ported instruction
//! for instruction: 16-bit dequantisation and butterflies that wrap, `pmaddwd` products in
//! 32 bits, rounding shifts and saturating packs. (TF runs the AVX2 version of this kernel on
//! AVX2 machines; it performs the same lane operations in another order of registers, so its
//! output is the same.)
//!
//! Unlike the IFAST kernel, the "AC terms all zero" shortcut of pass 1 is not the full pass
//! in disguise: it scales the DC row with a wrapping `psllw` where the full pass would saturate
//! in `packssdw`. It is reproduced as is.

use super::idct_fast::{load_table_row, store_rows, transpose};
use std::arch::x86_64::*;

const CONST_BITS: i32 = 13;
const PASS1_BITS: i32 = 2;
pub(super) const DESCALE_P1: i32 = CONST_BITS - PASS1_BITS;
pub(super) const DESCALE_P2: i32 = CONST_BITS + PASS1_BITS + 3;

const F_0_298: i32 = 2446;
const F_0_390: i32 = 3196;
const F_0_541: i32 = 4433;
const F_0_765: i32 = 6270;
const F_0_899: i32 = 7373;
const F_1_175: i32 = 9633;
const F_1_501: i32 = 12299;
const F_1_847: i32 = 15137;
const F_1_961: i32 = 16069;
const F_2_053: i32 = 16819;
const F_2_562: i32 = 20995;
const F_3_072: i32 = 25172;

/// The asm's `pmaddwd` constant pairs (first element at the lower address).
pub(super) const PW_F130_F054: (i16, i16) = ((F_0_541 + F_0_765) as i16, F_0_541 as i16);
pub(super) const PW_F054_MF130: (i16, i16) = (F_0_541 as i16, (F_0_541 - F_1_847) as i16);
pub(super) const PW_MF078_F117: (i16, i16) = ((F_1_175 - F_1_961) as i16, F_1_175 as i16);
pub(super) const PW_F117_F078: (i16, i16) = (F_1_175 as i16, (F_1_175 - F_0_390) as i16);
pub(super) const PW_MF060_MF089: (i16, i16) = ((F_0_298 - F_0_899) as i16, -F_0_899 as i16);
pub(super) const PW_MF089_F060: (i16, i16) = (-F_0_899 as i16, (F_1_501 - F_0_899) as i16);
pub(super) const PW_MF050_MF256: (i16, i16) = ((F_2_053 - F_2_562) as i16, -F_2_562 as i16);
pub(super) const PW_MF256_F050: (i16, i16) = (-F_2_562 as i16, (F_3_072 - F_2_562) as i16);

#[inline(always)]
unsafe fn pair(p: (i16, i16)) -> __m128i {
    _mm_set1_epi32(((p.1 as u16 as u32) << 16 | p.0 as u16 as u32) as i32)
}

/// `pmaddwd` of the interleaved lanes of `a` and `b` with a constant pair: (low, high halves).
#[inline(always)]
unsafe fn madd(a: __m128i, b: __m128i, k: (i16, i16)) -> (__m128i, __m128i) {
    let k = pair(k);
    (_mm_madd_epi16(_mm_unpacklo_epi16(a, b), k), _mm_madd_epi16(_mm_unpackhi_epi16(a, b), k))
}

/// `x << CONST_BITS` in 32 bits, from 16-bit lanes (the asm's unpack into the high half and
/// `psrad 16 - CONST_BITS`).
#[inline(always)]
unsafe fn widen_scaled(x: __m128i) -> (__m128i, __m128i) {
    let zero = _mm_setzero_si128();
    (
        _mm_srai_epi32::<{ 16 - CONST_BITS }>(_mm_unpacklo_epi16(zero, x)),
        _mm_srai_epi32::<{ 16 - CONST_BITS }>(_mm_unpackhi_epi16(zero, x)),
    )
}

type Half = (__m128i, __m128i);

#[inline(always)]
unsafe fn add(a: Half, b: Half) -> Half {
    (_mm_add_epi32(a.0, b.0), _mm_add_epi32(a.1, b.1))
}

#[inline(always)]
unsafe fn sub(a: Half, b: Half) -> Half {
    (_mm_sub_epi32(a.0, b.0), _mm_sub_epi32(a.1, b.1))
}

/// Round, shift by `SHIFT` and pack with signed saturation to 16 bits.
#[inline(always)]
unsafe fn descale<const SHIFT: i32>(v: Half) -> __m128i {
    let round = _mm_set1_epi32(1 << (SHIFT - 1));
    _mm_packs_epi32(
        _mm_srai_epi32::<SHIFT>(_mm_add_epi32(v.0, round)),
        _mm_srai_epi32::<SHIFT>(_mm_add_epi32(v.1, round)),
    )
}

/// One 1-D pass (both passes run this sequence; they differ in the descale shift).
#[inline(always)]
unsafe fn pass<const SHIFT: i32>(x: [__m128i; 8]) -> [__m128i; 8] {
    // -- Even part
    let tmp3 = madd(x[2], x[6], PW_F130_F054);
    let tmp2 = madd(x[2], x[6], PW_F054_MF130);
    let tmp0 = widen_scaled(_mm_add_epi16(x[0], x[4]));
    let tmp1 = widen_scaled(_mm_sub_epi16(x[0], x[4]));
    let tmp10 = add(tmp0, tmp3);
    let tmp13 = sub(tmp0, tmp3);
    let tmp11 = add(tmp1, tmp2);
    let tmp12 = sub(tmp1, tmp2);

    // -- Odd part
    let z3 = _mm_add_epi16(x[3], x[7]);
    let z4 = _mm_add_epi16(x[1], x[5]);
    let z3m = madd(z3, z4, PW_MF078_F117);
    let z4m = madd(z3, z4, PW_F117_F078);
    let otmp0 = add(madd(x[7], x[1], PW_MF060_MF089), z3m);
    let otmp3 = add(madd(x[7], x[1], PW_MF089_F060), z4m);
    let otmp1 = add(madd(x[5], x[3], PW_MF050_MF256), z4m);
    let otmp2 = add(madd(x[5], x[3], PW_MF256_F050), z3m);

    // -- Final output stage
    [
        descale::<SHIFT>(add(tmp10, otmp3)),
        descale::<SHIFT>(add(tmp11, otmp2)),
        descale::<SHIFT>(add(tmp12, otmp1)),
        descale::<SHIFT>(add(tmp13, otmp0)),
        descale::<SHIFT>(sub(tmp13, otmp0)),
        descale::<SHIFT>(sub(tmp12, otmp1)),
        descale::<SHIFT>(sub(tmp11, otmp2)),
        descale::<SHIFT>(sub(tmp10, otmp3)),
    ]
}

/// Dequantises and inverse-transforms one block (`jsimd_idct_islow_sse2`).
///
/// # Safety
/// `table`: 64 readable `i32` (`dct_table`); `coef`: 64 readable coefficients;
/// `output_buf[0..8]`: rows with at least `output_col + 8` writable bytes.
#[inline]
pub(super) unsafe fn idct_islow_sse2(table: *const i32, coef: *const i16, output_buf: *mut *mut u8, output_col: usize) {
    let c = |r: usize| _mm_loadu_si128(coef.add(8 * r) as *const __m128i);
    let q = |r: usize| load_table_row(table.add(8 * r));

    let ac = _mm_or_si128(
        _mm_or_si128(_mm_or_si128(c(1), c(2)), _mm_or_si128(c(3), c(4))),
        _mm_or_si128(_mm_or_si128(c(5), c(6)), c(7)),
    );
    let cols = if _mm_movemask_epi8(_mm_cmpeq_epi8(ac, _mm_setzero_si128())) == 0xFFFF {
        // -- AC terms all zero (psllw: wraps)
        let in0 = _mm_slli_epi16::<PASS1_BITS>(_mm_mullo_epi16(c(0), q(0)));
        let lo = _mm_unpacklo_epi16(in0, in0);
        let hi = _mm_unpackhi_epi16(in0, in0);
        [
            _mm_shuffle_epi32::<0x00>(lo),
            _mm_shuffle_epi32::<0x55>(lo),
            _mm_shuffle_epi32::<0xAA>(lo),
            _mm_shuffle_epi32::<0xFF>(lo),
            _mm_shuffle_epi32::<0x00>(hi),
            _mm_shuffle_epi32::<0x55>(hi),
            _mm_shuffle_epi32::<0xAA>(hi),
            _mm_shuffle_epi32::<0xFF>(hi),
        ]
    } else {
        let x: [__m128i; 8] = std::array::from_fn(|r| _mm_mullo_epi16(c(r), q(r)));
        transpose(pass::<DESCALE_P1>(x))
    };
    store_rows(pass::<DESCALE_P2>(cols), output_buf, output_col);
}

/// Scalar transliteration of the SSE2 lane arithmetic (the unit tests' reference).
#[cfg(test)]
#[allow(clippy::needless_range_loop)] // indices as in the asm's lane labels
pub(super) fn idct_islow_reference(table: &[i32; 64], coef: &[i16; 64]) -> [[u8; 8]; 8] {
    fn madd(a: i16, b: i16, k: (i16, i16)) -> i32 {
        (a as i32 * k.0 as i32).wrapping_add(b as i32 * k.1 as i32)
    }
    fn pass(x: [i16; 8], shift: i32) -> [i16; 8] {
        let descale = |v: i32| (v.wrapping_add(1 << (shift - 1)) >> shift).clamp(-32768, 32767) as i16;
        let tmp3 = madd(x[2], x[6], PW_F130_F054);
        let tmp2 = madd(x[2], x[6], PW_F054_MF130);
        let tmp0 = (x[0].wrapping_add(x[4]) as i32) << CONST_BITS;
        let tmp1 = (x[0].wrapping_sub(x[4]) as i32) << CONST_BITS;
        let (tmp10, tmp13) = (tmp0.wrapping_add(tmp3), tmp0.wrapping_sub(tmp3));
        let (tmp11, tmp12) = (tmp1.wrapping_add(tmp2), tmp1.wrapping_sub(tmp2));
        let z3 = x[3].wrapping_add(x[7]);
        let z4 = x[1].wrapping_add(x[5]);
        let z3m = madd(z3, z4, PW_MF078_F117);
        let z4m = madd(z3, z4, PW_F117_F078);
        let o0 = madd(x[7], x[1], PW_MF060_MF089).wrapping_add(z3m);
        let o3 = madd(x[7], x[1], PW_MF089_F060).wrapping_add(z4m);
        let o1 = madd(x[5], x[3], PW_MF050_MF256).wrapping_add(z4m);
        let o2 = madd(x[5], x[3], PW_MF256_F050).wrapping_add(z3m);
        [
            descale(tmp10.wrapping_add(o3)),
            descale(tmp11.wrapping_add(o2)),
            descale(tmp12.wrapping_add(o1)),
            descale(tmp13.wrapping_add(o0)),
            descale(tmp13.wrapping_sub(o0)),
            descale(tmp12.wrapping_sub(o1)),
            descale(tmp11.wrapping_sub(o2)),
            descale(tmp10.wrapping_sub(o3)),
        ]
    }
    let deq = |i: usize| coef[i].wrapping_mul(table[i] as i16);
    let mut ws = [[0i16; 8]; 8]; // ws[row][col]
    if coef[8..].iter().all(|&v| v == 0) {
        for (col, v) in (0..8).map(|c| (c, ((deq(c) as u16) << PASS1_BITS) as i16)) {
            for row in ws.iter_mut() {
                row[col] = v;
            }
        }
    } else {
        for col in 0..8 {
            let d = pass(std::array::from_fn(|k| deq(8 * k + col)), DESCALE_P1);
            for k in 0..8 {
                ws[k][col] = d[k];
            }
        }
    }
    let mut out = [[0u8; 8]; 8];
    for row in 0..8 {
        let d = pass(ws[row], DESCALE_P2);
        for k in 0..8 {
            out[row][k] = (d[k].clamp(-128, 127) as i8 as u8).wrapping_add(128);
        }
    }
    out
}
