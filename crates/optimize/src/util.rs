//! Helpers shared by the passes: side-effect rules, edge maps, rewiring, removal, constants.
use ferroflow_proto::attr::AttrMap;
use std::collections::{HashMap, HashSet};

use ferroflow_graph::{Attrs, Graph, GraphError, NodeId, NodeTypes, Output};
use ferroflow_ops::OpRegistry;
use ferroflow_proto::{attr, attr_value, convert, AttrValue};
use ferroflow_tensor::{DType, Tensor};

use crate::PassContext;

/// What the passes know about the graph's function library, found once per optimization and
/// linear in the library's size (a long chain of functions calling each other costs no more
/// than as many independent ones, and no recursion can run out of stack): which op names are
/// library functions, and which of those run an op with side effects, directly or through
/// calls at any depth (cycles included).
#[derive(Debug, Default)]
pub struct LibraryFacts {
    functions: HashSet<String>,
    effectful: HashSet<String>,
}

impl LibraryFacts {
    /// The facts of `graph`'s library.
    pub fn of(graph: &Graph) -> LibraryFacts {
        let reg = OpRegistry::global();
        let lib = &graph.library.function;
        let names: Vec<&str> = lib.iter().map(|f| f.signature.as_ref().map_or("", |s| s.name.as_str())).collect();
        let index: HashMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        // Effects flow from a function to its callers: mark the functions running a stateful
        // op, then everything that calls a marked function.
        let mut callers: Vec<Vec<usize>> = vec![Vec::new(); lib.len()];
        let mut effectful = vec![false; lib.len()];
        let mut stack = Vec::new();
        for (i, f) in lib.iter().enumerate() {
            for n in &f.node_def {
                match reg.facts(&n.op) {
                    Some(facts) if facts.has_side_effects() && !effectful[i] => {
                        effectful[i] = true;
                        stack.push(i);
                    }
                    Some(_) => {}
                    None => {
                        if let Some(&callee) = index.get(n.op.as_str()) {
                            callers[callee].push(i);
                        }
                    }
                }
            }
        }
        while let Some(callee) = stack.pop() {
            for &caller in &callers[callee] {
                if !effectful[caller] {
                    effectful[caller] = true;
                    stack.push(caller);
                }
            }
        }
        LibraryFacts {
            functions: names.iter().map(|n| n.to_string()).collect(),
            effectful: names.iter().zip(&effectful).filter(|(_, &e)| e).map(|(n, _)| n.to_string()).collect(),
        }
    }

    /// Ops whose running matters beyond their outputs, or whose outputs are not a function
    /// of their inputs: the registry's stateful ops and placeholders, and direct calls of
    /// library functions whose bodies hold such ops. Never removed, merged or folded.
    pub fn has_side_effects(&self, op: &str) -> bool {
        match OpRegistry::global().facts(op) {
            Some(f) => f.has_side_effects(),
            None => self.effectful.contains(op),
        }
    }

    /// Function-call ops (the registry's calls, and ops naming a library function): their
    /// bodies are opaque to the passes.
    pub fn is_call(&self, op: &str) -> bool {
        match OpRegistry::global().facts(op) {
            Some(f) => f.call().is_some(),
            None => self.functions.contains(op),
        }
    }
}

/// True if the graph has TensorFlow 1 control flow anywhere.
pub(crate) fn has_control_flow(graph: &Graph) -> bool {
    let reg = OpRegistry::global();
    graph.nodes().iter().any(|n| reg.is_control_flow(&n.op))
}

/// For each node, its data consumers as (consumer, input slot).
pub(crate) fn data_consumers(graph: &Graph) -> Vec<Vec<(NodeId, usize)>> {
    let mut out = vec![Vec::new(); graph.len()];
    for (id, n) in graph.nodes().iter().enumerate() {
        for (slot, o) in n.inputs.iter().enumerate() {
            out[o.node].push((id, slot));
        }
    }
    out
}

/// For each node, the nodes with a control edge from it.
pub(crate) fn control_consumers(graph: &Graph) -> Vec<Vec<NodeId>> {
    let mut out = vec![Vec::new(); graph.len()];
    for (id, n) in graph.nodes().iter().enumerate() {
        for &c in &n.control_inputs {
            out[c].push(id);
        }
    }
    out
}

