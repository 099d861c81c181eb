//! How plans reach the functions their nodes call (TensorFlow's `FunctionLibraryRuntime`):
//! plan building asks a [`FunctionLibraryRuntime`] to instantiate a library function for a
//! call site and gets a [`FunctionBody`] to run within the caller's steps. The session
//! implements it (a child session per body, sharing the caller's pools), so the kernels of
//! call ops never reach back into the session. This module also turns a `FunctionDef` into
//! an ordinary graph ([`function_graph`]).
use ferroflow_graph::{Attrs, Graph, Node};
use ferroflow_kernels::{KResult, KernelContext};
use ferroflow_ops::{LibraryOps, OpRegistry};
use ferroflow_proto::{attr_value::Value, AttrValue, FunctionDef, FunctionDefLibrary, GraphDef, NodeDef};
use ferroflow_tensor::Tensor;

use crate::{FunctionDefError, RuntimeError};

/// Instantiates library functions for the call sites of a plan.
pub(crate) trait FunctionLibraryRuntime {
    /// Instantiates function `name` of `library` with the call's attrs, for the call site
    /// `call_site` (named in errors): a body compiled once, run by every call.
    fn instantiate(
        &self,
        call_site: &Node,
        library: &FunctionDefLibrary,
        name: &str,
        call: &Attrs,
    ) -> Result<Box<dyn FunctionBody>, RuntimeError>;

    /// The most iterations one `While` may run (0 = no limit).
    fn max_loop_iterations(&self) -> u64;
}

/// An instantiated function: arguments in, results out, within the caller's step (its
/// cancellation and deadline apply).
pub(crate) trait FunctionBody: Send + Sync {
    /// Runs the body once.
    fn run(&self, ctx: &KernelContext, args: &[Tensor]) -> KResult<Vec<Tensor>>;
}

/// The flat output index of output argument `arg` element `i` of body node `n`.
fn flat_output(n: &NodeDef, arg: &str, i: usize, library: &FunctionDefLibrary) -> Result<usize, FunctionDefError> {
    if let Some(def) = OpRegistry::global().get(&n.op) {
        let ranges = def.output_ranges(&n.attr)?;
        let (_, r) = ranges
            .iter()
            .find(|(name, _)| name == arg)
            .ok_or_else(|| FunctionDefError::Body(format!("op '{}' has no output '{arg}'", n.op)))?;
        return if i < r.len() {
            Ok(r.start + i)
        } else {
            Err(FunctionDefError::Body(format!("output '{arg}:{i}' of '{}' does not exist", n.name)))
        };
    }
    let f = (LibraryOps { library })
        .function(&n.op)
        .ok_or_else(|| FunctionDefError::Body(format!("unknown op or function '{}'", n.op)))?;
    let sig = f.signature.clone().unwrap_or_default();
    let pos = sig
        .output_arg
        .iter()
        .position(|a| a.name == arg)
        .ok_or_else(|| FunctionDefError::Body(format!("function '{}' has no output '{arg}'", n.op)))?;
    if i != 0 {
        return Err(FunctionDefError::Body(format!("output '{arg}:{i}' of '{}' does not exist", n.name)));
    }
    Ok(pos)
}

/// Rewrites a body reference (`arg`, `arg:0`, `node:out:i`) as a graph tensor name.
pub(crate) fn resolve_ref(
    r: &str,
    f: &FunctionDef,
    body: &[NodeDef],
    library: &FunctionDefLibrary,
) -> Result<String, FunctionDefError> {
    let parts: Vec<&str> = r.split(':').collect();
    let sig = f.signature.clone().unwrap_or_default();
    match parts[..] {
        [a] | [a, "0"] if sig.input_arg.iter().any(|x| x.name == a) => Ok(format!("{a}:0")),
        [node, out, i] | [node, out, i, ..] if parts.len() == 3 => {
            let n = body
                .iter()
                .find(|n| n.name == node)
                .ok_or_else(|| FunctionDefError::Body(format!("reference '{r}' names no body node")))?;
            let i: usize = i.parse().map_err(|_| FunctionDefError::Body(format!("malformed reference '{r}'")))?;
            Ok(format!("{node}:{}", flat_output(n, out, i, library)?))
        }
        [node, out] => {
            let n = body
                .iter()
                .find(|n| n.name == node)
                .ok_or_else(|| FunctionDefError::Body(format!("reference '{r}' names no body node")))?;
            Ok(format!("{node}:{}", flat_output(n, out, 0, library)?))
        }
        _ => Err(FunctionDefError::Body(format!("malformed reference '{r}'"))),
    }
}

pub(crate) fn substitute(attrs: &Attrs, call: &Attrs) -> Result<Attrs, FunctionDefError> {
    attrs
        .iter()
        .map(|(k, v)| match &v.value {
            Some(Value::Placeholder(p)) => call.get(p).cloned().map(|v| (k.clone(), v)).ok_or_else(|| {
                FunctionDefError::Body(format!("attr '{k}' refers to function attr '{p}', which the call does not set"))
            }),
            _ => Ok((k.clone(), v.clone())),
        })
        .collect()
}

/// A function body as a graph, with the tensor names to feed (arguments) and fetch
/// (results), and the nodes to run (control outputs).
pub(crate) struct FunctionGraph {
    pub graph: Graph,
    pub feeds: Vec<String>,
    pub fetches: Vec<String>,
    pub targets: Vec<String>,
}

/// Function `name` of `library`, with the call's attrs substituted, as a graph (one
/// `Placeholder` per argument; body references `node:out:i` turned into flat output
/// indices).
pub(crate) fn function_graph(
    library: &FunctionDefLibrary,
    name: &str,
    call: &Attrs,
) -> Result<FunctionGraph, FunctionDefError> {
    let f =
        (LibraryOps { library }).function(name).ok_or_else(|| FunctionDefError::NoSuchFunction(name.to_string()))?;
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
                .ok_or_else(|| FunctionDefError::Body(format!("output '{}' has no return value", a.name)))
                .and_then(|r| resolve_ref(r, f, &f.node_def, library))
        })
        .collect::<Result<_, _>>()?;
    let targets = f.control_ret.values().cloned().collect();
    let def = GraphDef { node: nodes, library: Some(library.clone()), ..Default::default() };
    let graph = ferroflow_ops::import_graph_def(&def)
        .map_err(|source| FunctionDefError::Graph { name: name.to_string(), source })?;
    Ok(FunctionGraph { graph, feeds, fetches, targets })
}
