//! The direct convolution, for inputs of few channels (a first layer on gray or RGB images):
//! each output value summed over the window's taps in registers, blocks of output rows across
//! the intra-op pool (through the implicit GEMM of `implicit` where that applies); and the
//! per-pixel tap sums it shares with the depthwise convolution ([`tap_sums`]).
use rayon::prelude::*;

#[cfg(target_arch = "x86_64")]
use super::implicit;
use super::pool::{block_target, pool_from_stage};
use super::{implicit_applies, Axis, BlockFn, Conv2D};
use crate::matmul::GemmElement;
use crate::numeric::Float;
use crate::KernelContext;

/// Bytes of output per block of the direct convolution (the epilogue runs on it in cache).
const DIRECT_BLOCK_BYTES: usize = 1 << 18;

impl<T: GemmElement + Float> Conv2D<T> {
    /// The direct convolution (few input channels, see [`super::DIRECT_MAX_K`]): blocks of output
    /// rows, one task per block on the intra-op pool, each block's epilogue right after it.
    pub(super) fn run_direct(
        &self,
        ctx: &KernelContext,
        (x, dims, axes): (&[T], [usize; 4], [Axis; 2]),
        (f, kh, kw, oc): (&[T], usize, usize, usize),
        o: &mut [T],
        epilogue: Option<BlockFn<T>>,
        pool: Option<[usize; 2]>,
    ) {
        let [ph, pw] = pool.unwrap_or([1, 1]);
        let ow = axes[1].output;
        // Output pixels (of the convolution) in all, and per block: whole groups of ph output
        // rows when pooled.
        let rows = dims[0] * axes[0].output * ow;
        let group = if pool.is_some() { ph * ow } else { 1 };
        let threads = ctx.threads();
        let mut block = (DIRECT_BLOCK_BYTES / (oc * std::mem::size_of::<T>())).clamp(1, rows);
        if threads > 1 {
            block = block.min(rows.div_ceil(2 * threads));
        }
        if threads > 1 {
            // A whole number of blocks per thread (ResNet50's first layer at batch 1 made 13
            // blocks for 2 threads).
            block = rows.div_ceil(rows.div_ceil(block).div_ceil(threads) * threads);
        }
        let block = block.div_ceil(group) * group;
        // Elements of `o` per block.
        let per_block = block * oc / (ph * pw);
        let task = |bufs: &mut (Vec<T>, Vec<T>), (i, dst): (usize, &mut [T])| {
            if ctx.stopped() {
                return;
            }
            let (scratch, stage) = (&mut bufs.0, &mut bufs.1);
            let conv = block_target(dst, stage, pool);
            #[cfg(target_arch = "x86_64")]
            if implicit_applies::<T>(dims[3], kh * kw * dims[3], oc) {
                // SAFETY: `applies` holds only for f32: the same slices retyped.
                let (x, f, conv) = unsafe {
                    (
                        std::slice::from_raw_parts(x.as_ptr() as *const f32, x.len()),
                        std::slice::from_raw_parts(f.as_ptr() as *const f32, f.len()),
                        std::slice::from_raw_parts_mut(conv.as_mut_ptr() as *mut f32, conv.len()),
                    )
                };
                implicit::rows(x, dims, axes, f, i * block, conv);
            } else {
                direct_rows(x, dims, axes, (f, kh, kw), i * block, conv);
            }
            #[cfg(not(target_arch = "x86_64"))]
            direct_rows(x, dims, axes, (f, kh, kw), i * block, conv);
            if let Some(e) = epilogue {
                e(i * block * oc, conv, scratch);
            }
            pool_from_stage(stage, dst, ow, oc, pool);
        };
        if threads > 1 && rows > block {
            ctx.install(|| o.par_chunks_mut(per_block).enumerate().for_each_init(Default::default, task));
        } else {
            let mut bufs = Default::default();
            o.chunks_mut(per_block).enumerate().for_each(|b| task(&mut bufs, b));
        }
    }
}

