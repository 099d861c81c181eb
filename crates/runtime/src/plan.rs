//! Execution plans: the pruned, compiled form of a graph for one (feeds, fetches, targets)
//! signature. Built once, run many times.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ferroflow_graph::{Graph, NodeId, Output};
use ferroflow_kernels::{KernelRegistry, NodeDesc, OpKernel};
use ferroflow_ops::{CallKind, ControlFlow, Execution, OpRegistry, Transfer};
use ferroflow_tensor::{DType, Shape};
use smallvec::SmallVec;

use crate::executor::RunBuffers;
use crate::functional;
use crate::session::RuntimeEnv;
use crate::RuntimeError;

/// Where a plan node reads one input from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// A slot written by another plan node.
    Slot(usize),
    /// The n-th feed of the run.
    Feed(usize),
    /// The n-th constant of the plan (a `Const` node evaluated when the plan was built).
    Const(usize),
}

/// The kernel slot of a v1 control-flow node: the frame-aware executor interprets these ops
/// itself and never calls it.
struct ControlFlowOp;
impl OpKernel for ControlFlowOp {
    fn compute(
        &self,
        _: &ferroflow_kernels::KernelContext,
        _: &mut ferroflow_kernels::Inputs,
        _: &mut ferroflow_kernels::Outputs,
    ) -> ferroflow_kernels::KResult<()> {
        Err(ferroflow_kernels::KernelError::InvalidArgument(
            "control-flow ops run only in the frame-aware executor".into(),
        ))
    }
}

/// Flag on a `successor_list` entry: the successor has exactly one incoming edge.
pub(crate) const SINGLE_EDGE: u32 = 1 << 31;

/// One node of a plan. Kept small and free of pointers to chase: its inputs and successors
/// are ranges into the plan's flat arrays, its output dtypes are inline.
pub(crate) struct PlanNode {
    pub kernel: Box<dyn OpKernel>,
    /// Index in the session's graph.
    pub graph_id: u32,
    /// First output slot; output i goes to `first_slot + i`.
    pub first_slot: u32,
    /// Range of this node's entries in `ExecutionPlan::input_sources`.
    pub inputs: (u32, u32),
    /// Range in `ExecutionPlan::successor_list`: plan nodes to notify when this one
    /// finishes (one entry per edge).
    pub successors: (u32, u32),
    /// Edges into this node from other plan nodes.
    pub pending: u32,
    /// The dtype the op declares for each output (checked against what the kernel returns).
    pub output_types: SmallVec<[DType; 2]>,
    /// Its TensorFlow 1 control-flow role, if it has one.
    pub role: Option<ControlFlow>,
}

/// How the parallel executor treats a node of a plan with conditionals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CondKind {
    /// A kernel: dead if any input (data or control) is dead.
    Normal,
    /// `Switch`: forwards its data to output 0 (pred false) or 1 (pred true); the other is dead.
    Switch,
    /// `Merge`: forwards its live data input (with its index); dead only if all are dead.
    Merge,
}

/// A compiled step: pruned nodes with their kernels, input sources, slot lifetimes and
/// dependency counts.
pub struct ExecutionPlan {
    pub(crate) nodes: Vec<PlanNode>,
    pub(crate) input_sources: Vec<Source>,
    pub(crate) successor_list: Vec<u32>,
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
    /// Run buffers returned by finished runs, reused by the next ones.
    pub(crate) spare_buffers: Mutex<Vec<RunBuffers>>,
    /// True when the plan has TensorFlow 1 loops and runs on the frame-aware executor
    /// (`dynamic.rs`).
    pub(crate) control_flow: bool,
    /// For plans with `Switch`/`Merge` but no loops (conditionals), run by the parallel
    /// executor with dead values: what each plan node is. Empty when there are none.
    pub(crate) cond_kinds: Vec<CondKind>,
    /// Values of the `Const` nodes read as [`Source::Const`] (not run per step).
    pub(crate) constants: Vec<ferroflow_tensor::Tensor>,
    /// The graph the plan runs (the optimized one when the session optimizes).
    pub(crate) graph: Arc<Graph>,
    /// What the optimizer did for this plan's signature (`None` when it did not run).
    pub(crate) optimizer_report: Option<ferroflow_optimize::Report>,
    /// The per-device partition graphs this plan runs (empty with a single device).
    pub(crate) partitions: Vec<(String, ferroflow_proto::GraphDef)>,
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

