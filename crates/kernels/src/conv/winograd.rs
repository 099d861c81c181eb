//! Winograd's minimal filtering F(2×2, 3×3) for `Conv2D` with a 3×3 filter, stride 1 and no
//! dilation (ResNet's 3×3 convolutions): each 2×2 block of output pixels ("tile") takes 16
//! multiplies per input channel and output channel instead of 36, as 16 GEMMs.
//!
//! With `d` a tile's 4×4 input window, `g` the 3×3 filter of one (input, output) channel pair
//! and `Bᵀ`, `G`, `Aᵀ` Lavin & Gray's matrices, the tile's output is `Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A`.
//! The transformed filter `U = G g Gᵀ` is 16 matrices `[C, K]`, made once per filter buffer;
//! a block of `T` tiles is transformed to 16 matrices `V = Bᵀ d B` of `[T, C]`, multiplied
//! (`M[ξ] = V[ξ] · U[ξ]`, `[T, K]`), and transformed back into output pixels. The transforms
//! use only additions, subtractions and halvings; the rounding differs from the direct sum
//! (reassociation), about as much as a different GEMM blocking does.
use ferroflow_tensor::Tensor;

use super::Axis;
use crate::matmul::{product_serial, GemmElement};
use crate::numeric::Float;
use crate::SendPtr;

/// The transformed filter: 16 matrices `[c, k]`, row-major, one after the other.
pub(super) fn transform_filter<T: Float>(f: &[T], c: usize, k: usize) -> Vec<T> {
    let half = T::from_f64(0.5);
    let mut u = vec![T::ZERO; 16 * c * k];
    let ck = c * k;
    for ci in 0..c {
        for ko in 0..k {
            // g[i][j] = f[((i * 3 + j) * c + ci) * k + ko]
            let g = |i: usize, j: usize| f[((i * 3 + j) * c + ci) * k + ko];
            // G g: 4×3.
            let col = |j: usize| {
                let (a, b, d) = (g(0, j), g(1, j), g(2, j));
                [a, (a + b + d) * half, (a - b + d) * half, d]
            };
            let cols = [col(0), col(1), col(2)];
            let gg: [[T; 3]; 4] = std::array::from_fn(|i| [cols[0][i], cols[1][i], cols[2][i]]);
            // (G g) Gᵀ: 4×4.
            for (i, row) in gg.iter().enumerate() {
                let (a, b, d) = (row[0], row[1], row[2]);
                let out = [a, (a + b + d) * half, (a - b + d) * half, d];
                for (j, v) in out.into_iter().enumerate() {
                    u[(i * 4 + j) * ck + ci * k + ko] = v;
                }
            }
        }
    }
    u
}

/// A transformed filter kept by a kernel with the filter tensor it came from: holding a handle
/// keeps that buffer alive and unwritable (tensors are copy-on-write), so the same data
/// address means the same values.
pub(super) struct FilterCache<T>(std::sync::Mutex<Option<(Tensor, std::sync::Arc<Vec<T>>)>>);

impl<T> Default for FilterCache<T> {
    fn default() -> Self {
        FilterCache(Default::default())
    }
}

impl<T: Float + ferroflow_tensor::Element> FilterCache<T> {
    /// The transform of `filter` (`[3, 3, c, k]`), from the cache when it holds this buffer.
    pub(super) fn get(
        &self,
        filter: &Tensor,
        c: usize,
        k: usize,
    ) -> Result<std::sync::Arc<Vec<T>>, ferroflow_tensor::TensorError> {
        let f = filter.as_slice::<T>()?;
        let mut cached = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((t, u)) = cached.as_ref() {
            if t.dims() == filter.dims() && t.as_slice::<T>()?.as_ptr() == f.as_ptr() {
                return Ok(u.clone());
            }
        }
        let u = std::sync::Arc::new(transform_filter(f, c, k));
        *cached = Some((filter.clone(), u.clone()));
        Ok(u)
    }
}

/// The shapes of one Winograd convolution.
#[derive(Clone, Copy)]
pub(super) struct Plan {
    pub n: usize,
    pub h: usize,
    pub w: usize,
    pub c: usize,
    pub k: usize,
    pub axes: [Axis; 2],
}

impl Plan {
    /// Tile rows and tile columns per image.
    pub(super) fn tiles(&self) -> (usize, usize) {
        (self.axes[0].output.div_ceil(2), self.axes[1].output.div_ceil(2))
    }

