//! `DepthwiseConv2dNative`: one filter per channel (MobileNet's case) with each pixel's
//! channels accumulated in registers, rows across the intra-op pool and an epilogue on each
//! row in cache; a general loop for channel multipliers above 1.
use ferroflow_tensor::{DType, Tensor};
use rayon::prelude::*;

use super::direct::tap_sums;
use super::{nhwc, Axis, BlockFn, Window};
use crate::numeric::Float;
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

/// The shapes of a depthwise convolution: the NHWC input, the window, the channel multiplier
/// and the output axes.
pub(super) struct Geometry {
    pub(super) input: [usize; 4],
    pub(super) window: [usize; 2],
    pub(super) multiplier: usize,
    pub(super) axes: [Axis; 2],
}

impl Window {
    /// Checks a depthwise convolution's input and filter (`[kh, kw, c, m]`) against each other.
    pub(super) fn depthwise(&self, inputs: &Inputs) -> KResult<Geometry> {
        let [n, h, w, c] = nhwc(&inputs[0], "input")?;
        let [kh, kw, fc, m] = nhwc(&inputs[1], "filter")?;
        if fc != c {
            return Err(invalid(format!("input depth {c} does not match filter depth {fc}")));
        }
        Ok(Geometry { input: [n, h, w, c], window: [kh, kw], multiplier: m, axes: self.axes(h, w, kh, kw)? })
    }
}

/// `DepthwiseConv2dNative`.
pub(super) struct Depthwise<T> {
    pub(super) window: Window,
    pub(super) _t: std::marker::PhantomData<T>,
}

impl<T: Float> OpKernel for Depthwise<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        if let Some((window, padded)) = self.window.materialized::<T>(inputs)? {
            inputs[0] = padded;
            return Depthwise::<T> { window, _t: Default::default() }.compute(ctx, inputs, outputs);
        }
        let Geometry { input: [n, h, w, c], window: [kh, kw], multiplier: m, axes: [ah, aw] } =
            self.window.depthwise(inputs)?;
        let (oh, ow, oc) = (ah.output, aw.output, c * m);
        // One filter per channel writes every element (`depthwise_m1`); the general loop below
        // accumulates into zeros.
        let mut out = if m == 1 { Tensor::for_overwrite } else { Tensor::zeros }(T::DTYPE, &[n, oh, ow, oc])?;
        if m == 1 {
            let (x, f) = (inputs[0].as_slice::<T>()?, inputs[1].as_slice::<T>()?);
            depthwise_m1(ctx, (x, f), [n, h, w, c], [kh, kw], [ah, aw], out.as_mut_slice::<T>()?, None);
            outputs.push(out);
            return Ok(());
        }
        let (x, f) = (inputs[0].as_slice::<T>()?, inputs[1].as_slice::<T>()?);
        let row = |(r, dst): (usize, &mut [T])| {
            if ctx.stopped() {
                return;
            }
            let (b, y) = (r / oh, r % oh);
            for xo in 0..ow {
                let px = &mut dst[xo * oc..(xo + 1) * oc];
                for ky in 0..kh {
                    let Some(iy) = ah.source(y, ky) else { continue };
                    for kx in 0..kw {
                        let Some(ix) = aw.source(xo, kx) else { continue };
                        let src = &x[((b * h + iy) * w + ix) * c..][..c];
                        let taps = &f[(ky * kw + kx) * oc..][..oc];
                        for ci in 0..c {
                            for mi in 0..m {
                                px[ci * m + mi] = px[ci * m + mi] + src[ci] * taps[ci * m + mi];
                            }
                        }
                    }
                }
            }
        };
        let o = out.as_mut_slice::<T>()?;
        if ow * oc > 0 {
            if ctx.threads() > 1 && n * oh > 1 {
                ctx.install(|| o.par_chunks_mut(ow * oc).enumerate().for_each(row));
            } else {
                o.chunks_mut(ow * oc).enumerate().for_each(row);
            }
        }
        outputs.push(out);
        Ok(())
    }
}

