//! `jsimd_idct_ifast_sse2` (libjpeg-turbo simd/x86_64/jidctfst-sse2.asm), ported instruction
//! for instruction: the same 16-bit lanes (`pmullw`/`paddw`/`psubw` wrap, `pmulhw` keeps the
//! high half), the same pre-multiply shifts and constants, the same saturating byte packs.

use std::arch::x86_64::*;

const CONST_BITS: i32 = 8;
const PASS1_BITS: i32 = 2;
const PRE_MULTIPLY_SCALE_BITS: i32 = 2;
const CONST_SHIFT: i32 = 16 - PRE_MULTIPLY_SCALE_BITS - CONST_BITS;

const F_1_082: i32 = 277; // FIX(1.082392200)
const F_1_414: i32 = 362; // FIX(1.414213562)
const F_1_847: i32 = 473; // FIX(1.847759065)
const F_2_613: i32 = 669; // FIX(2.613125930)
const F_1_613: i32 = F_2_613 - 256; // FIX(2.613125930) - FIX(1)

pub(super) const PW_F1414: i16 = (F_1_414 << CONST_SHIFT) as i16;
pub(super) const PW_F1847: i16 = (F_1_847 << CONST_SHIFT) as i16;
pub(super) const PW_MF1613: i16 = ((-F_1_613) << CONST_SHIFT) as i16;
pub(super) const PW_F1082: i16 = (F_1_082 << CONST_SHIFT) as i16;
pub(super) const PRE_SHIFT: i32 = PRE_MULTIPLY_SCALE_BITS;
pub(super) const DESCALE: i32 = PASS1_BITS + 3;

/// Eight `int` multipliers truncated to 16 bits (what TF's `short` table holds).
///
/// # Safety
/// `p` must point at 8 readable `i32`.
#[inline(always)]
pub(super) unsafe fn load_table_row(p: *const i32) -> __m128i {
    let lo = _mm_loadu_si128(p as *const __m128i);
    let hi = _mm_loadu_si128(p.add(4) as *const __m128i);
    // Sign-extend each low half in place, then the saturating pack is exact.
    let lo = _mm_srai_epi32::<16>(_mm_slli_epi32::<16>(lo));
    let hi = _mm_srai_epi32::<16>(_mm_slli_epi32::<16>(hi));
    _mm_packs_epi32(lo, hi)
}

/// One 1-D pass of the kernel on eight lanes (both passes of the asm run this same sequence):
/// inputs `x[0..8]`, outputs `data0..data7` in order.
///
/// # Safety
/// SSE2 only (baseline on x86-64).
#[inline(always)]
unsafe fn pass(x: [__m128i; 8]) -> [__m128i; 8] {
    let f1414 = _mm_set1_epi16(PW_F1414);
    // -- Even part
    let tmp11 = _mm_sub_epi16(x[0], x[4]);
    let tmp10 = _mm_add_epi16(x[0], x[4]);
    let tmp13 = _mm_add_epi16(x[2], x[6]);
    let d26 = _mm_slli_epi16::<PRE_SHIFT>(_mm_sub_epi16(x[2], x[6]));
    let tmp12 = _mm_sub_epi16(_mm_mulhi_epi16(d26, f1414), tmp13);
    let tmp3 = _mm_sub_epi16(tmp10, tmp13);
    let tmp2 = _mm_sub_epi16(tmp11, tmp12);
    let tmp0 = _mm_add_epi16(tmp10, tmp13);
    let tmp1 = _mm_add_epi16(tmp11, tmp12);

    // -- Odd part
    let z12 = _mm_sub_epi16(x[1], x[7]);
    let z10 = _mm_sub_epi16(x[5], x[3]);
    let z11 = _mm_add_epi16(x[1], x[7]);
    let z13 = _mm_add_epi16(x[5], x[3]);
    let z12s = _mm_slli_epi16::<PRE_SHIFT>(z12);
    let z10s = _mm_slli_epi16::<PRE_SHIFT>(z10);
    let tmp7 = _mm_add_epi16(z11, z13);
    let tmp11 = _mm_mulhi_epi16(_mm_slli_epi16::<PRE_SHIFT>(_mm_sub_epi16(z11, z13)), f1414);
    // tmp12 = -2.613125930 * z10 + z5 = -1.613125930 * z10 - z10 + z5 (avoids overflow)
    let z5 = _mm_mulhi_epi16(_mm_add_epi16(z10s, z12s), _mm_set1_epi16(PW_F1847));
    let t = _mm_sub_epi16(_mm_mulhi_epi16(z10s, _mm_set1_epi16(PW_MF1613)), z10);
    let tmp10o = _mm_sub_epi16(_mm_mulhi_epi16(z12s, _mm_set1_epi16(PW_F1082)), z5);
    let tmp12o = _mm_add_epi16(t, z5);

    // -- Final output stage
    let tmp6 = _mm_sub_epi16(tmp12o, tmp7);
    let tmp5 = _mm_sub_epi16(tmp11, tmp6);
    let tmp4 = _mm_add_epi16(tmp10o, tmp5);
    [
        _mm_add_epi16(tmp0, tmp7),
        _mm_add_epi16(tmp1, tmp6),
        _mm_add_epi16(tmp2, tmp5),
        _mm_sub_epi16(tmp3, tmp4),
        _mm_add_epi16(tmp3, tmp4),
        _mm_sub_epi16(tmp2, tmp5),
        _mm_sub_epi16(tmp1, tmp6),
        _mm_sub_epi16(tmp0, tmp7),
    ]
}

