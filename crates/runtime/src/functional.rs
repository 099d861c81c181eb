//! Functions and functional control flow: `PartitionedCall`, `StatefulPartitionedCall`,
//! direct calls of library functions, `If`/`StatelessIf` and `While`/`StatelessWhile`.
//!
//! A `FunctionDef` is instantiated once per call site, at plan time, into an ordinary graph
//! (one `Placeholder` per argument; body references `node:out:i` turned into flat output
//! indices), run by a child session that shares the caller's thread pools.
use std::sync::Arc;

use ferroflow_graph::{Attrs, Graph, Node};
use ferroflow_kernels::{Inputs, KResult, KernelContext, KernelError, OpKernel, Outputs};
use ferroflow_ops::{CallKind, LibraryOps, OpRegistry};
use ferroflow_proto::{attr_value::Value, AttrValue, FunctionDef, FunctionDefLibrary, GraphDef, NodeDef};
use ferroflow_tensor::{DType, Tensor};

use crate::env::RuntimeEnv;
use crate::plan::ExecutionPlan;
use crate::session::Session;
use crate::RuntimeError;

/// The deepest chain of nested function calls a plan instantiates (each level compiles a
/// child plan on the stack).
const MAX_CALL_DEPTH: usize = 64;

fn err(node: &Node, reason: impl Into<String>) -> RuntimeError {
    RuntimeError::Function { node: node.name.clone(), op: node.op.clone(), reason: reason.into() }
}

/// A function instantiated for one call site: its session and compiled plan.
struct Body {
    session: Session,
    plan: Arc<ExecutionPlan>,
}

impl Body {
    /// Runs the body within the caller's step (its cancellation and deadline apply).
    fn run(&self, ctx: &KernelContext, args: &[Tensor]) -> KResult<Vec<Tensor>> {
        self.session.run_plan_in_step(&self.plan, args, ctx.step).map_err(|e| KernelError::Function(Box::new(e)))
    }
}

/// The function named by attr `attr` of `node` (a `func` attr), with its call attrs.
fn func_attr(node: &Node, attr: &str) -> Result<(String, Attrs), RuntimeError> {
    match node.attrs.get(attr).and_then(|v| v.value.as_ref()) {
        Some(Value::Func(f)) => Ok((f.name.clone(), f.attr.clone())),
        _ => Err(err(node, format!("attr '{attr}' must name a function"))),
    }
}

/// The flat output index of output argument `arg` element `i` of body node `n`.
fn flat_output(n: &NodeDef, arg: &str, i: usize, library: &FunctionDefLibrary) -> Result<usize, String> {
    if let Some(def) = OpRegistry::global().get(&n.op) {
        let ranges = def.output_ranges(&n.attr)?;
        let (_, r) = ranges
            .iter()
            .find(|(name, _)| name == arg)
            .ok_or_else(|| format!("op '{}' has no output '{arg}'", n.op))?;
        return if i < r.len() {
            Ok(r.start + i)
        } else {
            Err(format!("output '{arg}:{i}' of '{}' does not exist", n.name))
        };
    }
    let f = (LibraryOps { library }).function(&n.op).ok_or_else(|| format!("unknown op or function '{}'", n.op))?;
    let sig = f.signature.clone().unwrap_or_default();
    let pos = sig
        .output_arg
        .iter()
        .position(|a| a.name == arg)
        .ok_or_else(|| format!("function '{}' has no output '{arg}'", n.op))?;
    if i != 0 {
        return Err(format!("output '{arg}:{i}' of '{}' does not exist", n.name));
    }
    Ok(pos)
}

/// Rewrites a body reference (`arg`, `arg:0`, `node:out:i`) as a graph tensor name.
pub(crate) fn resolve_ref(
    r: &str,
    f: &FunctionDef,
    body: &[NodeDef],
    library: &FunctionDefLibrary,
) -> Result<String, String> {
    let parts: Vec<&str> = r.split(':').collect();
    let sig = f.signature.clone().unwrap_or_default();
    match parts[..] {
        [a] | [a, "0"] if sig.input_arg.iter().any(|x| x.name == a) => Ok(format!("{a}:0")),
        [node, out, i] | [node, out, i, ..] if parts.len() == 3 => {
            let n =
                body.iter().find(|n| n.name == node).ok_or_else(|| format!("reference '{r}' names no body node"))?;
            let i: usize = i.parse().map_err(|_| format!("malformed reference '{r}'"))?;
            Ok(format!("{node}:{}", flat_output(n, out, i, library)?))
        }
        [node, out] => {
            let n =
                body.iter().find(|n| n.name == node).ok_or_else(|| format!("reference '{r}' names no body node"))?;
            Ok(format!("{node}:{}", flat_output(n, out, 0, library)?))
        }
        _ => Err(format!("malformed reference '{r}'")),
    }
}

