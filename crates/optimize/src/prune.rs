//! Pruning: bypasses trivial forwarding nodes, drops `NoOp`s that order nothing, and removes
//! every node that no fetch, target or protected node needs.
use std::collections::HashMap;

use ferroflow_graph::{Graph, Output};
use ferroflow_ops::{ControlFlow, OpRegistry};

use crate::util::{control_consumers, data_consumers, remove, rewire};
use crate::{OptimizeError, Pass, PassContext};

/// The pruning pass.
pub struct Pruning;

/// Nodes whose outputs are their inputs, unchanged (the registry's forwarding ops).
fn is_forwarding(graph: &Graph, id: usize) -> bool {
    let n = graph.node(id);
    OpRegistry::global()
        .facts(&n.op)
        .is_some_and(|f| f.forwards_input || (f.forwards_single_input && n.inputs.len() == 1))
}

fn is_merge(graph: &Graph, id: usize) -> bool {
    OpRegistry::global().facts(&graph.node(id).op).and_then(|f| f.control_flow()) == Some(ControlFlow::Merge)
}

impl Pass for Pruning {
    fn name(&self) -> &'static str {
        "pruning"
    }

    fn run(&self, graph: &mut Graph, ctx: &mut PassContext) -> Result<(), OptimizeError> {
        // 1. Forwarding nodes (Identity, Snapshot, StopGradient, IdentityN, one-input AddN)
        //    are bypassed: their consumers read the forwarded tensors directly, in the same
        //    frame, dead or not. Not when a control edge hangs on them (an Identity of a Switch
        //    output anchors a branch's control edges) or they cross devices. Their own control
        //    inputs move to their consumers, when that does not add edges (TensorFlow's
        //    `in * out <= in + out`) and no consumer is a Merge.
        let ctrl = control_consumers(graph);
        let data = data_consumers(graph);
        let mut map = HashMap::new();
        let mut dead = vec![false; graph.len()];
        for id in graph.topological_order()? {
            if !is_forwarding(graph, id) || ctx.is_protected(graph, id) || !ctrl[id].is_empty() {
                continue;
            }
            let n = graph.node(id);
            let cross_device = n.inputs.iter().any(|o| {
                let d = &graph.node(o.node).device;
                !n.device.is_empty() && !d.is_empty() && *d != n.device
            });
            if cross_device {
                continue;
            }
            let controls = n.control_inputs.clone();
            if !controls.is_empty() {
                let (i, o) = (1 + controls.len(), data[id].len());
                if i * o > i + o || data[id].iter().any(|&(c, _)| is_merge(graph, c)) {
                    continue;
                }
                for &(c, _) in &data[id] {
                    let cn = graph.node_mut(c);
                    for &k in &controls {
                        if !cn.control_inputs.contains(&k) {
                            cn.control_inputs.push(k);
                        }
                    }
                }
            }
            for (i, &src) in graph.node(id).inputs.iter().enumerate() {
                map.insert(Output { node: id, index: i }, src);
            }
            dead[id] = true;
        }
        rewire(graph, &map);

        // 2. A NoOp without inputs orders nothing: drop the control edges from it.
        let empty_noop: Vec<bool> = (0..graph.len())
            .map(|i| {
                let n = graph.node(i);
                n.op == "NoOp" && n.inputs.is_empty() && n.control_inputs.is_empty() && !ctx.is_protected(graph, i)
            })
            .collect();
        for id in 0..graph.len() {
            let before = graph.node(id).control_inputs.len();
            graph.node_mut(id).control_inputs.retain(|&c| !empty_noop[c]);
            ctx.report.control_edges_removed += before - graph.node(id).control_inputs.len();
        }

        // 3. Keep only what the protected nodes need (when the item names any fetch or
        //    target: without them nothing is known to be needed).
        if ctx.has_fetches_or_targets {
            let mut needed = vec![false; graph.len()];
            let mut stack: Vec<usize> = (0..graph.len()).filter(|&i| ctx.is_protected(graph, i)).collect();
            while let Some(id) = stack.pop() {
                if needed[id] || dead[id] {
                    continue;
                }
                needed[id] = true;
                let n = graph.node(id);
                stack.extend(n.inputs.iter().map(|o| o.node).chain(n.control_inputs.iter().copied()));
            }
            for (d, n) in dead.iter_mut().zip(&needed) {
                *d |= !n;
            }
        }
        remove(graph, &dead, ctx)?;
        Ok(())
    }
}