/// 8x8 transpose of 16-bit lanes: `out[j]` lane `i` = `d[i]` lane `j` (the asm's three
/// unpack phases).
///
/// # Safety
/// SSE2 only.
#[inline(always)]
pub(super) unsafe fn transpose(d: [__m128i; 8]) -> [__m128i; 8] {
    let a0 = _mm_unpacklo_epi16(d[0], d[1]); // 00 10 01 11 02 12 03 13
    let a1 = _mm_unpackhi_epi16(d[0], d[1]); // 04 14 05 15 06 16 07 17
    let a2 = _mm_unpacklo_epi16(d[2], d[3]);
    let a3 = _mm_unpackhi_epi16(d[2], d[3]);
    let a4 = _mm_unpacklo_epi16(d[4], d[5]);
    let a5 = _mm_unpackhi_epi16(d[4], d[5]);
    let a6 = _mm_unpacklo_epi16(d[6], d[7]);
    let a7 = _mm_unpackhi_epi16(d[6], d[7]);
    let b0 = _mm_unpacklo_epi32(a0, a2); // 00 10 20 30 01 11 21 31
    let b1 = _mm_unpackhi_epi32(a0, a2); // 02 12 22 32 03 13 23 33
    let b2 = _mm_unpacklo_epi32(a1, a3); // 04 14 24 34 05 15 25 35
    let b3 = _mm_unpackhi_epi32(a1, a3); // 06 16 26 36 07 17 27 37
    let b4 = _mm_unpacklo_epi32(a4, a6); // 40 50 60 70 41 51 61 71
    let b5 = _mm_unpackhi_epi32(a4, a6);
    let b6 = _mm_unpacklo_epi32(a5, a7);
    let b7 = _mm_unpackhi_epi32(a5, a7);
    [
        _mm_unpacklo_epi64(b0, b4),
        _mm_unpackhi_epi64(b0, b4),
        _mm_unpacklo_epi64(b1, b5),
        _mm_unpackhi_epi64(b1, b5),
        _mm_unpacklo_epi64(b2, b6),
        _mm_unpackhi_epi64(b2, b6),
        _mm_unpacklo_epi64(b3, b7),
        _mm_unpackhi_epi64(b3, b7),
    ]
}

