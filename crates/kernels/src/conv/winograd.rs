//! Winograd's minimal filtering F(m×m, 3×3) for `Conv2D` with a 3×3 filter, stride 1 and no
//! dilation (ResNet's 3×3 convolutions), with output tiles of m = 2 or 4 pixels a side: each
//! m×m block of output pixels ("tile") takes α² = (m+2)² multiplies per input channel and
//! output channel instead of 9m² (F(2×2): 16 instead of 36; F(4×4): 36 instead of 144), as α²
//! GEMMs.
//!
//! With `d` a tile's α×α input window, `g` the 3×3 filter of one (input, output) channel pair
//! and `Bᵀ`, `G`, `Aᵀ` Lavin & Gray's matrices, the tile's output is `Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A`.
//! The transformed filter `U = G g Gᵀ` is α² matrices `[C, K]`, made once per filter buffer
//! (in f64, rounded once); a block of `T` tiles is transformed to α² matrices `V = Bᵀ d B` of
//! `[T, C]`, multiplied (`M[ξ] = V[ξ] · U[ξ]`, `[T, K]`), and transformed back into output
//! pixels. F(2×2)'s transforms use only additions, subtractions and halvings, and its rounding
//! differs from the direct sum about as much as a different GEMM blocking does; F(4×4)'s
//! multiply by small integers (2, 4, 5, 8) and its error is a few times larger (measured in
//! `Conv2D::run`'s choice).
//!
//! `Conv2D::run_winograd` drives it: blocks of tile rows across the intra-op pool, each
//! block's epilogue (and fused max pool) right after its output transform, or phase by phase
//! when the tiles are too few for blocks on every thread.
use ferroflow_tensor::Tensor;
use rayon::prelude::*;

use super::pool::{block_target, pool_from_stage};
use super::scratch::Lease;
use super::{Axis, BlockFn, Conv2D, WINOGRAD_MIN_TILES};
use crate::matmul::{product_serial, GemmElement};
use crate::numeric::Float;
use crate::packed::{self, Packed};
use crate::{KResult, KernelContext, SendPtr};

#[cfg(target_arch = "x86_64")]
mod avx512;

/// `G` of F(2×2, 3×3) and F(4×4, 3×3): α rows of 3.
const G2: [[f64; 3]; 4] = [[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]];
const G4: [[f64; 3]; 6] = [
    [1.0 / 4.0, 0.0, 0.0],
    [-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0],
    [-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0],
    [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0],
    [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0],
    [0.0, 0.0, 1.0],
];

/// The transformed filter for tiles of `m` (2 or 4): α² matrices `[c, k]`, row-major, one
/// after the other, each entry computed in f64 and rounded once.
pub(super) fn transform_filter<T: Float>(f: &[T], c: usize, k: usize, m: usize) -> Vec<T> {
    let g: &[[f64; 3]] = if m == 4 { &G4 } else { &G2 };
    let a = g.len();
    let mut u = vec![T::ZERO; a * a * c * k];
    let ck = c * k;
    for ci in 0..c {
        for ko in 0..k {
            let w = |i: usize, j: usize| f[((i * 3 + j) * c + ci) * k + ko].to_f64();
            // G w: α×3, then (G w) Gᵀ: α×α.
            let mut gw = [[0f64; 3]; 6];
            for (row, r) in gw.iter_mut().zip(g) {
                *row = std::array::from_fn(|j| (0..3).map(|t| r[t] * w(t, j)).sum());
            }
            for (i, row) in gw[..a].iter().enumerate() {
                for (j, gr) in g.iter().enumerate() {
                    let v: f64 = (0..3).map(|t| row[t] * gr[t]).sum();
                    u[(i * a + j) * ck + ci * k + ko] = T::from_f64(v);
                }
            }
        }
    }
    u
}

/// A transformed filter: α² matrices `[c, k]`, packed for [`packed::product`] where it runs
/// (f32 on AVX-512), else as [`transform_filter`] made them.
pub(super) enum Transformed<T> {
    Plain(Vec<T>),
    Packed(Vec<Packed<T>>),
}