/// Output rows `r0..` (as many as `dst` holds, `oc` values each) of a direct convolution: each
/// output value the sum over the window's taps in the filter's order (rows, columns, input
/// channels; padding left out) of input × filter, accumulated from zero in registers, output
/// channels in blocks of 32, 16, 8 and 4, then one at a time. The taps of an output row's interior
/// pixels (whole window inside the input's columns) differ only by the pixel's input offset, so
/// they are listed once per row.
fn direct_rows<T: Float>(
    x: &[T],
    [_, h, w, c]: [usize; 4],
    [ah, aw]: [Axis; 2],
    (f, kh, kw): (&[T], usize, usize),
    r0: usize,
    dst: &mut [T],
) {
    let oc = f.len() / (kh * kw * c);
    // Interior output columns: every tap's input column exists.
    let first = (0..aw.output).find(|&ox| (0..kw).all(|kx| aw.source(ox, kx).is_some())).unwrap_or(aw.output);
    let last = (first..aw.output).take_while(|&ox| (0..kw).all(|kx| aw.source(ox, kx).is_some())).count() + first;
    crate::isa::widest(
        #[inline(always)]
        || {
            // (input offset, filter offset) per tap: of the row's interior pixels relative to
            // the pixel's first input column, or of one border pixel.
            let mut row_taps: Vec<(usize, usize)> = Vec::with_capacity(kh * kw * c);
            let mut taps: Vec<(usize, usize)> = Vec::with_capacity(kh * kw * c);
            let mut r = r0;
            let end = r0 + dst.len() / oc;
            while r < end {
                let (ox0, oy, b) = (r % aw.output, (r / aw.output) % ah.output, r / (aw.output * ah.output));
                let ox1 = (ox0 + end - r).min(aw.output);
                row_taps.clear();
                for ky in 0..kh {
                    let Some(iy) = ah.source(oy, ky) else { continue };
                    for kx in 0..kw {
                        let (xo, fo) = (((b * h + iy) * w + kx * aw.dilation) * c, (ky * kw + kx) * c * oc);
                        row_taps.extend((0..c).map(|ci| (xo + ci, fo + ci * oc)));
                    }
                }
                let mut ox = ox0;
                while ox < ox1 {
                    let at = (r - r0 + ox - ox0) * oc;
                    let shift = |ox: usize| (ox * aw.stride - aw.pad_before) * c;
                    if (first..last).contains(&ox) && ox + DIRECT_PIXELS <= last.min(ox1) {
                        let pxs = &mut dst[at..at + DIRECT_PIXELS * oc];
                        direct_pixels(pxs, x, f, &row_taps, std::array::from_fn(|j| shift(ox + j)));
                        ox += DIRECT_PIXELS;
                        continue;
                    }
                    let px = &mut dst[at..at + oc];
                    ox += 1;
                    if (first..last).contains(&(ox - 1)) {
                        tap_sums::<T, true>(px, x, f, &row_taps, shift(ox - 1));
                        continue;
                    }
                    let ox = ox - 1;
                    taps.clear();
                    for ky in 0..kh {
                        let Some(iy) = ah.source(oy, ky) else { continue };
                        for kx in 0..kw {
                            let Some(ix) = aw.source(ox, kx) else { continue };
                            let (xo, fo) = (((b * h + iy) * w + ix) * c, (ky * kw + kx) * c * oc);
                            taps.extend((0..c).map(|ci| (xo + ci, fo + ci * oc)));
                        }
                    }
                    tap_sums::<T, true>(px, x, f, &taps, 0);
                }
                r += ox1 - ox0;
            }
        },
    )
}

/// Runs `$body` for channel blocks of 32, 16, 8 and 4 lanes in turn (the const `$l` in it),
/// advancing `$cb` by a block while one fits below `$n`; the channels left (fewer than 4) are
/// the caller's. The narrow blocks are for narrow layers: a Keras CNN's first layer of 8
/// channels ran one channel at a time, 2.8 ms of its 3 ms step at batch 32.
macro_rules! lane_blocks {
    ($cb:ident < $n:expr, |$l:ident| $body:expr) => {
        lane_blocks!(@ $cb < $n, $l, $body, 32 16 8 4)
    };
    (@ $cb:ident < $n:expr, $l:ident, $body:expr, $($lanes:literal)*) => {
        $({
            const $l: usize = $lanes;
            while $cb + $l <= $n {
                $body;
                $cb += $l;
            }
        })*
    };
}

/// Pixels the direct convolution computes together (their sums are independent chains of
/// additions, in flight at once, and share each filter load).
const DIRECT_PIXELS: usize = 4;