    /// The graph this plan runs: after optimization when the session optimizes.
    pub fn graph(&self) -> &Arc<Graph> {
        &self.graph
    }

    /// The per-device partition graphs (with `_Send`/`_Recv` pairs), by device name; empty
    /// when the session has one device.
    pub fn partitions(&self) -> &[(String, ferroflow_proto::GraphDef)] {
        &self.partitions
    }

    /// What the optimizer did for this plan (`None` when optimization is off).
    pub fn optimizer_report(&self) -> Option<&ferroflow_optimize::Report> {
        self.optimizer_report.as_ref()
    }

    /// Compiles a plan. `feeds`, `fetches` are tensor names; `targets` node names.
    pub(crate) fn build(
        graph_arc: Arc<Graph>,
        shapes: &[Vec<Shape>],
        feeds: &[&str],
        fetches: &[&str],
        targets: &[&str],
        env: &RuntimeEnv,
    ) -> Result<ExecutionPlan, RuntimeError> {
        let graph: &Graph = &graph_arc;
        let mut fed: HashMap<Output, usize> = HashMap::new();
        let mut feed_specs = Vec::with_capacity(feeds.len());
        for (i, name) in feeds.iter().enumerate() {
            let o = graph
                .output_by_name(name)
                .map_err(|e| RuntimeError::Feed { tensor: name.to_string(), reason: e.to_string() })?;
            if fed.insert(o, i).is_some() {
                return Err(RuntimeError::Feed { tensor: name.to_string(), reason: "fed more than once".into() });
            }
            let shape = shapes[o.node].get(o.index).cloned().unwrap_or_else(Shape::unknown);
            feed_specs.push((name.to_string(), graph.output_type(o), shape));
        }
        let mut fetch_outputs = Vec::with_capacity(fetches.len());
        for name in fetches {
            let o = graph
                .output_by_name(name)
                .map_err(|e| RuntimeError::Fetch { tensor: name.to_string(), reason: e.to_string() })?;
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

        // Prune: walk back from fetches and targets, stopping at fed tensors. A node whose
        // outputs are all fed does not run; control edges from it are satisfied (as when
        // TensorFlow feeds a placeholder that a constant depends on).
        let mut fed_outputs = vec![0usize; graph.len()];
        for o in fed.keys() {
            fed_outputs[o.node] += 1;
        }
        let fully_fed = |id: NodeId| fed_outputs[id] > 0 && fed_outputs[id] == graph.node(id).num_outputs();
        // The in-process rendezvous: a `_Recv` reads the tensor its `_Send` (same tensor_name)
        // sends, as if it were a data input, so it runs once that tensor exists.
        let sent = crate::rendezvous::sent_tensors(graph)?;
        let recv_input =
            |id: NodeId| -> Result<Option<Output>, RuntimeError> { crate::rendezvous::recv_source(graph, id, &sent) };
        let mut needed = vec![false; graph.len()];
        let mut stack: Vec<NodeId> = fetch_outputs.iter().filter(|o| !fed.contains_key(o)).map(|o| o.node).collect();
        stack.extend(&target_ids);
        while let Some(id) = stack.pop() {
            if std::mem::replace(&mut needed[id], true) {
                continue;
            }
            let node = graph.node(id);
            stack.extend(node.inputs.iter().filter(|o| !fed.contains_key(o)).map(|o| o.node));
            stack.extend(node.control_inputs.iter().copied().filter(|&c| !fully_fed(c)));
            if let Some(o) = recv_input(id)? {
                // Run the _Send too (it marks the transfer in step stats) and what it sends.
                stack.push(sent[&crate::rendezvous::tensor_name(graph, id)].0);
                if !fed.contains_key(&o) {
                    stack.push(o.node);
                }
            }
        }
        // Constants without control inputs are evaluated once, here, and read by their
        // consumers as plan constants: no kernel call, no scheduling per step. (Not in plans
        // with TensorFlow 1 control flow, whose executor tracks frames per node.)
        let ops = OpRegistry::global();
        let role = |id: NodeId| ops.facts(&graph.node(id).op).and_then(|f| f.control_flow());
        let control_flow = (0..graph.len()).any(|id| needed[id] && role(id).is_some_and(ControlFlow::is_loop));
        let has_cond = !control_flow && (0..graph.len()).any(|id| needed[id] && role(id).is_some());
        let mut const_source: HashMap<NodeId, usize> = HashMap::new();
        let mut constants = Vec::new();
        if !control_flow {
            let kernels = KernelRegistry::global();
            let def = OpRegistry::global().get("Const").expect("Const is registered");
            for id in 0..graph.len() {
                let n = graph.node(id);
                if !needed[id] || n.op != "Const" || !n.control_inputs.is_empty() || fed_outputs[id] > 0 {
                    continue;
                }
                let kernel_error =
                    |source| RuntimeError::Kernel { node: n.name.clone(), op: n.op.clone(), source: Box::new(source) };
                let kernel = kernels
                    .create(&NodeDesc { name: &n.name, def, attrs: &n.attrs, types: &n.types })
                    .map_err(kernel_error)?;
                let mut out = Vec::with_capacity(1);
                kernel
                    .compute(
                        &ferroflow_kernels::KernelContext { intra_op: None, resources: None },
                        &mut Vec::new(),
                        &mut out,
                    )
                    .map_err(kernel_error)?;
                const_source.insert(id, constants.len());
                constants.extend(out.into_iter().take(1));
                needed[id] = false;
            }
        }
        let order: Vec<NodeId> = graph.topological_order()?.into_iter().filter(|&id| needed[id]).collect();
        let mut plan_index = vec![usize::MAX; graph.len()];
        for (p, &id) in order.iter().enumerate() {
            plan_index[id] = p;
        }

        let kernels = KernelRegistry::global();
        let mut nodes = Vec::with_capacity(order.len());
        let mut first_slots = Vec::with_capacity(order.len());
        let mut num_slots = 0;
        for &id in &order {
            let n = graph.node(id);
            let kernel_error =
                |source| RuntimeError::Kernel { node: n.name.clone(), op: n.op.clone(), source: Box::new(source) };
            let kernel: Box<dyn OpKernel> = match ops.get(&n.op) {
                Some(def) => match def.facts.execution {
                    Execution::Kernel => kernels
                        .create(&NodeDesc { name: &n.name, def, attrs: &n.attrs, types: &n.types })
                        .map_err(kernel_error)?,
                    Execution::Call(kind) => functional::create(graph, n, kind, env)?,
                    Execution::ControlFlow(_) => Box::new(ControlFlowOp),
                    Execution::Transfer(Transfer::Send) => Box::new(crate::rendezvous::Send),
                    Execution::Transfer(Transfer::Recv) => Box::new(crate::rendezvous::Recv),
                    Execution::Transfer(Transfer::Arg | Transfer::Retval) => {
                        return Err(kernel_error(ferroflow_kernels::KernelError::InvalidArgument(
                            "feeds and fetches of a reported partition graph do not run: merge the partitions first (ferroflow merge-partitions)".into(),
                        )))
                    }
                },
                // A node whose op is a library function calls it.
                None if graph.library.function.iter().any(|f| f.signature.as_ref().is_some_and(|s| s.name == n.op)) => {
                    functional::create(graph, n, CallKind::Call, env)?
                }
                None => {
                    return Err(kernel_error(ferroflow_kernels::KernelError::InvalidArgument(
                        "op is not registered".into(),
                    )))
                }
            };
            nodes.push(PlanNode {
                kernel,
                graph_id: id as u32,
                first_slot: num_slots as u32,
                inputs: (0, 0),
                successors: (0, 0),
                pending: 0,
                output_types: n.types.outputs.iter().copied().collect(),
                role: role(id),
            });
            first_slots.push(num_slots);
            num_slots += n.num_outputs();
        }
        let mut readers = vec![0u32; num_slots];
        if nodes.len() >= SINGLE_EDGE as usize {
            return Err(RuntimeError::Fetch {
                tensor: fetches.join(","),
                reason: format!("a plan of {} nodes is too large", nodes.len()),
            });
        }
        let mut input_sources = Vec::new();
        let mut successors: Vec<Vec<u32>> = vec![Vec::new(); nodes.len()];
        for (p, &id) in order.iter().enumerate() {
            let n = graph.node(id);
            let start = input_sources.len() as u32;
            let received = recv_input(id)?;
            for o in n.inputs.iter().chain(received.as_ref()) {
                let src = match (fed.get(o), const_source.get(&o.node)) {
                    (Some(&f), _) => Source::Feed(f),
                    (None, Some(&c)) => Source::Const(c),
                    (None, None) => {
                        let producer = plan_index[o.node];
                        let slot = first_slots[producer] + o.index;
                        readers[slot] += 1;
                        successors[producer].push(p as u32);
                        nodes[p].pending += 1;
                        Source::Slot(slot)
                    }
                };
                input_sources.push(src);
            }
            nodes[p].inputs = (start, input_sources.len() as u32);
            for &c in &n.control_inputs {
                if plan_index[c] == usize::MAX {
                    continue; // fully fed: nothing to wait for
                }
                successors[plan_index[c]].push(p as u32);
                nodes[p].pending += 1;
            }
        }
        let mut successor_list = Vec::new();
        for p in 0..nodes.len() {
            let start = successor_list.len() as u32;
            for &s in &successors[p] {
                // A successor with a single incoming edge is ready as soon as this node is
                // done: mark it so the executor skips the atomic decrement.
                let single = if nodes[s as usize].pending == 1 { SINGLE_EDGE } else { 0 };
                successor_list.push(s | single);
            }
            nodes[p].successors = (start, successor_list.len() as u32);
        }
        let mut fetched = vec![false; num_slots];
        let fetches = fetch_outputs
            .iter()
            .map(|o| match (fed.get(o), const_source.get(&o.node)) {
                (Some(&f), _) => Source::Feed(f),
                (None, Some(&c)) => Source::Const(c),
                (None, None) => {
                    let slot = first_slots[plan_index[o.node]] + o.index;
                    fetched[slot] = true;
                    Source::Slot(slot)
                }
            })
            .collect();
        let roots = (0..nodes.len()).filter(|&p| nodes[p].pending == 0).collect();
        Ok(ExecutionPlan {
            nodes,
            input_sources,
            successor_list,
            roots,
            num_slots,
            readers,
            fetched,
            fetches,
            feed_specs,
            spare_buffers: Mutex::new(Vec::new()),
            control_flow,
            cond_kinds: if has_cond {
                order
                    .iter()
                    .map(|&id| match role(id) {
                        Some(ControlFlow::Switch) => CondKind::Switch,
                        Some(ControlFlow::Merge) => CondKind::Merge,
                        _ => CondKind::Normal,
                    })
                    .collect()
            } else {
                Vec::new()
            },
            constants,
            graph: graph_arc.clone(),
            optimizer_report: None,
            partitions: Vec::new(),
        })
    }
}
