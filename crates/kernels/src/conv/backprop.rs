//! The gradients of the convolutions and pools: `Conv2DBackpropInput` and
//! `Conv2DBackpropFilter` (through im2col and the GEMM), the depthwise convolution's two,
//! `MaxPoolGrad` and `AvgPoolGrad`.
use ferroflow_tensor::{DType, Tensor};
use rayon::prelude::*;

use super::gemm::im2col;
use super::{four, nhwc, Window};
use crate::matmul::{product, GemmElement};
use crate::numeric::Float;
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

/// Reads a 4-element int32 shape input (`input_sizes`, `filter_sizes`, `orig_input_shape`).
fn shape4(t: &Tensor, what: &str) -> KResult<[usize; 4]> {
    let v = t.as_slice::<i32>().map_err(|e| invalid(format!("{what}: {e}")))?;
    match v {
        &[a, b, c, d] if v.iter().all(|&x| x >= 0) => Ok([a as usize, b as usize, c as usize, d as usize]),
        _ => Err(invalid(format!("{what} must be 4 non-negative sizes, got {v:?}"))),
    }
}

/// `Conv2DBackpropInput` (`filter_input == false`) and `Conv2DBackpropFilter`: the gradients
/// of `Conv2D` with respect to its input and its filter, through im2col and the GEMM.
struct ConvBackprop<T> {
    window: Window,
    wrt_filter: bool,
    _t: std::marker::PhantomData<T>,
}

impl<T: GemmElement + Float> OpKernel for ConvBackprop<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (xdims, fdims) = if self.wrt_filter {
            (nhwc(&inputs[0], "input")?, shape4(&inputs[1], "filter_sizes")?)
        } else {
            (shape4(&inputs[0], "input_sizes")?, nhwc(&inputs[1], "filter")?)
        };
        let [n, h, w, c] = xdims;
        let [kh, kw, fc, oc] = fdims;
        if fc != c {
            return Err(invalid(format!("input depth {c} does not match filter depth {fc}")));
        }
        let axes = self.window.axes(h, w, kh, kw)?;
        let (oh, ow) = (axes[0].output, axes[1].output);
        let g = &inputs[2];
        if g.dims() != [n, oh, ow, oc] {
            return Err(invalid(format!(
                "out_backprop has shape {:?}, expected [{n}, {oh}, {ow}, {oc}] for input {xdims:?} and filter {fdims:?}",
                g.dims()
            )));
        }
        let gs = g.as_slice::<T>()?;
        let (rows, k) = (n * oh * ow, kh * kw * c);
        crate::check_output(T::DTYPE, &[rows, k])?;
        if self.wrt_filter {
            // dF[k, oc] = col(x)ᵀ · g
            let col = im2col(inputs[0].as_slice::<T>()?, xdims, axes);
            let mut out = Tensor::zeros(T::DTYPE, &[kh, kw, c, oc])?;
            product(ctx, (k, oc, rows), (&col, 1, k), (gs, oc, 1), out.as_mut_slice::<T>()?);
            outputs.push(out);
        } else {
            // dcol[rows, k] = g · Fᵀ, then each tap is added back to the pixel it read.
            let f = inputs[1].as_slice::<T>()?;
            let mut dcol = vec![T::ZERO; rows * k];
            product(ctx, (rows, k, oc), (gs, oc, 1), (f, 1, oc), &mut dcol);
            let mut out = Tensor::zeros(T::DTYPE, &[n, h, w, c])?;
            let dx = out.as_mut_slice::<T>()?;
            let [ah, aw] = axes;
            let mut r = 0;
            for b in 0..n {
                for y in 0..oh {
                    for xo in 0..ow {
                        let row = &dcol[r * k..(r + 1) * k];
                        for ky in 0..kh {
                            let Some(iy) = ah.source(y, ky) else { continue };
                            for kx in 0..kw {
                                let Some(ix) = aw.source(xo, kx) else { continue };
                                let dst = &mut dx[((b * h + iy) * w + ix) * c..][..c];
                                let src = &row[(ky * kw + kx) * c..][..c];
                                dst.iter_mut().zip(src).for_each(|(d, s)| *d = *d + *s);
                            }
                        }
                        r += 1;
                    }
                }
            }
            outputs.push(out);
        }
        Ok(())
    }
}