/// The asm's output stage: `d[k]` lane `r` is row `r`, column `k`, already descaled to
/// 16 bits; packs with signed saturation, adds CENTERJSAMPLE (wrapping byte add) and stores
/// eight bytes at `output_buf[r] + output_col`.
///
/// # Safety
/// `output_buf[0..8]` must be rows with at least `output_col + 8` writable bytes.
#[inline(always)]
pub(super) unsafe fn store_rows(d: [__m128i; 8], output_buf: *mut *mut u8, output_col: usize) {
    let center = _mm_set1_epi8(-128); // PB_CENTERJSAMP (0x80)
                                      // (00 10 .. 70 06 16 .. 76), (01 .. 71 07 .. 77), (02 .. 72 04 .. 74), (03 .. 73 05 .. 75)
    let p1 = _mm_add_epi8(_mm_packs_epi16(d[0], d[6]), center);
    let p3 = _mm_add_epi8(_mm_packs_epi16(d[1], d[7]), center);
    let p5 = _mm_add_epi8(_mm_packs_epi16(d[2], d[4]), center);
    let p7 = _mm_add_epi8(_mm_packs_epi16(d[3], d[5]), center);

    let x1 = _mm_unpacklo_epi8(p1, p3); // 00 01 10 11 .. 70 71
    let x0 = _mm_unpackhi_epi8(p1, p3); // 06 07 16 17 .. 76 77
    let x5 = _mm_unpacklo_epi8(p5, p7); // 02 03 12 13 .. 72 73
    let x6 = _mm_unpackhi_epi8(p5, p7); // 04 05 14 15 .. 74 75

    let y1 = _mm_unpacklo_epi16(x1, x5); // 00 01 02 03 10 11 12 13 .. 30 31 32 33
    let y4 = _mm_unpackhi_epi16(x1, x5); // 40 .. 73
    let y6 = _mm_unpacklo_epi16(x6, x0); // 04 05 06 07 14 .. 37
    let y2 = _mm_unpackhi_epi16(x6, x0); // 44 .. 77

    let r01 = _mm_unpacklo_epi32(y1, y6); // row 0, row 1
    let r23 = _mm_unpackhi_epi32(y1, y6); // row 2, row 3
    let r45 = _mm_unpacklo_epi32(y4, y2); // row 4, row 5
    let r67 = _mm_unpackhi_epi32(y4, y2); // row 6, row 7

    let row = |r: usize| (*output_buf.add(r)).add(output_col) as *mut __m128i;
    _mm_storel_epi64(row(0), r01);
    _mm_storel_epi64(row(2), r23);
    _mm_storel_epi64(row(4), r45);
    _mm_storel_epi64(row(6), r67);
    _mm_storel_epi64(row(1), _mm_shuffle_epi32::<0x4E>(r01));
    _mm_storel_epi64(row(3), _mm_shuffle_epi32::<0x4E>(r23));
    _mm_storel_epi64(row(5), _mm_shuffle_epi32::<0x4E>(r45));
    _mm_storel_epi64(row(7), _mm_shuffle_epi32::<0x4E>(r67));
}

/// Dequantises and inverse-transforms one block (`jsimd_idct_ifast_sse2`).
///
/// # Safety
/// `table`: 64 readable `i32` (`dct_table`); `coef`: 64 readable coefficients;
/// `output_buf[0..8]`: rows with at least `output_col + 8` writable bytes.
#[inline]
pub(super) unsafe fn idct_ifast_sse2(table: *const i32, coef: *const i16, output_buf: *mut *mut u8, output_col: usize) {
    let c = |r: usize| _mm_loadu_si128(coef.add(8 * r) as *const __m128i);
    let q = |r: usize| load_table_row(table.add(8 * r));

    // ---- Pass 1: columns (lane = column, register = row).
    let ac = _mm_or_si128(
        _mm_or_si128(_mm_or_si128(c(1), c(2)), _mm_or_si128(c(3), c(4))),
        _mm_or_si128(_mm_or_si128(c(5), c(6)), c(7)),
    );
    let cols = if _mm_movemask_epi8(_mm_cmpeq_epi8(ac, _mm_setzero_si128())) == 0xFFFF {
        // -- AC terms all zero: every output row of pass 1 is the dequantised DC row, so
        // column j is row 0's lane j broadcast (the same values the full pass yields).
        let in0 = _mm_mullo_epi16(c(0), q(0));
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
        let x = [
            _mm_mullo_epi16(c(0), q(0)),
            _mm_mullo_epi16(c(1), q(1)),
            _mm_mullo_epi16(c(2), q(2)),
            _mm_mullo_epi16(c(3), q(3)),
            _mm_mullo_epi16(c(4), q(4)),
            _mm_mullo_epi16(c(5), q(5)),
            _mm_mullo_epi16(c(6), q(6)),
            _mm_mullo_epi16(c(7), q(7)),
        ];
        transpose(pass(x))
    };

    // ---- Pass 2: rows (lane = row, register = column), descale by PASS1_BITS + 3.
    let d = pass(cols);
    let d = [
        _mm_srai_epi16::<DESCALE>(d[0]),
        _mm_srai_epi16::<DESCALE>(d[1]),
        _mm_srai_epi16::<DESCALE>(d[2]),
        _mm_srai_epi16::<DESCALE>(d[3]),
        _mm_srai_epi16::<DESCALE>(d[4]),
        _mm_srai_epi16::<DESCALE>(d[5]),
        _mm_srai_epi16::<DESCALE>(d[6]),
        _mm_srai_epi16::<DESCALE>(d[7]),
    ];
    store_rows(d, output_buf, output_col);
}

