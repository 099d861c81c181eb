//! GEMM against a right operand packed once and reused across calls: a convolution's filter
//! (`[k, oc]`) or Winograd's transformed filter, multiplied by blocks of pixel rows on every
//! step. The `gemm` crate repacks its operands on every call; for the filters of late layers
//! at batch 1 (a 7×7×512 3×3 layer: a 9.4 MB filter for 49 pixels) that repacking was about
//! 11% of ResNet50's step on one thread.
//!
//! The packed operand is column panels of [`NR`] (zero-padded on the right), cut in slices of
//! [`KC`] rows of `NR` contiguous values, stored in the order the product reads them (see
//! [`slice_at`]). The micro-kernel (AVX-512) keeps an [`MR`]×[`NR`] tile of the output
//! in 28 registers and, for each `p` in order, broadcasts one value of each of the tile's `MR`
//! rows of the left operand (read in place: row-major, no packing) and multiplies it into the
//! panel's row `p` — each output element is one chain of fused multiply-adds over `p = 0..k`,
//! whatever the blocking, the row split or the thread count, so results do not depend on them.
//! Loops: rows in blocks of `mc` (their output stays in L2), `k` in slices of [`KC`] (a panel's
//! slice, 16 KB, stays in L1 while every row tile of the block runs over it), then panels, then
//! row tiles; while the first tiles run over a panel's slice they prefetch the next one into
//! L1. f32 only, on CPUs with AVX-512F; elsewhere callers keep the `gemm` crate.
use std::ops::Range;

use crate::KernelContext;

/// Columns per panel (two AVX-512 vectors of f32).
pub(crate) const NR: usize = 32;
/// Rows per micro-kernel tile (28 accumulators, 2 panel vectors and a broadcast: 31 of the 32
/// registers).
const MR: usize = 14;
/// Rows of the packed operand per pass: a panel's slice is `KC * NR * 4` = 16 KB.
const KC: usize = 128;
/// Row stride (elements) from which the left operand's rows are packed.
const PACK_MIN_ROW: usize = 512;
/// Elements between copied rows beyond their length (one cache line).
const ROW_PAD: usize = 16;
/// Bytes of output a row block keeps in L2 across its `k` slices.
const MC_BYTES: usize = 256 << 10;
/// Rows of a product from which the `gemm` crate is used instead (see [`pays`]).
const PAYS_BELOW_ROWS: usize = 256;
/// Multiply-adds below which a product stays on one thread.
const PARALLEL_MIN_FLOPS: usize = 1 << 18;

/// A `[k, n]` matrix in column panels of [`NR`], zero-padded (see the module docs).
pub(crate) struct Packed<T> {
    k: usize,
    n: usize,
    data: Vec<T>,
}

impl<T: Copy + Default> Packed<T> {
    /// Packs `b[k×n]`, where `b[p, j]` is `b[p * rs + j * cs]`.
    pub(crate) fn new(b: &[T], k: usize, n: usize, rs: usize, cs: usize) -> Packed<T> {
        let panels = n.div_ceil(NR);
        let mut data = vec![T::default(); panels * k * NR];
        for p0 in (0..k).step_by(KC) {
            let kc = KC.min(k - p0);
            for jp in 0..panels {
                let cols = NR.min(n - jp * NR);
                let at = slice_at(p0, kc, panels, jp);
                for (dp, row) in data[at..at + kc * NR].chunks_mut(NR).enumerate() {
                    for (j, v) in row[..cols].iter_mut().enumerate() {
                        *v = b[(p0 + dp) * rs + (jp * NR + j) * cs];
                    }
                }
            }
        }
        Packed { k, n, data }
    }
}

/// Where panel `jp`'s slice of rows `p0..p0 + kc` starts in a packed operand of `panels`
/// panels: slices of [`KC`] rows in order, each the slice of every panel in turn, so the
/// product reads the operand from start to end in one stream (its loops go slice by slice,
/// panel by panel). A panel-major layout (each panel's `k` rows together) made every 16 KB
/// slice a jump of `k × NR` floats: the hardware prefetcher restarts at every 4 KB page, and
/// a filter read from memory (every filter of a model at batch 1: ResNet50's are 100 MB) ran
/// at 70–95 GFLOP/s instead of 150.
fn slice_at(p0: usize, kc: usize, panels: usize, jp: usize) -> usize {
    p0 * panels * NR + jp * kc * NR
}

