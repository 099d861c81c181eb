//! The 3-D window ops (NDHWC): `Conv3D` and its gradients `Conv3DBackpropInputV2` and
//! `Conv3DBackpropFilterV2` as im2col + GEMM over blocks of output pixels (the filter is
//! already the `[kd·kh·kw·c, oc]` matrix the GEMM reads); `MaxPool3D`, `AvgPool3D` and their
//! gradients, each output pixel's taps reduced a channel vector at a time.
use ferroflow_tensor::{DType, Tensor};
use rayon::prelude::*;

use super::{Axis, Padding};
use crate::matmul::{product, product_serial, GemmElement};
use crate::numeric::Float;
use crate::reduce::axis_values;
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

/// Bytes of one block's im2col rows: enough rows for the GEMM to run at speed, few enough to
/// stay in cache and bound the scratch memory (as the 2-D convolution's blocks).
const BLOCK_BYTES: usize = 1 << 20;

/// The strides, dilations and padding of a 3-D window op.
struct Window3 {
    strides: [usize; 3],
    dilations: [usize; 3],
    same: bool,
}

fn five(d: &NodeDesc, name: &str) -> KResult<[usize; 3]> {
    let v = d.ints(name);
    let v = if v.is_empty() { vec![1; 5] } else { v };
    if v.len() != 5 || v.iter().any(|&x| x < 1) {
        return Err(invalid(format!("node '{}': {name} must be 5 positive values, got {v:?}", d.name)));
    }
    if v[0] != 1 || v[4] != 1 {
        return Err(invalid(format!(
            "node '{}': {name} in the batch and depth dimensions must be 1, got {v:?}",
            d.name
        )));
    }
    Ok([v[1] as usize, v[2] as usize, v[3] as usize])
}

impl Window3 {
    fn from_node(d: &NodeDesc, dilations: bool) -> KResult<Window3> {
        let format = d.string("data_format")?;
        if format != "NDHWC" {
            return Err(invalid(format!(
                "node '{}': data_format '{format}' is not supported: the CPU kernel supports only NDHWC",
                d.name
            )));
        }
        let same = match d.string("padding")?.as_str() {
            "SAME" => true,
            "VALID" => false,
            p => return Err(invalid(format!("node '{}': padding '{p}' is not one of SAME, VALID", d.name))),
        };
        let dilations = if dilations { five(d, "dilations")? } else { [1; 3] };
        Ok(Window3 { strides: five(d, "strides")?, dilations, same })
    }

    fn axes(&self, input: [usize; 3], window: [usize; 3]) -> KResult<[Axis; 3]> {
        let padding = if self.same { Padding::Same } else { Padding::Valid };
        let axis = |i: usize| Axis::new(input[i], window[i], self.strides[i], self.dilations[i], &padding, i.min(1));
        Ok([axis(0)?, axis(1)?, axis(2)?])
    }
}

fn ndhwc(t: &Tensor, what: &str) -> KResult<[usize; 5]> {
    match t.dims() {
        &[a, b, c, d, e] => Ok([a, b, c, d, e]),
        d => Err(invalid(format!("{what} must be 5-dimensional, got shape {d:?}"))),
    }
}

/// Output pixels of one image.
fn pixels(axes: &[Axis; 3]) -> usize {
    axes.iter().map(|a| a.output).product()
}

/// Calls `f(tap, source)` for each window tap of output pixel `r` of one image, taps in the
/// filter's order (`kd`, `kh`, `kw`); `source` is the input pixel within the image, `None` in
/// the padding.
#[inline]
fn taps(axes: &[Axis; 3], r: usize, mut f: impl FnMut(usize, Option<usize>)) {
    let [az, ay, ax] = axes;
    let (z, y, xo) = (r / (ay.output * ax.output), (r / ax.output) % ay.output, r % ax.output);
    let mut tap = 0;
    for kz in 0..az.window {
        let iz = az.source(z, kz);
        for ky in 0..ay.window {
            let iy = ay.source(y, ky);
            for kx in 0..ax.window {
                let src = match (iz, iy, ax.source(xo, kx)) {
                    (Some(a), Some(b), Some(c)) => Some((a * ay.input + b) * ax.input + c),
                    _ => None,
                };
                f(tap, src);
                tap += 1;
            }
        }
    }
}