/// `DIRECT_PIXELS` consecutive interior pixels (`pxs`, `oc` values each) of the direct
/// convolution, pixel `j`'s inputs at the taps' offsets + `shifts[j]`.
#[inline(always)]
fn direct_pixels<T: Float>(pxs: &mut [T], x: &[T], f: &[T], taps: &[(usize, usize)], shifts: [usize; DIRECT_PIXELS]) {
    let oc = pxs.len() / DIRECT_PIXELS;
    let mut cb = 0;
    lane_blocks!(cb < oc, |L| direct_block::<T, L>(pxs, x, f, taps, shifts, cb));
    for (j, &shift) in shifts.iter().enumerate() {
        for ch in cb..oc {
            let mut a = T::ZERO;
            for &(s, t) in taps {
                a = a + x[s + shift] * f[t + ch];
            }
            pxs[j * oc + ch] = a;
        }
    }
}

/// Channels `cb..cb + L` of [`direct_pixels`]' pixels: `DIRECT_PIXELS × L` sums in registers
/// (at 32 lanes, eight independent chains of additions in flight), each tap's filter vector
/// loaded once for all the pixels; the loads unchecked after one check of every tap's extent.
#[inline(always)]
fn direct_block<T: Float, const L: usize>(
    pxs: &mut [T],
    x: &[T],
    f: &[T],
    taps: &[(usize, usize)],
    shifts: [usize; DIRECT_PIXELS],
    cb: usize,
) {
    let far = shifts.iter().copied().max().unwrap_or(0);
    assert!(taps.iter().all(|&(s, t)| s + far < x.len() && t + cb + L <= f.len()), "taps inside the operands");
    let (xp, fp) = (x.as_ptr(), f.as_ptr());
    let oc = pxs.len() / DIRECT_PIXELS;
    let mut acc = [[T::ZERO; L]; DIRECT_PIXELS];
    for &(s, t) in taps {
        // SAFETY: `t + cb + L <= f.len()` and `s + shifts[j] < x.len()` (asserted above).
        let fs: [T; L] = unsafe { std::ptr::read_unaligned(fp.add(t + cb) as *const [T; L]) };
        for (a, &shift) in acc.iter_mut().zip(&shifts) {
            let xv = unsafe { *xp.add(s + shift) };
            for l in 0..L {
                a[l] = a[l] + xv * fs[l];
            }
        }
    }
    for (j, a) in acc.iter().enumerate() {
        pxs[j * oc + cb..j * oc + cb + L].copy_from_slice(a);
    }
}

/// One output pixel of a depthwise (`BROADCAST` false) or direct (`BROADCAST` true)
/// convolution: `px[ch] = Σ x[s + shift (+ ch)] * f[t + ch]` over `taps` (input offset, filter
/// offset), the input per channel, or one value for every output channel. Channels in blocks
/// of 32, then 16, then one by one: each block's sums are independent chains of additions (one
/// per register), so a wider block keeps more of them in flight.
#[inline(always)]
pub(super) fn tap_sums<T: Float, const BROADCAST: bool>(
    px: &mut [T],
    x: &[T],
    f: &[T],
    taps: &[(usize, usize)],
    shift: usize,
) {
    let c = px.len();
    let mut cb = 0;
    lane_blocks!(cb < c, |L| tap_block::<T, L, BROADCAST>(px, x, f, taps, shift, cb));
    for ch in cb..c {
        let lane = if BROADCAST { 0 } else { ch };
        let mut a = T::ZERO;
        for &(s, t) in taps {
            a = a + x[s + shift + lane] * f[t + ch];
        }
        px[ch] = a;
    }
}

/// Channels `cb..cb + L` of one output pixel of [`tap_sums`], accumulated in registers over
/// the taps (in their order, from zero, as the general kernels do).
#[inline(always)]
fn tap_block<T: Float, const L: usize, const BROADCAST: bool>(
    px: &mut [T],
    x: &[T],
    f: &[T],
    taps: &[(usize, usize)],
    shift: usize,
    cb: usize,
) {
    let mut acc = [T::ZERO; L];
    for &(s, t) in taps {
        let fs: &[T; L] = f[t + cb..t + cb + L].try_into().expect("L lanes");
        if BROADCAST {
            let xv = x[s + shift];
            for l in 0..L {
                acc[l] = acc[l] + xv * fs[l];
            }
        } else {
            let xs: &[T; L] = x[s + shift + cb..s + shift + cb + L].try_into().expect("L lanes");
            for l in 0..L {
                acc[l] = acc[l] + xs[l] * fs[l];
            }
        }
    }
    px[cb..cb + L].copy_from_slice(&acc);
}
