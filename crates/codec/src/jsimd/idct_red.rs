//! `jsimd_idct_4x4_sse2` and `jsimd_idct_2x2_sse2` (libjpeg-turbo simd/x86_64/jidctred-sse2.asm,
//! the reduced-size IDCTs of `ratio=2` and `ratio=4` decodes), ported instruction for
//! instruction: 16-bit dequantisation that wraps, `pmaddwd` products, rounding shifts and
//! saturating packs where the asm has them (the 2x2 kernel keeps its DC term in 32 bits
//! between the passes and shifts it left with `pslld`, which wraps).

use super::idct_fast::load_table_row;
use std::arch::x86_64::*;

const CONST_BITS: i32 = 13;
const PASS1_BITS: i32 = 2;
const DESCALE_P1_4: i32 = CONST_BITS - PASS1_BITS + 1;
const DESCALE_P2_4: i32 = CONST_BITS + PASS1_BITS + 3 + 1;
const DESCALE_P1_2: i32 = CONST_BITS - PASS1_BITS + 2;
const DESCALE_P2_2: i32 = CONST_BITS + PASS1_BITS + 3 + 2;

const F_0_211: i32 = 1730;
const F_0_509: i32 = 4176;
const F_0_601: i32 = 4926;
const F_0_720: i32 = 5906;
const F_0_765: i32 = 6270;
const F_0_850: i32 = 6967;
const F_0_899: i32 = 7373;
const F_1_061: i32 = 8697;
const F_1_272: i32 = 10426;
const F_1_451: i32 = 11893;
const F_1_847: i32 = 15137;
const F_2_172: i32 = 17799;
const F_2_562: i32 = 20995;
const F_3_624: i32 = 29692;

const PW_F184_MF076: (i16, i16) = (F_1_847 as i16, -F_0_765 as i16);
const PW_F256_F089: (i16, i16) = (F_2_562 as i16, F_0_899 as i16);
const PW_F106_MF217: (i16, i16) = (F_1_061 as i16, -F_2_172 as i16);
const PW_MF060_MF050: (i16, i16) = (-F_0_601 as i16, -F_0_509 as i16);
const PW_F145_MF021: (i16, i16) = (F_1_451 as i16, -F_0_211 as i16);
const PW_F362_MF127: (i16, i16) = (F_3_624 as i16, -F_1_272 as i16);
const PW_F085_MF072: (i16, i16) = (F_0_850 as i16, -F_0_720 as i16);

#[inline(always)]
unsafe fn madd(pairs: __m128i, k: (i16, i16)) -> __m128i {
    _mm_madd_epi16(pairs, _mm_set1_epi32(((k.1 as u16 as u32) << 16 | k.0 as u16 as u32) as i32))
}

/// `pmaddwd` of the interleaved lanes of `a` and `b`: (lanes 0-3, lanes 4-7).
#[inline(always)]
unsafe fn madd2(a: __m128i, b: __m128i, k: (i16, i16)) -> (__m128i, __m128i) {
    (madd(_mm_unpacklo_epi16(a, b), k), madd(_mm_unpackhi_epi16(a, b), k))
}

#[inline(always)]
unsafe fn add(a: (__m128i, __m128i), b: (__m128i, __m128i)) -> (__m128i, __m128i) {
    (_mm_add_epi32(a.0, b.0), _mm_add_epi32(a.1, b.1))
}

#[inline(always)]
unsafe fn sub(a: (__m128i, __m128i), b: (__m128i, __m128i)) -> (__m128i, __m128i) {
    (_mm_sub_epi32(a.0, b.0), _mm_sub_epi32(a.1, b.1))
}

#[inline(always)]
unsafe fn round_shift<const SHIFT: i32>(v: __m128i) -> __m128i {
    _mm_srai_epi32::<SHIFT>(_mm_add_epi32(v, _mm_set1_epi32(1 << (SHIFT - 1))))
}

#[inline(always)]
unsafe fn descale_pack<const SHIFT: i32>(v: (__m128i, __m128i)) -> __m128i {
    _mm_packs_epi32(round_shift::<SHIFT>(v.0), round_shift::<SHIFT>(v.1))
}

