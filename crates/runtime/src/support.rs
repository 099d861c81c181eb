//! Which ops of a graph ferroflow can run: a node's op must be in the registry and, unless the
//! executor, the function runtime or the rendezvous runs it, have a CPU kernel. A graph's
//! library functions are looked into as well (a SavedModel's main graph is a few
//! `StatefulPartitionedCall`s; its ops live in the functions), so every missing op is named
//! before anything runs.
use ferroflow_proto::attr::AttrMap;
use std::collections::{BTreeMap, BTreeSet};

use ferroflow_kernels::KernelRegistry;

use crate::FunctionDefError;
use ferroflow_ops::{facts::Execution, OpRegistry};
use ferroflow_proto::{attr_value::Value, FunctionDef, GraphDef, NodeDef};

/// An op the graph uses that ferroflow cannot run, and where it is used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingOp {
    /// The op type (`BesselI0e`).
    pub op: String,
    /// Whether the registry knows the op at all (true: defined, but without a CPU kernel).
    pub defined: bool,
    /// Up to three places: `node 'x'` or `function 'f', node 'y'`.
    pub places: Vec<String>,
    /// How many nodes use it in all.
    pub uses: usize,
}

impl std::fmt::Display for MissingOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}", self.op, self.places.join("; "))?;
        if self.uses > self.places.len() {
            write!(f, "; {} more", self.uses - self.places.len())?;
        }
        write!(f, ")")
    }
}

/// True when ferroflow runs `op`: a registered op with a kernel, or one the executor,
/// the function runtime or the rendezvous runs (a TensorFlow 1 ref op runs as its
/// resource form).
pub fn can_run(op: &str) -> bool {
    let reg = OpRegistry::global();
    let op = reg.ref_form(op).map_or(op, |(resource, _)| resource);
    match reg.get(op) {
        None => false,
        Some(def) => match def.facts.execution {
            Execution::Kernel => KernelRegistry::global().has_op(op),
            _ => true,
        },
    }
}

/// Every op ferroflow cannot run among the nodes of `def` (except those named in `skip`) and
/// the library functions they reach (called as ops, or named by a function attr such as a
/// `While`'s body), sorted by op name.
pub fn missing_ops(def: &GraphDef, skip: &[&str]) -> Vec<MissingOp> {
    op_uses(def, skip)
        .into_iter()
        .filter(|u| !u.runs)
        .map(|u| MissingOp { op: u.op, defined: u.defined, places: u.places, uses: u.uses })
        .collect()
}

/// One op type a graph uses: how often, where first, and whether ferroflow runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpUse {
    /// The op type.
    pub op: String,
    /// How many nodes use it, in the graph and the library functions it reaches.
    pub uses: usize,
    /// Up to three places: `node 'x'` or `function 'f', node 'y'`.
    pub places: Vec<String>,
    /// Whether the registry defines it.
    pub defined: bool,
    /// Whether ferroflow runs it ([`can_run`]).
    pub runs: bool,
}

/// Every op type among the nodes of `def` (except those named in `skip`) and the library
/// functions they reach, sorted by op name; function calls by name count as the function's
/// ops, not as an op of their own.
pub fn op_uses(def: &GraphDef, skip: &[&str]) -> Vec<OpUse> {
    let mut w = Walk {
        library: def
            .library
            .iter()
            .flat_map(|l| &l.function)
            .filter_map(|f| Some((f.signature.as_ref()?.name.as_str(), f)))
            .collect(),
        found: BTreeMap::new(),
        queue: Vec::new(),
    };
    for n in def.node.iter().filter(|n| !skip.contains(&n.name.as_str())) {
        w.visit(n, None);
    }
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    while let Some(f) = w.queue.pop() {
        if seen.insert(f) {
            for n in &w.library[f].node_def {
                w.visit(n, Some(f));
            }
        }
    }
    w.found.into_values().collect()
}

struct Walk<'a> {
    library: BTreeMap<&'a str, &'a FunctionDef>,
    found: BTreeMap<String, OpUse>,
    queue: Vec<&'a str>,
}