pub(crate) fn substitute(attrs: &Attrs, call: &Attrs) -> Result<Attrs, String> {
    attrs
        .iter()
        .map(|(k, v)| match &v.value {
            Some(Value::Placeholder(p)) => call
                .get(p)
                .cloned()
                .map(|v| (k.clone(), v))
                .ok_or_else(|| format!("attr '{k}' refers to function attr '{p}', which the call does not set")),
            _ => Ok((k.clone(), v.clone())),
        })
        .collect()
}

/// A function body as a graph, with the tensor names to feed (arguments) and fetch
/// (results), and the nodes to run (control outputs).
struct Instance {
    graph: Graph,
    feeds: Vec<String>,
    fetches: Vec<String>,
    targets: Vec<String>,
}

/// Instantiates function `name` as a graph.
fn instantiate(library: &FunctionDefLibrary, name: &str, call: &Attrs) -> Result<Instance, String> {
    let f = (LibraryOps { library })
        .function(name)
        .ok_or_else(|| format!("the graph's library has no function '{name}'"))?;
    let sig = f.signature.clone().unwrap_or_default();
    let types = ferroflow_ops::function_types(f, call)?;
    let mut nodes = Vec::new();
    let mut feeds = Vec::new();
    for (arg, t) in sig.input_arg.iter().zip(&types.inputs) {
        let mut attr = Attrs::new();
        attr.insert("dtype".into(), AttrValue { value: Some(Value::Type(t.to_tf())) });
        nodes.push(NodeDef { name: arg.name.clone(), op: "Placeholder".into(), attr, ..Default::default() });
        feeds.push(format!("{}:0", arg.name));
    }
    for n in &f.node_def {
        let mut m = n.clone();
        m.attr = substitute(&n.attr, call)?;
        m.input = n
            .input
            .iter()
            .map(|i| if i.starts_with('^') { Ok(i.clone()) } else { resolve_ref(i, f, &f.node_def, library) })
            .collect::<Result<_, _>>()?;
        nodes.push(m);
    }
    let fetches = sig
        .output_arg
        .iter()
        .map(|a| {
            f.ret
                .get(&a.name)
                .ok_or_else(|| format!("output '{}' has no return value", a.name))
                .and_then(|r| resolve_ref(r, f, &f.node_def, library))
        })
        .collect::<Result<_, _>>()?;
    let targets = f.control_ret.values().cloned().collect();
    let def = GraphDef { node: nodes, library: Some(library.clone()), ..Default::default() };
    let graph = ferroflow_ops::import_graph_def(&def).map_err(|e| format!("function '{name}': {e}"))?;
    Ok(Instance { graph, feeds, fetches, targets })
}

fn body(graph: &Graph, node: &Node, attr: &str, env: &RuntimeEnv) -> Result<Body, RuntimeError> {
    let (name, call) = match attr {
        "" => (node.op.clone(), node.attrs.clone()),
        a => func_attr(node, a)?,
    };
    if env.call_stack.contains(&name) {
        return Err(err(
            node,
            format!(
                "function '{name}' calls itself (call chain: {} -> {name}); recursion is not supported",
                env.call_stack.join(" -> ")
            ),
        ));
    }
    if env.call_stack.len() >= MAX_CALL_DEPTH {
        let outer = env.call_stack.first().map_or("", String::as_str);
        return Err(err(
            node,
            format!("function '{name}' is nested {MAX_CALL_DEPTH} calls deep (from '{outer}'); the limit is {MAX_CALL_DEPTH}"),
        ));
    }
    let Instance { graph: g, feeds, fetches, targets } =
        instantiate(&graph.library, &name, &call).map_err(|e| err(node, e))?;
    let mut child_env = env.clone();
    child_env.call_stack.push(name);
    let session = Session::child(g, child_env)?;
    fn refs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }
    let plan = session.plan(&refs(&feeds), &refs(&fetches), &refs(&targets))?;
    Ok(Body { session, plan })
}

/// Creates the kernel of a function-calling node.
pub(crate) fn create(
    graph: &Graph,
    node: &Node,
    kind: CallKind,
    env: &RuntimeEnv,
) -> Result<Box<dyn OpKernel>, RuntimeError> {
    Ok(match kind {
        CallKind::Call => {
            let attr = if node.op.ends_with("PartitionedCall") { "f" } else { "" };
            Box::new(Call(body(graph, node, attr, env)?))
        }
        CallKind::If => Box::new(If {
            then: body(graph, node, "then_branch", env)?,
            otherwise: body(graph, node, "else_branch", env)?,
        }),
        CallKind::While => Box::new(While {
            cond: body(graph, node, "cond", env)?,
            body: body(graph, node, "body", env)?,
            limit: env.options.max_loop_iterations,
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