/// Reduced-size IDCT to 4x4 (`jsimd_idct_4x4_sse2`).
///
/// # Safety
/// `table`: 64 readable `i32` (`dct_table`); `coef`: 64 readable coefficients;
/// `output_buf[0..4]`: rows with at least `output_col + 4` writable bytes.
pub(super) unsafe fn idct_4x4_sse2(table: *const i32, coef: *const i16, output_buf: *mut *mut u8, output_col: usize) {
    let zero = _mm_setzero_si128();
    let c = |r: usize| _mm_loadu_si128(coef.add(8 * r) as *const __m128i);
    let q = |r: usize| load_table_row(table.add(8 * r));

    // ---- Pass 1: columns; four output rows. Row 4 is not used by this IDCT.
    let ac = _mm_or_si128(_mm_or_si128(_mm_or_si128(c(1), c(2)), _mm_or_si128(c(3), c(5))), _mm_or_si128(c(6), c(7)));
    let (c01, c23, c45, c67) = if _mm_movemask_epi8(_mm_cmpeq_epi8(ac, zero)) == 0xFFFF {
        let in0 = _mm_slli_epi16::<PASS1_BITS>(_mm_mullo_epi16(c(0), q(0)));
        let lo = _mm_unpacklo_epi16(in0, in0);
        let hi = _mm_unpackhi_epi16(in0, in0);
        (
            _mm_shuffle_epi32::<0x50>(lo),
            _mm_shuffle_epi32::<0xFA>(lo),
            _mm_shuffle_epi32::<0x50>(hi),
            _mm_shuffle_epi32::<0xFA>(hi),
        )
    } else {
        let (in1, in3) = (_mm_mullo_epi16(c(1), q(1)), _mm_mullo_epi16(c(3), q(3)));
        let (in5, in7) = (_mm_mullo_epi16(c(5), q(5)), _mm_mullo_epi16(c(7), q(7)));
        let tmp2 = add(madd2(in5, in7, PW_MF060_MF050), madd2(in1, in3, PW_F256_F089));
        let tmp0 = add(madd2(in5, in7, PW_F145_MF021), madd2(in1, in3, PW_F106_MF217));
        let in0 = _mm_mullo_epi16(c(0), q(0));
        let (in2, in6) = (_mm_mullo_epi16(c(2), q(2)), _mm_mullo_epi16(c(6), q(6)));
        let t0 = (
            _mm_srai_epi32::<{ 16 - CONST_BITS - 1 }>(_mm_unpacklo_epi16(zero, in0)),
            _mm_srai_epi32::<{ 16 - CONST_BITS - 1 }>(_mm_unpackhi_epi16(zero, in0)),
        );
        let t2 = madd2(in2, in6, PW_F184_MF076);
        let tmp10 = add(t0, t2);
        let tmp12 = sub(t0, t2);
        let d0 = descale_pack::<DESCALE_P1_4>(add(tmp10, tmp2));
        let d3 = descale_pack::<DESCALE_P1_4>(sub(tmp10, tmp2));
        let d1 = descale_pack::<DESCALE_P1_4>(add(tmp12, tmp0));
        let d2 = descale_pack::<DESCALE_P1_4>(sub(tmp12, tmp0));
        let a = _mm_unpacklo_epi16(d0, d1); // 00 10 01 11 02 12 03 13
        let b = _mm_unpackhi_epi16(d0, d1); // 04 14 05 15 06 16 07 17
        let c = _mm_unpacklo_epi16(d2, d3); // 20 30 21 31 22 32 23 33
        let d = _mm_unpackhi_epi16(d2, d3); // 24 34 25 35 26 36 27 37
        (
            _mm_unpacklo_epi32(a, c), // [col0 col1]
            _mm_unpackhi_epi32(a, c), // [col2 col3]
            _mm_unpacklo_epi32(b, d), // [col4 col5]
            _mm_unpackhi_epi32(b, d), // [col6 col7]
        )
    };

    // ---- Pass 2: the four rows (lanes), 32-bit.
    let tmp0e = _mm_srai_epi32::<{ 16 - CONST_BITS - 1 }>(_mm_unpacklo_epi16(zero, c01));
    let p13 = _mm_unpackhi_epi16(c01, c23);
    let p57 = _mm_unpackhi_epi16(c45, c67);
    let tmp2 = _mm_add_epi32(madd(p57, PW_MF060_MF050), madd(p13, PW_F256_F089));
    let tmp0 = _mm_add_epi32(madd(p57, PW_F145_MF021), madd(p13, PW_F106_MF217));
    let t2 = madd(_mm_unpacklo_epi16(c23, c67), PW_F184_MF076);
    let tmp10 = _mm_add_epi32(tmp0e, t2);
    let tmp12 = _mm_sub_epi32(tmp0e, t2);
    let d0 = round_shift::<DESCALE_P2_4>(_mm_add_epi32(tmp10, tmp2));
    let d1 = round_shift::<DESCALE_P2_4>(_mm_add_epi32(tmp12, tmp0));
    let d3 = round_shift::<DESCALE_P2_4>(_mm_sub_epi32(tmp10, tmp2));
    let d2 = round_shift::<DESCALE_P2_4>(_mm_sub_epi32(tmp12, tmp0));
    let x4 = _mm_packs_epi32(d0, d2); // 00 10 20 30 02 12 22 32
    let x7 = _mm_packs_epi32(d1, d3); // 01 11 21 31 03 13 23 33
    let y4 = _mm_unpacklo_epi16(x4, x7); // 00 01 10 11 20 21 30 31
    let y0 = _mm_unpackhi_epi16(x4, x7); // 02 03 12 13 22 23 32 33
    let rows = _mm_packs_epi16(_mm_unpacklo_epi32(y4, y0), _mm_unpackhi_epi32(y4, y0));
    let rows = _mm_add_epi8(rows, _mm_set1_epi8(-128));
    let mut bytes = [0u8; 16];
    _mm_storeu_si128(bytes.as_mut_ptr() as *mut __m128i, rows);
    for r in 0..4 {
        std::ptr::copy_nonoverlapping(bytes.as_ptr().add(4 * r), (*output_buf.add(r)).add(output_col), 4);
    }
}

