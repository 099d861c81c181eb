//! The resizes that weigh several source pixels per axis: `ResizeBicubic`, `ResizeArea` and
//! `ScaleAndTranslate` (Lanczos, Gaussian, box, triangle, Keys and Mitchell cubic kernels,
//! with or without antialiasing), NHWC, with TensorFlow's weights and edge rules. Each axis
//! is a list of taps (source index, weight) per output position, so every one of them is the
//! same separable pass: each output row is the weighted sum of its source rows (whole rows
//! at a time), then each pixel the weighted sum of that row's pixels; rows across the
//! intra-op pool.
use ferroflow_tensor::{DType, Tensor};
use rayon::prelude::*;

use crate::{check_output, invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

/// Each output position's source taps along one axis.
pub(super) type Taps = Vec<Vec<(usize, f32)>>;

/// The images as f32, as TensorFlow's kernels read them.
pub(super) fn widen(x: &Tensor) -> KResult<Vec<f32>> {
    macro_rules! w {
        ($t:ty) => {
            x.as_slice::<$t>()?.iter().map(|&v| v as f32).collect()
        };
    }
    Ok(match x.dtype() {
        DType::Float => x.as_slice::<f32>()?.to_vec(),
        DType::Double => w!(f64),
        DType::UInt8 => w!(u8),
        DType::Int8 => w!(i8),
        DType::Int16 => w!(i16),
        DType::UInt16 => w!(u16),
        DType::Int32 => w!(i32),
        DType::Int64 => w!(i64),
        d => return Err(invalid(format!("images of {d} cannot be resized"))),
    })
}

/// The separable resize of `src` (`[n, h, w, c]`) by the taps of each axis.
pub(super) fn resample(ctx: &KernelContext, src: &[f32], [n, h, w, c]: [usize; 4], ys: &Taps, xs: &Taps) -> Vec<f32> {
    let (oh, row_len) = (ys.len(), xs.len() * c);
    let mut out = vec![0f32; n * oh * row_len];
    if out.is_empty() {
        return out;
    }
    let row = |line: &mut Vec<f32>, (r, dst): (usize, &mut [f32])| {
        let (b, y) = (r / oh, r % oh);
        line.fill(0.0);
        for &(i, wy) in &ys[y] {
            let s = &src[(b * h + i) * w * c..(b * h + i + 1) * w * c];
            line.iter_mut().zip(s).for_each(|(l, &v)| *l += wy * v);
        }
        for (px, taps) in dst.chunks_mut(c).zip(xs) {
            for &(j, wx) in taps {
                px.iter_mut().zip(&line[j * c..(j + 1) * c]).for_each(|(o, &v)| *o += wx * v);
            }
        }
    };
    if ctx.threads() > 1 && n * oh > 1 {
        ctx.install(|| out.par_chunks_mut(row_len).enumerate().for_each_init(|| vec![0f32; w * c], row));
    } else {
        let mut line = vec![0f32; w * c];
        out.chunks_mut(row_len).enumerate().for_each(|r| row(&mut line, r));
    }
    out
}

/// TensorFlow's `CalculateResizeScale`.
fn resize_scale(input: usize, output: usize, align_corners: bool) -> f32 {
    if align_corners && output > 1 {
        (input - 1) as f32 / (output - 1) as f32
    } else {
        input as f32 / output as f32
    }
}

fn bound(i: i64, limit: usize) -> usize {
    i.clamp(0, limit as i64 - 1) as usize
}

/// `ResizeBicubic`'s taps along one axis: TensorFlow's table of 1,024 cubic weights
/// (`a = -0.5`, Keys, with half-pixel centers: taps outside the image get no weight and the
/// rest are renormalized; `a = -0.75` otherwise, the edge pixel repeated).
fn bicubic_axis(input: usize, output: usize, align_corners: bool, half_pixel: bool) -> Taps {
    const TABLE: usize = 1024;
    let a: f32 = if half_pixel { -0.5 } else { -0.75 };
    let mut table = vec![0f32; (TABLE + 1) * 2];
    for i in 0..=TABLE {
        let x = (i as f64 / TABLE as f64) as f32;
        table[i * 2] = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
        let x = x + 1.0;
        table[i * 2 + 1] = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
    }
    let scale = resize_scale(input, output, align_corners);
    (0..output)
        .map(|o| {
            let at = if half_pixel { (o as f32 + 0.5) * scale - 0.5 } else { o as f32 * scale };
            let loc = at.floor() as i64;
            let offset = ((at - loc as f32) * TABLE as f32).round_ties_even() as usize;
            let mut w = [
                table[offset * 2 + 1],
                table[offset * 2],
                table[(TABLE - offset) * 2],
                table[(TABLE - offset) * 2 + 1],
            ];
            let idx: Vec<usize> = (0..4).map(|j| bound(loc - 1 + j, input)).collect();
            if half_pixel {
                for j in 0..4 {
                    if idx[j] as i64 != loc - 1 + j as i64 {
                        w[j] = 0.0;
                    }
                }
                let sum: f32 = w.iter().sum();
                if sum.abs() >= 1000.0 * f32::MIN_POSITIVE {
                    let inv = 1.0 / sum;
                    w.iter_mut().for_each(|v| *v *= inv);
                }
            }
            idx.into_iter().zip(w).collect()
        })
        .collect()
}

/// `ResizeArea`'s taps along one axis: each source cell weighted by the part of it the
/// output cell covers, divided by the output cell's size.
fn area_axis(input: usize, output: usize, align_corners: bool) -> Taps {
    let scale = resize_scale(input, output, align_corners);
    (0..output)
        .map(|o| {
            let (lo, hi) = (o as f32 * scale, (o + 1) as f32 * scale);
            let (start, end) = (lo.floor() as i64, hi.ceil() as i64);
            (start..end)
                .map(|i| {
                    let (f, f1) = (i as f32, (i + 1) as f32);
                    let part = match (f < lo, f1 > hi) {
                        (true, true) => scale,
                        (true, false) => f1 - lo,
                        (false, true) => hi - f,
                        (false, false) => 1.0,
                    };
                    (bound(i, input), part / scale)
                })
                .collect()
        })
        .collect()
}

/// `ScaleAndTranslate`'s sampling kernels (TensorFlow's `sampling_kernels.h`).
#[derive(Clone, Copy, Debug)]
enum Kernel {
    Lanczos(f32),
    Gaussian,
    Box,
    Triangle,
    KeysCubic,
    MitchellCubic,
}

impl Kernel {
    fn parse(name: &str) -> Option<Kernel> {
        Some(match name {
            "lanczos1" => Kernel::Lanczos(1.0),
            "lanczos3" => Kernel::Lanczos(3.0),
            "lanczos5" => Kernel::Lanczos(5.0),
            "gaussian" => Kernel::Gaussian,
            "box" => Kernel::Box,
            "triangle" => Kernel::Triangle,
            "keyscubic" => Kernel::KeysCubic,
            "mitchellcubic" => Kernel::MitchellCubic,
            _ => return None,
        })
    }

    fn radius(self) -> f32 {
        match self {
            Kernel::Lanczos(r) => r,
            Kernel::Gaussian => 1.5,
            Kernel::Box | Kernel::Triangle => 1.0,
            Kernel::KeysCubic | Kernel::MitchellCubic => 2.0,
        }
    }

    fn weight(self, x: f32) -> f32 {
        let x = x.abs();
        match self {
            Kernel::Lanczos(r) => {
                const PI: f32 = std::f32::consts::PI;
                if x > r {
                    0.0
                } else if x <= 1e-3 {
                    1.0
                } else {
                    r * (PI * x).sin() * (PI * x / r).sin() / (PI * PI * x * x)
                }
            }
            Kernel::Gaussian => {
                let sigma = 1.5f32 / 3.0;
                if x >= 1.5 {
                    0.0
                } else {
                    (-(x as f64) * x as f64 / (2.0 * sigma as f64 * sigma as f64)).exp() as f32
                }
            }
            Kernel::Box => {
                if x < 0.5 {
                    1.0
                } else if x == 0.5 {
                    0.5
                } else {
                    0.0
                }
            }
            Kernel::Triangle => (1.0 - x).max(0.0),
            Kernel::KeysCubic if x >= 2.0 => 0.0,
            Kernel::KeysCubic if x >= 1.0 => ((-0.5 * x + 2.5) * x - 4.0) * x + 2.0,
            Kernel::KeysCubic => ((1.5 * x - 2.5) * x) * x + 1.0,
            Kernel::MitchellCubic if x >= 2.0 => 0.0,
            Kernel::MitchellCubic if x >= 1.0 => (((-7.0 / 18.0) * x + 2.0) * x - 10.0 / 3.0) * x + 16.0 / 9.0,
            Kernel::MitchellCubic => (((7.0 / 6.0) * x - 2.0) * x) * x + 8.0 / 9.0,
        }
    }
}

/// `ScaleAndTranslate`'s taps along one axis (TensorFlow's `ComputeSpansCore`): output
/// pixel centers mapped back through the scale and translation; the kernel widened by the
/// downscale when antialiasing; weights normalized to sum to one; none where the sample
/// falls outside the input.
fn scaled_axis(kernel: Kernel, input: usize, output: usize, scale: f32, translate: f32, antialias: bool) -> Taps {
    let inv_scale = (1.0 / scale as f64) as f32;
    let inv_translate = -inv_scale * translate;
    let kernel_scale = if antialias { inv_scale.max(1.0) } else { 1.0 };
    let radius = kernel.radius() * kernel_scale;
    (0..output)
        .map(|o| {
            let sample = (o as f32 + 0.5) * inv_scale + inv_translate;
            if sample < 0.0 || sample > input as f32 {
                return Vec::new();
            }
            let start = ((sample - radius - 0.5).ceil() as i64).clamp(0, input as i64 - 1);
            let end = ((sample + radius - 0.5).floor() as i64).clamp(0, input as i64 - 1) + 1;
            let taps: Vec<(usize, f32)> = (start..end)
                .map(|s| (s as usize, kernel.weight((s as f32 + 0.5 - sample) * (1.0 / kernel_scale))))
                .collect();
            let total: f32 = taps.iter().map(|t| t.1).sum();
            if total.abs() < 1000.0 * f32::MIN_POSITIVE {
                return Vec::new();
            }
            let inv = 1.0 / total;
            taps.into_iter().map(|(s, w)| (s, w * inv)).collect()
        })
        .collect()
}

#[derive(Clone, Copy)]
enum Method {
    Bicubic { align_corners: bool, half_pixel: bool },
    Area { align_corners: bool },
    Scaled { kernel: Kernel, antialias: bool },
}

struct Sampled(Method);

/// Two f32 values of a `[2]` tensor.
fn pair(t: &Tensor, what: &str) -> KResult<[f32; 2]> {
    match (t.dims(), t.as_slice::<f32>()) {
        ([2], Ok(&[a, b])) => Ok([a, b]),
        _ => Err(invalid(format!("{what} must be a float vector of 2 elements, got shape {:?}", t.dims()))),
    }
}

impl Sampled {
    /// Each axis's taps for images of `[h, w]` resized to `[oh, ow]` (`inputs[2..]`: the scale
    /// and translation of `ScaleAndTranslate`).
    fn taps(&self, [h, w, oh, ow]: [usize; 4], inputs: &Inputs) -> KResult<(Taps, Taps)> {
        Ok(match self.0 {
            Method::Bicubic { align_corners, half_pixel } => {
                (bicubic_axis(h, oh, align_corners, half_pixel), bicubic_axis(w, ow, align_corners, half_pixel))
            }
            Method::Area { align_corners } => (area_axis(h, oh, align_corners), area_axis(w, ow, align_corners)),
            Method::Scaled { kernel, antialias } => {
                let scale = pair(&inputs[2], "scale")?;
                let translation = pair(&inputs[3], "translation")?;
                if scale[0] <= 0.0 || scale[1] <= 0.0 {
                    return Err(invalid(format!("scale must be positive, got {scale:?}")));
                }
                (
                    scaled_axis(kernel, h, oh, scale[0], translation[0], antialias),
                    scaled_axis(kernel, w, ow, scale[1], translation[1], antialias),
                )
            }
        })
    }
}

impl OpKernel for Sampled {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = &inputs[0];
        let &[n, h, w, c] = x.dims() else {
            return Err(invalid(format!("images must be 4-dimensional, got shape {:?}", x.dims())));
        };
        let size = inputs[1].as_slice::<i32>()?;
        let &[oh, ow] = size else { return Err(invalid(format!("size must be a vector of 2 elements, got {size:?}"))) };
        if oh <= 0 || ow <= 0 || h == 0 || w == 0 {
            return Err(invalid(format!("output size {size:?} and input size [{h}, {w}] must be positive")));
        }
        let (oh, ow) = (oh as usize, ow as usize);
        check_output(DType::Float, &[n, oh, ow, c])?;
        let (ys, xs) = self.taps([h, w, oh, ow], inputs)?;
        let out = resample(ctx, &widen(x)?, [n, h, w, c], &ys, &xs);
        outputs.push(Tensor::from_vec(&[n, oh, ow, c], out)?);
        Ok(())
    }
}