impl<T> Packed<T> {
    fn panels(&self) -> usize {
        self.n.div_ceil(NR)
    }
}

/// A value derived from a filter tensor (its packing, its Winograd transform), kept by a
/// kernel with the tensor it came from: holding a handle keeps that buffer alive and
/// unwritable (tensors are copy-on-write), so the same data address, shape and `tag` mean the
/// same derived value. A kernel sees one filter (a `Const`) on every step, so one entry does.
pub(crate) struct Derived<V>(std::sync::Mutex<Option<(ferroflow_tensor::Tensor, usize, std::sync::Arc<V>)>>);

impl<V> Default for Derived<V> {
    fn default() -> Self {
        Derived(Default::default())
    }
}

impl<V> Derived<V> {
    /// The value derived from `filter` (whose data starts at `data`) with `tag`: the cached
    /// one when it came from this buffer, else `make()`'s, cached.
    pub(crate) fn get<T>(
        &self,
        filter: &ferroflow_tensor::Tensor,
        data: *const T,
        tag: usize,
        make: impl FnOnce() -> V,
    ) -> std::sync::Arc<V> {
        let mut cached = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((t, ttag, v)) = cached.as_ref() {
            if *ttag == tag
                && t.dims() == filter.dims()
                && t.as_bytes().ok().map(<[u8]>::as_ptr) == Some(data as *const u8)
            {
                return v.clone();
            }
        }
        let v = std::sync::Arc::new(make());
        *cached = Some((filter.clone(), tag, v.clone()));
        v
    }
}

/// Whether [`product`] runs for element type `T` on this CPU (f32 with AVX-512F).
pub(crate) fn available<T: 'static>() -> bool {
    std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() && crate::isa::has_avx512f()
}

/// Whether [`product`] runs for `T` and pays for products of `m` rows and `n` columns: a
/// filter packed once saves the `gemm` crate's repacking, which matters for few rows (a 7×7
/// layer's 49 pixels: 49×2048×512 ran at 98–106 GFLOP/s packed against 84–91 through the
/// `gemm` crate); for many rows that repacking is a small share and the `gemm` crate's kernels
/// were as fast or faster (512 rows × 576 × 96: 104 against 112 GFLOP/s). Columns that leave
/// most of a panel empty (16) waste its multiplies.
pub(crate) fn pays<T: 'static>(m: usize, n: usize) -> bool {
    available::<T>() && m < PAYS_BELOW_ROWS && (n >= 2 * NR || n.is_multiple_of(NR))
}

/// `o[m×n] = a[m×k] · b`, where row `i` of `a` is `a[i * a_rs..][..k]` and `o` is row-major
/// `m×n`; on the intra-op pool (panels split across threads) when `ctx` is given and the
/// product is large enough.
///
/// # Panics
/// When [`available`] is false for `T`, or the slices are shorter than the shapes say.
pub(crate) fn product<T: 'static>(
    ctx: Option<&KernelContext>,
    m: usize,
    a: &[T],
    a_rs: usize,
    b: &Packed<T>,
    o: &mut [T],
) {
    assert!(available::<T>(), "packed GEMM needs f32 and AVX-512F");
    let (k, n) = (b.k, b.n);
    if m == 0 || n == 0 {
        return;
    }
    assert!(o.len() >= m * n, "output too small for the product");
    assert!(k == 0 || a.len() >= (m - 1) * a_rs + k, "left operand too small for the product");
    assert!(b.data.len() >= b.panels() * k * NR);
    // SAFETY: `available` checked that T is f32, so these are the same slices retyped.
    let (a, o, bd) = unsafe {
        (
            std::slice::from_raw_parts(a.as_ptr() as *const f32, a.len()),
            std::slice::from_raw_parts_mut(o.as_mut_ptr() as *mut f32, o.len()),
            std::slice::from_raw_parts(b.data.as_ptr() as *const f32, b.data.len()),
        )
    };
    if k == 0 {
        o[..m * n].fill(0.0);
        return;
    }
    let panels = b.panels();
    let threads = match ctx {
        Some(ctx) if m * n * k >= PARALLEL_MIN_FLOPS && panels > 1 => ctx.threads().min(panels),
        _ => 1,
    };
    let op = crate::SendPtr(o.as_mut_ptr());
    let run = |range: Range<usize>| {
        // SAFETY: the extents of `a`, `o` and the panels were checked above; tasks get
        // disjoint panel ranges, so each writes its own columns of `o` only, and `o` aliases
        // neither operand (a `&mut` borrow).
        unsafe { panels_avx512(m, (a.as_ptr(), a_rs), (bd.as_ptr(), k, n), range, op.get()) }
    };
    match ctx {
        Some(ctx) if threads > 1 => {
            // Two ranges per thread: the calling thread starts at once and takes more of them
            // than a pool thread that wakes late.
            let per = panels.div_ceil(2 * threads);
            ctx.for_each_part(panels.div_ceil(per), |t| run(t * per..((t + 1) * per).min(panels)));
        }
        _ => run(0..panels),
    }
}

