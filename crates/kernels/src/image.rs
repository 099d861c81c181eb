//! `ResizeBilinear` and `ResizeNearestNeighbor` (NHWC), with TensorFlow's coordinate rules
//! for `align_corners` and `half_pixel_centers`.
use ferroflow_tensor::{DType, Tensor};

use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

#[derive(Clone, Copy)]
struct Resize {
    bilinear: bool,
    align_corners: bool,
    half_pixel: bool,
}

fn scale(input: usize, output: usize, align: bool) -> f32 {
    if align && output > 1 {
        (input - 1) as f32 / (output - 1) as f32
    } else {
        input as f32 / output as f32
    }
}

/// Source coordinate, lower and upper neighbours and weight of the upper one, for bilinear.
fn lerp_axis(o: usize, scale: f32, input: usize, half_pixel: bool) -> (usize, usize, f32) {
    let x = if half_pixel { (o as f32 + 0.5) * scale - 0.5 } else { o as f32 * scale };
    let lo = x.floor();
    let low = (lo.max(0.0) as usize).min(input - 1);
    let high = (x.ceil().max(0.0) as usize).min(input - 1);
    (low, high, x - lo)
}

fn nearest_axis(o: usize, scale: f32, input: usize, align: bool, half_pixel: bool) -> usize {
    let x = if half_pixel { (o as f32 + 0.5) * scale } else { o as f32 * scale };
    let i = if align { x.round() } else { x.floor() };
    (i.max(0.0) as usize).min(input - 1)
}

fn to_f32(t: &Tensor) -> KResult<Vec<f32>> {
    Ok(match t.dtype() {
        DType::Float => t.as_slice::<f32>()?.to_vec(),
        DType::Double => t.as_slice::<f64>()?.iter().map(|&v| v as f32).collect(),
        DType::Int32 => t.as_slice::<i32>()?.iter().map(|&v| v as f32).collect(),
        DType::Int64 => t.as_slice::<i64>()?.iter().map(|&v| v as f32).collect(),
        DType::UInt8 => t.as_slice::<u8>()?.iter().map(|&v| v as f32).collect(),
        d => return Err(invalid(format!("resize is not defined for {d} images"))),
    })
}

impl OpKernel for Resize {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = &inputs[0];
        let &[n, h, w, c] = x.dims() else {
            return Err(invalid(format!("input must be 4-dimensional, got shape {:?}", x.dims())));
        };
        let size = inputs[1].as_slice::<i32>()?;
        let &[oh, ow] = size else { return Err(invalid(format!("size must be a vector of 2 elements, got {size:?}"))) };
        if oh <= 0 || ow <= 0 || h == 0 || w == 0 {
            return Err(invalid(format!("output size {size:?} and input size [{h}, {w}] must be positive")));
        }
        let (oh, ow) = (oh as usize, ow as usize);
        crate::check_output(if self.bilinear { DType::Float } else { x.dtype() }, &[n, oh, ow, c])?;
        let (sy, sx) = (scale(h, oh, self.align_corners), scale(w, ow, self.align_corners));
        let at = |b: usize, y: usize, xx: usize| ((b * h + y) * w + xx) * c;
        if self.bilinear {
            let src = to_f32(x)?;
            let mut out = Vec::with_capacity(n * oh * ow * c);
            for b in 0..n {
                for y in 0..oh {
                    let (y0, y1, yl) = lerp_axis(y, sy, h, self.half_pixel);
                    for xo in 0..ow {
                        let (x0, x1, xl) = lerp_axis(xo, sx, w, self.half_pixel);
                        for ch in 0..c {
                            let (tl, tr) = (src[at(b, y0, x0) + ch], src[at(b, y0, x1) + ch]);
                            let (bl, br) = (src[at(b, y1, x0) + ch], src[at(b, y1, x1) + ch]);
                            let top = tl + (tr - tl) * xl;
                            let bottom = bl + (br - bl) * xl;
                            out.push(top + (bottom - top) * yl);
                        }
                    }
                }
            }
            outputs.push(Tensor::from_vec(&[n, oh, ow, c], out)?);
        } else {
            let size = x.dtype().size().ok_or_else(|| invalid(format!("resize is not defined for {}", x.dtype())))?;
            let bytes = x.as_bytes()?;
            let mut out = Vec::with_capacity(n * oh * ow * c * size);
            for b in 0..n {
                for y in 0..oh {
                    let iy = nearest_axis(y, sy, h, self.align_corners, self.half_pixel);
                    for xo in 0..ow {
                        let ix = nearest_axis(xo, sx, w, self.align_corners, self.half_pixel);
                        let p = at(b, iy, ix) * size;
                        out.extend_from_slice(&bytes[p..p + c * size]);
                    }
                }
            }
            outputs.push(Tensor::from_bytes(x.dtype(), &[n, oh, ow, c], &out)?);
        }
        Ok(())
    }
}

fn k_resize(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let r = Resize {
        bilinear: d.def.name == "ResizeBilinear",
        align_corners: d.bool("align_corners")?,
        half_pixel: d.bool("half_pixel_centers")?,
    };
    if r.align_corners && r.half_pixel {
        return Err(invalid("half_pixel_centers and align_corners cannot both be true"));
    }
    Ok(Box::new(r))
}

pub(crate) fn register(r: &mut KernelRegistry) {
    const T: &[DType] = &[DType::Float, DType::Double, DType::Int32, DType::Int64, DType::UInt8];
    r.register("ResizeBilinear", "T", T, k_resize);
    r.register("ResizeNearestNeighbor", "T", T, k_resize);
}