/// The taps read the other way: for each source position, the outputs that weigh it.
pub(super) fn transpose(taps: &Taps, input: usize) -> Taps {
    let mut t = vec![Vec::new(); input];
    for (o, row) in taps.iter().enumerate() {
        for &(i, w) in row {
            t[i].push((o, w));
        }
    }
    t
}

/// `ResizeBicubicGrad` and `ScaleAndTranslateGrad`: the output's gradient spread back over the
/// source pixels with the forward taps' weights (the same separable pass, taps transposed),
/// in the original image's type.
struct SampledGrad(Sampled);

impl OpKernel for SampledGrad {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (g, x) = (&inputs[0], &inputs[1]);
        let (&[n, oh, ow, c], &[xn, h, w, xc]) = (g.dims(), x.dims()) else {
            return Err(invalid(format!(
                "grads and original_image must be 4-dimensional, got shapes {:?} and {:?}",
                g.dims(),
                x.dims()
            )));
        };
        if (n, c) != (xn, xc) || h == 0 || w == 0 || oh == 0 || ow == 0 {
            return Err(invalid(format!(
                "grads {:?} and original_image {:?} must agree on batch and channels and be non-empty",
                g.dims(),
                x.dims()
            )));
        }
        let (ys, xs) = self.0.taps([h, w, oh, ow], inputs)?;
        let out = resample(ctx, &widen(g)?, [n, oh, ow, c], &transpose(&ys, h), &transpose(&xs, w));
        let dims = [n, h, w, c];
        outputs.push(match x.dtype() {
            DType::Double => Tensor::from_vec(&dims, out.into_iter().map(f64::from).collect())?,
            _ => Tensor::from_vec(&dims, out)?,
        });
        Ok(())
    }
}