/// Replaces every use of a key of `map` by its value (following chains). Linear in the
/// graph and the map: each chain is walked once and every output on it is remembered with
/// its final source (path compression), so a long Identity chain costs no more than a wide one.
pub(crate) fn rewire(graph: &mut Graph, map: &HashMap<Output, Output>) {
    if map.is_empty() {
        return;
    }
    let mut resolved: HashMap<Output, Output> = HashMap::with_capacity(map.len());
    let mut path = Vec::new();
    let mut resolve = |o: Output| -> Output {
        path.clear();
        let mut cur = o;
        let end = loop {
            if let Some(&r) = resolved.get(&cur) {
                break r;
            }
            match map.get(&cur) {
                Some(&next) => {
                    path.push(cur);
                    assert!(path.len() <= map.len(), "rewiring map has a cycle");
                    cur = next;
                }
                None => break cur,
            }
        };
        for &p in &path {
            resolved.insert(p, end);
        }
        end
    };
    for id in 0..graph.len() {
        let n = graph.node_mut(id);
        for o in &mut n.inputs {
            *o = resolve(*o);
        }
    }
}

/// Removes the nodes flagged in `dead` and records their names.
pub(crate) fn remove(graph: &mut Graph, dead: &[bool], ctx: &mut PassContext) -> Result<(), GraphError> {
    if !dead.iter().any(|&d| d) {
        return Ok(());
    }
    for (id, &d) in dead.iter().enumerate() {
        if d {
            ctx.report.removed.push(graph.node(id).name.clone());
        }
    }
    let keep: Vec<bool> = dead.iter().map(|&d| !d).collect();
    graph.retain_nodes(&keep)?;
    Ok(())
}

/// Removes nodes that nothing needs: not protected, and without data or control consumers
/// (repeatedly, so whole dead chains go).
pub(crate) fn remove_orphans(graph: &mut Graph, ctx: &mut PassContext) -> Result<(), GraphError> {
    let n = graph.len();
    let mut uses = vec![0usize; n];
    for node in graph.nodes() {
        for o in &node.inputs {
            uses[o.node] += 1;
        }
        for &c in &node.control_inputs {
            uses[c] += 1;
        }
    }
    let mut dead = vec![false; n];
    let mut stack: Vec<NodeId> = (0..n).filter(|&i| uses[i] == 0 && !ctx.is_protected(graph, i)).collect();
    while let Some(id) = stack.pop() {
        if dead[id] {
            continue;
        }
        dead[id] = true;
        let node = graph.node(id);
        for p in node.inputs.iter().map(|o| o.node).chain(node.control_inputs.iter().copied()) {
            uses[p] -= 1;
            if uses[p] == 0 && !dead[p] && !ctx.is_protected(graph, p) {
                stack.push(p);
            }
        }
    }
    remove(graph, &dead, ctx)
}

/// The value of a `Const` node.
pub(crate) fn const_value(graph: &Graph, id: NodeId) -> Option<Tensor> {
    let n = graph.node(id);
    if n.op != "Const" {
        return None;
    }
    match n.attrs.attr_value("value") {
        Some(attr_value::Value::Tensor(t)) => convert::tensor_from_proto(t).ok(),
        _ => None,
    }
}

/// An attr holding a tensor.
/// Small numeric tensors use the typed `*_val` fields (readable in text format, as
/// TensorFlow writes scalars); others `tensor_content`.
pub(crate) fn tensor_attr(t: &Tensor) -> AttrValue {
    let mut p = convert::tensor_to_proto(t);
    if t.len() <= 16 {
        let done = match t.dtype() {
            DType::Float => t.as_slice::<f32>().map(|v| p.float_val = v.to_vec()).is_ok(),
            DType::Double => t.as_slice::<f64>().map(|v| p.double_val = v.to_vec()).is_ok(),
            DType::Int32 => t.as_slice::<i32>().map(|v| p.int_val = v.to_vec()).is_ok(),
            DType::Int64 => t.as_slice::<i64>().map(|v| p.int64_val = v.to_vec()).is_ok(),
            DType::Bool => t.as_slice::<bool>().map(|v| p.bool_val = v.to_vec()).is_ok(),
            _ => false,
        };
        if done {
            p.tensor_content.clear();
        }
    }
    AttrValue { value: Some(attr_value::Value::Tensor(Box::new(p))) }
}

/// Rewrites node `id` in place into a `Const` holding `value`, with `controls` as its control
/// inputs; name and device stay.
pub(crate) fn make_const(graph: &mut Graph, id: NodeId, value: &Tensor, controls: Vec<NodeId>) {
    let n = graph.node_mut(id);
    n.op = "Const".into();
    n.inputs.clear();
    n.control_inputs = controls;
    let mut attrs = Attrs::new();
    attrs.insert("dtype".into(), attr::dtype(value.dtype()));
    attrs.insert("value".into(), tensor_attr(value));
    n.attrs = attrs;
    n.types = NodeTypes { inputs: vec![], outputs: vec![value.dtype()] };
    n.experimental_type = None;
}