    /// The output elements that tile rows `r0..r1` (counted over all images) cover: they are
    /// contiguous in NHWC.
    pub(super) fn output_range(&self, r0: usize, r1: usize) -> (usize, usize) {
        let (th, _) = self.tiles();
        let (oh, ow) = (self.axes[0].output, self.axes[1].output);
        let row_of = |r: usize| (r / th) * oh + ((r % th) * 2).min(oh);
        let start = row_of(r0);
        // The end of tile row r1-1 (the last of an image may cover one output row).
        let last = r1 - 1;
        let end = (last / th) * oh + ((last % th) * 2 + 2).min(oh);
        (start * ow * self.k, end * ow * self.k)
    }
}

/// Scratch of one task: the block's `V` and `M` matrices.
#[derive(Default)]
pub(super) struct Scratch<T> {
    v: Vec<T>,
    m: Vec<T>,
    zeros: Vec<T>,
}

/// Computes tile rows `r0..r1` into `out` (exactly [`Plan::output_range`] of them): the three
/// phases on the calling thread.
pub(super) fn block<T: Float + GemmElement>(
    p: &Plan,
    x: &[T],
    u: &[T],
    (r0, r1): (usize, usize),
    out: &mut [T],
    s: &mut Scratch<T>,
) {
    s.size_for(p, r1 - r0);
    let tiles = (r1 - r0) * p.tiles().1;
    // SAFETY: `size_for` sized `v` for the block's tiles, and this thread alone writes it.
    unsafe { transform_input(p, x, (r0, r1), r0, tiles, s.v.as_mut_ptr(), &s.zeros) };
    for xi in 0..16 {
        multiply(p, u, xi, tiles, &s.v, &mut s.m[xi * tiles * p.k..(xi + 1) * tiles * p.k]);
    }
    transform_output(p, &s.m, (r0, r1), r0, tiles, out);
}

impl<T: Float> Scratch<T> {
    /// Sizes the matrices for `rows` tile rows.
    pub(super) fn size_for(&mut self, p: &Plan, rows: usize) {
        let tiles = rows * p.tiles().1;
        self.v.resize(16 * tiles * p.c, T::ZERO);
        self.m.resize(16 * tiles * p.k, T::ZERO);
        if self.zeros.len() < p.c {
            self.zeros.resize(p.c, T::ZERO);
        }
    }
}

/// The whole convolution in three phases, each split across the intra-op pool: the input
/// transform by tile rows, the 16 GEMMs (one task each, every tile at once: full-size
/// products, and each transformed filter packed once), the output transform and `finish` by
/// tile rows. For convolutions with too few tiles to give every thread blocks of its own
/// (batch 1), where splitting the tiles would leave 16 tiny GEMMs per block.
pub(super) fn phased<T: Float + GemmElement>(
    p: &Plan,
    x: &[T],
    u: &[T],
    out: &mut [T],
    s: &mut Scratch<T>,
    parts: usize,
    finish: super::BlockFn<T>,
) {
    use rayon::prelude::*;
    let (th, tw) = p.tiles();
    let total = p.n * th;
    s.size_for(p, total);
    let tiles = total * tw;
    let per_part = total.div_ceil(parts.max(1));
    let ranges: Vec<(usize, usize)> = (0..total).step_by(per_part).map(|r| (r, (r + per_part).min(total))).collect();
    let v = SendPtr(s.v.as_mut_ptr());
    let zeros = &s.zeros;
    ranges.par_iter().for_each(|&rows| {
        // SAFETY: `size_for` sized `v` for every tile; the ranges are disjoint, so each
        // task writes its own tiles' entries only.
        unsafe { transform_input(p, x, rows, 0, tiles, v.get(), zeros) }
    });
    let vs = &s.v;
    s.m.par_chunks_mut(tiles * p.k).enumerate().for_each(|(xi, m)| multiply(p, u, xi, tiles, vs, m));
    let mut parts_out = Vec::with_capacity(ranges.len());
    let mut rest = out;
    for &(r0, r1) in &ranges {
        let (start, end) = p.output_range(r0, r1);
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(end - start);
        parts_out.push((r0, r1, start, head));
        rest = tail;
    }
    let m = &s.m;
    parts_out.into_par_iter().for_each_init(Vec::new, |scratch, (r0, r1, start, dst)| {
        transform_output(p, m, (r0, r1), 0, tiles, dst);
        finish(start, dst, scratch);
    });
}

/// `M[ξ] = V[ξ] · U[ξ]` for the `tiles` tiles of `v`.
fn multiply<T: GemmElement>(p: &Plan, u: &[T], xi: usize, tiles: usize, v: &[T], m: &mut [T]) {
    let (c, k) = (p.c, p.k);
    let v = &v[xi * tiles * c..(xi + 1) * tiles * c];
    product_serial((tiles, k, c), (v, c, 1), (&u[xi * c * k..(xi + 1) * c * k], k, 1), m);
}