impl<'a> Walk<'a> {
    fn function(&self, name: &str) -> Option<&'a str> {
        self.library.get_key_value(name).map(|(k, _)| *k)
    }

    fn visit(&mut self, n: &'a NodeDef, function: Option<&str>) {
        if let Some(f) = self.function(&n.op) {
            self.queue.push(f);
        } else {
            let m = self.found.entry(n.op.clone()).or_insert_with(|| OpUse {
                op: n.op.clone(),
                uses: 0,
                places: Vec::new(),
                defined: OpRegistry::global().get(&n.op).is_some(),
                runs: can_run(&n.op),
            });
            m.uses += 1;
            if m.places.len() < 3 {
                m.places.push(match function {
                    Some(f) => format!("function '{f}', node '{}'", n.name),
                    None => format!("node '{}'", n.name),
                });
            }
        }
        for f in function_attrs(n) {
            self.queue.extend(self.function(f));
        }
    }
}

/// The functions node `n` names in its attrs (a call's `f`, a `While`'s `cond` and `body`, an
/// `If`'s branches, lists of functions).
pub fn function_attrs(n: &NodeDef) -> impl Iterator<Item = &str> {
    n.attr.values().flat_map(|v| {
        let names: Vec<&str> = match &v.value {
            Some(Value::Func(f)) => vec![f.name.as_str()],
            Some(Value::List(l)) => l.func.iter().map(|f| f.name.as_str()).collect(),
            _ => vec![],
        };
        names
    })
}

/// The deepest chain of nested calls [`inline_calls`] expands.
const MAX_INLINE_DEPTH: usize = 64;

/// `def` with every function call (`PartitionedCall`, `StatefulPartitionedCall`, a library
/// function used as an op) replaced by the function's body, recursively: body node `n` of call
/// `c` becomes `c/n`, the arguments are the call's inputs, the call's control inputs go to the
/// body nodes that have no inputs, and an `IdentityN` named `c` (a `NoOp` for a function
/// without results) returns the results, waiting for the function's control outputs — so
/// every `c:i` and `^c` of the graph keeps its meaning. `While`/`If` bodies stay functions.
pub fn inline_calls(def: &GraphDef) -> Result<GraphDef, FunctionDefError> {
    use ferroflow_ops::LibraryOps;
    let library = def.library.clone().unwrap_or_default();
    let lib = LibraryOps { library: &library };
    let mut out = def.clone();
    for depth in 0.. {
        let is_call = |n: &NodeDef| {
            n.op == "PartitionedCall" || n.op == "StatefulPartitionedCall" || lib.function(&n.op).is_some()
        };
        if !out.node.iter().any(is_call) {
            break;
        }
        if depth == MAX_INLINE_DEPTH {
            return Err(FunctionDefError::Body(format!("function calls nest more than {MAX_INLINE_DEPTH} deep")));
        }
        let mut nodes = Vec::with_capacity(out.node.len());
        for c in std::mem::take(&mut out.node) {
            if !is_call(&c) {
                nodes.push(c);
                continue;
            }
            let (fname, call_attrs) = if c.op.ends_with("PartitionedCall") {
                match c.attr.attr_value("f") {
                    Some(Value::Func(f)) => (f.name.clone(), f.attr.clone()),
                    _ => {
                        return Err(FunctionDefError::Body(format!("node '{}': attr 'f' must name a function", c.name)))
                    }
                }
            } else {
                (c.op.clone(), c.attr.clone())
            };
            let f = lib
                .function(&fname)
                .ok_or_else(|| FunctionDefError::Body(format!("node '{}' calls unknown function '{fname}'", c.name)))?;
            nodes.extend(inline_one(&c, f, &call_attrs, &library)?);
        }
        out.node = nodes;
    }
    Ok(out)
}

/// An error in the body of function `name`.
fn in_function(name: &str, e: FunctionDefError) -> FunctionDefError {
    FunctionDefError::In { name: name.to_string(), source: Box::new(e) }
}