/// The product's columns in panels `range`.
///
/// # Safety
/// The CPU has AVX-512F; `a` holds `m` rows of `k` at stride `a_rs`, `b` `ceil(n/NR)` panels
/// of `k×NR`, `o` `m×n`; no other thread writes these columns of `o`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn panels_avx512(
    m: usize,
    (a, a_rs): (*const f32, usize),
    (b, k, n): (*const f32, usize, usize),
    range: Range<usize>,
    o: *mut f32,
) {
    let mc = ((MC_BYTES / (4 * NR * range.len().max(1))).max(MR) / MR) * MR;
    PACKED_ROWS.with(|buf| {
        let mut buf = buf.borrow_mut();
        let mut i0 = 0;
        while i0 < m {
            let rows = mc.min(m - i0);
            // The block's rows in tiles of at most `MR`, as even as they go (49 rows: 13, 12,
            // 12, 12 rather than 14, 14, 14, 7: a short tile runs at a short tile's speed).
            let tiles = rows.div_ceil(MR);
            let (base, extra) = (rows / tiles, rows % tiles);
            let tile = |t: usize| (t * base + t.min(extra), base + usize::from(t < extra));
            let mut p0 = 0;
            while p0 < k {
                let kc = KC.min(k - p0);
                // Long rows (2 KB apart or more) are copied: the block's rows of this slice,
                // `kc + ROW_PAD` apart, so the micro-kernel's `MR` rows fall in different L1
                // sets (rows 4 KB apart map to the same set and evict each other and the
                // panel). Shorter rows are read in place.
                let pack = a_rs >= PACK_MIN_ROW;
                let stride = kc + ROW_PAD;
                buf.resize(if pack { rows * stride } else { 0 }, 0.0);
                if pack {
                    for (i, dst) in buf.chunks_mut(stride).enumerate() {
                        std::ptr::copy_nonoverlapping(a.add((i0 + i) * a_rs + p0), dst.as_mut_ptr(), kc);
                    }
                }
                for jp in range.clone() {
                    let cols = NR.min(n - jp * NR);
                    let masks = (lane_mask(cols), lane_mask(cols.saturating_sub(16)));
                    let bp = b.add(slice_at(p0, kc, n.div_ceil(NR), jp));
                    // The first two tiles prefetch the operand's next slice (the next in
                    // memory: its `kc` rows of `NR` are `2 × kc` cache lines), half each, so it
                    // is in L1 when the next panel starts.
                    let ahead = |t: usize| (t < 2).then(|| bp.add(kc * NR + t * kc * NR / 2));
                    for t in 0..tiles {
                        let (start, r) = tile(t);
                        let at = if pack {
                            (buf.as_ptr().add(start * stride), stride, 1)
                        } else {
                            (a.add((i0 + start) * a_rs + p0), a_rs, 1)
                        };
                        let to = (o.add((i0 + start) * n + jp * NR), n);
                        macro_rules! tile {
                            ($($r:literal)*) => {
                                match r {
                                    $($r => tile_avx512::<$r>(kc, at, bp, to, p0 > 0, masks, ahead(t)),)*
                                    _ => unreachable!(),
                                }
                            };
                        }
                        tile!(1 2 3 4 5 6 7 8 9 10 11 12 13 14);
                    }
                }
                p0 += kc;
            }
            i0 += rows;
        }
    })
}

