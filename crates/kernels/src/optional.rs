//! TensorFlow's `Optional` ops on `variant` tensors ([`Tensor::optional`]): TF2's `cond`
//! returns its branches' intermediates wrapped in Optionals (`OptionalFromValue` in the taken
//! branch, `OptionalNone` in the other) for its gradient, which unwraps them with
//! `OptionalGetValue`.
use ferroflow_tensor::{DType, Tensor};

use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

struct FromValue;
impl OpKernel for FromValue {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        outputs.push(Tensor::optional(Some(std::mem::take(inputs))));
        Ok(())
    }
}

struct NoneValue;
impl OpKernel for NoneValue {
    fn compute(&self, _: &KernelContext, _: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        outputs.push(Tensor::optional(None));
        Ok(())
    }
}

struct GetValue {
    node: String,
    types: Vec<DType>,
}
impl OpKernel for GetValue {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let node = &self.node;
        let o = inputs[0].as_optional().map_err(|e| invalid(format!("node '{node}': {e}")))?;
        let Some(values) = o else {
            return Err(invalid(format!("node '{node}': the optional has no value")));
        };
        let got: Vec<DType> = values.iter().map(Tensor::dtype).collect();
        if got != self.types {
            return Err(invalid(format!("node '{node}': the optional holds {got:?}, expected {:?}", self.types)));
        }
        outputs.extend(values.iter().cloned());
        Ok(())
    }
}

fn k_from_value(_: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    Ok(Box::new(FromValue))
}
fn k_none(_: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    Ok(Box::new(NoneValue))
}
fn k_get_value(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    Ok(Box::new(GetValue { node: d.name.to_string(), types: d.types.outputs.clone() }))
}

pub(crate) fn register(r: &mut KernelRegistry) {
    r.register("OptionalFromValue", "", &[], k_from_value);
    r.register("OptionalNone", "", &[], k_none);
    r.register("OptionalGetValue", "", &[], k_get_value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferroflow_graph::Attrs;
    use ferroflow_proto::{attr_value::ListValue, attr_value::Value, AttrValue};

    fn types(name: &str, t: &[DType]) -> Attrs {
        let mut a = Attrs::new();
        let list = ListValue { r#type: t.iter().map(|d| d.to_tf()).collect(), ..Default::default() };
        a.insert(name.into(), AttrValue { value: Some(Value::List(Box::new(list))) });
        a
    }

    #[test]
    fn optionals_wrap_and_unwrap_and_an_empty_one_is_an_error() {
        let ctx = KernelContext { intra_op: None, resources: None, step: None };
        let x = Tensor::from_vec(&[2], vec![1.0f32, 2.0]).unwrap();
        let n = Tensor::scalar(3i64);
        let some = crate::run_op(
            "OptionalFromValue",
            &types("Toutput_types", &[DType::Float, DType::Int64]),
            vec![x.clone(), n.clone()],
            &ctx,
        )
        .unwrap();
        let mut get = types("output_types", &[DType::Float, DType::Int64]);
        let shapes = ListValue { shape: vec![Default::default(), Default::default()], ..Default::default() };
        get.insert("output_shapes".into(), AttrValue { value: Some(Value::List(Box::new(shapes))) });
        let back = crate::run_op("OptionalGetValue", &get, some, &ctx).unwrap();
        assert_eq!(back, vec![x, n]);
        let none = crate::run_op("OptionalNone", &Attrs::new(), vec![], &ctx).unwrap();
        let e = crate::run_op("OptionalGetValue", &get, none, &ctx).unwrap_err().to_string();
        assert!(e.contains("has no value"), "{e}");
    }
}
