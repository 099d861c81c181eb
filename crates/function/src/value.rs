//! [`Value`]: a tensor in a function's body, concrete when the body runs eagerly and a graph
//! output while it is traced; [`Traced`], the op target over values (every op of the one
//! surface, [`RawOps`](ferroflow_ops::RawOps), runs at once on concrete values and is added
//! to the innermost trace otherwise).
use ferroflow_graph::{Attrs, Output};
use ferroflow_ops::{Applied, Arg, ArgDTypes, Input, OpCall, OpRegistry, OpTarget};
use ferroflow_proto::AttrValue;
use ferroflow_tensor::{DType, Tensor};

use crate::context::{current, output_in, TRACING};
use crate::eager;
use crate::error::{FunctionError, OpError};

/// A tensor in a function's body: concrete when the body runs eagerly, a graph output while
/// it is traced.
#[derive(Clone, Debug)]
pub enum Value {
    /// A concrete tensor.
    Eager(Tensor),
    /// An output of a graph being traced, with its dtype and the trace's id.
    Symbolic(Output, DType, u64),
}

impl From<Tensor> for Value {
    fn from(t: Tensor) -> Value {
        Value::Eager(t)
    }
}

impl Value {
    /// A scalar constant.
    pub fn scalar<T: ferroflow_tensor::Element>(v: T) -> Value {
        Value::Eager(Tensor::scalar(v))
    }
    /// The dtype.
    pub fn dtype(&self) -> DType {
        match self {
            Value::Eager(t) => t.dtype(),
            Value::Symbolic(_, d, _) => *d,
        }
    }
    /// The concrete tensor, when eager.
    pub fn tensor(&self) -> Option<&Tensor> {
        match self {
            Value::Eager(t) => Some(t),
            Value::Symbolic(..) => None,
        }
    }
}

/// Applies `op` to `inputs` (each one tensor; lists with [`apply_lists`]): eagerly when all
/// are concrete and nothing is being traced, otherwise as a node of the traced graph (concrete
/// inputs become constants of it).
pub fn apply(op: &str, inputs: &[&Value], attrs: &[(&str, AttrValue)]) -> Result<Vec<Value>, FunctionError> {
    if TRACING.with(|t| t.borrow().is_empty()) {
        // Eager: straight to the eager call, borrowing the tensors.
        let mut call = eager::op(op);
        for v in inputs {
            match v {
                Value::Eager(t) => call = call.input(t),
                Value::Symbolic(..) => {
                    return Err(FunctionError::usage(op, "a symbolic value was used outside the trace that made it"))
                }
            }
        }
        for (k, v) in attrs {
            call = call.attr(k, v.clone());
        }
        return Ok(call.run()?.into_iter().map(Value::Eager).collect());
    }
    let args: Vec<Vec<&Value>> = inputs.iter().map(|v| vec![*v]).collect();
    apply_args(op, &args, &vec![false; inputs.len()], attrs)
}

/// [`apply`] where `lists[i]` says that argument `i` is a list (`ConcatV2`'s values).
pub fn apply_lists(
    op: &str,
    args: &[Vec<&Value>],
    lists: &[bool],
    attrs: &[(&str, AttrValue)],
) -> Result<Vec<Value>, FunctionError> {
    apply_args(op, args, lists, attrs)
}

fn apply_args(
    op: &str,
    args: &[Vec<&Value>],
    lists: &[bool],
    attrs: &[(&str, AttrValue)],
) -> Result<Vec<Value>, FunctionError> {
    let scope = current();
    let all_eager = args.iter().flatten().all(|v| matches!(v, Value::Eager(_)));
    let Some((scope, id)) = scope else {
        if !all_eager {
            return Err(FunctionError::usage(op, "a symbolic value was used outside the trace that made it"));
        }
        let tensors: Vec<Vec<Tensor>> = args
            .iter()
            .map(|a| a.iter().map(|v| if let Value::Eager(t) = v { t.clone() } else { unreachable!() }).collect())
            .collect();
        let mut call = eager::op(op);
        for (a, &list) in tensors.iter().zip(lists) {
            call = if list { call.inputs(a) } else { call.input(&a[0]) };
        }
        for (k, v) in attrs {
            call = call.attr(k, v.clone());
        }
        return Ok(call.run()?.into_iter().map(Value::Eager).collect());
    };
    let def = OpRegistry::global().get(op).ok_or_else(|| FunctionError::traced(op, OpError::UnknownOp))?;
    let mut flat = Vec::new();
    let mut dtypes = Vec::with_capacity(args.len());
    for (a, &list) in args.iter().zip(lists) {
        let mut ds = Vec::with_capacity(a.len());
        for v in a {
            let o = output_in(&scope, id, v, op)?;
            ds.push(scope.dtype(o));
            flat.push(o);
        }
        dtypes.push(if list { ArgDTypes::List(ds) } else { ArgDTypes::One(ds[0]) });
    }
    let mut full: Attrs = attrs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    def.infer_type_attrs(&dtypes, &mut full).map_err(|e| FunctionError::traced(op, e))?;
    let node = scope.add_op(op, op, &flat, &[], full).map_err(|e| FunctionError::traced(op, e))?;
    let outputs = scope.with_graph(|g| g.node(node).types.outputs.clone());
    Ok(outputs.into_iter().enumerate().map(|(index, d)| Value::Symbolic(Output { node, index }, d, id)).collect())
}