thread_local! {
    /// A thread's packed rows of the left operand (one row block's slice).
    static PACKED_ROWS: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn panels_avx512(_: usize, _: (*const f32, usize), _: (*const f32, usize, usize), _: Range<usize>, _: *mut f32) {
    unreachable!("the packed GEMM is only available on x86-64")
}

/// The mask of the first `lanes` (at most 16) of a vector.
fn lane_mask(lanes: usize) -> u16 {
    if lanes >= 16 {
        u16::MAX
    } else {
        (1u16 << lanes) - 1
    }
}

/// One `R`×[`NR`] tile over `kc` rows of a panel slice, with the left operand's `(i, p)` at
/// `a + i * a_is + p * a_ps`: starts from zero, or from the tile's
/// current values when `resume` (a later `k` slice: the chain of multiply-adds continues);
/// only the lanes in `masks` (the columns inside the matrix) are read and written; with
/// `prefetch`, `kc` cache lines from there are prefetched into L1.
///
/// # Safety
/// As [`panels_avx512`], for this tile.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline(never)]
unsafe fn tile_avx512<const R: usize>(
    kc: usize,
    (a, a_is, a_ps): (*const f32, usize, usize),
    b: *const f32,
    (o, o_rs): (*mut f32, usize),
    resume: bool,
    (m0, m1): (u16, u16),
    prefetch: Option<*const f32>,
) {
    use std::arch::x86_64::*;
    let mut lo = [_mm512_setzero_ps(); R];
    let mut hi = [_mm512_setzero_ps(); R];
    if resume {
        for i in 0..R {
            lo[i] = _mm512_maskz_loadu_ps(m0, o.add(i * o_rs));
            hi[i] = _mm512_maskz_loadu_ps(m1, o.add(i * o_rs + 16));
        }
    }
    for p in 0..kc {
        if let Some(pf) = prefetch {
            // One cache line (16 floats) per row of the slice: `kc` lines.
            _mm_prefetch::<_MM_HINT_T0>(pf.add(p * 16) as *const i8);
        }
        let b0 = _mm512_loadu_ps(b.add(p * NR));
        let b1 = _mm512_loadu_ps(b.add(p * NR + 16));
        for i in 0..R {
            let x = _mm512_set1_ps(*a.add(i * a_is + p * a_ps));
            lo[i] = _mm512_fmadd_ps(x, b0, lo[i]);
            hi[i] = _mm512_fmadd_ps(x, b1, hi[i]);
        }
    }
    for i in 0..R {
        _mm512_mask_storeu_ps(o.add(i * o_rs), m0, lo[i]);
        _mm512_mask_storeu_ps(o.add(i * o_rs + 16), m1, hi[i]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The product in f64 (the reference).
    fn reference(m: usize, k: usize, n: usize, a: &[f32], b: &[f32]) -> Vec<f64> {
        let mut o = vec![0f64; m * n];
        for i in 0..m {
            for p in 0..k {
                for j in 0..n {
                    o[i * n + j] += a[i * k + p] as f64 * b[p * n + j] as f64;
                }
            }
        }
        o
    }

    #[test]
    fn matches_the_product_for_every_edge() {
        if !available::<f32>() {
            return;
        }
        let mut seed = 7u32;
        let mut next = || {
            seed = seed.wrapping_mul(1664525).wrapping_add(1013904223);
            (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5
        };
        // Rows around the tile and block sizes, k around the slice, columns around the panel;
        // long rows (copied) and short.
        for &(m, k, n) in &[
            (1, 1, 1),
            (13, 5, 17),
            (14, 128, 32),
            (15, 129, 33),
            (29, 300, 70),
            (29, 600, 70),
            (700, 40, 64),
            (300, 1000, 40),
            (3, 0, 5),
        ] {
            let a: Vec<f32> = (0..m * k).map(|_| next()).collect();
            let b: Vec<f32> = (0..k * n).map(|_| next()).collect();
            let packed = Packed::new(&b, k, n, n, 1);
            let mut o = vec![f32::NAN; m * n];
            product(None, m, &a, k, &packed, &mut o);
            let want = reference(m, k, n, &a, &b);
            for (idx, (&g, &w)) in o.iter().zip(&want).enumerate() {
                assert!((g as f64 - w).abs() <= 1e-5 * (k as f64).sqrt().max(1.0), "{m}x{k}x{n} at {idx}: {g} vs {w}");
            }
            // The same bits whatever the threads: each element is one chain over k.
            let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
            let ctx = KernelContext { intra_op: Some(&pool), resources: None, step: None };
            let mut o2 = vec![f32::NAN; m * n];
            product(Some(&ctx), m, &a, k, &packed, &mut o2);
            assert_eq!(
                o.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                o2.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
        }
    }
}
