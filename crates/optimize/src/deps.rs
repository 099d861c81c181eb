//! The dependency optimizer: drops control edges that other edges already imply, and
//! bypasses `NoOp`s that only relay control edges (when that does not add edges).
//!
//! Exact: only ordering constraints that still hold through another path are removed, so
//! every node still runs after everything it had to wait for. A path through a `Merge` does
//! not count (a `Merge` runs when any one input arrives); in graphs with TensorFlow 1 control
//! flow only duplicate edges are removed (control edges also carry dead tokens), and NoOps
//! next to control-flow ops stay.
use std::collections::HashSet;

use ferroflow_graph::{Graph, NodeId};
use ferroflow_ops::{ControlFlow, OpRegistry};

use crate::util::{control_consumers, data_consumers, has_control_flow, remove_orphans};
use crate::{OptimizeError, Pass, PassContext};

/// The TensorFlow 1 control-flow role of `op`.
fn role(op: &str) -> Option<ControlFlow> {
    OpRegistry::global().facts(op).and_then(|f| f.control_flow())
}

/// The dependency-optimizer pass.
pub struct DependencyOptimizer;

impl Pass for DependencyOptimizer {
    fn name(&self) -> &'static str {
        "dependency_optimizer"
    }

    fn run(&self, graph: &mut Graph, ctx: &mut PassContext) -> Result<(), OptimizeError> {
        let control_flow = has_control_flow(graph);
        // 1. Redundant control inputs: duplicates; `^a` where `a` is also a data input; `^a`
        //    where a data or control input of this node itself depends on `a` directly.
        let mut removed = 0;
        for id in 0..graph.len() {
            if graph.node(id).control_inputs.is_empty() {
                continue;
            }
            let n = graph.node(id);
            let mut implied: HashSet<NodeId> = HashSet::new();
            if !control_flow {
                for o in &n.inputs {
                    implied.insert(o.node);
                }
                let direct: Vec<NodeId> =
                    n.inputs.iter().map(|o| o.node).chain(n.control_inputs.iter().copied()).collect();
                for p in direct {
                    let pn = graph.node(p);
                    if role(&pn.op) == Some(ControlFlow::Merge) {
                        continue;
                    }
                    implied.extend(pn.inputs.iter().map(|o| o.node));
                    implied.extend(pn.control_inputs.iter().copied());
                }
            }
            let mut seen = HashSet::new();
            let before = n.control_inputs.len();
            let kept: Vec<NodeId> =
                n.control_inputs.iter().copied().filter(|c| !implied.contains(c) && seen.insert(*c)).collect();
            removed += before - kept.len();
            graph.node_mut(id).control_inputs = kept;
        }
        ctx.report.control_edges_removed += removed;

        // 2. NoOps that relay control edges: their consumers wait on the NoOp's inputs
        //    directly, when that does not make more edges (|in| * |out| <= |in| + |out|).
        {
            let data = data_consumers(graph);
            let ctrl = control_consumers(graph);
            let mut bypassed = vec![false; graph.len()];
            for id in 0..graph.len() {
                let n = graph.node(id);
                if n.op != "NoOp" || ctx.is_protected(graph, id) || !data[id].is_empty() || ctrl[id].is_empty() {
                    continue;
                }
                // In TensorFlow 1 control flow a Switch output must be anchored by an Identity
                // and a Merge fires on any input: neither is rewired through.
                let role_of = |i: &NodeId| role(&graph.node(*i).op);
                if n.control_inputs.iter().any(|i| role_of(i) == Some(ControlFlow::Switch))
                    || ctrl[id].iter().any(|i| role_of(i) == Some(ControlFlow::Merge))
                {
                    continue;
                }
                let ins: Vec<NodeId> = n.control_inputs.iter().copied().filter(|&i| !bypassed[i]).collect();
                if ins.len() != n.control_inputs.len()
                    || ctrl[id].iter().any(|&c| bypassed[c])
                    || ins.len() * ctrl[id].len() > ins.len() + ctrl[id].len()
                {
                    continue;
                }
                for &c in &ctrl[id] {
                    let cn = graph.node_mut(c);
                    cn.control_inputs.retain(|&x| x != id);
                    for &i in &ins {
                        if !cn.control_inputs.contains(&i) && !cn.inputs.iter().any(|o| o.node == i) {
                            cn.control_inputs.push(i);
                        }
                    }
                }
                bypassed[id] = true;
                ctx.report.rewritten.push((graph.node(id).name.clone(), "NoOp bypassed".into()));
            }
        }
        remove_orphans(graph, ctx)?;
        Ok(())
    }
}