/// The transformed filter a kernel keeps (see [`packed::Derived`]).
pub(super) struct FilterCache<T>(packed::Derived<Transformed<T>>);

impl<T> Default for FilterCache<T> {
    fn default() -> Self {
        FilterCache(Default::default())
    }
}

impl<T: Float + GemmElement + ferroflow_tensor::Element> FilterCache<T> {
    /// The transform of `filter` (`[3, 3, c, k]`) for tiles of `m`, packed when its products
    /// have `rows` rows and packing pays for them, from the cache when it holds this
    /// buffer's.
    pub(super) fn get(
        &self,
        filter: &Tensor,
        (c, k): (usize, usize),
        m: usize,
        rows: usize,
    ) -> Result<std::sync::Arc<Transformed<T>>, ferroflow_tensor::TensorError> {
        let f = filter.as_slice::<T>()?;
        let pack = packed::pays::<T>(rows, k);
        Ok(self.0.get(filter, f.as_ptr(), m * 2 + pack as usize, || {
            let plain = transform_filter(f, c, k, m);
            if pack {
                Transformed::Packed(plain.chunks((c * k).max(1)).map(|u| Packed::new(u, c, k, k, 1)).collect())
            } else {
                Transformed::Plain(plain)
            }
        }))
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
    /// Output pixels per tile side: 2 or 4.
    pub m: usize,
}

impl Plan {
    /// Tile rows and tile columns per image.
    pub(super) fn tiles(&self) -> (usize, usize) {
        (self.axes[0].output.div_ceil(self.m), self.axes[1].output.div_ceil(self.m))
    }

    /// The transformed matrices: α² = (m + 2)².
    pub(super) fn count(&self) -> usize {
        (self.m + 2) * (self.m + 2)
    }