#[cfg(test)]
thread_local! {
    /// Set by [`idct_ifast_reference`] when a 16-bit lane operation wrapped.
    pub(super) static WRAPPED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Scalar transliteration of the SSE2 lane arithmetic (i16 wrapping, `pmulhw`, `packsswb`):
/// the reference the unit tests hold the kernel to. Sets [`WRAPPED`] when any lane operation
/// overflowed 16 bits (where the portable C, in 32 bits, gives other pixels).
#[cfg(test)]
#[allow(clippy::needless_range_loop)] // indices as in the asm's lane labels
pub(super) fn idct_ifast_reference(table: &[i32; 64], coef: &[i16; 64]) -> [[u8; 8]; 8] {
    fn note(exact: i32) -> i16 {
        if exact != exact as i16 as i32 {
            WRAPPED.with(|w| w.set(true));
        }
        exact as i16
    }
    fn add(a: i16, b: i16) -> i16 {
        note(a as i32 + b as i32)
    }
    fn sub(a: i16, b: i16) -> i16 {
        note(a as i32 - b as i32)
    }
    fn mulhi(a: i16, b: i16) -> i16 {
        ((a as i32 * b as i32) >> 16) as i16
    }
    fn shl(a: i16) -> i16 {
        note((a as i32) << PRE_SHIFT)
    }
    fn pass(x: [i16; 8]) -> [i16; 8] {
        let tmp11 = sub(x[0], x[4]);
        let tmp10 = add(x[0], x[4]);
        let tmp13 = add(x[2], x[6]);
        let tmp12 = sub(mulhi(shl(sub(x[2], x[6])), PW_F1414), tmp13);
        let tmp3 = sub(tmp10, tmp13);
        let tmp2 = sub(tmp11, tmp12);
        let tmp0 = add(tmp10, tmp13);
        let tmp1 = add(tmp11, tmp12);
        let z12 = sub(x[1], x[7]);
        let z10 = sub(x[5], x[3]);
        let z11 = add(x[1], x[7]);
        let z13 = add(x[5], x[3]);
        let (z12s, z10s) = (shl(z12), shl(z10));
        let tmp7 = add(z11, z13);
        let tmp11o = mulhi(shl(sub(z11, z13)), PW_F1414);
        let z5 = mulhi(add(z10s, z12s), PW_F1847);
        let tmp10o = sub(mulhi(z12s, PW_F1082), z5);
        let tmp12o = add(sub(mulhi(z10s, PW_MF1613), z10), z5);
        let tmp6 = sub(tmp12o, tmp7);
        let tmp5 = sub(tmp11o, tmp6);
        let tmp4 = add(tmp10o, tmp5);
        [
            add(tmp0, tmp7),
            add(tmp1, tmp6),
            add(tmp2, tmp5),
            sub(tmp3, tmp4),
            add(tmp3, tmp4),
            sub(tmp2, tmp5),
            sub(tmp1, tmp6),
            sub(tmp0, tmp7),
        ]
    }
    let mut ws = [[0i16; 8]; 8]; // ws[row][col]
    for col in 0..8 {
        // pmullw keeps the low 16 bits of the product (of the table entry's low 16 bits).
        let x: [i16; 8] = std::array::from_fn(|k| note(coef[8 * k + col] as i32 * (table[8 * k + col] as i16) as i32));
        let d = pass(x);
        for k in 0..8 {
            ws[k][col] = d[k];
        }
    }
    let mut out = [[0u8; 8]; 8];
    for row in 0..8 {
        let d = pass(ws[row]);
        for k in 0..8 {
            let v = (d[k] >> DESCALE).clamp(-128, 127) as i8;
            out[row][k] = (v as u8).wrapping_add(128);
        }
    }
    out
}