/// `DepthwiseConv2dNative` with one filter per channel (MobileNet's case): each output pixel's
/// channels in blocks of 32 and 16 accumulated in registers over the window's taps (in the
/// taps' order, from zero, as the general kernel does) and stored once; output rows split over
/// the intra-op pool; AVX-512 or AVX2 when the CPU has it. `epilogue` runs on each finished row while it is
/// in cache. Each row prefetches the next row's new input rows and its output a few lines at
/// a time.
pub(super) fn depthwise_m1<T: Float>(
    ctx: &KernelContext,
    (x, f): (&[T], &[T]),
    [_n, h, w, c]: [usize; 4],
    [kh, kw]: [usize; 2],
    [ah, aw]: [Axis; 2],
    o: &mut [T],
    epilogue: Option<BlockFn<T>>,
) {
    let (oh, ow) = (ah.output, aw.output);
    let rows_of = |r: usize| -> Vec<(usize, usize)> {
        let (b, y) = (r / oh, r % oh);
        (0..kh).filter_map(|ky| Some((((b * h + ah.source(y, ky)?) * w) * c, ky * kw * c))).collect()
    };
    let row = |scratch: &mut Vec<T>, (r, dst): (usize, &mut [T])| {
        if ctx.stopped() {
            return;
        }
        let rows = rows_of(r);
        // The next row's new input rows and its output, from memory while this row computes:
        // the channel blocks below read and write pixels a block apart, a stride the
        // hardware prefetchers miss (at batch 32 the rows come from DRAM).
        // Spread over the row's blocks of pixels (at once, they stall it): 10–20% off
        // MobileNetV2's 56×56×144 layer at batch 32.
        let mut ahead = crate::isa::Ahead::none();
        for (start, _) in rows_of(r + 1) {
            if rows.iter().all(|&(s, _)| s != start) {
                ahead.add(x.as_ptr().wrapping_add(start), w * c);
            }
        }
        ahead.add(dst.as_ptr().wrapping_add(dst.len()), dst.len());
        depthwise_row(dst, (x, f), &rows, (c, kw), aw, &mut ahead);
        if let Some(e) = epilogue {
            e(r * ow * c, dst, scratch);
        }
    };
    if ow * c == 0 {
        return;
    }
    if ctx.threads() > 1 && o.len() / (ow * c) > 1 {
        ctx.install(|| o.par_chunks_mut(ow * c).enumerate().for_each_init(Vec::new, row));
    } else {
        let mut scratch = Vec::new();
        o.chunks_mut(ow * c).enumerate().for_each(|r| row(&mut scratch, r));
    }
}

/// One output row of a depthwise convolution: for each pixel, `px[ch] = Σ x[s + ch] * f[t + ch]`
/// over its window's taps (input offset, filter offset), from `rows` (each window row's input
/// row offset and filter row offset, padding rows left out); AVX-512 or AVX2 where the CPU has
/// them (chosen once per row).
fn depthwise_row<T: Float>(
    dst: &mut [T],
    xf: (&[T], &[T]),
    rows: &[(usize, usize)],
    ck: (usize, usize),
    aw: Axis,
    ahead: &mut crate::isa::Ahead,
) {
    crate::isa::widest(
        #[inline(always)]
        || depthwise_row_impl(dst, xf, rows, ck, aw, ahead),
    )
}