/// `DepthwiseConv2dNativeBackpropInput` (`wrt_filter == false`) and
/// `DepthwiseConv2dNativeBackpropFilter`: the gradients of `DepthwiseConv2dNative` with
/// respect to its input (each output gradient spread back over the taps that read a pixel,
/// one task per image) and its filter (one task per window tap).
struct DepthwiseBackprop<T> {
    window: Window,
    wrt_filter: bool,
    _t: std::marker::PhantomData<T>,
}

impl<T: Float> OpKernel for DepthwiseBackprop<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (xdims, fdims) = if self.wrt_filter {
            (nhwc(&inputs[0], "input")?, shape4(&inputs[1], "filter_sizes")?)
        } else {
            (shape4(&inputs[0], "input_sizes")?, nhwc(&inputs[1], "filter")?)
        };
        let [n, h, w, c] = xdims;
        let [kh, kw, fc, m] = fdims;
        if fc != c {
            return Err(invalid(format!("input depth {c} does not match filter depth {fc}")));
        }
        let [ah, aw] = self.window.axes(h, w, kh, kw)?;
        let (oh, ow, oc) = (ah.output, aw.output, c * m);
        let g = &inputs[2];
        if g.dims() != [n, oh, ow, oc] {
            return Err(invalid(format!(
                "out_backprop has shape {:?}, expected [{n}, {oh}, {ow}, {oc}] for input {xdims:?} and filter {fdims:?}",
                g.dims()
            )));
        }
        let gs = g.as_slice::<T>()?;
        let parallel = ctx.threads() > 1;
        if self.wrt_filter {
            let x = inputs[0].as_slice::<T>()?;
            let mut out = Tensor::zeros(T::DTYPE, &[kh, kw, c, m])?;
            let tap = |(t, dst): (usize, &mut [T])| {
                if ctx.stopped() {
                    return;
                }
                let (ky, kx) = (t / kw, t % kw);
                for b in 0..n {
                    for y in 0..oh {
                        let Some(iy) = ah.source(y, ky) else { continue };
                        for xo in 0..ow {
                            let Some(ix) = aw.source(xo, kx) else { continue };
                            let src = &x[((b * h + iy) * w + ix) * c..][..c];
                            let go = &gs[((b * oh + y) * ow + xo) * oc..][..oc];
                            for ci in 0..c {
                                for mi in 0..m {
                                    dst[ci * m + mi] = dst[ci * m + mi] + src[ci] * go[ci * m + mi];
                                }
                            }
                        }
                    }
                }
            };
            let o = out.as_mut_slice::<T>()?;
            if oc > 0 {
                if parallel && kh * kw > 1 {
                    ctx.install(|| o.par_chunks_mut(oc).enumerate().for_each(tap));
                } else {
                    o.chunks_mut(oc).enumerate().for_each(tap);
                }
            }
            outputs.push(out);
        } else {
            let f = inputs[1].as_slice::<T>()?;
            let mut out = Tensor::zeros(T::DTYPE, &[n, h, w, c])?;
            let image = |(b, dx): (usize, &mut [T])| {
                if ctx.stopped() {
                    return;
                }
                for y in 0..oh {
                    for xo in 0..ow {
                        let go = &gs[((b * oh + y) * ow + xo) * oc..][..oc];
                        for ky in 0..kh {
                            let Some(iy) = ah.source(y, ky) else { continue };
                            for kx in 0..kw {
                                let Some(ix) = aw.source(xo, kx) else { continue };
                                let taps = &f[(ky * kw + kx) * oc..][..oc];
                                let dst = &mut dx[(iy * w + ix) * c..][..c];
                                for ci in 0..c {
                                    let mut acc = dst[ci];
                                    for mi in 0..m {
                                        acc = acc + go[ci * m + mi] * taps[ci * m + mi];
                                    }
                                    dst[ci] = acc;
                                }
                            }
                        }
                    }
                }
            };
            let dx = out.as_mut_slice::<T>()?;
            if h * w * c > 0 {
                if parallel && n > 1 {
                    ctx.install(|| dx.par_chunks_mut(h * w * c).enumerate().for_each(image));
                } else {
                    dx.chunks_mut(h * w * c).enumerate().for_each(image);
                }
            }
            outputs.push(out);
        }
        Ok(())
    }
}

