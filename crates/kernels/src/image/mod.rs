//! Image kernels: resizing (`resize`: bilinear and nearest; `sampled`: bicubic, area and
//! `ScaleAndTranslate`), files and image codecs (`codec`; its decoders are
//! public for the data pipeline and the fuzz targets), and the augmentation ops
//! `AdjustContrastv2` and `ReverseV2` (flips); detection post-processing: non-max
//! suppression (`nms`) and `CropAndResize` (`crop`).
mod codec;
mod crop;
mod nms;
mod resize;
mod sampled;

use ferroflow_tensor::{DType, Tensor};

use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, OpKernel, Outputs};

pub use codec::{decode_image, decode_jpeg, decode_png, read_file};

/// `(x - mean) * factor + mean` per image and channel, the mean over height and width.
struct AdjustContrast;
impl OpKernel for AdjustContrast {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = &inputs[0];
        let factor = inputs[1]
            .scalar_value::<f32>()
            .map_err(|_| invalid(format!("contrast_factor must be a scalar, got shape {:?}", inputs[1].dims())))?;
        let dims = x.dims();
        if dims.len() < 3 {
            return Err(invalid(format!("images must be at least 3-dimensional, got shape {dims:?}")));
        }
        let (h, w, c) = (dims[dims.len() - 3], dims[dims.len() - 2], dims[dims.len() - 1]);
        let per_image = h * w * c;
        let src = x.as_slice::<f32>()?;
        let mut out = src.to_vec();
        if per_image > 0 {
            for img in out.chunks_exact_mut(per_image) {
                for ch in 0..c {
                    let sum: f32 = img.iter().skip(ch).step_by(c).sum();
                    let mean = sum / (h * w) as f32;
                    for v in img.iter_mut().skip(ch).step_by(c) {
                        *v = (*v - mean) * factor + mean;
                    }
                }
            }
        }
        outputs.push(Tensor::from_vec(dims, out)?);
        Ok(())
    }
}

/// Reverses the given axes.
struct Reverse;
impl OpKernel for Reverse {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = &inputs[0];
        let rank = x.rank() as i64;
        let axes: Vec<i64> = match inputs[1].dtype() {
            DType::Int64 => inputs[1].as_slice::<i64>()?.to_vec(),
            _ => inputs[1].as_slice::<i32>()?.iter().map(|&a| a as i64).collect(),
        };
        let mut flip = vec![false; x.rank()];
        for &a in &axes {
            let k = if a < 0 { a + rank } else { a };
            if !(0..rank).contains(&k) {
                return Err(invalid(format!("axis {a} is out of range for a tensor of rank {rank}")));
            }
            if std::mem::replace(&mut flip[k as usize], true) {
                return Err(invalid(format!("axis {a} is given twice")));
            }
        }
        let dims = x.dims();
        let n = x.len();
        let mut strides = vec![1usize; dims.len()];
        for i in (0..dims.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * dims[i + 1];
        }
        let source = |mut o: usize| {
            let mut s = 0;
            for k in 0..dims.len() {
                let i = o / strides[k];
                o %= strides[k];
                s += if flip[k] { dims[k] - 1 - i } else { i } * strides[k];
            }
            s
        };
        if x.dtype() == DType::String {
            let src = x.as_strings()?;
            outputs.push(Tensor::from_strings(dims, (0..n).map(|o| src[source(o)].clone()).collect())?);
            return Ok(());
        }
        let size = x.dtype().size().ok_or_else(|| invalid(format!("ReverseV2 is not defined for {}", x.dtype())))?;
        crate::check_output(x.dtype(), dims)?;
        let src = x.as_bytes()?;
        outputs.push(Tensor::from_fill(x.dtype(), dims, |out| {
            for (o, chunk) in out.chunks_exact_mut(size).enumerate() {
                let s = source(o);
                chunk.copy_from_slice(&src[s * size..(s + 1) * size]);
            }
        })?);
        Ok(())
    }
}

pub(crate) fn register(r: &mut KernelRegistry) {
    codec::register(r);
    resize::register(r);
    sampled::register(r);
    crop::register(r);
    nms::register(r);
    r.register("AdjustContrastv2", "T", &[DType::Float], |_| Ok(Box::new(AdjustContrast)));
    r.register("ReverseV2", "", &[], |_| Ok(Box::new(Reverse)));
}
