//! Execution plans: the pruned, compiled form of a graph for one (feeds, fetches, targets)
//! signature. Built once, run many times.
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use ferroflow_graph::{Graph, GraphError, NodeId, Output};
use ferroflow_kernels::{KernelRegistry, NodeDesc, OpKernel};
use ferroflow_ops::{CallKind, ControlFlow, Execution, LibraryOps, OpRegistry, Transfer};
use ferroflow_tensor::{DType, Shape, Tensor};
use smallvec::SmallVec;

use crate::buffers::SpareBuffers;
use crate::env::RuntimeEnv;
use crate::function_library::FunctionLibraryRuntime;
use crate::functional;
use crate::rendezvous::Transfers;
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
    /// The node's one output goes straight to its one successor, whose only input it is and
    /// which becomes ready by this node alone: the executor runs that successor next on the
    /// same thread and hands the tensor over in its scratch buffers, never storing it in the
    /// slot (see [`mark_hand_offs`]).
    pub hand_off: bool,
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
    pub(crate) spare_buffers: SpareBuffers,
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
    /// Each plan node's profiler event name (`name:Type`), interned on the first profiled run.
    pub(crate) profile_names: std::sync::OnceLock<Vec<ferroflow_profiler::NameId>>,
    /// The graph's timeline labels by node, built on the first traced step.
    pub(crate) timeline_labels: OnceLock<Arc<[String]>>,
    /// What the optimizer did for this plan's signature (`None` when it did not run).
    pub(crate) optimizer_report: Option<ferroflow_optimize::Report>,
    /// The per-device partition graphs this plan runs (empty with a single device).
    pub(crate) partitions: Vec<(String, ferroflow_proto::GraphDef)>,
    /// The step in words, for errors that stop it (`fetching y:0; running train`).
    pub(crate) step_name: String,
    /// In a cluster: this rank's place in it and the fingerprint of what every rank must run
    /// (the signature and every task's partition graphs), compared at every step.
    pub(crate) cluster: Option<(crate::Cluster, u64)>,
    /// Whether the plan has kernels large enough to split across the intra-op pool (a
    /// convolution or matrix product of at least [`SPLIT_OUTPUT_ELEMENTS`] outputs per
    /// example): its steps
    /// keep the pool's other threads awake (see `executor::spin_for_work`).
    pub(crate) splits_work: bool,
}

/// Output elements from which a convolution or matrix product counts as splitting its work.
const SPLIT_OUTPUT_ELEMENTS: usize = 1 << 16;

impl ExecutionPlan {
    /// Each plan node's profiler event name, `name:Type` as TensorFlow's op events.
    pub(crate) fn profile_names(&self) -> &[ferroflow_profiler::NameId] {
        self.profile_names.get_or_init(|| {
            self.nodes
                .iter()
                .map(|n| {
                    let node = self.graph.node(n.graph_id as usize);
                    ferroflow_profiler::intern(&format!("{}:{}", node.name, node.op))
                })
                .collect()
        })
    }

