//! Functions and functional control flow: `PartitionedCall`, `StatefulPartitionedCall`,
//! direct calls of library functions, `If`/`StatelessIf` and `While`/`StatelessWhile`.
//!
//! Each call site's function is instantiated once, at plan time, through the plan's
//! [`FunctionLibraryRuntime`]; these kernels run the bodies it hands back.
use ferroflow_graph::{Attrs, Graph, Node};
use ferroflow_kernels::{Inputs, KResult, KernelContext, KernelError, OpKernel, Outputs};
use ferroflow_ops::CallKind;
use ferroflow_proto::attr_value::Value;
use ferroflow_tensor::{DType, Tensor};

use crate::function_library::{FunctionBody, FunctionLibraryRuntime};
use crate::{FunctionDefError, RuntimeError};

fn err(node: &Node, source: FunctionDefError) -> RuntimeError {
    RuntimeError::Function { node: node.name.clone(), op: node.op.clone(), source: Box::new(source) }
}

type Body = Box<dyn FunctionBody>;

/// The function named by attr `attr` of `node` (a `func` attr), with its call attrs.
fn func_attr(node: &Node, attr: &str) -> Result<(String, Attrs), RuntimeError> {
    match node.attrs.get(attr).and_then(|v| v.value.as_ref()) {
        Some(Value::Func(f)) => Ok((f.name.clone(), f.attr.clone())),
        _ => Err(err(node, FunctionDefError::NotAFunction(attr.to_string()))),
    }
}

/// The body of the function that attr `attr` of `node` names (`""`: the node's op itself
/// is the function).
fn body(graph: &Graph, node: &Node, attr: &str, functions: &dyn FunctionLibraryRuntime) -> Result<Body, RuntimeError> {
    let (name, call) = match attr {
        "" => (node.op.clone(), node.attrs.clone()),
        a => func_attr(node, a)?,
    };
    functions.instantiate(node, &graph.library, &name, &call)
}

/// Creates the kernel of a function-calling node.
pub(crate) fn create(
    graph: &Graph,
    node: &Node,
    kind: CallKind,
    functions: &dyn FunctionLibraryRuntime,
) -> Result<Box<dyn OpKernel>, RuntimeError> {
    Ok(match kind {
        CallKind::Call => {
            let attr = if node.op.ends_with("PartitionedCall") { "f" } else { "" };
            Box::new(Call(body(graph, node, attr, functions)?))
        }
        CallKind::If => Box::new(If {
            then: body(graph, node, "then_branch", functions)?,
            otherwise: body(graph, node, "else_branch", functions)?,
        }),
        CallKind::While => Box::new(While {
            cond: body(graph, node, "cond", functions)?,
            body: body(graph, node, "body", functions)?,
            limit: functions.max_loop_iterations(),
        }),
    })
}

struct Call(Body);
impl OpKernel for Call {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        outputs.extend(self.0.run(ctx, inputs)?);
        Ok(())
    }
}

/// TensorFlow's truth value of a predicate tensor: a scalar bool or number is itself;
/// a string scalar is true when non-empty; any other tensor is true when non-empty.
fn truth(t: &Tensor) -> KResult<bool> {
    if t.rank() != 0 {
        return Ok(!t.is_empty());
    }
    Ok(match t.dtype() {
        DType::Bool => t.scalar_value::<bool>()?,
        DType::Float => t.scalar_value::<f32>()? != 0.0,
        DType::Double => t.scalar_value::<f64>()? != 0.0,
        DType::Int32 => t.scalar_value::<i32>()? != 0,
        DType::Int64 => t.scalar_value::<i64>()? != 0,
        DType::String => !t.as_strings()?[0].is_empty(),
        d => t
            .as_bytes()
            .map_err(|_| KernelError::InvalidArgument(format!("a {d} predicate has no truth value")))?
            .iter()
            .any(|&b| b != 0),
    })
}

struct If {
    then: Body,
    otherwise: Body,
}
impl OpKernel for If {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let cond = truth(&inputs[0])?;
        let branch = if cond { &self.then } else { &self.otherwise };
        outputs.extend(branch.run(ctx, &inputs[1..])?);
        Ok(())
    }
}

struct While {
    cond: Body,
    body: Body,
    limit: u64,
}
impl OpKernel for While {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let mut vars: Vec<Tensor> = std::mem::take(inputs);
        let mut iterations = 0u64;
        loop {
            if let Some(step) = ctx.step {
                step.check()?;
            }
            let c = self.cond.run(ctx, &vars)?;
            let pred =
                c.first().ok_or_else(|| KernelError::InvalidArgument("the loop condition returned nothing".into()))?;
            if !truth(pred)? {
                break;
            }
            if self.limit > 0 && iterations >= self.limit {
                return Err(KernelError::InvalidArgument(format!(
                    "the loop ran {iterations} iterations, the limit set by max_loop_iterations"
                )));
            }
            vars = self.body.run(ctx, &vars)?;
            iterations += 1;
        }
        outputs.extend(vars);
        Ok(())
    }
}
