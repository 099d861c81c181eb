//! Helpers shared by the passes: side-effect rules, edge maps, rewiring, removal, constants.
use std::collections::HashMap;

use ferroflow_graph::{Attrs, Graph, GraphError, NodeId, NodeTypes, Output};
use ferroflow_ops::OpRegistry;
use ferroflow_proto::{attr, attr_value, convert, AttrValue};
use ferroflow_tensor::{DType, Tensor};

use crate::PassContext;

/// Ops whose running matters beyond their outputs, or whose outputs are not a function of
/// their inputs: the registry's stateful ops and placeholders, and direct calls of library
/// functions whose bodies hold such ops. Never removed, merged or folded.
pub(crate) fn has_side_effects(graph: &Graph, op: &str) -> bool {
    match OpRegistry::global().facts(op) {
        Some(f) => f.has_side_effects(),
        None => function_has_side_effects(graph, op, &mut Vec::new()),
    }
}

/// True if library function `name` runs an op with side effects (through nested calls too).
fn function_has_side_effects<'a>(graph: &'a Graph, name: &'a str, visiting: &mut Vec<&'a str>) -> bool {
    let Some(f) = graph.library.function.iter().find(|f| f.signature.as_ref().is_some_and(|s| s.name == name)) else {
        return false;
    };
    if visiting.contains(&name) {
        return false;
    }
    visiting.push(name);
    let reg = OpRegistry::global();
    f.node_def.iter().any(|n| match reg.facts(&n.op) {
        Some(facts) => facts.has_side_effects(),
        None => function_has_side_effects(graph, &n.op, visiting),
    })
}

/// True if the graph has TensorFlow 1 control flow anywhere.
pub(crate) fn has_control_flow(graph: &Graph) -> bool {
    let reg = OpRegistry::global();
    graph.nodes().iter().any(|n| reg.is_control_flow(&n.op))
}

/// Function-call ops (the registry's calls, and ops naming a library function): their bodies
/// are opaque to the passes.
pub(crate) fn is_call(graph: &Graph, op: &str) -> bool {
    match OpRegistry::global().facts(op) {
        Some(f) => f.call().is_some(),
        None => graph.library.function.iter().any(|f| f.signature.as_ref().is_some_and(|s| s.name == op)),
    }
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
    match n.attrs.get("value").and_then(|v| v.value.as_ref()) {
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
        let keep: Option<Vec<Vec<u8>>> = match graph.node(id).attrs.get("_class").and_then(|a| a.value.as_ref()) {
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