#[inline(always)]
fn depthwise_row_impl<T: Float>(
    dst: &mut [T],
    (x, f): (&[T], &[T]),
    rows: &[(usize, usize)],
    (c, kw): (usize, usize),
    aw: Axis,
    ahead: &mut crate::isa::Ahead,
) {
    let ow = dst.len() / c.max(1);
    // The pixels whose whole window is inside the row (all but the padded edges).
    let inside = |xo: &usize| aw.source(*xo, 0).is_some() && aw.source(*xo, kw - 1).is_some();
    let lo = (0..ow).find(inside).unwrap_or(ow);
    let hi = (lo..ow).rfind(inside).map_or(lo, |xo| xo + 1);
    let fast = rows.len() == 3 && kw == 3;
    if fast && hi > lo && c > 0 {
        let ix0 = aw.source(lo, 0).expect("an inside pixel");
        let taps: [(usize, usize); 9] = std::array::from_fn(|t| {
            let ((xrow, frow), kx) = (rows[t / 3], t % 3);
            (xrow + (ix0 + kx * aw.dilation) * c, frow + kx * c)
        });
        window_sums::<T, 9>(&mut dst[lo * c..hi * c], x, f, &taps, c, aw.stride * c, ahead);
    } else if hi > lo && c > 0 {
        // Other windows (5×5, 7×7, dilated, fewer rows at the top and bottom edges): the
        // inside pixels' taps are pixel `lo`'s shifted by the stride, so they are listed once
        // for the row (the same taps in the same order as pixel by pixel).
        let ix0 = aw.source(lo, 0).expect("an inside pixel");
        let mut taps: Vec<(usize, usize)> = Vec::with_capacity(rows.len() * kw);
        for &(xrow, frow) in rows {
            for kx in 0..kw {
                taps.push((xrow + (ix0 + kx * aw.dilation) * c, frow + kx * c));
            }
        }
        window_sums_any(&mut dst[lo * c..hi * c], x, f, &taps, c, aw.stride * c);
    }
    let mut taps: Vec<(usize, usize)> = Vec::with_capacity(rows.len() * kw);
    for (xo, px) in dst.chunks_exact_mut(c).enumerate() {
        if (lo..hi).contains(&xo) {
            continue;
        }
        taps.clear();
        for &(xrow, frow) in rows {
            for kx in 0..kw {
                if let Some(ix) = aw.source(xo, kx) {
                    taps.push((xrow + ix * c, frow + kx * c));
                }
            }
        }
        tap_sums::<T, false>(px, x, f, &taps, 0);
    }
    ahead.advance(usize::MAX);
}

/// Consecutive output pixels of a depthwise convolution whose windows are wholly inside the
/// input (`N` taps each): pixel `i` is `Σ x[s + i * step + ch] * f[t + ch]` over `taps`
/// (input offset of pixel 0, filter offset), in the taps' order from zero, as [`tap_sums`]
/// computes it. Channels in blocks of 16, each block over all the pixels with its `N` filter
/// vectors held in registers and four pixels at a time (four independent sums in flight); a
/// block's input is the window rows' 16 channels, small enough to stay in L1 across the row.
#[inline(always)]
fn window_sums<T: Float, const N: usize>(
    dst: &mut [T],
    x: &[T],
    f: &[T],
    taps: &[(usize, usize); N],
    c: usize,
    step: usize,
    ahead: &mut crate::isa::Ahead,
) {
    const L: usize = 16;
    const P: usize = 4;
    let pixels = dst.len() / c;
    if pixels == 0 {
        return;
    }
    // `ahead`'s lines spread over the blocks of four pixels.
    let per_step = ahead.lines().div_ceil(((c / L) * (pixels / P)).max(1)).max(1);
    // Every read below is inside `x` and `f`: the checks once, not per load.
    let last = (pixels - 1) * step;
    assert!(taps.iter().all(|&(s, t)| s + last + c <= x.len() && t + c <= f.len()), "window inside the input");
    let load = |p: *const T| -> [T; L] {
        // SAFETY: callers pass pointers with L elements in bounds (asserted above).
        unsafe { std::ptr::read_unaligned(p as *const [T; L]) }
    };
    let (xp, fp) = (x.as_ptr(), f.as_ptr());
    let mut cb = 0;
    while cb + L <= c {
        // SAFETY (here and below): `taps[t].1 + cb + L <= f.len()` and
        // `taps[t].0 + i * step + cb + L <= x.len()` for every pixel `i < pixels`.
        let fv: [[T; L]; N] = std::array::from_fn(|t| load(unsafe { fp.add(taps[t].1 + cb) }));
        let mut i = 0;
        while i + P <= pixels {
            let q = unsafe { xp.add(cb + i * step) };
            let mut acc = [[T::ZERO; L]; P];
            for t in 0..N {
                let qt = unsafe { q.add(taps[t].0) };
                for (p, a) in acc.iter_mut().enumerate() {
                    let xs = load(unsafe { qt.add(p * step) });
                    for l in 0..L {
                        a[l] = a[l] + xs[l] * fv[t][l];
                    }
                }
            }
            for (p, a) in acc.iter().enumerate() {
                dst[(i + p) * c + cb..][..L].copy_from_slice(a);
            }
            ahead.advance(per_step);
            i += P;
        }
        while i < pixels {
            let mut a = [T::ZERO; L];
            for t in 0..N {
                let xs = load(unsafe { xp.add(taps[t].0 + cb + i * step) });
                for l in 0..L {
                    a[l] = a[l] + xs[l] * fv[t][l];
                }
            }
            dst[i * c + cb..][..L].copy_from_slice(&a);
            i += 1;
        }
        cb += L;
    }
    if cb < c {
        for (i, px) in dst.chunks_exact_mut(c).enumerate() {
            for ch in cb..c {
                let mut a = T::ZERO;
                for &(s, t) in taps {
                    a = a + x[s + i * step + ch] * f[t + ch];
                }
                px[ch] = a;
            }
        }
    }
}