fn inline_one(
    c: &NodeDef,
    f: &FunctionDef,
    call_attrs: &BTreeMap<String, ferroflow_proto::AttrValue>,
    library: &ferroflow_proto::FunctionDefLibrary,
) -> Result<Vec<NodeDef>, FunctionDefError> {
    use ferroflow_proto::AttrValue;
    let sig = f.signature.clone().unwrap_or_default();
    let fname = sig.name.clone();
    let (data, control): (Vec<&String>, Vec<&String>) = c.input.iter().partition(|i| !i.starts_with('^'));
    if data.len() != sig.input_arg.len()
        || sig.input_arg.iter().any(|a| !a.number_attr.is_empty() || !a.type_list_attr.is_empty())
    {
        return Err(FunctionDefError::Body(format!(
            "node '{}': cannot inline '{fname}': {} inputs for {} arguments (list arguments are not inlined)",
            c.name,
            data.len(),
            sig.input_arg.len()
        )));
    }
    let prefix = |s: &str| format!("{}/{s}", c.name);
    let map_ref = |r: &str| -> Result<String, FunctionDefError> {
        if let Some(n) = r.strip_prefix('^') {
            return Ok(format!("^{}", prefix(n)));
        }
        let resolved = crate::function_library::resolve_ref(r, f, &f.node_def, library)?;
        let (node, index) = resolved.rsplit_once(':').unwrap_or((&resolved, "0"));
        match sig.input_arg.iter().position(|a| a.name == node) {
            Some(i) => Ok(data[i].clone()),
            None => Ok(format!("{}:{index}", prefix(node))),
        }
    };
    let mut out = Vec::with_capacity(f.node_def.len() + 1);
    for n in &f.node_def {
        let mut m = n.clone();
        m.name = prefix(&n.name);
        m.attr = crate::function_library::substitute(&n.attr, call_attrs).map_err(|e| in_function(&fname, e))?;
        m.input = n.input.iter().map(|i| map_ref(i)).collect::<Result<_, _>>().map_err(|e| in_function(&fname, e))?;
        if m.device.is_empty() {
            m.device = c.device.clone();
        }
        if n.input.is_empty() {
            m.input.extend(control.iter().map(|s| s.to_string()));
        }
        out.push(m);
    }
    // The results, as the call's own outputs.
    let mut results = Vec::with_capacity(sig.output_arg.len());
    let mut types = Vec::with_capacity(sig.output_arg.len());
    let tout: Vec<i32> = match c.attr.attr_value("Tout") {
        Some(Value::List(l)) => l.r#type.clone(),
        _ => Vec::new(),
    };
    for (j, a) in sig.output_arg.iter().enumerate() {
        let r = f.ret.get(&a.name).ok_or_else(|| {
            FunctionDefError::Body(format!("function '{fname}': output '{}' has no return value", a.name))
        })?;
        results.push(map_ref(r)?);
        let t = if let Some(&t) = tout.get(j) {
            t
        } else if !a.type_attr.is_empty() {
            match call_attrs.get(&a.type_attr).and_then(|v| v.value.as_ref()) {
                Some(Value::Type(t)) => *t,
                _ => {
                    return Err(FunctionDefError::Body(format!(
                        "node '{}': the type of output '{}' is not known",
                        c.name, a.name
                    )))
                }
            }
        } else {
            a.r#type
        };
        types.push(t);
    }
    let waits: Vec<String> = f.control_ret.values().map(|n| format!("^{}", prefix(n))).collect();
    let mut ret = NodeDef { name: c.name.clone(), device: c.device.clone(), ..Default::default() };
    if results.is_empty() {
        ret.op = "NoOp".into();
        ret.input = waits;
        if ret.input.is_empty() {
            // A function without results or control outputs: wait for every body node.
            ret.input = f.node_def.iter().map(|n| format!("^{}", prefix(&n.name))).collect();
        }
    } else {
        ret.op = "IdentityN".into();
        ret.input = results;
        ret.input.extend(waits);
        let list = ferroflow_proto::attr_value::ListValue { r#type: types, ..Default::default() };
        ret.attr.insert("T".into(), AttrValue { value: Some(Value::List(Box::new(list))) });
    }
    out.push(ret);
    Ok(out)
}