/// Fills `col` (rows of `taps·c`) with the im2col rows of output pixels `r0..` (counted
/// across images): each tap's channels, zero in the padding. Every element is written.
fn im2col<T: Float>(x: &[T], c: usize, axes: &[Axis; 3], r0: usize, col: &mut [T]) {
    let k = axes.iter().map(|a| a.window).product::<usize>() * c;
    if k == 0 {
        return;
    }
    let (per_image, image) = (pixels(axes), axes.iter().map(|a| a.input).product::<usize>() * c);
    for (i, row) in col.chunks_mut(k).enumerate() {
        let r = r0 + i;
        let src = &x[(r / per_image) * image..];
        taps(axes, r % per_image, |t, s| {
            let dst = &mut row[t * c..(t + 1) * c];
            match s {
                Some(p) => dst.copy_from_slice(&src[p * c..(p + 1) * c]),
                None => dst.fill(T::ZERO),
            }
        });
    }
}

/// Rows per block for im2col rows of `k` elements of `T`.
fn block_rows<T>(k: usize) -> usize {
    (BLOCK_BYTES / (k.max(1) * std::mem::size_of::<T>())).max(64)
}

/// The shapes and windows of a 3-D convolution: input `[n, d, h, w, c]`, filter
/// `[kd, kh, kw, c, oc]`.
struct Geometry {
    x: [usize; 5],
    oc: usize,
    axes: [Axis; 3],
}

impl Geometry {
    fn new(window: &Window3, x: [usize; 5], f: [usize; 5]) -> KResult<Geometry> {
        if f[3] != x[4] {
            return Err(invalid(format!(
                "input depth {} does not match filter depth {} (filter shape {f:?})",
                x[4], f[3]
            )));
        }
        let axes = window.axes([x[1], x[2], x[3]], [f[0], f[1], f[2]])?;
        Ok(Geometry { x, oc: f[4], axes })
    }

    fn k(&self) -> usize {
        self.axes.iter().map(|a| a.window).product::<usize>() * self.x[4]
    }

    fn out_dims(&self) -> [usize; 5] {
        let [az, ay, ax] = self.axes;
        [self.x[0], az.output, ay.output, ax.output, self.oc]
    }
}

struct Conv3D<T> {
    window: Window3,
    _t: std::marker::PhantomData<T>,
}

impl<T: GemmElement + Float> OpKernel for Conv3D<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let g = Geometry::new(&self.window, ndhwc(&inputs[0], "input")?, ndhwc(&inputs[1], "filter")?)?;
        let (x, f) = (inputs[0].as_slice::<T>()?, inputs[1].as_slice::<T>()?);
        let (k, oc, c) = (g.k(), g.oc, g.x[4]);
        let mut out = Tensor::zeros(T::DTYPE, &g.out_dims())?;
        let o = out.as_mut_slice::<T>()?;
        if o.is_empty() {
            outputs.push(out);
            return Ok(());
        }
        let rows = block_rows::<T>(k);
        let block = |(i, dst): (usize, &mut [T])| {
            if ctx.stopped() {
                return;
            }
            let n = dst.len() / oc;
            let mut col = vec![T::ZERO; n * k];
            im2col(x, c, &g.axes, i * rows, &mut col);
            product_serial((n, oc, k), (&col, k, 1), (f, oc, 1), dst);
        };
        if o.len() <= rows * oc {
            // One block: the GEMM itself splits across the pool.
            let mut col = vec![T::ZERO; o.len() / oc * k];
            im2col(x, c, &g.axes, 0, &mut col);
            product(ctx, (o.len() / oc, oc, k), (&col, k, 1), (f, oc, 1), o);
        } else if ctx.threads() > 1 {
            ctx.install(|| o.par_chunks_mut(rows * oc).enumerate().for_each(block));
        } else {
            o.chunks_mut(rows * oc).enumerate().for_each(block);
        }
        outputs.push(out);
        Ok(())
    }
}