/// Reduced-size IDCT to 2x2 (`jsimd_idct_2x2_sse2`).
///
/// # Safety
/// `table`: 64 readable `i32` (`dct_table`); `coef`: 64 readable coefficients;
/// `output_buf[0..2]`: rows with at least `output_col + 2` writable bytes.
pub(super) unsafe fn idct_2x2_sse2(table: *const i32, coef: *const i16, output_buf: *mut *mut u8, output_col: usize) {
    let c = |r: usize| _mm_loadu_si128(coef.add(8 * r) as *const __m128i);
    let q = |r: usize| load_table_row(table.add(8 * r));

    // ---- Pass 1: columns 0, 1, 3, 5, 7 (the others do not reach a 2x2 output).
    let (in1, in3) = (_mm_mullo_epi16(c(1), q(1)), _mm_mullo_epi16(c(3), q(3)));
    let (in5, in7) = (_mm_mullo_epi16(c(5), q(5)), _mm_mullo_epi16(c(7), q(7)));
    let high_words = _mm_slli_epi32::<16>(_mm_set1_epi32(-1));
    let x4 = madd(_mm_unpacklo_epi16(in1, in3), PW_F362_MF127);
    let x5 = madd(_mm_unpacklo_epi16(in5, in7), PW_F085_MF072);
    let o13 = _mm_or_si128(_mm_srli_epi32::<16>(in1), _mm_and_si128(in3, high_words));
    let o57 = _mm_or_si128(_mm_srli_epi32::<16>(in5), _mm_and_si128(in7, high_words));
    let tmp0_even = _mm_add_epi32(x4, x5); // [col0 col1 **** col3]
    let tmp0_odd = _mm_add_epi32(madd(o13, PW_F362_MF127), madd(o57, PW_F085_MF072)); // [col1 col3 col5 col7]
    let in0 = _mm_mullo_epi16(c(0), q(0));
    let tmp10_even = _mm_srai_epi32::<{ 16 - CONST_BITS - 2 }>(_mm_slli_epi32::<16>(in0));
    let tmp10_odd = _mm_srai_epi32::<{ 16 - CONST_BITS - 2 }>(_mm_and_si128(in0, high_words));
    let a_even = _mm_add_epi32(tmp10_even, tmp0_even);
    let b_even = _mm_sub_epi32(tmp10_even, tmp0_even);
    let a_odd = _mm_add_epi32(tmp10_odd, tmp0_odd);
    let b_odd = _mm_sub_epi32(tmp10_odd, tmp0_odd);
    let x6 = round_shift::<DESCALE_P1_2>(_mm_unpacklo_epi32(a_even, b_even)); // A0 B0 ** **
    let x1 = round_shift::<DESCALE_P1_2>(_mm_unpacklo_epi64(a_odd, b_odd)); // A1 A3 B1 B3
    let x7 = round_shift::<DESCALE_P1_2>(_mm_unpackhi_epi64(a_odd, b_odd)); // A5 A7 B5 B7

    // ---- Pass 2: rows 0 (A) and 1 (B).
    let tmp0 =
        _mm_add_epi32(madd(_mm_packs_epi32(x1, x1), PW_F362_MF127), madd(_mm_packs_epi32(x7, x7), PW_F085_MF072));
    let tmp10 = _mm_slli_epi32::<{ CONST_BITS + 2 }>(x6);
    let cd = _mm_unpacklo_epi32(_mm_add_epi32(tmp10, tmp0), _mm_sub_epi32(tmp10, tmp0)); // C0 D0 C1 D1
    let cd = round_shift::<DESCALE_P2_2>(cd);
    let cd = _mm_packs_epi32(cd, cd);
    let cd = _mm_add_epi8(_mm_packs_epi16(cd, cd), _mm_set1_epi8(-128));
    let w0 = (_mm_extract_epi16::<0>(cd) as u16).to_le_bytes();
    let w1 = (_mm_extract_epi16::<1>(cd) as u16).to_le_bytes();
    std::ptr::copy_nonoverlapping(w0.as_ptr(), (*output_buf).add(output_col), 2);
    std::ptr::copy_nonoverlapping(w1.as_ptr(), (*output_buf.add(1)).add(output_col), 2);
}

