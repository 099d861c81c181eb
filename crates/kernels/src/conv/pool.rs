//! `MaxPool` and `AvgPool` (NHWC, each pixel's taps reduced in registers), and the max pool
//! a fused convolution runs on its blocks while they are in cache (`_FusedConv2DElementwise`'s
//! `max_pool`) with `MaxPool`'s bits.
use ferroflow_tensor::{DType, Tensor};
use rayon::prelude::*;

use super::{four, nhwc, Window};
use crate::numeric::Float;
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

struct Pool<T> {
    max: bool,
    ksize: [usize; 2],
    window: Window,
    _t: std::marker::PhantomData<T>,
}

impl<T: Float> OpKernel for Pool<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let [n, h, w, c] = nhwc(&inputs[0], "input")?;
        let [ah, aw] = self.window.axes(h, w, self.ksize[0], self.ksize[1])?;
        let (oh, ow) = (ah.output, aw.output);
        // Every pixel is written: its first tap copied, or filled when the window is empty.
        let mut out = Tensor::for_overwrite(T::DTYPE, &[n, oh, ow, c])?;
        let x = inputs[0].as_slice::<T>()?;
        let max = self.max;
        let row = |(r, dst): (usize, &mut [T])| {
            if ctx.stopped() {
                return;
            }
            let (b, y) = (r / oh, r % oh);
            let rows: Vec<usize> = (0..ah.window).filter_map(|ky| ah.source(y, ky)).collect();
            if max {
                // Each pixel's taps (inside the input) in order, reduced in registers.
                let mut taps: Vec<&[T]> = Vec::with_capacity(rows.len() * aw.window);
                crate::isa::widest(
                    #[inline(always)]
                    || {
                        for (xo, px) in dst.chunks_mut(c).enumerate() {
                            taps.clear();
                            for &iy in &rows {
                                for kx in 0..aw.window {
                                    if let Some(ix) = aw.source(xo, kx) {
                                        taps.push(&x[((b * h + iy) * w + ix) * c..][..c]);
                                    }
                                }
                            }
                            if taps.is_empty() {
                                px.fill(T::LOWEST);
                            } else {
                                max_of_taps(px, &taps);
                            }
                        }
                    },
                );
                return;
            }
            for xo in 0..ow {
                let px = &mut dst[xo * c..(xo + 1) * c];
                let mut first = true;
                let mut count = 0usize;
                for &iy in &rows {
                    for kx in 0..aw.window {
                        let Some(ix) = aw.source(xo, kx) else { continue };
                        count += 1;
                        let src = &x[((b * h + iy) * w + ix) * c..][..c];
                        if first {
                            pool_step(px, src, |_, s| s);
                            first = false;
                        } else {
                            pool_step(px, src, |v, s| v + s);
                        }
                    }
                }
                if first {
                    px.fill(T::ZERO);
                } else {
                    let n = T::from_f64(count as f64);
                    px.iter_mut().for_each(|v| *v = *v / n);
                }
            }
        };
        let o = out.as_mut_slice::<T>()?;
        if ow * c > 0 {
            if ctx.threads() > 1 && n * oh > 1 {
                ctx.install(|| o.par_chunks_mut(ow * c).enumerate().for_each(row));
            } else {
                o.chunks_mut(ow * c).enumerate().for_each(row);
            }
        }
        outputs.push(out);
        Ok(())
    }
}

/// `px[i] = f(px[i], src[i])` over a pixel's channels, 8 at a time as fixed-size arrays (vector
/// code, no `memcpy` call per pixel), the rest one by one.
#[inline(always)]
fn pool_step<T: Float>(px: &mut [T], src: &[T], f: impl Fn(T, T) -> T) {
    const L: usize = 8;
    let mut d = px.chunks_exact_mut(L);
    let mut s = src.chunks_exact(L);
    for (d, s) in (&mut d).zip(&mut s) {
        let (d, s): (&mut [T; L], &[T; L]) = (d.try_into().expect("L"), s.try_into().expect("L"));
        *d = std::array::from_fn(|l| f(d[l], s[l]));
    }
    for (d, &s) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *d = f(*d, s);
    }
}