/// The `[n, d, h, w, c]` an `input_sizes` tensor holds.
fn sizes(t: &Tensor, what: &str) -> KResult<[usize; 5]> {
    let v = axis_values(t)?;
    match v[..] {
        [a, b, c, d, e] if v.iter().all(|&x| x >= 0) => {
            Ok([a as usize, b as usize, c as usize, d as usize, e as usize])
        }
        _ => Err(invalid(format!("{what} must be 5 non-negative sizes, got {v:?}"))),
    }
}

fn check_backprop(g: &Geometry, dy: &Tensor) -> KResult<()> {
    if dy.dims() != g.out_dims() {
        return Err(invalid(format!(
            "out_backprop has shape {:?}, but the convolution's output has shape {:?}",
            dy.dims(),
            g.out_dims()
        )));
    }
    Ok(())
}

/// `Conv3DBackpropInputV2`: each block's im2col-shaped gradient `dy · filterᵀ`, scattered
/// back onto the input pixels its taps read (col2im); images in parallel.
struct Conv3DBackpropInput<T> {
    window: Window3,
    _t: std::marker::PhantomData<T>,
}

impl<T: GemmElement + Float> OpKernel for Conv3DBackpropInput<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let xd = sizes(&inputs[0], "input_sizes")?;
        crate::check_output(T::DTYPE, &xd)?;
        let g = Geometry::new(&self.window, xd, ndhwc(&inputs[1], "filter")?)?;
        check_backprop(&g, &inputs[2])?;
        let (f, dy) = (inputs[1].as_slice::<T>()?, inputs[2].as_slice::<T>()?);
        let (k, oc, c) = (g.k(), g.oc, xd[4]);
        let mut dx = Tensor::zeros(T::DTYPE, &xd)?;
        let o = dx.as_mut_slice::<T>()?;
        let (per_image, image) = (pixels(&g.axes), xd[1] * xd[2] * xd[3] * c);
        if o.is_empty() || per_image == 0 || k == 0 {
            outputs.push(dx);
            return Ok(());
        }
        let rows = block_rows::<T>(k);
        let one_image = |(b, dst): (usize, &mut [T])| {
            let mut col = vec![T::ZERO; rows.min(per_image) * k];
            for r0 in (0..per_image).step_by(rows) {
                if ctx.stopped() {
                    return;
                }
                let n = rows.min(per_image - r0);
                let src = &dy[(b * per_image + r0) * oc..(b * per_image + r0 + n) * oc];
                product_serial((n, k, oc), (src, oc, 1), (f, 1, oc), &mut col[..n * k]);
                for (i, row) in col[..n * k].chunks(k).enumerate() {
                    taps(&g.axes, r0 + i, |t, s| {
                        if let Some(p) = s {
                            for (d, &v) in dst[p * c..(p + 1) * c].iter_mut().zip(&row[t * c..(t + 1) * c]) {
                                *d = *d + v;
                            }
                        }
                    });
                }
            }
        };
        if ctx.threads() > 1 && xd[0] > 1 {
            ctx.install(|| o.par_chunks_mut(image).enumerate().for_each(one_image));
        } else {
            o.chunks_mut(image).enumerate().for_each(one_image);
        }
        outputs.push(dx);
        Ok(())
    }
}

/// `Conv3DBackpropFilterV2`: the sum over blocks of `im2colᵀ · dy`, each task summing its
/// blocks into its own `[k, oc]` matrix.
struct Conv3DBackpropFilter<T> {
    window: Window3,
    _t: std::marker::PhantomData<T>,
}

