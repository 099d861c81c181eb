//! `IteratorV2` (a handle naming an attached iterator), `IteratorToStringHandle` and
//! `IteratorGetNext` (its next element, checked against the node's `output_types`; the end is an out-of-range error).
use ferroflow_tensor::{DType, Tensor};

use crate::resource::handle_key;
use crate::{invalid, Inputs, KResult, KernelContext, KernelError, KernelRegistry, NodeDesc, OpKernel, Outputs};

struct IteratorHandle {
    key: String,
}

impl OpKernel for IteratorHandle {
    fn compute(&self, _: &KernelContext, _: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        outputs.push(Tensor::resource_handle(&self.key));
        Ok(())
    }
}

/// `IteratorToStringHandle`: the iterator's key as a string (what TensorFlow's feedable
/// iterators pass around).
struct StringHandle;

impl OpKernel for StringHandle {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let key = inputs[0].resource_key()?.as_bytes().to_vec();
        outputs.push(Tensor::from_strings(&[], vec![key])?);
        Ok(())
    }
}

struct GetNext {
    node: String,
    types: Vec<DType>,
}

impl OpKernel for GetNext {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let key = inputs[0].resource_key()?.to_string();
        let source = ctx.resources(&self.node)?.iterator(&key).ok_or_else(|| {
            invalid(format!(
                "no dataset is attached to iterator '{key}': attach one first (Dataset::attach_iterator with this shared_name)"
            ))
        })?;
        let element = source
            .get_next()
            .map_err(|e| invalid(format!("iterator '{key}': {e}")))?
            .ok_or_else(|| KernelError::OutOfRange(format!("End of sequence (iterator '{key}')")))?;
        if element.len() != self.types.len() {
            return Err(invalid(format!(
                "iterator '{key}' yields {} components, the node expects {} (output_types)",
                element.len(),
                self.types.len()
            )));
        }
        for (i, (t, want)) in element.iter().zip(&self.types).enumerate() {
            if t.dtype() != *want {
                return Err(invalid(format!(
                    "iterator '{key}' component {i} is {} {:?}, the node expects {want} (output_types)",
                    t.dtype(),
                    t.dims()
                )));
            }
        }
        outputs.extend(element);
        Ok(())
    }
}

fn k_iterator(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    Ok(Box::new(IteratorHandle { key: handle_key(&d.string("container")?, &d.string("shared_name")?, d.name) }))
}

fn k_get_next(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    Ok(Box::new(GetNext { node: d.name.to_string(), types: d.types.outputs.clone() }))
}

pub(crate) fn register(r: &mut KernelRegistry) {
    r.register("IteratorV2", "", &[], k_iterator);
    r.register("IteratorGetNext", "", &[], k_get_next);
    r.register("IteratorToStringHandle", "", &[], |_| Ok(Box::new(StringHandle)));
}