/// The input transform of tile rows `r0..r1` into `v`, whose tile 0 is the first of tile row
/// `base` and whose 16 matrices hold `tiles` tiles each.
///
/// # Safety
/// `v` must be valid for `16 * tiles * c` writes, with no other thread touching the entries
/// of these tile rows.
unsafe fn transform_input<T: Float>(
    p: &Plan,
    x: &[T],
    (r0, r1): (usize, usize),
    base: usize,
    tiles: usize,
    v: *mut T,
    zeros: &[T],
) {
    let (th, tw) = p.tiles();
    let c = p.c;
    let [ah, aw] = p.axes;
    for r in r0..r1 {
        for tx in 0..tw {
            let (b, ty) = (r / th, r % th);
            let t = (r - base) * tw + tx;
            let mut d: [&[T]; 16] = [&zeros[..c]; 16];
            for i in 0..4 {
                let Some(iy) = (ty * 2 + i).checked_sub(ah.pad_before).filter(|&v| v < p.h) else { continue };
                for j in 0..4 {
                    let Some(ix) = (tx * 2 + j).checked_sub(aw.pad_before).filter(|&v| v < p.w) else { continue };
                    let at = ((b * p.h + iy) * p.w + ix) * c;
                    d[i * 4 + j] = &x[at..at + c];
                }
            }
            // SAFETY: tile t < tiles, so its 16 ranges lie in `v` (the caller's contract).
            unsafe { input_transform(&d, v, t * c, tiles * c, c) };
        }
    }
}

/// The output transform of tile rows `r0..r1` from `m` (laid out as in [`transform_input`])
/// into `out`, which starts at the first output element of tile row `r0`.
fn transform_output<T: Float>(p: &Plan, m: &[T], (r0, r1): (usize, usize), base: usize, tiles: usize, out: &mut [T]) {
    let (th, tw) = p.tiles();
    let k = p.k;
    let [ah, aw] = p.axes;
    let (oh, ow) = (ah.output, aw.output);
    let (first, _) = p.output_range(r0, r1);
    for r in r0..r1 {
        for tx in 0..tw {
            let (b, ty) = (r / th, r % th);
            let t = (r - base) * tw + tx;
            let rows = (oh - ty * 2).min(2);
            let cols = (ow - tx * 2).min(2);
            let mut dst: [usize; 4] = [usize::MAX; 4];
            for i in 0..rows {
                for j in 0..cols {
                    dst[i * 2 + j] = ((b * oh + ty * 2 + i) * ow + tx * 2 + j) * k - first;
                }
            }
            output_transform(m, t * k, tiles * k, k, dst, out);
        }
    }
}

/// `V = Bᵀ d B` of one tile for every channel: `v[ξ * stride + at + ch]`.
///
/// # Safety
/// `v` must be valid for writes at `ξ * stride + at + ch` for every ξ < 16 and ch < c.
unsafe fn input_transform<T: Float>(d: &[&[T]; 16], v: *mut T, at: usize, stride: usize, c: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2")]
        unsafe fn avx2<T: Float>(d: &[&[T]; 16], v: *mut T, at: usize, stride: usize, c: usize) {
            // SAFETY: the caller's contract.
            unsafe { input_transform_impl(d, v, at, stride, c) }
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above); the caller's contract.
            return unsafe { avx2(d, v, at, stride, c) };
        }
    }
    // SAFETY: the caller's contract.
    unsafe { input_transform_impl(d, v, at, stride, c) }
}

/// Channels per step of the transforms: one AVX2 register of f32. Steps are fixed-size arrays,
/// so they compile to vector adds; a partial last step is zero-padded on load and only its
/// `lanes` channels are stored.
const L: usize = 8;

/// `row[..lanes]` from `src`: a whole step as one fixed-size move. Partial steps go through
/// an out-of-line copy, so the compiler cannot merge the two into one variable-length `memcpy`
/// call (which it otherwise does, costing more than the transform).
#[inline(always)]
fn load<T: Copy>(row: &mut [T; L], src: &[T], lanes: usize) {
    match src.first_chunk::<L>() {
        Some(from) if lanes == L => *row = *from,
        _ => copy_partial(&mut row[..lanes], &src[..lanes]),
    }
}

#[cold]
#[inline(never)]
fn copy_partial<T: Copy>(to: &mut [T], from: &[T]) {
    to.copy_from_slice(from);
}