pub(crate) fn apply1(op: &str, inputs: &[&Value], attrs: &[(&str, AttrValue)]) -> Result<Value, FunctionError> {
    let mut out = apply(op, inputs, attrs)?;
    if out.len() != 1 {
        return Err(Traced.output_count_error(op, out.len()));
    }
    Ok(out.remove(0))
}

/// The op target over [`Value`]s (see the module docs): `Traced.floor_mod(&i, 2)`,
/// `Traced.mat_mul(&x, &w)`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Traced;

impl OpTarget for Traced {
    type Tensor = Value;
    type Node = ();
    type Error = FunctionError;

    fn apply(&self, call: OpCall<'_, Value>) -> Result<Applied<Value, ()>, FunctionError> {
        if TRACING.with(|t| t.borrow().is_empty()) {
            // Eager: the tensors move straight to the eager call.
            let mut inputs = smallvec::SmallVec::new();
            for a in call.inputs {
                inputs.push(match a {
                    Arg::One(Value::Eager(t)) => Arg::One(t),
                    Arg::List(vs) => {
                        Arg::List(vs.into_iter().map(|v| eager_tensor(v, call.op)).collect::<Result<_, _>>()?)
                    }
                    Arg::One(Value::Symbolic(..)) => return Err(outside_trace(call.op)),
                });
            }
            let outputs =
                crate::eager::Eager.apply(OpCall { op: call.op, name: call.name, inputs, attrs: call.attrs })?.outputs;
            return Ok(Applied { outputs: outputs.into_iter().map(Value::Eager).collect(), node: () });
        }
        let lists: Vec<bool> = call.inputs.iter().map(|a| matches!(a, Arg::List(_))).collect();
        let args: Vec<Vec<&Value>> = call
            .inputs
            .iter()
            .map(|a| match a {
                Arg::One(v) => vec![v],
                Arg::List(vs) => vs.iter().collect(),
            })
            .collect();
        let attrs: Vec<(&str, AttrValue)> = call.attrs.into_iter().collect();
        Ok(Applied { outputs: apply_args(call.op, &args, &lists, &attrs)?, node: () })
    }

    fn constant(&self, value: &Tensor) -> Result<Value, FunctionError> {
        Ok(Value::Eager(value.clone()))
    }

    fn output_count_error(&self, op: &str, got: usize) -> FunctionError {
        FunctionError::usage(op, format!("has {got} outputs"))
    }
}

/// The error of a symbolic value used where nothing is being traced.
fn outside_trace(op: &str) -> FunctionError {
    FunctionError::usage(op, "a symbolic value was used outside the trace that made it")
}

/// A concrete value's tensor.
fn eager_tensor(v: Value, op: &str) -> Result<Tensor, FunctionError> {
    match v {
        Value::Eager(t) => Ok(t),
        Value::Symbolic(..) => Err(outside_trace(op)),
    }
}

impl Input<Traced> for Value {
    fn into_input(self, _: &Traced) -> Result<Value, FunctionError> {
        Ok(self)
    }
}

impl Input<Traced> for &Value {
    fn into_input(self, _: &Traced) -> Result<Value, FunctionError> {
        Ok(self.clone())
    }
}

impl Input<Traced> for Tensor {
    fn into_input(self, _: &Traced) -> Result<Value, FunctionError> {
        Ok(Value::Eager(self))
    }
}

impl Input<Traced> for &Tensor {
    fn into_input(self, _: &Traced) -> Result<Value, FunctionError> {
        Ok(Value::Eager(self.clone()))
    }
}