/// `px` = the lane-wise maximum of `taps` (each at least as long as `px`) in their order: the
/// first tap, then each later one where it is larger or NaN (`MaxPool`'s rule: NaN
/// propagates), 16 lanes at a time in registers and stored once (a pixel updated in memory
/// tap by tap stalled on every load after a masked store).
#[inline(always)]
fn max_of_taps<T: Float>(px: &mut [T], taps: &[&[T]]) {
    const L: usize = 16;
    let Some((first, rest)) = taps.split_first() else { return };
    let k = px.len();
    let mut ch = 0;
    while ch + L <= k {
        let mut acc: [T; L] = first[ch..ch + L].try_into().expect("L lanes");
        for t in rest {
            let s: &[T; L] = t[ch..ch + L].try_into().expect("L lanes");
            acc = std::array::from_fn(|l| if s[l] > acc[l] || s[l].is_nan() { s[l] } else { acc[l] });
        }
        px[ch..ch + L].copy_from_slice(&acc);
        ch += L;
    }
    for c in ch..k {
        let mut v = first[c];
        for t in rest {
            if t[c] > v || t[c].is_nan() {
                v = t[c];
            }
        }
        px[c] = v;
    }
}

/// Max-pools `src` (whole groups of `ph` rows of `ow` pixels of `k` channels) by windows of
/// `ph`×`pw` pixels at strides of the window (VALID; `ow` a multiple of `pw`) into `dst`: each
/// output the first tap, then the later ones in `MaxPool`'s order (rows, then columns) with
/// its rule (a larger value or a NaN replaces), so the bits are `MaxPool`'s.
fn max_pool_block<T: Float>(src: &[T], ow: usize, k: usize, [ph, pw]: [usize; 2], dst: &mut [T]) {
    let pooled_w = ow / pw;
    let mut taps: Vec<&[T]> = Vec::with_capacity(ph * pw);
    crate::isa::widest(
        #[inline(always)]
        || {
            for (pr, row) in dst.chunks_mut(pooled_w * k).enumerate() {
                for (pc, px) in row.chunks_mut(k).enumerate() {
                    taps.clear();
                    for i in 0..ph {
                        for j in 0..pw {
                            taps.push(&src[((pr * ph + i) * ow + pc * pw + j) * k..][..k]);
                        }
                    }
                    max_of_taps(px, &taps);
                }
            }
        },
    );
}

/// Where a block of a convolution is made: its part of the output, or (with `pool`) the
/// stage buffer, `ph·pw` times as large, that [`pool_from_stage`] pools into that part.
pub(super) fn block_target<'a, T: Float>(
    dst: &'a mut [T],
    stage: &'a mut Vec<T>,
    pool: Option<[usize; 2]>,
) -> &'a mut [T] {
    match pool {
        Some([ph, pw]) => {
            let len = dst.len() * ph * pw;
            stage.resize(len, T::ZERO);
            &mut stage[..len]
        }
        None => dst,
    }
}

/// With `pool`, max-pools the block [`block_target`] staged (rows of `ow` pixels of `k`
/// channels) into `dst`.
pub(super) fn pool_from_stage<T: Float>(stage: &[T], dst: &mut [T], ow: usize, k: usize, pool: Option<[usize; 2]>) {
    if let Some([ph, pw]) = pool {
        max_pool_block(&stage[..dst.len() * ph * pw], ow, k, [ph, pw], dst);
    }
}

/// `MaxPool` of an NHWC tensor by `[ph, pw]` windows at strides of the window, VALID (rows
/// and columns past the last whole window left out): a fused convolution's pool where it
/// could not pool block by block.
pub(super) fn max_pool_valid<T: Float>(t: &Tensor, [ph, pw]: [usize; 2]) -> KResult<Tensor> {
    let [n, h, w, c] = nhwc(t, "input")?;
    let (oh, ow) = (h / ph, w / pw);
    let mut out = Tensor::for_overwrite(T::DTYPE, &[n, oh, ow, c])?;
    let (x, o) = (t.as_slice::<T>()?, out.as_mut_slice::<T>()?);
    if oh * ow * c > 0 {
        for (b, dst) in o.chunks_mut(oh * ow * c).enumerate() {
            max_pool_block(&x[b * h * w * c..][..oh * ph * w * c], w, c, [ph, pw], dst);
        }
    }
    Ok(out)
}

fn k_pool(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let window = Window::from_node(d, false)?;
    let ksize = four(d, "ksize", 1)?;
    let max = d.def.name == "MaxPool";
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(Pool::<T> { max, ksize, window, _t: Default::default() }) as Box<dyn OpKernel>))
}

pub(super) fn register(r: &mut KernelRegistry) {
    const F: &[DType] = &[DType::Float, DType::Double];
    r.register("MaxPool", "T", F, k_pool);
    r.register("AvgPool", "T", F, k_pool);
}