    /// Number of nodes that run in this plan.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True if no node runs (all fetches are fed).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Every node's step-stats timeline label (built once per plan).
    pub(crate) fn timeline_labels(&self) -> &Arc<[String]> {
        self.timeline_labels.get_or_init(|| crate::trace::labels(&self.graph))
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

    /// Compiles a plan for `sig` (resolved against `graph`), in phases: prune to what the
    /// fetches and targets need, evaluate constants once, instantiate kernels, lay out the
    /// flat input/successor arrays and slot lifetimes.
    pub(crate) fn build(
        graph_arc: Arc<Graph>,
        shapes: &[Vec<Shape>],
        sig: &Signature,
        env: &RuntimeEnv,
        functions: &dyn FunctionLibraryRuntime,
    ) -> Result<ExecutionPlan, RuntimeError> {
        let graph: &Graph = &graph_arc;
        let feed_specs = sig
            .feeds
            .iter()
            .map(|(name, o)| {
                let shape = shapes[o.node].get(o.index).cloned().unwrap_or_else(Shape::unknown);
                (name.clone(), graph.output_type(*o), shape)
            })
            .collect();
        let fed: HashMap<Output, usize> = sig.feeds.iter().enumerate().map(|(i, (_, o))| (*o, i)).collect();
        let transfers = Transfers::of(graph, env.options.cluster.filter(|c| c.tasks > 1))?;
        let mut needed = prune(graph, sig, &fed, &transfers);
        let roles: Vec<Option<ControlFlow>> =
            graph.nodes().iter().map(|n| OpRegistry::global().facts(&n.op).and_then(|f| f.control_flow())).collect();
        // Plans with TensorFlow 1 loops run on the frame-aware executor; plans with only
        // conditionals on the parallel one, with dead values.
        let control_flow = (0..graph.len()).any(|id| needed[id] && roles[id].is_some_and(ControlFlow::is_loop));
        let has_cond = !control_flow && (0..graph.len()).any(|id| needed[id] && roles[id].is_some());
        let (constants, const_source) =
            if control_flow { (Vec::new(), HashMap::new()) } else { evaluate_constants(graph, &mut needed, &fed)? };
        let order: Vec<NodeId> = graph.topological_order()?.into_iter().filter(|&id| needed[id]).collect();
        // Output elements per example: unknown dimensions (a batch of any size) count as 1.
        let per_example = |s: &Shape| s.dims().map(|d| d.iter().map(|d| d.unwrap_or(1)).product::<usize>());
        let splits_work = order.iter().any(|&id| {
            OpRegistry::global().facts(&graph.node(id).op).is_some_and(|f| f.contraction)
                && shapes[id].first().and_then(per_example).is_some_and(|n| n >= SPLIT_OUTPUT_ELEMENTS)
        });
        let mut nodes = instantiate(graph, &order, &roles, functions, &transfers)?;
        if nodes.len() >= SINGLE_EDGE as usize {
            let fetches = sig.fetches.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(",");
            return Err(RuntimeError::PlanTooLarge { fetches, nodes: nodes.len() });
        }
        let layout = Layout::wire(graph, &order, &mut nodes, &fed, &const_source, &transfers);
        let mut fetched = vec![false; layout.num_slots];
        let fetches = sig
            .fetches
            .iter()
            .map(|(_, o)| match (fed.get(o), const_source.get(&o.node)) {
                (Some(&f), _) => Source::Feed(f),
                (None, Some(&c)) => Source::Const(c),
                (None, None) => {
                    let slot = layout.first_slots[layout.plan_index[o.node]] + o.index;
                    fetched[slot] = true;
                    Source::Slot(slot)
                }
            })
            .collect();
        let roots = (0..nodes.len()).filter(|&p| nodes[p].pending == 0).collect();
        let cond_kinds = if has_cond {
            order
                .iter()
                .map(|&id| match roles[id] {
                    Some(ControlFlow::Switch) => CondKind::Switch,
                    Some(ControlFlow::Merge) => CondKind::Merge,
                    _ => CondKind::Normal,
                })
                .collect()
        } else {
            Vec::new()
        };
        if cond_kinds.is_empty() {
            mark_hand_offs(&mut nodes, &layout, &fetched);
        }
        Ok(ExecutionPlan {
            nodes,
            input_sources: layout.input_sources,
            successor_list: layout.successor_list,
            roots,
            readers: layout.readers,
            fetched,
            fetches,
            feed_specs,
            spare_buffers: SpareBuffers::default(),
            control_flow,
            cond_kinds,
            constants,
            graph: graph_arc.clone(),
            optimizer_report: None,
            partitions: Vec::new(),
            profile_names: OnceLock::new(),
            timeline_labels: OnceLock::new(),
            step_name: sig.describe(graph),
            cluster: None,
            splits_work,
        })
    }
}

/// A step's feeds, fetches and targets, resolved against the graph a plan runs.
pub(crate) struct Signature {
    /// Fed tensors, by name as given and as outputs.
    pub feeds: Vec<(String, Output)>,
    /// Fetched tensors.
    pub fetches: Vec<(String, Output)>,
    /// Nodes run as targets.
    pub targets: Vec<NodeId>,
}

impl Signature {
    /// The step in words: what it fetches and runs (shortened past a few names).
    pub(crate) fn describe(&self, graph: &Graph) -> String {
        fn list(mut names: impl Iterator<Item = String>, total: usize) -> String {
            let shown: Vec<String> = names.by_ref().take(3).collect();
            match total.saturating_sub(shown.len()) {
                0 => shown.join(", "),
                more => format!("{} and {more} more", shown.join(", ")),
            }
        }
        let mut parts = Vec::new();
        if !self.fetches.is_empty() {
            let names = self.fetches.iter().map(|(n, _)| n.clone());
            parts.push(format!("fetching {}", list(names, self.fetches.len())));
        }
        if !self.targets.is_empty() {
            let names = self.targets.iter().map(|&t| graph.node(t).name.clone());
            parts.push(format!("running {}", list(names, self.targets.len())));
        }
        if parts.is_empty() {
            return "the empty step".into();
        }
        format!("the step {}", parts.join(" and "))
    }