impl<T: GemmElement + Float> OpKernel for Conv3DBackpropFilter<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let fd = sizes(&inputs[1], "filter_sizes")?;
        crate::check_output(T::DTYPE, &fd)?;
        let g = Geometry::new(&self.window, ndhwc(&inputs[0], "input")?, fd)?;
        check_backprop(&g, &inputs[2])?;
        let (x, dy) = (inputs[0].as_slice::<T>()?, inputs[2].as_slice::<T>()?);
        let (k, oc, c) = (g.k(), g.oc, g.x[4]);
        let total = dy.len().checked_div(oc).unwrap_or(0);
        let rows = block_rows::<T>(k);
        let blocks = total.div_ceil(rows);
        let sum_blocks = |range: std::ops::Range<usize>| -> Vec<T> {
            let mut acc = vec![T::ZERO; k * oc];
            let mut part = vec![T::ZERO; k * oc];
            let mut col = vec![T::ZERO; rows.min(total) * k];
            for blk in range {
                if ctx.stopped() {
                    break;
                }
                let r0 = blk * rows;
                let n = rows.min(total - r0);
                im2col(x, c, &g.axes, r0, &mut col[..n * k]);
                product_serial((k, oc, n), (&col[..n * k], 1, k), (&dy[r0 * oc..(r0 + n) * oc], oc, 1), &mut part);
                acc.iter_mut().zip(&part).for_each(|(a, &p)| *a = *a + p);
            }
            acc
        };
        let tasks = ctx.threads().min(blocks).max(1);
        let df = if tasks > 1 {
            let parts: Vec<Vec<T>> = ctx.install(|| {
                (0..tasks).into_par_iter().map(|t| sum_blocks(blocks * t / tasks..blocks * (t + 1) / tasks)).collect()
            });
            let mut df = parts[0].clone();
            for p in &parts[1..] {
                df.iter_mut().zip(p).for_each(|(a, &v)| *a = *a + v);
            }
            df
        } else {
            sum_blocks(0..blocks)
        };
        outputs.push(Tensor::from_vec(&fd, df)?);
        Ok(())
    }
}

/// `MaxPool3D`, `AvgPool3D`: each output pixel the max, or the mean, of its window's taps
/// inside the input (TensorFlow's average counts only those).
struct Pool3D<T> {
    max: bool,
    ksize: [usize; 3],
    window: Window3,
    _t: std::marker::PhantomData<T>,
}

impl<T: Float> OpKernel for Pool3D<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let [n, d, h, w, c] = ndhwc(&inputs[0], "input")?;
        let axes = self.window.axes([d, h, w], self.ksize)?;
        let [az, ay, ax] = axes;
        let mut out = Tensor::zeros(T::DTYPE, &[n, az.output, ay.output, ax.output, c])?;
        let x = inputs[0].as_slice::<T>()?;
        let (per_image, image) = (pixels(&axes), d * h * w * c);
        let max = self.max;
        let pixel = |(r, dst): (usize, &mut [T])| {
            let src = &x[(r / per_image) * image..];
            let mut count = 0usize;
            dst.fill(if max { T::LOWEST } else { T::ZERO });
            taps(&axes, r % per_image, |_, s| {
                let Some(p) = s else { return };
                count += 1;
                let tap = &src[p * c..(p + 1) * c];
                if max {
                    dst.iter_mut().zip(tap).for_each(|(o, &v)| *o = if v > *o || v.is_nan() { v } else { *o });
                } else {
                    dst.iter_mut().zip(tap).for_each(|(o, &v)| *o = *o + v);
                }
            });
            if !max && count > 0 {
                let inv = T::from_usize(count);
                dst.iter_mut().for_each(|o| *o = *o / inv);
            }
        };
        let o = out.as_mut_slice::<T>()?;
        if c > 0 {
            if ctx.threads() > 1 {
                ctx.install(|| o.par_chunks_mut(c).enumerate().for_each(pixel));
            } else {
                o.chunks_mut(c).enumerate().for_each(pixel);
            }
        }
        outputs.push(out);
        Ok(())
    }
}

/// `MaxPool3DGrad` (TensorFlow's CPU kernel: each window's gradient goes to every input
/// within 1e-5 of the window's max) and `AvgPool3DGrad` (each window's gradient spread
/// evenly over its taps inside the input); images in parallel.
struct Pool3DGrad<T> {
    max: bool,
    ksize: [usize; 3],
    window: Window3,
    _t: std::marker::PhantomData<T>,
}

