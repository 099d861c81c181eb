//! Checkpoint I/O kernels: TensorFlow's `SaveV2` and `RestoreV2`, reading and writing a V2
//! tensor bundle (`ferroflow-checkpoint`) at the prefix they are given.
use std::path::Path;

use ferroflow_checkpoint::{write_bundle, BundleReader};
use ferroflow_tensor::{DType, Tensor};

use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

/// The three string inputs every V2 saver op starts with: the prefix (a scalar), the tensor
/// names and the slice specs (one per tensor; only `""`, the whole tensor, is supported).
fn names_and_prefix(inputs: &Inputs, n: usize) -> KResult<(String, Vec<String>)> {
    let text =
        |b: &[u8], what: &str| String::from_utf8(b.to_vec()).map_err(|_| invalid(format!("{what} is not UTF-8")));
    let prefix = inputs[0].as_strings()?;
    if prefix.len() != 1 {
        return Err(invalid(format!("prefix must be a scalar, got shape {:?}", inputs[0].dims())));
    }
    let prefix = text(&prefix[0], "the prefix")?;
    if prefix.is_empty() {
        return Err(invalid("the checkpoint prefix is empty"));
    }
    let names = inputs[1].as_strings()?;
    let slices = inputs[2].as_strings()?;
    if names.len() != n || slices.len() != n {
        return Err(invalid(format!("{n} tensors but {} names and {} shape_and_slices", names.len(), slices.len())));
    }
    if let Some((i, s)) = slices.iter().enumerate().find(|(_, s)| !s.is_empty()) {
        return Err(invalid(format!(
            "tensor '{}' has slice spec '{}'; partitioned variables are not supported",
            String::from_utf8_lossy(&names[i]),
            String::from_utf8_lossy(s)
        )));
    }
    let names = names.iter().map(|b| text(b, "a tensor name")).collect::<KResult<Vec<_>>>()?;
    Ok((prefix, names))
}

struct SaveV2;
impl OpKernel for SaveV2 {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, _: &mut Outputs) -> KResult<()> {
        let n = inputs.len() - 3;
        let (prefix, names) = names_and_prefix(inputs, n)?;
        let tensors: Vec<(String, Tensor)> = names.into_iter().zip(inputs.drain(3..)).collect();
        Ok(write_bundle(Path::new(&prefix), &tensors)?)
    }
}

struct RestoreV2 {
    dtypes: Vec<DType>,
}
impl OpKernel for RestoreV2 {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        use rayon::prelude::*;
        let (prefix, names) = names_and_prefix(inputs, self.dtypes.len())?;
        let err = |e: ferroflow_checkpoint::CheckpointError| invalid(e.to_string());
        let reader = BundleReader::open(Path::new(&prefix)).map_err(err)?;
        // Tensors are read (and their CRCs checked) in parallel on the intra-op pool.
        let read = |(name, &dtype): (&String, &DType)| -> KResult<Tensor> {
            let t = reader.read(name).map_err(err)?;
            if t.dtype() != dtype {
                return Err(invalid(format!(
                    "tensor '{name}' is {} in checkpoint '{prefix}', but the graph expects {dtype}",
                    t.dtype()
                )));
            }
            Ok(t)
        };
        let tensors: Vec<KResult<Tensor>> = ctx.install(|| names.par_iter().zip(&self.dtypes).map(read).collect());
        for t in tensors {
            outputs.push(t?);
        }
        Ok(())
    }
}

fn k_save(_: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    Ok(Box::new(SaveV2))
}
fn k_restore(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    Ok(Box::new(RestoreV2 { dtypes: d.types.outputs.clone() }))
}

pub(crate) fn register(r: &mut KernelRegistry) {
    r.register("SaveV2", "", &[], k_save);
    r.register("RestoreV2", "", &[], k_restore);
}
