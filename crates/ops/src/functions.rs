//! Library functions as graphs: a `FunctionDef`'s body turned into an ordinary [`Graph`]
//! ([`function_graph`], what the runtime instantiates and autodiff differentiates), and a
//! graph turned back into a `FunctionDef` ([`function_def`]).
use ferroflow_graph::{AttrError, Attrs, Graph, GraphError, NodeId, Output};
use ferroflow_proto::{attr_value::Value, AttrValue, FunctionDef, FunctionDefLibrary, GraphDef, NodeDef};
use ferroflow_tensor::DType;

use crate::{LibraryOps, OpRegistry};

/// Why a library function cannot be instantiated (or inlined) for a call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FunctionDefError {
    /// The call names a function the library does not have.
    #[error("the graph's library has no function '{0}'")]
    NoSuchFunction(String),
    /// An attr that should name a function does not.
    #[error("attr '{0}' must name a function")]
    NotAFunction(String),
    /// The function calls itself.
    #[error("function '{name}' calls itself (call chain: {chain} -> {name}); recursion is not supported")]
    Recursion {
        /// The function.
        name: String,
        /// The calls that led to it, outermost first.
        chain: String,
    },
    /// Calls nest deeper than the limit.
    #[error("function '{name}' is nested {limit} calls deep (from '{outer}'); the limit is {limit}")]
    TooDeep {
        /// The function.
        name: String,
        /// The outermost function of the chain.
        outer: String,
        /// The limit.
        limit: usize,
    },
    /// The function's arguments have no concrete types for this call.
    #[error(transparent)]
    Types(#[from] AttrError),
    /// The body does not fit together: a reference, a call attr, a result.
    #[error("{0}")]
    Body(String),
    /// The error in function `name`.
    #[error("function '{name}': {source}")]
    In {
        /// The function.
        name: String,
        /// What is wrong in it.
        source: Box<FunctionDefError>,
    },
    /// The body, as a graph, is invalid.
    #[error("function '{name}': {source}")]
    Graph {
        /// The function.
        name: String,
        /// Why.
        source: GraphError,
    },
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
pub fn resolve_ref(
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

/// `attrs` with the placeholders (`$T`) replaced by the call's attrs.
pub fn substitute(attrs: &Attrs, call: &Attrs) -> Result<Attrs, FunctionDefError> {
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
pub struct FunctionGraph {
    /// The body.
    pub graph: Graph,
    /// The arguments' tensor names.
    pub feeds: Vec<String>,
    /// The results' tensor names.
    pub fetches: Vec<String>,
    /// The control outputs' node names.
    pub targets: Vec<String>,
}

/// Function `name` of `library`, with the call's attrs substituted, as a graph (one
/// `Placeholder` per argument; body references `node:out:i` turned into flat output
/// indices).
pub fn function_graph(
    library: &FunctionDefLibrary,
    name: &str,
    call: &Attrs,
) -> Result<FunctionGraph, FunctionDefError> {
    let f =
        (LibraryOps { library }).function(name).ok_or_else(|| FunctionDefError::NoSuchFunction(name.to_string()))?;
    let sig = f.signature.clone().unwrap_or_default();
    let types = crate::function_types(f, call)?;
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
    let graph =
        crate::import_graph_def(&def).map_err(|source| FunctionDefError::Graph { name: name.to_string(), source })?;
    Ok(FunctionGraph { graph, feeds, fetches, targets })
}

/// The graph `g` as a `FunctionDef` named `name`: the `Placeholder` nodes `args` become its
/// arguments, in order and named after the nodes (so their names must be valid argument
/// names: `[a-z][a-z0-9_]*`); `outputs` become its results `out0, out1, ...`; every other
/// node is the body, its references in TensorFlow's `node:output_arg:index` form. The
/// graph's library is not copied: the caller's graph holds the functions the body calls.
pub fn function_def(
    name: &str,
    g: &Graph,
    args: &[NodeId],
    outputs: &[Output],
) -> Result<FunctionDef, FunctionDefError> {
    use ferroflow_proto::{op_def::ArgDef, OpDef};
    let library = LibraryOps { library: &g.library };
    let reference = |o: Output| -> Result<String, FunctionDefError> {
        let n = g.node(o.node);
        if args.contains(&o.node) {
            return Ok(n.name.clone());
        }
        let out_arg = match OpRegistry::global().get(&n.op) {
            Some(def) => {
                let ranges = def.output_ranges(&n.attrs)?;
                ranges
                    .iter()
                    .find(|(_, r)| r.contains(&o.index))
                    .map(|(arg, r)| (arg.clone(), o.index - r.start))
                    .ok_or_else(|| {
                        FunctionDefError::Body(format!("output {} of '{}' is out of range", o.index, n.name))
                    })?
            }
            None => {
                let f = library
                    .function(&n.op)
                    .ok_or_else(|| FunctionDefError::Body(format!("unknown op or function '{}'", n.op)))?;
                let sig = f.signature.clone().unwrap_or_default();
                let arg = sig.output_arg.get(o.index).ok_or_else(|| {
                    FunctionDefError::Body(format!("output {} of '{}' is out of range", o.index, n.name))
                })?;
                (arg.name.clone(), 0)
            }
        };
        Ok(format!("{}:{}:{}", n.name, out_arg.0, out_arg.1))
    };
    let mut node_def = Vec::new();
    for (id, n) in g.nodes().iter().enumerate() {
        if args.contains(&id) {
            continue;
        }
        let mut input: Vec<String> = n.inputs.iter().map(|o| reference(*o)).collect::<Result<_, _>>()?;
        input.extend(n.control_inputs.iter().map(|c| format!("^{}", g.node(*c).name)));
        node_def.push(NodeDef {
            name: n.name.clone(),
            op: n.op.clone(),
            input,
            attr: n.attrs.clone(),
            ..Default::default()
        });
    }
    let arg_def = |name: String, d: DType| ArgDef { name, r#type: d.to_tf(), ..Default::default() };
    let mut input_arg = Vec::new();
    for &a in args {
        let n = g.node(a);
        if n.op != "Placeholder" {
            return Err(FunctionDefError::Body(format!("argument '{}' is a {}, not a Placeholder", n.name, n.op)));
        }
        input_arg.push(arg_def(n.name.clone(), n.types.outputs[0]));
    }
    let output_arg = outputs.iter().enumerate().map(|(i, o)| arg_def(format!("out{i}"), g.output_type(*o))).collect();
    let ret = outputs
        .iter()
        .enumerate()
        .map(|(i, o)| Ok((format!("out{i}"), reference(*o)?)))
        .collect::<Result<_, FunctionDefError>>()?;
    Ok(FunctionDef {
        signature: Some(OpDef { name: name.to_string(), input_arg, output_arg, ..Default::default() }),
        node_def,
        ret,
        ..Default::default()
    })
}