#[cfg(test)]
fn madd_s(a: i16, b: i16, k: (i16, i16)) -> i32 {
    (a as i32 * k.0 as i32).wrapping_add(b as i32 * k.1 as i32)
}

#[cfg(test)]
fn sat8(v: i16) -> u8 {
    (v.clamp(-128, 127) as i8 as u8).wrapping_add(128)
}

#[cfg(test)]
fn descale_s(v: i32, shift: i32) -> i32 {
    v.wrapping_add(1 << (shift - 1)) >> shift
}

#[cfg(test)]
fn sat16(v: i32) -> i16 {
    v.clamp(-32768, 32767) as i16
}

/// Scalar transliteration of the 4x4 kernel's lane arithmetic (the unit tests' reference).
#[cfg(test)]
#[allow(clippy::needless_range_loop)] // indices as in the asm's lane labels
pub(super) fn idct_4x4_reference(table: &[i32; 64], coef: &[i16; 64]) -> [[u8; 4]; 4] {
    let deq = |k: usize, c: usize| coef[8 * k + c].wrapping_mul(table[8 * k + c] as i16);
    // One 1-D pass: inputs x[0..8] (x[4] unused), outputs 0..4 before descaling.
    let pass = |x: [i16; 8]| -> [i32; 4] {
        let tmp2 = madd_s(x[5], x[7], PW_MF060_MF050).wrapping_add(madd_s(x[1], x[3], PW_F256_F089));
        let tmp0 = madd_s(x[5], x[7], PW_F145_MF021).wrapping_add(madd_s(x[1], x[3], PW_F106_MF217));
        let t0 = (x[0] as i32) << (CONST_BITS + 1);
        let t2 = madd_s(x[2], x[6], PW_F184_MF076);
        let (tmp10, tmp12) = (t0.wrapping_add(t2), t0.wrapping_sub(t2));
        [tmp10.wrapping_add(tmp2), tmp12.wrapping_add(tmp0), tmp12.wrapping_sub(tmp0), tmp10.wrapping_sub(tmp2)]
    };
    let mut ws = [[0i16; 8]; 4]; // ws[row][col]
    if [1, 2, 3, 5, 6, 7].iter().all(|&k| coef[8 * k..8 * k + 8].iter().all(|&v| v == 0)) {
        for c in 0..8 {
            let v = ((deq(0, c) as u16) << PASS1_BITS) as i16;
            for row in ws.iter_mut() {
                row[c] = v;
            }
        }
    } else {
        for c in 0..8 {
            let d = pass(std::array::from_fn(|k| deq(k, c)));
            for r in 0..4 {
                ws[r][c] = sat16(descale_s(d[r], DESCALE_P1_4));
            }
        }
    }
    std::array::from_fn(|r| pass(ws[r]).map(|v| sat8(sat16(descale_s(v, DESCALE_P2_4)))))
}

/// Scalar transliteration of the 2x2 kernel's lane arithmetic (the unit tests' reference).
#[cfg(test)]
#[allow(clippy::needless_range_loop)] // indices as in the asm's lane labels
pub(super) fn idct_2x2_reference(table: &[i32; 64], coef: &[i16; 64]) -> [[u8; 2]; 2] {
    let deq = |k: usize, c: usize| coef[8 * k + c].wrapping_mul(table[8 * k + c] as i16);
    // ws[row][col] in 32 bits, for columns 0, 1, 3, 5, 7.
    let mut ws = [[0i32; 8]; 2];
    for c in [0, 1, 3, 5, 7] {
        let tmp0 =
            madd_s(deq(1, c), deq(3, c), PW_F362_MF127).wrapping_add(madd_s(deq(5, c), deq(7, c), PW_F085_MF072));
        let tmp10 = (deq(0, c) as i32) << (CONST_BITS + 2);
        ws[0][c] = descale_s(tmp10.wrapping_add(tmp0), DESCALE_P1_2);
        ws[1][c] = descale_s(tmp10.wrapping_sub(tmp0), DESCALE_P1_2);
    }
    std::array::from_fn(|r| {
        let x = |c: usize| sat16(ws[r][c]);
        let tmp0 = madd_s(x(1), x(3), PW_F362_MF127).wrapping_add(madd_s(x(5), x(7), PW_F085_MF072));
        let tmp10 = ws[r][0].wrapping_shl((CONST_BITS + 2) as u32);
        [tmp10.wrapping_add(tmp0), tmp10.wrapping_sub(tmp0)].map(|v| sat8(sat16(descale_s(v, DESCALE_P2_2))))
    })
}