/// `MaxPoolGrad` (each output's gradient goes to the first maximum of its window, in scan
/// order, as TensorFlow's CPU kernel) and `AvgPoolGrad` (spread evenly over the window's
/// in-bounds taps).
struct PoolGrad<T> {
    max: bool,
    ksize: [usize; 2],
    window: Window,
    _t: std::marker::PhantomData<T>,
}

impl<T: Float> OpKernel for PoolGrad<T> {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let xdims = if self.max { nhwc(&inputs[0], "orig_input")? } else { shape4(&inputs[0], "orig_input_shape")? };
        let [n, h, w, c] = xdims;
        let [ah, aw] = self.window.axes(h, w, self.ksize[0], self.ksize[1])?;
        let (oh, ow) = (ah.output, aw.output);
        let g = inputs.last().expect("grad input");
        if g.dims() != [n, oh, ow, c] {
            return Err(invalid(format!("grad has shape {:?}, expected [{n}, {oh}, {ow}, {c}]", g.dims())));
        }
        let gs = g.as_slice::<T>()?;
        let mut out = Tensor::zeros(T::DTYPE, &[n, h, w, c])?;
        let dx = out.as_mut_slice::<T>()?;
        let x = if self.max { Some(inputs[0].as_slice::<T>()?) } else { None };
        for b in 0..n {
            for y in 0..oh {
                for xo in 0..ow {
                    let taps: Vec<usize> = (0..ah.window)
                        .filter_map(|ky| ah.source(y, ky))
                        .flat_map(|iy| (0..aw.window).filter_map(move |kx| aw.source(xo, kx).map(|ix| iy * w + ix)))
                        .collect();
                    let go = &gs[((b * oh + y) * ow + xo) * c..][..c];
                    match x {
                        Some(x) => {
                            for ch in 0..c {
                                let mut best: Option<(usize, T)> = None;
                                for &p in &taps {
                                    let v = x[(b * h * w + p) * c + ch];
                                    if best.is_none_or(|(_, m)| v > m) {
                                        best = Some((p, v));
                                    }
                                }
                                if let Some((p, _)) = best {
                                    let d = &mut dx[(b * h * w + p) * c + ch];
                                    *d = *d + go[ch];
                                }
                            }
                        }
                        None if !taps.is_empty() => {
                            let inv = T::ONE / T::from_f64(taps.len() as f64);
                            for &p in &taps {
                                let dst = &mut dx[(b * h * w + p) * c..][..c];
                                dst.iter_mut().zip(go).for_each(|(d, g)| *d = *d + *g * inv);
                            }
                        }
                        None => {}
                    }
                }
            }
        }
        outputs.push(out);
        Ok(())
    }
}

fn k_conv_backprop(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let window = Window::from_node(d, true)?;
    let wrt_filter = d.def.name == "Conv2DBackpropFilter";
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(ConvBackprop::<T> { window, wrt_filter, _t: Default::default() }) as Box<dyn OpKernel>))
}

fn k_pool_grad(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let window = Window::from_node(d, false)?;
    let ksize = four(d, "ksize", 1)?;
    let max = d.def.name == "MaxPoolGrad";
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(PoolGrad::<T> { max, ksize, window, _t: Default::default() }) as Box<dyn OpKernel>))
}

fn k_depthwise_backprop(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let window = Window::from_node(d, true)?;
    let wrt_filter = d.def.name == "DepthwiseConv2dNativeBackpropFilter";
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(DepthwiseBackprop::<T> { window, wrt_filter, _t: Default::default() }) as Box<dyn OpKernel>))
}

pub(super) fn register(r: &mut KernelRegistry) {
    const F: &[DType] = &[DType::Float, DType::Double];
    r.register("Conv2DBackpropInput", "T", F, k_conv_backprop);
    r.register("Conv2DBackpropFilter", "T", F, k_conv_backprop);
    r.register("MaxPoolGrad", "T", F, k_pool_grad);
    r.register("AvgPoolGrad", "T", F, k_pool_grad);
    r.register("DepthwiseConv2dNativeBackpropInput", "T", F, k_depthwise_backprop);
    r.register("DepthwiseConv2dNativeBackpropFilter", "T", F, k_depthwise_backprop);
}