/// [`window_sums`] for any window (`taps` listed at run time): channels in blocks of 32, 16,
/// 8, 4 and then one, each block over the pixels four at a time (four independent sums in
/// flight, each filter vector loaded once for the four), in the taps' order from zero as
/// [`tap_sums`] computes them. NASNet's odd channel counts (11, 44, 88) and the 5×5 and 7×7
/// windows of EfficientNet, MobileNetV3 and NASNet run here.
#[inline(always)]
#[allow(clippy::int_plus_one)] // `cb + L <= c` for every block width, 1 included
fn window_sums_any<T: Float>(dst: &mut [T], x: &[T], f: &[T], taps: &[(usize, usize)], c: usize, step: usize) {
    let pixels = dst.len() / c.max(1);
    if pixels == 0 {
        return;
    }
    // Every read below is inside `x` and `f`: the checks once, not per load.
    let last = (pixels - 1) * step;
    assert!(taps.iter().all(|&(s, t)| s + last + c <= x.len() && t + c <= f.len()), "window inside the input");
    let mut cb = 0;
    macro_rules! blocks {
        ($($l:literal)*) => {$(
            while cb + $l <= c {
                window_block::<T, $l>(dst, (x, f), taps, (c, step, pixels), cb);
                cb += $l;
            }
        )*};
    }
    blocks!(32 16 8 4 1);
}

/// Channels `cb..cb + L` of [`window_sums_any`]'s pixels.
#[inline(always)]
fn window_block<T: Float, const L: usize>(
    dst: &mut [T],
    (x, f): (&[T], &[T]),
    taps: &[(usize, usize)],
    (c, step, pixels): (usize, usize, usize),
    cb: usize,
) {
    const P: usize = 4;
    let load = |p: *const T| -> [T; L] {
        // SAFETY: callers pass pointers with L elements in bounds (asserted by the caller).
        unsafe { std::ptr::read_unaligned(p as *const [T; L]) }
    };
    let (xp, fp) = (x.as_ptr(), f.as_ptr());
    let mut i = 0;
    while i + P <= pixels {
        let mut acc = [[T::ZERO; L]; P];
        for &(s, t) in taps {
            // SAFETY (here and below): `t + cb + L <= f.len()` and
            // `s + i * step + cb + L <= x.len()` for every pixel `i < pixels` (asserted).
            let fv = load(unsafe { fp.add(t + cb) });
            for (p, a) in acc.iter_mut().enumerate() {
                let xs = load(unsafe { xp.add(s + (i + p) * step + cb) });
                for l in 0..L {
                    a[l] = a[l] + xs[l] * fv[l];
                }
            }
        }
        for (p, a) in acc.iter().enumerate() {
            dst[(i + p) * c + cb..][..L].copy_from_slice(a);
        }
        i += P;
    }
    while i < pixels {
        let mut a = [T::ZERO; L];
        for &(s, t) in taps {
            let (xs, fv) = (load(unsafe { xp.add(s + i * step + cb) }), load(unsafe { fp.add(t + cb) }));
            for l in 0..L {
                a[l] = a[l] + xs[l] * fv[l];
            }
        }
        dst[i * c + cb..][..L].copy_from_slice(&a);
        i += 1;
    }
}

fn k_depthwise(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let window = Window::from_node(d, true)?;
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(Depthwise::<T> { window, _t: Default::default() }) as Box<dyn OpKernel>))
}

pub(super) fn register(r: &mut KernelRegistry) {
    r.register("DepthwiseConv2dNative", "T", &[DType::Float, DType::Double], k_depthwise);
}
