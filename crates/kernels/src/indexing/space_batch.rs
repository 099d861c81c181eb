//! `SpaceToBatchND` and `BatchToSpaceND`, TensorFlow's semantics: the blocked dimensions of
//! the "space" tensor (padded, or cropped) are split into `block` interleaved grids, each
//! grid a batch entry of the "batch" tensor (block offsets outermost). Both ops walk the
//! batch tensor in order and move whole runs of the trailing (unblocked) dimensions.
use ferroflow_tensor::{DType, Tensor};

use crate::reduce::axis_values;
use crate::{check_output, invalid, Inputs, KResult, KernelContext, KernelRegistry, OpKernel, Outputs};

struct SpaceBatch {
    to_batch: bool,
}

impl OpKernel for SpaceBatch {
    fn compute(&self, _ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = &inputs[0];
        let block = axis_values(&inputs[1])?;
        let pads = axis_values(&inputs[2])?;
        let m = block.len();
        let what = if self.to_batch { "paddings" } else { "crops" };
        if inputs[1].rank() != 1 || inputs[2].dims() != [m, 2] {
            return Err(invalid(format!(
                "block_shape must be a vector and {what} a [{m}, 2] matrix, got shapes {:?} and {:?}",
                inputs[1].dims(),
                inputs[2].dims()
            )));
        }
        let xd = x.dims().to_vec();
        if xd.len() < m + 1 {
            return Err(invalid(format!("input of shape {xd:?} has fewer than {} dimensions", m + 1)));
        }
        if block.iter().any(|&b| b < 1) || pads.iter().any(|&p| p < 0) {
            return Err(invalid(format!("block_shape {block:?} must be positive and {what} {pads:?} non-negative")));
        }
        let size =
            x.dtype().size().ok_or_else(|| invalid(format!("{} tensors cannot be moved by block", x.dtype())))?;
        let block: Vec<usize> = block.iter().map(|&b| b as usize).collect();
        let pads: Vec<usize> = pads.iter().map(|&p| p as usize).collect();
        let prod = block.iter().try_fold(1usize, |a, &b| a.checked_mul(b)).ok_or_else(|| invalid("block too large"))?;
        // The batch tensor's grid (`grid[i]` per blocked dimension) and the space tensor's
        // dimensions, from whichever of the two is the input.
        let (mut grid, mut space) = (vec![0; m], xd.clone());
        let batch;
        if self.to_batch {
            batch = xd[0];
            for i in 0..m {
                let padded = xd[1 + i] + pads[2 * i] + pads[2 * i + 1];
                if !padded.is_multiple_of(block[i]) {
                    return Err(invalid(format!(
                        "padded dimension {} of size {padded} is not divisible by block {}",
                        1 + i,
                        block[i]
                    )));
                }
                grid[i] = padded / block[i];
            }
        } else {
            if !xd[0].is_multiple_of(prod) {
                return Err(invalid(format!("batch {} is not divisible by the blocks' product {prod}", xd[0])));
            }
            batch = xd[0] / prod;
            space[0] = batch;
            for i in 0..m {
                grid[i] = xd[1 + i];
                let full = xd[1 + i] * block[i];
                let crop = pads[2 * i] + pads[2 * i + 1];
                if crop > full {
                    return Err(invalid(format!("crops {crop} exceed dimension {} of size {full}", 1 + i)));
                }
                space[1 + i] = full - crop;
            }
        }
        let run = xd[1 + m..].iter().product::<usize>() * size;
        let out_dims = if self.to_batch {
            let mut d = vec![batch * prod];
            d.extend(&grid);
            d.extend(&xd[1 + m..]);
            d
        } else {
            space.clone()
        };
        check_output(x.dtype(), &out_dims)?;
        let src = x.as_bytes()?;
        let mut out = vec![0u8; out_dims.iter().product::<usize>() * size];
        let cells: usize = grid.iter().product();
        // Strides (in runs) of the space tensor's blocked dimensions.
        let mut space_stride = vec![1usize; m];
        for i in (0..m.saturating_sub(1)).rev() {
            space_stride[i] = space_stride[i + 1] * space[2 + i];
        }
        let space_image: usize = space[1..=m].iter().product();
        let mut batch_run = 0;
        for offset in 0..prod {
            // Block offsets, the first blocked dimension outermost.
            let mut o = vec![0; m];
            let mut r = offset;
            for i in (0..m).rev() {
                o[i] = r % block[i];
                r /= block[i];
            }
            for b in 0..batch {
                for cell in 0..cells {
                    let (mut r, mut pos, mut inside) = (cell, 0, true);
                    for i in (0..m).rev() {
                        let t = r % grid[i];
                        r /= grid[i];
                        match (t * block[i] + o[i]).checked_sub(pads[2 * i]).filter(|&p| p < space[1 + i]) {
                            Some(p) => pos += p * space_stride[i],
                            None => inside = false,
                        }
                    }
                    if inside {
                        let s = (b * space_image + pos) * run;
                        let t = batch_run * run;
                        if self.to_batch {
                            out[t..t + run].copy_from_slice(&src[s..s + run]);
                        } else {
                            out[s..s + run].copy_from_slice(&src[t..t + run]);
                        }
                    }
                    batch_run += 1;
                }
            }
        }
        outputs.push(Tensor::from_bytes(x.dtype(), &out_dims, &out)?);
        Ok(())
    }
}

pub(super) fn register(r: &mut KernelRegistry) {
    const T: &[DType] = &[
        DType::Float,
        DType::Double,
        DType::Half,
        DType::BFloat16,
        DType::Int8,
        DType::UInt8,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::Bool,
    ];
    r.register("SpaceToBatchND", "T", T, |_| Ok(Box::new(SpaceBatch { to_batch: true })));
    r.register("BatchToSpaceND", "T", T, |_| Ok(Box::new(SpaceBatch { to_batch: false })));
}