/// Rewrites node `id` in place into `Identity(input)` (keeping name, device and control inputs).
pub(crate) fn make_identity(graph: &mut Graph, id: NodeId, input: Output) {
    let dtype = graph.output_type(input);
    let n = graph.node_mut(id);
    n.op = "Identity".into();
    n.inputs = vec![input];
    let mut attrs = Attrs::new();
    attrs.insert("T".into(), attr::dtype(dtype));
    n.attrs = attrs;
    n.types = NodeTypes { inputs: vec![dtype], outputs: vec![dtype] };
    n.experimental_type = None;
}

/// Checks what passes must keep true (see [`Graph::validate`]).
pub(crate) fn check(graph: &Graph) -> Result<(), GraphError> {
    graph.validate()
}

/// Drops colocation constraints (`_class: ["loc:@name"]`) that name nodes the passes removed
/// (TensorFlow's `ReassignColocation` after Grappler): a dangling one would make the graph
/// unimportable in TensorFlow and unplaceable. Returns how many were dropped.
pub(crate) fn drop_dangling_colocation(graph: &mut Graph) -> usize {
    let mut dropped = 0;
    for id in 0..graph.len() {
        let keep: Option<Vec<Vec<u8>>> = match graph.node(id).attrs.attr_value("_class") {
            Some(attr_value::Value::List(l)) => {
                let kept: Vec<Vec<u8>> =
                    l.s.iter()
                        .filter(|s| match std::str::from_utf8(s).ok().and_then(|s| s.strip_prefix("loc:@")) {
                            Some(name) => graph.find(name).is_some(),
                            None => true,
                        })
                        .cloned()
                        .collect();
                (kept.len() != l.s.len()).then_some(kept)
            }
            _ => None,
        };
        if let Some(kept) = keep {
            let n = graph.node_mut(id);
            let Some(attr_value::Value::List(l)) = n.attrs.get_mut("_class").and_then(|a| a.value.as_mut()) else {
                continue;
            };
            dropped += l.s.len() - kept.len();
            if kept.is_empty() {
                n.attrs.remove("_class");
            } else {
                l.s = kept;
            }
        }
    }
    dropped
}

#[cfg(test)]
mod tests {
    use ferroflow_graph::Graph;
    use ferroflow_proto::{FunctionDef, NodeDef, OpDef};

    use super::LibraryFacts;

    fn function(name: &str, ops: &[&str]) -> FunctionDef {
        FunctionDef {
            signature: Some(OpDef { name: name.into(), ..Default::default() }),
            node_def: ops
                .iter()
                .map(|op| NodeDef { name: "n".into(), op: op.to_string(), ..Default::default() })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn library_facts_follow_calls_at_any_depth_and_through_cycles() {
        // f0 calls f1 ... calls f19999, whose body is stateful: every function has effects.
        // (A recursive walk per query was quadratic here, and deep enough to overflow a stack.)
        let n = 20_000;
        let mut g = Graph::default();
        for i in 0..n {
            let callee = if i + 1 < n { format!("f{}", i + 1) } else { "RandomUniform".into() };
            g.library.function.push(function(&format!("f{i}"), &["Identity", &callee]));
        }
        // A cycle without effects, a cycle with one, and a pure function.
        g.library.function.push(function("a", &["b"]));
        g.library.function.push(function("b", &["a", "Identity"]));
        g.library.function.push(function("c", &["d"]));
        g.library.function.push(function("d", &["c", "AssignVariableOp"]));
        g.library.function.push(function("pure", &["Identity", "AddV2"]));
        let facts = LibraryFacts::of(&g);
        assert!(facts.has_side_effects("f0") && facts.has_side_effects("f19999"));
        assert!(!facts.has_side_effects("a") && !facts.has_side_effects("b"));
        assert!(facts.has_side_effects("c") && facts.has_side_effects("d"));
        assert!(!facts.has_side_effects("pure") && facts.is_call("pure"));
        assert!(facts.has_side_effects("RandomUniform") && !facts.has_side_effects("Identity"));
        assert!(!facts.is_call("Identity") && facts.is_call("PartitionedCall") && !facts.is_call("nope"));
    }
}