/// # Safety
/// As [`input_transform`].
#[inline(always)]
unsafe fn input_transform_impl<T: Float>(d: &[&[T]; 16], v: *mut T, at: usize, stride: usize, c: usize) {
    let mut ch = 0;
    while ch < c {
        let lanes = L.min(c - ch);
        // The 16 inputs' channels ch..ch+lanes (zero past `lanes`).
        let mut x = [[T::ZERO; L]; 16];
        for (q, row) in x.iter_mut().enumerate() {
            load(row, &d[q][ch..], lanes);
        }
        // Bᵀ d: rows combine as (d0 - d2, d1 + d2, d2 - d1, d1 - d3), per column.
        let mut t = [[[T::ZERO; L]; 4]; 4];
        for j in 0..4 {
            let (d0, d1, d2, d3) = (&x[j], &x[4 + j], &x[8 + j], &x[12 + j]);
            for l in 0..L {
                t[0][j][l] = d0[l] - d2[l];
                t[1][j][l] = d1[l] + d2[l];
                t[2][j][l] = d2[l] - d1[l];
                t[3][j][l] = d1[l] - d3[l];
            }
        }
        // (Bᵀ d) B: the same along each row.
        for (i, row) in t.iter().enumerate() {
            let mut out = [[T::ZERO; L]; 4];
            for l in 0..L {
                let (a0, a1, a2, a3) = (row[0][l], row[1][l], row[2][l], row[3][l]);
                out[0][l] = a0 - a2;
                out[1][l] = a1 + a2;
                out[2][l] = a2 - a1;
                out[3][l] = a1 - a3;
            }
            for (j, vals) in out.iter().enumerate() {
                let to = v.wrapping_add((i * 4 + j) * stride + at + ch);
                if lanes == L {
                    // SAFETY: in bounds by the caller's contract (ξ = i*4+j < 16, ch+L ≤ c).
                    unsafe { to.cast::<[T; L]>().write_unaligned(*vals) };
                } else {
                    // SAFETY: as above, ch+lanes ≤ c.
                    copy_partial(unsafe { std::slice::from_raw_parts_mut(to, lanes) }, &vals[..lanes]);
                }
            }
        }
        ch += lanes;
    }
}

/// `Y = Aᵀ M A` of one tile for every output channel, written to the (up to 4) output pixels
/// at `dst` offsets (`usize::MAX`: outside the output).
fn output_transform<T: Float>(m: &[T], at: usize, stride: usize, k: usize, dst: [usize; 4], out: &mut [T]) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2")]
        unsafe fn avx2<T: Float>(m: &[T], at: usize, stride: usize, k: usize, dst: [usize; 4], out: &mut [T]) {
            output_transform_impl(m, at, stride, k, dst, out)
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { avx2(m, at, stride, k, dst, out) };
        }
    }
    output_transform_impl(m, at, stride, k, dst, out)
}

#[inline(always)]
fn output_transform_impl<T: Float>(m: &[T], at: usize, stride: usize, k: usize, dst: [usize; 4], out: &mut [T]) {
    let mut ko = 0;
    while ko < k {
        let lanes = L.min(k - ko);
        let mut x = [[T::ZERO; L]; 16];
        for (q, row) in x.iter_mut().enumerate() {
            load(row, &m[q * stride + at + ko..], lanes);
        }
        // Aᵀ M: rows combine as (m0 + m1 + m2, m1 - m2 - m3), per column.
        let mut t = [[[T::ZERO; L]; 4]; 2];
        for j in 0..4 {
            let (m0, m1, m2, m3) = (&x[j], &x[4 + j], &x[8 + j], &x[12 + j]);
            for l in 0..L {
                t[0][j][l] = m0[l] + m1[l] + m2[l];
                t[1][j][l] = m1[l] - m2[l] - m3[l];
            }
        }
        for (i, row) in t.iter().enumerate() {
            let mut y = [[T::ZERO; L]; 2];
            for l in 0..L {
                let (a0, a1, a2, a3) = (row[0][l], row[1][l], row[2][l], row[3][l]);
                y[0][l] = a0 + a1 + a2;
                y[1][l] = a1 - a2 - a3;
            }
            for (jj, vals) in y.iter().enumerate() {
                let at = dst[i * 2 + jj];
                if at == usize::MAX {
                    continue;
                }
                match out[at + ko..].first_chunk_mut::<L>() {
                    Some(to) if lanes == L => *to = *vals,
                    _ => copy_partial(&mut out[at + ko..at + ko + lanes], &vals[..lanes]),
                }
            }
        }
        ko += lanes;
    }
}
