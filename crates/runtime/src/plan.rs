//! Execution plans: the pruned, compiled form of a graph for one (feeds, fetches, targets)
//! signature. Built once, run many times.
use std::collections::HashMap;

use ferroflow_graph::{Graph, NodeId, Output};
use ferroflow_kernels::{KernelRegistry, NodeDesc, OpKernel};
use ferroflow_ops::OpRegistry;
use ferroflow_tensor::{DType, Shape};

use crate::RuntimeError;

/// Where a plan node reads one input from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// A slot written by another plan node.
    Slot(usize),
    /// The n-th feed of the run.
    Feed(usize),
}

/// One node of a plan.
pub(crate) struct PlanNode {
    /// Index in the session's graph.
    pub graph_id: NodeId,
    pub kernel: Box<dyn OpKernel>,
    pub inputs: Vec<Source>,
    /// First output slot; output i goes to `first_slot + i`.
    pub first_slot: usize,
    pub num_outputs: usize,
    /// Plan nodes to notify when this one finishes (one entry per edge).
    pub successors: Vec<usize>,
    /// Edges into this node from other plan nodes.
    pub pending: u32,
}

/// A compiled step: pruned nodes with their kernels, input sources, slot lifetimes and
/// dependency counts.
pub struct ExecutionPlan {
    pub(crate) nodes: Vec<PlanNode>,
    /// Plan nodes with no pending edges.
    pub(crate) roots: Vec<usize>,
    pub(crate) num_slots: usize,
    /// Readers of each slot; the last reader takes the tensor, so buffers are freed (or
    /// reused in place) as soon as their last consumer has run.
    pub(crate) readers: Vec<u32>,
    /// Slots that are fetched (kept until the end of the run).
    pub(crate) fetched: Vec<bool>,
    /// Where each fetch comes from.
    pub(crate) fetches: Vec<Source>,
    /// The feeds' expected dtypes and shapes, in feed order.
    pub(crate) feed_specs: Vec<(String, DType, Shape)>,
}

impl ExecutionPlan {
    /// Number of nodes that run in this plan.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True if no node runs (all fetches are fed).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Compiles a plan. `feeds`, `fetches` are tensor names; `targets` node names.
    pub(crate) fn build(
        graph: &Graph,
        shapes: &[Vec<Shape>],
        feeds: &[&str],
        fetches: &[&str],
        targets: &[&str],
    ) -> Result<ExecutionPlan, RuntimeError> {
        let mut fed: HashMap<Output, usize> = HashMap::new();
        let mut feed_specs = Vec::with_capacity(feeds.len());
        for (i, name) in feeds.iter().enumerate() {
            let o = graph.output_by_name(name).map_err(|e| RuntimeError::Feed {
                tensor: name.to_string(),
                reason: e.to_string(),
            })?;
            if fed.insert(o, i).is_some() {
                return Err(RuntimeError::Feed {
                    tensor: name.to_string(),
                    reason: "fed more than once".into(),
                });
            }
            let shape = shapes[o.node]
                .get(o.index)
                .cloned()
                .unwrap_or_else(Shape::unknown);
            feed_specs.push((name.to_string(), graph.output_type(o), shape));
        }
        let mut fetch_outputs = Vec::with_capacity(fetches.len());
        for name in fetches {
            let o = graph
                .output_by_name(name)
                .map_err(|e| RuntimeError::Fetch {
                    tensor: name.to_string(),
                    reason: e.to_string(),
                })?;
            fetch_outputs.push(o);
        }
        let mut target_ids = Vec::with_capacity(targets.len());
        for name in targets {
            let t = name.strip_prefix('^').unwrap_or(name);
            let id = graph.find(t).ok_or_else(|| RuntimeError::Fetch {
                tensor: name.to_string(),
                reason: format!("the graph has no node named '{t}'"),
            })?;
            target_ids.push(id);
        }

        // Prune: walk back from fetches and targets, stopping at fed tensors.
        let mut needed = vec![false; graph.len()];
        let mut stack: Vec<NodeId> = fetch_outputs
            .iter()
            .filter(|o| !fed.contains_key(o))
            .map(|o| o.node)
            .collect();
        stack.extend(&target_ids);
        while let Some(id) = stack.pop() {
            if std::mem::replace(&mut needed[id], true) {
                continue;
            }
            let node = graph.node(id);
            stack.extend(
                node.inputs
                    .iter()
                    .filter(|o| !fed.contains_key(o))
                    .map(|o| o.node),
            );
            stack.extend(&node.control_inputs);
        }
        let order: Vec<NodeId> = graph
            .topological_order()?
            .into_iter()
            .filter(|&id| needed[id])
            .collect();
        let mut plan_index = vec![usize::MAX; graph.len()];
        for (p, &id) in order.iter().enumerate() {
            plan_index[id] = p;
        }

        let ops = OpRegistry::global();
        let kernels = KernelRegistry::global();
        let mut nodes = Vec::with_capacity(order.len());
        let mut num_slots = 0;
        for &id in &order {
            let n = graph.node(id);
            let def = ops.get(&n.op).ok_or_else(|| RuntimeError::Kernel {
                node: n.name.clone(),
                op: n.op.clone(),
                source: Box::new(ferroflow_kernels::KernelError::InvalidArgument(
                    "op is not registered".into(),
                )),
            })?;
            let kernel = kernels
                .create(&NodeDesc {
                    name: &n.name,
                    def,
                    attrs: &n.attrs,
                    types: &n.types,
                })
                .map_err(|source| RuntimeError::Kernel {
                    node: n.name.clone(),
                    op: n.op.clone(),
                    source: Box::new(source),
                })?;
            nodes.push(PlanNode {
                graph_id: id,
                kernel,
                inputs: Vec::with_capacity(n.inputs.len()),
                first_slot: num_slots,
                num_outputs: n.num_outputs(),
                successors: Vec::new(),
                pending: 0,
            });
            num_slots += n.num_outputs();
        }
        let mut readers = vec![0u32; num_slots];
        for p in 0..nodes.len() {
            let n = graph.node(nodes[p].graph_id);
            for o in &n.inputs {
                let src = match fed.get(o) {
                    Some(&f) => Source::Feed(f),
                    None => {
                        let producer = plan_index[o.node];
                        let slot = nodes[producer].first_slot + o.index;
                        readers[slot] += 1;
                        nodes[producer].successors.push(p);
                        nodes[p].pending += 1;
                        Source::Slot(slot)
                    }
                };
                nodes[p].inputs.push(src);
            }
            for &c in &n.control_inputs {
                nodes[plan_index[c]].successors.push(p);
                nodes[p].pending += 1;
            }
        }
        let mut fetched = vec![false; num_slots];
        let fetches = fetch_outputs
            .iter()
            .map(|o| match fed.get(o) {
                Some(&f) => Source::Feed(f),
                None => {
                    let slot = nodes[plan_index[o.node]].first_slot + o.index;
                    fetched[slot] = true;
                    Source::Slot(slot)
                }
            })
            .collect();
        let roots = (0..nodes.len())
            .filter(|&p| nodes[p].pending == 0)
            .collect();
        Ok(ExecutionPlan {
            nodes,
            roots,
            num_slots,
            readers,
            fetched,
            fetches,
            feed_specs,
        })
    }
}