fn k_sampled(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let method = match d.def.name.trim_end_matches("Grad") {
        "ResizeBicubic" => {
            let (align_corners, half_pixel) = (d.bool("align_corners")?, d.bool("half_pixel_centers")?);
            if align_corners && half_pixel {
                return Err(invalid("half_pixel_centers and align_corners cannot both be true"));
            }
            Method::Bicubic { align_corners, half_pixel }
        }
        "ResizeArea" => Method::Area { align_corners: d.bool("align_corners")? },
        _ => {
            let name = d.string("kernel_type")?;
            let kernel = Kernel::parse(&name).ok_or_else(|| {
                invalid(format!(
                    "node '{}': kernel_type '{name}' is not one of lanczos1, lanczos3, lanczos5, gaussian, box, triangle, keyscubic, mitchellcubic",
                    d.name
                ))
            })?;
            Method::Scaled { kernel, antialias: d.bool("antialias")? }
        }
    };
    Ok(if d.def.name.ends_with("Grad") { Box::new(SampledGrad(Sampled(method))) } else { Box::new(Sampled(method)) })
}

pub(super) fn register(r: &mut KernelRegistry) {
    const T: &[DType] = &[
        DType::Int8,
        DType::UInt8,
        DType::Int16,
        DType::UInt16,
        DType::Int32,
        DType::Int64,
        DType::Float,
        DType::Double,
    ];
    for name in ["ResizeBicubic", "ResizeArea", "ScaleAndTranslate"] {
        r.register(name, "T", T, k_sampled);
    }
    r.register("ResizeBicubicGrad", "T", &[DType::Float, DType::Double], k_sampled);
    r.register("ScaleAndTranslateGrad", "T", &[DType::Float], k_sampled);
}
