//! The input and output transforms of f32 tiles in AVX-512 registers: 16 channels per step,
//! a partial last step through masked loads and stores. The same operations in the same
//! order as the generic `b_t`/`a_t` (no fused multiply-adds), so the bits are the same; the
//! generic code, written over arrays of 8-lane steps, kept its intermediate values on the
//! stack and took as long as the α² GEMMs on the small CNN's 14×14 layer.
// Loops index the tile's α×α layout (rows, columns, transposed stores) by position.
#![allow(clippy::needless_range_loop)]
use std::arch::x86_64::*;

use super::Plan;

/// Lanes per step.
const L: usize = 16;

/// The mask of a step of `n` ≤ 16 lanes.
#[inline(always)]
fn mask(n: usize) -> __mmask16 {
    if n >= L {
        0xffff
    } else {
        ((1u32 << n) - 1) as __mmask16
    }
}

/// `Bᵀ` of F(M×M, 3×3) on α values (see the generic `b_t`).
#[inline(always)]
unsafe fn b_t<const M: usize>(x: [__m512; 6]) -> [__m512; 6] {
    unsafe {
        if M == 2 {
            let (d0, d1, d2, d3) = (x[0], x[1], x[2], x[3]);
            let z = _mm512_setzero_ps();
            [_mm512_sub_ps(d0, d2), _mm512_add_ps(d1, d2), _mm512_sub_ps(d2, d1), _mm512_sub_ps(d1, d3), z, z]
        } else {
            let (two, four, five) = (_mm512_set1_ps(2.0), _mm512_set1_ps(4.0), _mm512_set1_ps(5.0));
            let [d0, d1, d2, d3, d4, d5] = x;
            [
                _mm512_add_ps(_mm512_sub_ps(_mm512_mul_ps(four, d0), _mm512_mul_ps(five, d2)), d4),
                _mm512_sub_ps(_mm512_add_ps(d3, d4), _mm512_mul_ps(four, _mm512_add_ps(d1, d2))),
                _mm512_add_ps(_mm512_mul_ps(four, _mm512_sub_ps(d1, d2)), _mm512_sub_ps(d4, d3)),
                _mm512_add_ps(_mm512_mul_ps(two, _mm512_sub_ps(d3, d1)), _mm512_sub_ps(d4, d2)),
                _mm512_add_ps(_mm512_mul_ps(two, _mm512_sub_ps(d1, d3)), _mm512_sub_ps(d4, d2)),
                _mm512_add_ps(_mm512_sub_ps(_mm512_mul_ps(four, d1), _mm512_mul_ps(five, d3)), d5),
            ]
        }
    }
}

/// `Aᵀ` of F(M×M, 3×3) on α values (see the generic `a_t`).
#[inline(always)]
unsafe fn a_t<const M: usize>(x: [__m512; 6]) -> [__m512; 4] {
    unsafe {
        let z = _mm512_setzero_ps();
        if M == 2 {
            let (m0, m1, m2, m3) = (x[0], x[1], x[2], x[3]);
            [_mm512_add_ps(_mm512_add_ps(m0, m1), m2), _mm512_sub_ps(_mm512_sub_ps(m1, m2), m3), z, z]
        } else {
            let (two, four, eight) = (_mm512_set1_ps(2.0), _mm512_set1_ps(4.0), _mm512_set1_ps(8.0));
            let [m0, m1, m2, m3, m4, m5] = x;
            let (s12, d12) = (_mm512_add_ps(m1, m2), _mm512_sub_ps(m1, m2));
            let (s34, d34) = (_mm512_add_ps(m3, m4), _mm512_sub_ps(m3, m4));
            [
                _mm512_add_ps(_mm512_add_ps(m0, s12), s34),
                _mm512_add_ps(d12, _mm512_mul_ps(two, d34)),
                _mm512_add_ps(s12, _mm512_mul_ps(four, s34)),
                _mm512_add_ps(_mm512_add_ps(d12, _mm512_mul_ps(eight, d34)), m5),
            ]
        }
    }
}

