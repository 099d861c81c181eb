//! Image kernels: resizing (`resize`), files and image codecs (`codec`; its decoders are
//! public for the data pipeline and the fuzz targets), and the augmentation op
//! `AdjustContrastv2`. Flips are `ReverseV2`, an indexing kernel.
mod codec;
mod resize;

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

pub(crate) fn register(r: &mut KernelRegistry) {
    codec::register(r);
    resize::register(r);
    r.register("AdjustContrastv2", "T", &[DType::Float], |_| Ok(Box::new(AdjustContrast)));
}
