//! Common-subexpression elimination: nodes with the same op, inputs, control inputs, attrs
//! and device compute the same value; all but the first are removed and their consumers
//! read the first.
//!
//! Exact: a node without side effects is a function of its inputs and attrs. The inputs of
//! the registry's commutative ops are compared as a set only when no input is a float (`a+b`
//! and `b+a` can differ in the NaN payload they return; integer and boolean results cannot).
use std::collections::HashMap;

use ferroflow_graph::{Graph, NodeId, Output};
use ferroflow_ops::OpRegistry;
use prost::Message;

use crate::util::remove;
use crate::{OptimizeError, Pass, PassContext};

/// The CSE pass.
pub struct CommonSubexpressionElimination;

fn key(graph: &Graph, id: NodeId, buf: &mut Vec<u8>) {
    let n = graph.node(id);
    buf.clear();
    buf.extend_from_slice(n.op.as_bytes());
    buf.push(0);
    buf.extend_from_slice(n.device.as_bytes());
    buf.push(0);
    let commutative = n.types.inputs.iter().all(|t| !t.is_float())
        && OpRegistry::global().facts(&n.op).is_some_and(|f| f.commutative);
    let sorted;
    let inputs: &[Output] = if commutative {
        let mut v = n.inputs.clone();
        v.sort_unstable();
        sorted = v;
        &sorted
    } else {
        &n.inputs
    };
    for o in inputs {
        buf.extend_from_slice(&(o.node as u64).to_le_bytes());
        buf.extend_from_slice(&(o.index as u32).to_le_bytes());
    }
    buf.push(1);
    let mut controls = n.control_inputs.clone();
    controls.sort_unstable();
    controls.dedup();
    for c in controls {
        buf.extend_from_slice(&(c as u64).to_le_bytes());
    }
    buf.push(2);
    for (k, v) in &n.attrs {
        buf.extend_from_slice(k.as_bytes());
        buf.push(0);
        v.encode_length_delimited(buf).expect("a Vec grows");
    }
}

/// The representative a node was merged into (following merges of representatives).
fn find(rep: &[NodeId], mut i: NodeId) -> NodeId {
    while rep[i] != i {
        i = rep[i];
    }
    i
}

impl Pass for CommonSubexpressionElimination {
    fn name(&self) -> &'static str {
        "common_subexpression_elimination"
    }

    fn run(&self, graph: &mut Graph, ctx: &mut PassContext) -> Result<(), OptimizeError> {
        let order = graph.topological_order()?;
        let mut seen: HashMap<Vec<u8>, NodeId> = HashMap::with_capacity(graph.len());
        let mut rep: Vec<NodeId> = (0..graph.len()).collect();
        let mut dead = vec![false; graph.len()];
        let mut buf = Vec::new();
        for (step, &id) in order.iter().enumerate() {
            if step % 1024 == 0 && ctx.out_of_time() {
                break;
            }
            // Read the representatives of this node's inputs (they come earlier in the order).
            {
                let n = graph.node_mut(id);
                for o in &mut n.inputs {
                    o.node = find(&rep, o.node);
                }
                for c in &mut n.control_inputs {
                    *c = find(&rep, *c);
                }
                let mut seen_c = Vec::with_capacity(n.control_inputs.len());
                n.control_inputs.retain(|c| {
                    let fresh = !seen_c.contains(c);
                    seen_c.push(*c);
                    fresh
                });
            }
            let n = graph.node(id);
            let protected = ctx.is_protected(graph, id);
            if OpRegistry::global().is_control_flow(&n.op) || ctx.is_fed(graph, id) || (protected && n.op != "Const") {
                continue;
            }
            if protected {
                // A protected Const may stand for others, but is never removed itself.
                key(graph, id, &mut buf);
                seen.entry(buf.clone()).or_insert(id);
                continue;
            }
            key(graph, id, &mut buf);
            match seen.get(&buf) {
                Some(&r) if id < r && !ctx.is_protected(graph, r) => {
                    // Keep the node that comes first in the graph (as TensorFlow does).
                    rep[r] = id;
                    dead[r] = true;
                    seen.insert(buf.clone(), id);
                    ctx.report.merged.push((graph.node(r).name.clone(), n.name.clone()));
                }
                Some(&r) => {
                    rep[id] = r;
                    dead[id] = true;
                    ctx.report.merged.push((n.name.clone(), graph.node(r).name.clone()));
                }
                None => {
                    seen.insert(buf.clone(), id);
                }
            }
        }
        // Back edges (NextIteration into Merge) and anything after a timeout: read the
        // representatives everywhere.
        let map: HashMap<Output, Output> = (0..graph.len())
            .filter(|&i| rep[i] != i)
            .flat_map(|i| {
                let r = find(&rep, i);
                (0..graph.node(i).num_outputs())
                    .map(move |k| (Output { node: i, index: k }, Output { node: r, index: k }))
            })
            .collect();
        crate::util::rewire(graph, &map);
        for id in 0..graph.len() {
            let n = graph.node_mut(id);
            for c in &mut n.control_inputs {
                *c = find(&rep, *c);
            }
        }
        remove(graph, &dead, ctx)?;
        Ok(())
    }
}