/// The input transform of tile rows `r0..r1` (see `super::transform_input`): for each tile,
/// `V = Bᵀ d B` for channels `0..c` into `v[ξ * tiles * c + t * c + ch]`, `t` counted from
/// tile row `base`. Padding pixels are read as zeros through a load mask of 0 (a masked-off
/// load never touches memory), so no zero buffer and no per-pixel pointers are needed.
///
/// # Safety
/// The CPU must have AVX-512F; `x` must hold the plan's `n·h·w·c` input; `v` must be valid
/// for writes at every `ξ * tiles * c + t * c + ch` of these tile rows.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn input<const M: usize>(
    p: &Plan,
    x: *const f32,
    (r0, r1): (usize, usize),
    base: usize,
    tiles: usize,
    v: *mut f32,
) {
    let a = M + 2;
    let (th, tw) = p.tiles();
    let c = p.c;
    let stride = tiles * c;
    let [ah, aw] = p.axes;
    for r in r0..r1 {
        let (b, ty) = (r / th, r % th);
        // Each input row of the tile row: its element offset and whether it is inside.
        let mut row_at = [0usize; 6];
        let mut row_in = [0 as __mmask16; 6];
        for i in 0..a {
            if let Some(iy) = (ty * M + i).checked_sub(ah.pad_before).filter(|&iy| iy < p.h) {
                row_at[i] = (b * p.h + iy) * p.w * c;
                row_in[i] = 0xffff;
            }
        }
        for tx in 0..tw {
            let at = ((r - base) * tw + tx) * c;
            let mut col_at = [0usize; 6];
            let mut col_in = [0 as __mmask16; 6];
            for j in 0..a {
                if let Some(ix) = (tx * M + j).checked_sub(aw.pad_before).filter(|&ix| ix < p.w) {
                    col_at[j] = ix * c;
                    col_in[j] = 0xffff;
                }
            }
            let mut ch = 0;
            while ch < c {
                let k = mask(c - ch);
                // SAFETY (this block): an unmasked load reads channels ch..c of an input pixel
                // inside the image (so inside `x`); masked-off lanes are not accessed. The
                // stores write this tile's entries, in `v` by the caller's contract.
                unsafe {
                    let mut t = [[_mm512_setzero_ps(); 6]; 6];
                    for j in 0..a {
                        let col: [__m512; 6] = std::array::from_fn(|i| {
                            if i < a {
                                let from = x.wrapping_add(row_at[i] + col_at[j] + ch);
                                _mm512_maskz_loadu_ps(k & row_in[i] & col_in[j], from)
                            } else {
                                _mm512_setzero_ps()
                            }
                        });
                        let y = b_t::<M>(col);
                        for i in 0..a {
                            t[i][j] = y[i];
                        }
                    }
                    for (i, row) in t.iter().enumerate().take(a) {
                        let y = b_t::<M>(*row);
                        for (j, val) in y.iter().enumerate().take(a) {
                            _mm512_mask_storeu_ps(v.add((i * a + j) * stride + at + ch), k, *val);
                        }
                    }
                }
                ch += L;
            }
        }
    }
}

/// The output transform of tile rows `r0..r1` (see `super::transform_output`): for each
/// tile, `Y = Aᵀ M A` for output channels `0..k` from `m[ξ * tiles * k + t * k + ko]` into
/// its (up to M²) output pixels, `out` starting at tile row `r0`'s first output element.
///
/// # Safety
/// The CPU must have AVX-512F; `m` must hold every tile's α² entries and `out` every output
/// element of these tile rows.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn output<const M: usize>(
    p: &Plan,
    m: *const f32,
    (r0, r1): (usize, usize),
    base: usize,
    tiles: usize,
    out: *mut f32,
) {
    let a = M + 2;
    let (th, tw) = p.tiles();
    let k = p.k;
    let stride = tiles * k;
    let (oh, ow) = (p.axes[0].output, p.axes[1].output);
    let (first, _) = p.output_range(r0, r1);
    for r in r0..r1 {
        let (b, ty) = (r / th, r % th);
        let rows = (oh - ty * M).min(M);
        for tx in 0..tw {
            let at = ((r - base) * tw + tx) * k;
            let cols = (ow - tx * M).min(M);
            // Output pixel (0, 0) of the tile; pixel (i, j) is i * ow * k + j * k further.
            let o = ((b * oh + ty * M) * ow + tx * M) * k - first;
            let mut ko = 0;
            while ko < k {
                let msk = mask(k - ko);
                // SAFETY (this block): the loads read this tile's α² entries (in `m`), the
                // stores the tile's output pixels inside the image (in `out`), masked to k.
                unsafe {
                    let mut t = [[_mm512_setzero_ps(); 6]; 4];
                    for j in 0..a {
                        let col: [__m512; 6] = std::array::from_fn(|i| {
                            if i < a {
                                _mm512_maskz_loadu_ps(msk, m.add((i * a + j) * stride + at + ko))
                            } else {
                                _mm512_setzero_ps()
                            }
                        });
                        let y = a_t::<M>(col);
                        for i in 0..M {
                            t[i][j] = y[i];
                        }
                    }
                    for (i, row) in t.iter().enumerate().take(rows) {
                        let y = a_t::<M>(*row);
                        for (j, val) in y.iter().enumerate().take(cols) {
                            _mm512_mask_storeu_ps(out.add(o + (i * ow + j) * k + ko), msk, *val);
                        }
                    }
                }
                ko += L;
            }
        }
    }
}