impl<T: Float> OpKernel for Pool3DGrad<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (xd, g) = if self.max {
            (ndhwc(&inputs[0], "orig_input")?, &inputs[2])
        } else {
            let xd = sizes(&inputs[0], "orig_input_shape")?;
            crate::check_output(T::DTYPE, &xd)?;
            (xd, &inputs[1])
        };
        let [n, d, h, w, c] = xd;
        let axes = self.window.axes([d, h, w], self.ksize)?;
        let out_dims = [n, axes[0].output, axes[1].output, axes[2].output, c];
        if g.dims() != out_dims || (self.max && inputs[1].dims() != out_dims) {
            return Err(invalid(format!("the pool's output and gradient must have shape {out_dims:?}")));
        }
        let gv = g.as_slice::<T>()?;
        let (x, y) =
            if self.max { (inputs[0].as_slice::<T>()?, inputs[1].as_slice::<T>()?) } else { (&[][..], &[][..]) };
        let (per_image, image) = (pixels(&axes), d * h * w * c);
        let mut dx = Tensor::zeros(T::DTYPE, &xd)?;
        let o = dx.as_mut_slice::<T>()?;
        let tol = T::ONE / T::from_usize(100_000);
        let max = self.max;
        let one_image = |(b, dst): (usize, &mut [T])| {
            for r in 0..per_image {
                let at = (b * per_image + r) * c;
                let gr = &gv[at..at + c];
                let mut count = 0usize;
                if !max {
                    taps(&axes, r, |_, s| count += s.is_some() as usize);
                }
                let scale = T::from_usize(count.max(1));
                taps(&axes, r, |_, s| {
                    let Some(p) = s else { return };
                    let slot = &mut dst[p * c..(p + 1) * c];
                    if max {
                        let (xs, ys) = (&x[b * image + p * c..][..c], &y[at..at + c]);
                        for (ch, o) in slot.iter_mut().enumerate() {
                            let diff = xs[ch] - ys[ch];
                            let diff = if diff < T::ZERO { -diff } else { diff };
                            if diff < tol {
                                *o = *o + gr[ch];
                            }
                        }
                    } else {
                        slot.iter_mut().zip(gr).for_each(|(o, &v)| *o = *o + v / scale);
                    }
                });
            }
        };
        if image > 0 {
            if ctx.threads() > 1 && n > 1 {
                ctx.install(|| o.par_chunks_mut(image).enumerate().for_each(one_image));
            } else {
                o.chunks_mut(image).enumerate().for_each(one_image);
            }
        }
        outputs.push(dx);
        Ok(())
    }
}

fn pool_window(d: &NodeDesc) -> KResult<([usize; 3], Window3)> {
    Ok((five(d, "ksize")?, Window3::from_node(d, false)?))
}

pub(super) fn register(r: &mut KernelRegistry) {
    const F: &[DType] = &[DType::Float, DType::Double];
    fn conv(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
        let window = Window3::from_node(d, true)?;
        dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64], |T| Ok(match d.def.name.as_str() {
            "Conv3D" => Box::new(Conv3D::<T> { window, _t: Default::default() }) as Box<dyn OpKernel>,
            "Conv3DBackpropInputV2" => Box::new(Conv3DBackpropInput::<T> { window, _t: Default::default() }),
            _ => Box::new(Conv3DBackpropFilter::<T> { window, _t: Default::default() }),
        }))
    }
    fn pool(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
        let (ksize, window) = pool_window(d)?;
        let max = d.def.name == "MaxPool3D";
        dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
            |T| Ok(Box::new(Pool3D::<T> { max, ksize, window, _t: Default::default() }) as Box<dyn OpKernel>))
    }
    fn pool_grad(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
        let (ksize, window) = pool_window(d)?;
        let max = d.def.name == "MaxPool3DGrad";
        dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
            |T| Ok(Box::new(Pool3DGrad::<T> { max, ksize, window, _t: Default::default() }) as Box<dyn OpKernel>))
    }
    for name in ["Conv3D", "Conv3DBackpropInputV2", "Conv3DBackpropFilterV2"] {
        r.register(name, "T", F, conv);
    }
    r.register("MaxPool3D", "T", F, pool);
    r.register("AvgPool3D", "T", F, pool);
    r.register("MaxPool3DGrad", "T", F, pool_grad);
    r.register("AvgPool3DGrad", "T", F, pool_grad);
}