    /// The output elements that tile rows `r0..r1` (counted over all images) cover: they are
    /// contiguous in NHWC.
    pub(super) fn output_range(&self, r0: usize, r1: usize) -> (usize, usize) {
        let (th, _) = self.tiles();
        let (oh, ow, m) = (self.axes[0].output, self.axes[1].output, self.m);
        let row_of = |r: usize| (r / th) * oh + ((r % th) * m).min(oh);
        let start = row_of(r0);
        // The end of tile row r1-1 (the last of an image may cover fewer output rows).
        let last = r1 - 1;
        let end = (last / th) * oh + ((last % th) * m + m).min(oh);
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
    u: &Transformed<T>,
    (r0, r1): (usize, usize),
    out: &mut [T],
    s: &mut Scratch<T>,
) {
    s.size_for(p, r1 - r0);
    let tiles = (r1 - r0) * p.tiles().1;
    // SAFETY: `size_for` sized `v` for the block's tiles, and this thread alone writes it.
    unsafe { transform_input(p, x, (r0, r1), r0, tiles, s.v.as_mut_ptr(), &s.zeros) };
    for xi in 0..p.count() {
        multiply(p, u, xi, tiles, &s.v, &mut s.m[xi * tiles * p.k..(xi + 1) * tiles * p.k]);
    }
    transform_output(p, &s.m, (r0, r1), r0, tiles, out);
}

impl<T: Float> Scratch<T> {
    /// Sizes the matrices for `rows` tile rows.
    pub(super) fn size_for(&mut self, p: &Plan, rows: usize) {
        let tiles = rows * p.tiles().1;
        self.v.resize(p.count() * tiles * p.c, T::ZERO);
        self.m.resize(p.count() * tiles * p.k, T::ZERO);
        if self.zeros.len() < p.c {
            self.zeros.resize(p.c, T::ZERO);
        }
    }
}

/// The whole convolution in three phases, each split across the intra-op pool: the input
/// transform by tile rows, the α² GEMMs (one task each, every tile at once: full-size
/// products, and each transformed filter packed once), the output transform and `finish` by
/// tile rows. For convolutions with too few tiles to give every thread blocks of its own
/// (batch 1), where splitting the tiles would leave α² tiny GEMMs per block.
pub(super) fn phased<T: Float + GemmElement>(
    p: &Plan,
    x: &[T],
    u: &Transformed<T>,
    out: &mut [T],
    s: &mut Scratch<T>,
    parts: usize,
    finish: BlockFn<T>,
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

/// Bytes of one Winograd block's transformed input (α² matrices of tiles × channels).
const WINOGRAD_BLOCK_BYTES: usize = 1 << 20;
/// The fewest tiles per block when the transformed filter is larger than a block (so it is
/// streamed from memory by every block's α² GEMMs): on ResNet50's 7×7×512 layers at batch
/// 32, blocks of 16 tiles took 2.5× as long as blocks of 128 or more.
const WINOGRAD_STREAMED_TILES: usize = 128;

impl<T: GemmElement + Float> Conv2D<T> {
    /// Winograd F(m×m, 3×3): blocks of whole tile rows (so each block's output is one
    /// contiguous range), one task per block on the intra-op pool, the epilogue on each block
    /// right after its output transform. With too few tiles for two blocks per thread,
    /// smaller blocks while each keeps [`WINOGRAD_MIN_TILES`], else phase by phase
    /// ([`phased`]): on 2 threads batch-1 ResNet50's 28×28 and 14×14 3×3 layers
    /// (49 tiles in all) took 35–45% less time than with blocks of a few tile rows, whose
    /// α² GEMMs each were tiny (measured when the `gemm` crate repacked the transformed filter
    /// per GEMM; blocks of 14 tiles were still slower with it packed once).
    /// With `pool`, `o` is the max-pooled output: each block is made in a scratch buffer
    /// and pooled from there (false, with nothing done, where the schedule is phased).
    pub(super) fn run_winograd(
        &self,
        ctx: &KernelContext,
        p: &Plan,
        x: &[T],
        filter: &Tensor,
        (o, pool): (&mut [T], Option<[usize; 2]>),
        epilogue: Option<BlockFn<T>>,
    ) -> KResult<bool> {
        let (th, tw) = p.tiles();
        let total = p.n * th;
        let size = std::mem::size_of::<T>();
        let lo = if p.count() * p.c * p.k * size > WINOGRAD_BLOCK_BYTES { WINOGRAD_STREAMED_TILES } else { 16 };
        let tiles = (WINOGRAD_BLOCK_BYTES / (p.count() * p.c.max(p.k) * size)).clamp(lo, 512);
        let mut per_block = (tiles / tw).max(1);
        let threads = ctx.threads();
        let mut by_phases = false;
        if threads > 1 && total.div_ceil(per_block) < 2 * threads {
            // Too few tiles for two blocks per thread: smaller blocks while they keep enough
            // tiles, else phase by phase. With the transformed filter packed once, blocks of
            // 49 tiles (batch 1's 56×56 layers, F(4×4)) took 10–30% less time than phases;
            // blocks of 14 were slower.
            let even = total.div_ceil(2 * threads);
            if even * tw >= WINOGRAD_MIN_TILES {
                per_block = even;
            } else {
                by_phases = true;
            }
        }
        if by_phases && pool.is_some() {
            // Phases transform every tile at once: no blocks to pool in cache.
            return Ok(false);
        }
        // The rows of each α² product: every tile when phased, a block's otherwise.
        let rows = if by_phases { total * tw } else { per_block.min(total) * tw };
        let u = self.winograd_filter.get(filter, (p.c, p.k), p.m, rows)?;
        let u = &*u;
        if by_phases {
            let mut lease = Lease::<(Scratch<T>, Vec<T>)>::take();
            let finish = |start: usize, dst: &mut [T], scratch: &mut Vec<T>| {
                if let Some(e) = epilogue {
                    e(start, dst, scratch);
                }
            };
            ctx.install(|| phased(p, x, u, o, &mut lease.bufs.0, 2 * threads, &finish));
            return Ok(true);
        }
        // Each block's part of `o`: its output range, or (pooled: the output's sides are
        // multiples of the tile, the tile of the window) its pooled rows.
        let [ph, pw] = pool.unwrap_or([1, 1]);
        let mut blocks = Vec::with_capacity(total.div_ceil(per_block));
        let mut rest = o;
        let mut r0 = 0;
        while r0 < total {
            let r1 = (r0 + per_block).min(total);
            let (start, end) = p.output_range(r0, r1);
            let (head, tail) = std::mem::take(&mut rest).split_at_mut((end - start) / (ph * pw));
            blocks.push((r0, r1, start, head));
            rest = tail;
            r0 = r1;
        }
        let ow = p.axes[1].output;
        let task = |lease: &mut Lease<(Scratch<T>, Vec<T>, Vec<T>)>,
                    (r0, r1, start, dst): (usize, usize, usize, &mut [T])| {
            if ctx.stopped() {
                return;
            }
            let (scratch, epi, stage) = (&mut lease.bufs.0, &mut lease.bufs.1, &mut lease.bufs.2);
            let conv = block_target(dst, stage, pool);
            block(p, x, u, (r0, r1), conv, scratch);
            if let Some(e) = epilogue {
                e(start, conv, epi);
            }
            pool_from_stage(stage, dst, ow, p.k, pool);
        };
        if threads > 1 && blocks.len() > 1 {
            ctx.install(|| blocks.into_par_iter().for_each_init(Lease::take, task));
        } else {
            let mut lease = Lease::take();
            blocks.into_iter().for_each(|b| task(&mut lease, b));
        }
        Ok(true)
    }
}

/// `M[ξ] = V[ξ] · U[ξ]` for the `tiles` tiles of `v`.
fn multiply<T: GemmElement>(p: &Plan, u: &Transformed<T>, xi: usize, tiles: usize, v: &[T], m: &mut [T]) {
    let (c, k) = (p.c, p.k);
    let v = &v[xi * tiles * c..(xi + 1) * tiles * c];
    match u {
        Transformed::Packed(b) => packed::product(None, tiles, v, c, &b[xi], m),
        Transformed::Plain(u) => product_serial((tiles, k, c), (v, c, 1), (&u[xi * c * k..(xi + 1) * c * k], k, 1), m),
    }
}

/// The input transform of tile rows `r0..r1` into `v`, whose tile 0 is the first of tile row
/// `base` and whose α² matrices hold `tiles` tiles each.
///
/// # Safety
/// `v` must be valid for `α² * tiles * c` writes, with no other thread touching the entries
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
    let (c, m) = (p.c, p.m);
    let a = m + 2;
    let [ah, aw] = p.axes;
    assert!(x.len() >= p.n * p.h * p.w * c);
    #[cfg(target_arch = "x86_64")]
    if packed::available::<T>() {
        let (x, v) = (x.as_ptr() as *const f32, v as *mut f32);
        // SAFETY: T is f32 on an AVX-512F CPU (`available`); `x` holds the whole input
        // (asserted) and `v` this block's tiles (the caller's contract).
        unsafe {
            if m == 4 {
                avx512::input::<4>(p, x, (r0, r1), base, tiles, v)
            } else {
                avx512::input::<2>(p, x, (r0, r1), base, tiles, v)
            }
        }
        return;
    }
    for r in r0..r1 {
        let (b, ty) = (r / th, r % th);
        // The element offset of each of the tile row's α input rows (None: padding).
        let rows: [Option<usize>; 6] = std::array::from_fn(|i| {
            (ty * m + i).checked_sub(ah.pad_before).filter(|&iy| i < a && iy < p.h).map(|iy| (b * p.h + iy) * p.w * c)
        });
        for tx in 0..tw {
            let t = (r - base) * tw + tx;
            let cols: [Option<usize>; 6] = std::array::from_fn(|j| {
                (tx * m + j).checked_sub(aw.pad_before).filter(|&ix| j < a && ix < p.w).map(|ix| ix * c)
            });
            let d: [&[T]; 36] = std::array::from_fn(|q| match (q < a * a).then(|| (rows[q / a], cols[q % a])) {
                Some((Some(row), Some(col))) => &x[row + col..row + col + c],
                _ => &zeros[..c],
            });
            // SAFETY: tile t < tiles, so its α² ranges lie in `v` (the caller's contract).
            crate::isa::avx2(
                #[inline(always)]
                || unsafe {
                    if m == 4 {
                        input_transform::<T, 4>(&d, v, t * c, tiles * c, c)
                    } else {
                        input_transform::<T, 2>(&d, v, t * c, tiles * c, c)
                    }
                },
            );
        }
    }
}

/// The output transform of tile rows `r0..r1` from `m` (laid out as in [`transform_input`])
/// into `out`, which starts at the first output element of tile row `r0`.
fn transform_output<T: Float>(p: &Plan, mm: &[T], (r0, r1): (usize, usize), base: usize, tiles: usize, out: &mut [T]) {
    let (th, tw) = p.tiles();
    let (k, m) = (p.k, p.m);
    let [ah, aw] = p.axes;
    let (oh, ow) = (ah.output, aw.output);
    let (first, _) = p.output_range(r0, r1);
    #[cfg(target_arch = "x86_64")]
    if packed::available::<T>() {
        let (_, last) = p.output_range(r0, r1);
        assert!((r1 - base) * tw <= tiles && mm.len() >= p.count() * tiles * k && out.len() >= last - first);
        let (mm, out) = (mm.as_ptr() as *const f32, out.as_mut_ptr() as *mut f32);
        // SAFETY: T is f32 on an AVX-512F CPU (`available`); the tiles' α² ranges lie in
        // `mm` and their output pixels in `out` (asserted).
        unsafe {
            if m == 4 {
                avx512::output::<4>(p, mm, (r0, r1), base, tiles, out)
            } else {
                avx512::output::<2>(p, mm, (r0, r1), base, tiles, out)
            }
        }
        return;
    }
    for r in r0..r1 {
        for tx in 0..tw {
            let (b, ty) = (r / th, r % th);
            let t = (r - base) * tw + tx;
            let rows = (oh - ty * m).min(m);
            let cols = (ow - tx * m).min(m);
            let mut dst: [usize; 16] = [usize::MAX; 16];
            for i in 0..rows {
                for j in 0..cols {
                    dst[i * m + j] = ((b * oh + ty * m + i) * ow + tx * m + j) * k - first;
                }
            }
            crate::isa::avx2(
                #[inline(always)]
                || {
                    if m == 4 {
                        output_transform::<T, 4>(mm, t * k, tiles * k, k, &dst, out)
                    } else {
                        output_transform::<T, 2>(mm, t * k, tiles * k, k, &dst, out)
                    }
                },
            );
        }
    }
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

/// One lane-wise combination of α values: `Bᵀ` (M = 2: `d0 - d2, d1 + d2, d2 - d1, d1 - d3`;
/// M = 4: Lavin & Gray's 6×6) applied to `x`, written to `y`.
#[inline(always)]
fn b_t<T: Float, const M: usize>(x: [&[T; L]; 6], y: &mut [[T; L]; 6]) {
    if M == 2 {
        for l in 0..L {
            let (d0, d1, d2, d3) = (x[0][l], x[1][l], x[2][l], x[3][l]);
            y[0][l] = d0 - d2;
            y[1][l] = d1 + d2;
            y[2][l] = d2 - d1;
            y[3][l] = d1 - d3;
        }
    } else {
        let (two, four, five) = (T::from_f64(2.0), T::from_f64(4.0), T::from_f64(5.0));
        for l in 0..L {
            let (d0, d1, d2, d3, d4, d5) = (x[0][l], x[1][l], x[2][l], x[3][l], x[4][l], x[5][l]);
            y[0][l] = four * d0 - five * d2 + d4;
            y[1][l] = (d3 + d4) - four * (d1 + d2);
            y[2][l] = four * (d1 - d2) + (d4 - d3);
            y[3][l] = two * (d3 - d1) + (d4 - d2);
            y[4][l] = two * (d1 - d3) + (d4 - d2);
            y[5][l] = four * d1 - five * d3 + d5;
        }
    }
}

/// `V = Bᵀ d B` of one tile for every channel (inlined into the caller's AVX2 code): `v[ξ * stride + at + ch]`, `d` holding the
/// tile's (M+2)² input pixels row by row.
///
/// # Safety
/// `v` must be valid for writes at `ξ * stride + at + ch` for every ξ < (M+2)² and ch < c.
#[inline(always)]
unsafe fn input_transform<T: Float, const M: usize>(d: &[&[T]; 36], v: *mut T, at: usize, stride: usize, c: usize) {
    let a = M + 2;
    // Zeroed once per tile, not per block of channels (a memset each: 3% of the small CNN);
    // past `lanes` they hold the previous block's values, which reach no output.
    let mut x = [[T::ZERO; L]; 36];
    let mut t = [[[T::ZERO; L]; 6]; 6];
    let mut ch = 0;
    while ch < c {
        let lanes = L.min(c - ch);
        // The α² inputs' channels ch..ch+lanes.
        for (q, row) in x.iter_mut().enumerate().take(a * a) {
            load(row, &d[q][ch..], lanes);
        }
        // Bᵀ d, per column: t[i][j] combines column j's rows.
        for j in 0..a {
            let mut col = [[T::ZERO; L]; 6];
            b_t::<T, M>(std::array::from_fn(|i| &x[(i % a) * a + j]), &mut col);
            for i in 0..a {
                t[i][j] = col[i];
            }
        }
        // (Bᵀ d) B: the same along each row.
        for (i, row) in t.iter().enumerate().take(a) {
            let mut out = [[T::ZERO; L]; 6];
            b_t::<T, M>(std::array::from_fn(|j| &row[j % a]), &mut out);
            for (j, vals) in out.iter().enumerate().take(a) {
                let to = v.wrapping_add((i * a + j) * stride + at + ch);
                if lanes == L {
                    // SAFETY: in bounds by the caller's contract (ξ = i*α+j < α², ch+L ≤ c).
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

/// `Aᵀ` applied lane-wise to α values (M = 2: `m0 + m1 + m2, m1 - m2 - m3`; M = 4: Lavin &
/// Gray's 4×6).
#[inline(always)]
fn a_t<T: Float, const M: usize>(x: [&[T; L]; 6], y: &mut [[T; L]; 4]) {
    if M == 2 {
        for l in 0..L {
            let (m0, m1, m2, m3) = (x[0][l], x[1][l], x[2][l], x[3][l]);
            y[0][l] = m0 + m1 + m2;
            y[1][l] = m1 - m2 - m3;
        }
    } else {
        let (two, four, eight) = (T::from_f64(2.0), T::from_f64(4.0), T::from_f64(8.0));
        for l in 0..L {
            let (m0, m1, m2, m3, m4, m5) = (x[0][l], x[1][l], x[2][l], x[3][l], x[4][l], x[5][l]);
            let (s12, d12, s34, d34) = (m1 + m2, m1 - m2, m3 + m4, m3 - m4);
            y[0][l] = m0 + s12 + s34;
            y[1][l] = d12 + two * d34;
            y[2][l] = s12 + four * s34;
            y[3][l] = d12 + eight * d34 + m5;
        }
    }
}

/// `Y = Aᵀ M A` of one tile for every output channel, written to the (up to M²) output
/// pixels at `dst` offsets (`usize::MAX`: outside the output).
#[inline(always)]
fn output_transform<T: Float, const M: usize>(
    m: &[T],
    at: usize,
    stride: usize,
    k: usize,
    dst: &[usize; 16],
    out: &mut [T],
) {
    let a = M + 2;
    // Zeroed once per tile (see `input_transform`).
    let mut x = [[T::ZERO; L]; 36];
    let mut t = [[[T::ZERO; L]; 6]; 4];
    let mut ko = 0;
    while ko < k {
        let lanes = L.min(k - ko);
        for (q, row) in x.iter_mut().enumerate().take(a * a) {
            load(row, &m[q * stride + at + ko..], lanes);
        }
        // Aᵀ M, per column.
        for j in 0..a {
            let mut col = [[T::ZERO; L]; 4];
            a_t::<T, M>(std::array::from_fn(|i| &x[(i % a) * a + j]), &mut col);
            for i in 0..M {
                t[i][j] = col[i];
            }
        }
        for (i, row) in t.iter().enumerate().take(M) {
            let mut y = [[T::ZERO; L]; 4];
            a_t::<T, M>(std::array::from_fn(|j| &row[j % a]), &mut y);
            for (jj, vals) in y.iter().enumerate().take(M) {
                let at = dst[i * M + jj];
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