    /// Resolves tensor names (`x:0`) and target node names (`train`, `^train`) in `graph`.
    pub(crate) fn resolve(
        graph: &Graph,
        feeds: &[&str],
        fetches: &[&str],
        targets: &[&str],
    ) -> Result<Signature, RuntimeError> {
        let tensor = |what: &'static str, name: &str| {
            graph.output_by_name(name).map(|o| (name.to_string(), o)).map_err(|e| RuntimeError::NoSuchTensor {
                what,
                name: name.to_string(),
                source: Box::new(e),
            })
        };
        let feeds = feeds.iter().map(|f| tensor("feed", f)).collect::<Result<Vec<_>, _>>()?;
        for (i, (name, o)) in feeds.iter().enumerate() {
            if feeds[..i].iter().any(|(_, p)| p == o) {
                return Err(RuntimeError::FedTwice { tensor: name.clone() });
            }
        }
        let fetches = fetches.iter().map(|f| tensor("fetch", f)).collect::<Result<Vec<_>, _>>()?;
        let targets = targets
            .iter()
            .map(|name| {
                let t = name.strip_prefix('^').unwrap_or(name);
                graph.find(t).ok_or_else(|| RuntimeError::NoSuchTensor {
                    what: "target",
                    name: name.to_string(),
                    source: Box::new(GraphError::NoSuchNode(t.to_string())),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Signature { feeds, fetches, targets })
    }
}

/// The nodes the fetches and targets need: walking back from them, stopping at fed tensors.
/// A node whose outputs are all fed does not run; control edges from it are satisfied (as when
/// TensorFlow feeds a placeholder that a constant depends on). A `_Recv` needs its `_Send` and
/// what that sends.
fn prune(graph: &Graph, sig: &Signature, fed: &HashMap<Output, usize>, transfers: &Transfers) -> Vec<bool> {
    let mut fed_outputs = vec![0usize; graph.len()];
    for o in fed.keys() {
        fed_outputs[o.node] += 1;
    }
    let fully_fed = |id: NodeId| fed_outputs[id] > 0 && fed_outputs[id] == graph.node(id).num_outputs();
    let mut needed = vec![false; graph.len()];
    let mut stack: Vec<NodeId> =
        sig.fetches.iter().filter(|(_, o)| !fed.contains_key(o)).map(|(_, o)| o.node).collect();
    stack.extend(&sig.targets);
    while let Some(id) = stack.pop() {
        if std::mem::replace(&mut needed[id], true) {
            continue;
        }
        let node = graph.node(id);
        stack.extend(node.inputs.iter().filter(|o| !fed.contains_key(o)).map(|o| o.node));
        stack.extend(node.control_inputs.iter().copied().filter(|&c| !fully_fed(c)));
        if let Some((send, o)) = transfers.of_recv(id) {
            // Run the _Send too (it marks the transfer in step stats) and what it sends.
            stack.push(send);
            if !fed.contains_key(&o) {
                stack.push(o.node);
            }
        }
    }
    needed
}

/// Evaluates the needed `Const` nodes without control inputs once, into plan constants that
/// their consumers read (no kernel call, no scheduling per step); they leave `needed`.
fn evaluate_constants(
    graph: &Graph,
    needed: &mut [bool],
    fed: &HashMap<Output, usize>,
) -> Result<(Vec<Tensor>, HashMap<NodeId, usize>), RuntimeError> {
    let kernels = KernelRegistry::global();
    let def = OpRegistry::global().get("Const").expect("Const is registered");
    let ctx = ferroflow_kernels::KernelContext { intra_op: None, resources: None, step: None };
    let mut constants = Vec::new();
    let mut source = HashMap::new();
    for (id, n) in graph.nodes().iter().enumerate() {
        if !needed[id]
            || n.op != "Const"
            || !n.control_inputs.is_empty()
            || fed.contains_key(&Output { node: id, index: 0 })
        {
            continue;
        }
        let kernel_error = |e| RuntimeError::Kernel { node: n.name.clone(), op: n.op.clone(), source: Box::new(e) };
        let kernel =
            kernels.create(&NodeDesc { name: &n.name, def, attrs: &n.attrs, types: &n.types }).map_err(kernel_error)?;
        let mut out = Vec::with_capacity(1);
        kernel.compute(&ctx, &mut Vec::new(), &mut out).map_err(kernel_error)?;
        source.insert(id, constants.len());
        constants.extend(out.into_iter().take(1));
        needed[id] = false;
    }
    Ok((constants, source))
}

/// Creates each plan node's kernel: a CPU kernel, a function call, or the executor's or the
/// rendezvous' own handling, as the registry declares the op's execution.
fn instantiate(
    graph: &Graph,
    order: &[NodeId],
    roles: &[Option<ControlFlow>],
    functions: &dyn FunctionLibraryRuntime,
    transfers: &Transfers,
) -> Result<Vec<PlanNode>, RuntimeError> {
    let ops = OpRegistry::global();
    let kernels = KernelRegistry::global();
    let mut nodes = Vec::with_capacity(order.len());
    let mut first_slot = 0;
    for &id in order {
        let n = graph.node(id);
        let kernel_error =
            |source| RuntimeError::Kernel { node: n.name.clone(), op: n.op.clone(), source: Box::new(source) };
        let kernel: Box<dyn OpKernel> = match ops.get(&n.op) {
            Some(def) => match def.facts.execution {
                Execution::Kernel => kernels
                    .create(&NodeDesc { name: &n.name, def, attrs: &n.attrs, types: &n.types })
                    .map_err(kernel_error)?,
                Execution::Call(kind) => functional::create(graph, n, kind, functions)?,
                Execution::ControlFlow(_) => Box::new(ControlFlowOp),
                Execution::Transfer(end @ (Transfer::Send | Transfer::Recv)) => match transfers.remote_kernel(n, end)? {
                    Some(k) => k,
                    None if end == Transfer::Send => Box::new(crate::rendezvous::Send),
                    None => Box::new(crate::rendezvous::Recv),
                },
                Execution::Transfer(Transfer::Arg | Transfer::Retval) => {
                    return Err(kernel_error(ferroflow_kernels::KernelError::InvalidArgument(
                        "feeds and fetches of a reported partition graph do not run: merge the partitions first (ferroflow merge-partitions)".into(),
                    )))
                }
            },
            // A node whose op is a library function calls it.
            None if LibraryOps { library: &graph.library }.function(&n.op).is_some() => {
                functional::create(graph, n, CallKind::Call, functions)?
            }
            None => {
                return Err(kernel_error(ferroflow_kernels::KernelError::InvalidArgument("op is not registered".into())))
            }
        };
        nodes.push(PlanNode {
            kernel,
            graph_id: id as u32,
            first_slot: first_slot as u32,
            inputs: (0, 0),
            successors: (0, 0),
            pending: 0,
            output_types: n.types.outputs.iter().copied().collect(),
            role: roles[id],
            hand_off: false,
        });
        first_slot += n.num_outputs();
    }
    Ok(nodes)
}

/// Marks the nodes whose output the executor hands to the next node directly: one output,
/// read once, not fetched, by the node's only successor, which has no other pending edge
/// (so it is ready the moment this node finishes, and is the one the executor runs next on
/// this thread) and no other input. A chain of such nodes (activations, casts, unary math)
/// then passes its tensor along without a slot write, a slot read or a reader count.
fn mark_hand_offs(nodes: &mut [PlanNode], layout: &Layout, fetched: &[bool]) {
    for p in 0..nodes.len() {
        let (a, b) = nodes[p].successors;
        if nodes[p].output_types.len() != 1 || b != a + 1 {
            continue;
        }
        let entry = layout.successor_list[a as usize];
        if entry & SINGLE_EDGE == 0 {
            continue;
        }
        let slot = nodes[p].first_slot as usize;
        let s = &nodes[(entry & !SINGLE_EDGE) as usize];
        let (ia, ib) = s.inputs;
        nodes[p].hand_off = layout.readers[slot] == 1
            && !fetched[slot]
            && s.role.is_none()
            && ib == ia + 1
            && matches!(layout.input_sources[ia as usize], Source::Slot(x) if x == slot);
    }
}

/// Where every plan node reads its inputs from and whom it notifies: the flat arrays the
/// executor walks.
struct Layout {
    input_sources: Vec<Source>,
    successor_list: Vec<u32>,
    readers: Vec<u32>,
    num_slots: usize,
    /// Each plan node's first output slot.
    first_slots: Vec<usize>,
    /// Each graph node's plan index (`usize::MAX` when it does not run).
    plan_index: Vec<usize>,
}

impl Layout {
    /// Lays out inputs, successors (one entry per edge; those with a single incoming edge
    /// marked), pending counts and slot readers.
    fn wire(
        graph: &Graph,
        order: &[NodeId],
        nodes: &mut [PlanNode],
        fed: &HashMap<Output, usize>,
        const_source: &HashMap<NodeId, usize>,
        transfers: &Transfers,
    ) -> Layout {
        let mut plan_index = vec![usize::MAX; graph.len()];
        for (p, &id) in order.iter().enumerate() {
            plan_index[id] = p;
        }
        let first_slots: Vec<usize> = nodes.iter().map(|n| n.first_slot as usize).collect();
        let num_slots = nodes.last().map_or(0, |n| n.first_slot as usize + n.output_types.len());
        let mut readers = vec![0u32; num_slots];
        let mut input_sources = Vec::new();
        let mut successors: Vec<Vec<u32>> = vec![Vec::new(); nodes.len()];
        for (p, &id) in order.iter().enumerate() {
            let n = graph.node(id);
            let start = input_sources.len() as u32;
            let received = transfers.of_recv(id).map(|(_, o)| o);
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
        Layout { input_sources, successor_list, readers, num_slots, first_slots, plan_index }
    }
}
