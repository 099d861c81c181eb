//! `Session`: runs a graph by tensor names, with plans cached per signature.
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use ferroflow_graph::{Attrs, Graph, Node};
use ferroflow_kernels::resource::ResourceMgr;
use ferroflow_kernels::step::{Cancellation, StepControl};
use ferroflow_kernels::{KResult, KernelContext, KernelError};
use ferroflow_ops::infer_shapes;
use ferroflow_optimize::{Item, MetaOptimizer, OptimizeError};
use ferroflow_proto::FunctionDefLibrary;
use ferroflow_proto::{run_options, RunMetadata, RunOptions};
use ferroflow_tensor::{Shape, Tensor};

use crate::cluster::{cluster_begin, cluster_end, Record};
use crate::device::CPU0;
use crate::env::RuntimeEnv;
use crate::function_library::{function_graph, FunctionBody, FunctionGraph, FunctionLibraryRuntime};
use crate::options::SessionOptions;
use crate::plan::{ExecutionPlan, Signature};
use crate::{executor, FunctionDefError, RuntimeError};

/// The plan cache's key: a signature's names, as given.
struct PlanKey {
    feeds: Vec<String>,
    fetches: Vec<String>,
    targets: Vec<String>,
}

impl PlanKey {
    fn new(feeds: &[&str], fetches: &[&str], targets: &[&str]) -> PlanKey {
        let own = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        PlanKey { feeds: own(feeds), fetches: own(fetches), targets: own(targets) }
    }

    fn is(&self, feeds: &[&str], fetches: &[&str], targets: &[&str]) -> bool {
        let same = |a: &[String], b: &[&str]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y);
        same(&self.feeds, feeds) && same(&self.fetches, fetches) && same(&self.targets, targets)
    }
}

/// Compiled plans by the hash of their signature (a few share a hash at most).
type PlanCache = HashMap<u64, Vec<(PlanKey, Arc<ExecutionPlan>)>>;

/// A hash of a signature's names, computed without allocating.
fn signature_hash(feeds: &[&str], fetches: &[&str], targets: &[&str]) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    for list in [feeds, fetches, targets] {
        list.len().hash(&mut h);
        for s in list {
            s.hash(&mut h);
        }
    }
    h.finish()
}

/// Runs a graph: `run(feeds, fetches, targets)` by tensor and node names.
pub struct Session {
    devices: Arc<crate::device::DeviceSet>,
    graph: Arc<Graph>,
    /// The graph's static shapes (what plans of the graph as written use).
    shapes: Arc<Vec<Vec<Shape>>>,
    env: RuntimeEnv,
    /// Compiled plans by signature hash (a lookup allocates nothing).
    plans: Mutex<PlanCache>,
}

impl Session {
    /// Creates a session over `graph` (validated: shapes are inferred once here).
    pub fn new(graph: Graph, options: SessionOptions) -> Result<Session, RuntimeError> {
        let devices = match options.cluster {
            Some(c) if c.tasks > 1 => crate::device::DeviceSet::workers(c.tasks),
            _ => crate::device::DeviceSet::cpus(options.cpu_devices.max(1)),
        };
        Session::with_env(graph, devices, RuntimeEnv::new(options)?)
    }

    /// A session for a function body, sharing its caller's pools and options (it runs on the
    /// caller's device).
    fn child(graph: Graph, env: RuntimeEnv) -> Result<Session, RuntimeError> {
        Session::with_env(graph, crate::device::DeviceSet::cpus(1), env)
    }

    fn with_env(graph: Graph, devices: crate::device::DeviceSet, env: RuntimeEnv) -> Result<Session, RuntimeError> {
        Session::sharing(graph, Arc::new(devices), env)
    }

    fn sharing(graph: Graph, devices: Arc<crate::device::DeviceSet>, env: RuntimeEnv) -> Result<Session, RuntimeError> {
        let shapes = Arc::new(infer_shapes(&graph)?);
        Ok(Session { devices, graph: Arc::new(graph), shapes, env, plans: Mutex::new(HashMap::new()) })
    }

    /// A session over `graph` — this session's graph with nodes added (TensorFlow's
    /// `Session.extend`: Python code that builds more of its graph after creating the
    /// session) — with the same devices, thread pools and resources, so the variables keep
    /// their values. Plans are compiled afresh.
    pub fn extended(&self, graph: Graph) -> Result<Session, RuntimeError> {
        Session::sharing(graph, self.devices.clone(), self.env.clone())
    }

    /// The session's variables and random-generator states (shared by every plan).
    pub fn resources(&self) -> &Arc<ResourceMgr> {
        &self.env.resources
    }

    /// The variable that the `VarHandleOp` node `name` of the session's graph refers to (by its
    /// `container` and `shared_name`, as the op's kernel finds it), once a step created it;
    /// `None` for another node or a variable no step has touched.
    pub fn variable(&self, name: &str) -> Option<Arc<ferroflow_kernels::resource::Variable>> {
        let node = self.graph.node(self.graph.find(name)?);
        if node.op != "VarHandleOp" {
            return None;
        }
        let attr = |key: &str| match node.attrs.get(key).and_then(|a| a.value.as_ref()) {
            Some(ferroflow_proto::attr_value::Value::S(s)) => String::from_utf8_lossy(s).into_owned(),
            _ => String::new(),
        };
        let key = ferroflow_kernels::resource::handle_key(&attr("container"), &attr("shared_name"), &node.name);
        self.env.resources.lookup(&key)
    }

    /// The session's graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The plan for this signature, compiled on first use and cached.
    pub fn plan(&self, feeds: &[&str], fetches: &[&str], targets: &[&str]) -> Result<Arc<ExecutionPlan>, RuntimeError> {
        let hash = signature_hash(feeds, fetches, targets);
        let cached = |plans: &PlanCache| {
            plans.get(&hash)?.iter().find(|(k, _)| k.is(feeds, fetches, targets)).map(|(_, p)| p.clone())
        };
        if let Some(p) = cached(&self.plans.lock().unwrap_or_else(|p| p.into_inner())) {
            return Ok(p);
        }
        let plan = Arc::new(self.compile(feeds, fetches, targets)?);
        let mut plans = self.plans.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = cached(&plans) {
            return Ok(p); // compiled meanwhile by another thread
        }
        plans.entry(hash).or_default().push((PlanKey::new(feeds, fetches, targets), plan.clone()));
        Ok(plan)
    }

    /// Optimizes the graph for the signature, places and partitions it when the session has
    /// several devices, infers its shapes once, and builds the plan.
    fn compile(&self, feeds: &[&str], fetches: &[&str], targets: &[&str]) -> Result<ExecutionPlan, RuntimeError> {
        let opts = &self.env.options.optimizer;
        // In a cluster every rank compiles the whole step's signature (rank 0's fetches
        // included), so every rank optimizes and partitions the same graph; the step's
        // fingerprint check below proves it before any rank runs.
        let (graph, report) = if opts.enabled {
            let own = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
            let item = Item { feeds: own(feeds), fetches: own(fetches), targets: own(targets), keep: vec![] };
            let optimized = MetaOptimizer::new(opts.clone()).optimize(&self.graph, &item).map_err(|e| match e {
                OptimizeError::BadItem { what, name, source } => RuntimeError::NoSuchTensor { what, name, source },
                OptimizeError::Graph(g) => RuntimeError::Graph(g),
                other => RuntimeError::Optimizer(other),
            })?;
            (Arc::new(optimized.graph), Some(optimized.report))
        } else {
            (self.graph.clone(), None)
        };
        // Shapes once per plan: the optimized graph's, or the session's for the graph as written.
        let shapes = if report.is_some() { Arc::new(infer_shapes(&graph)?) } else { self.shapes.clone() };
        if self.devices.devices().len() > 1 {
            // Place, partition per device, and run the partitions' union as one plan.
            let mut placed = (*graph).clone();
            let cluster = self.env.options.cluster.filter(|c| c.tasks > 1);
            if let Some(c) = cluster {
                crate::cluster::check_tasks(&placed, c)?;
            }
            crate::placer::place(&mut placed, &self.devices, &self.env.options.placement)?;
            let parts = crate::partition::partition(placed, (*shapes).clone(), &self.devices)?;
            let union = Arc::new(parts.graph.clone());
            let mut sig = Signature::resolve(&union, feeds, fetches, targets)?;
            if let Some(c) = cluster {
                // This task's partitions only: its sends to other tasks run whatever is
                // fetched; fetches elsewhere would make this rank run another's nodes.
                crate::cluster::restrict_to_task(&union, &mut sig, c)?;
            }
            let mut reported = crate::partition::with_client_plumbing(&parts.graph_defs(), &union, feeds, fetches);
            let mut plan = ExecutionPlan::build(union, &parts.shapes, &sig, &self.env, self)?;
            plan.optimizer_report = report;
            if let Some(c) = cluster {
                let names: Vec<&str> = feeds.iter().chain(fetches).chain(targets).copied().collect();
                plan.cluster = Some((c, crate::cluster::fingerprint(&names, &reported)));
                // This rank reports the partitions it runs; rank 0 gathers the others'.
                reported.retain(|(device, g)| crate::device::task_of(device) == c.task && !g.node.is_empty());
            }
            plan.partitions = reported;
            return Ok(plan);
        }
        let sig = Signature::resolve(&graph, feeds, fetches, targets)?;
        let mut plan = ExecutionPlan::build(graph, &shapes, &sig, &self.env, self)?;
        plan.optimizer_report = report;
        Ok(plan)
    }

    /// Runs one step: feeds tensors by name (`x:0`), returns the fetched tensors in order,
    /// and also runs the target nodes. Only what the fetches and targets need is run.
    pub fn run(
        &self,
        feeds: &[(&str, Tensor)],
        fetches: &[&str],
        targets: &[&str],
    ) -> Result<Vec<Tensor>, RuntimeError> {
        let names: Vec<&str> = feeds.iter().map(|(n, _)| *n).collect();
        let plan = self.plan(&names, fetches, targets)?;
        let values: Vec<Tensor> = feeds.iter().map(|(_, t)| t.clone()).collect();
        self.run_plan(&plan, &values)
    }

    /// Runs a plan from [`Session::plan`] with feeds in the plan's feed order.
    pub fn run_plan(&self, plan: &ExecutionPlan, feeds: &[Tensor]) -> Result<Vec<Tensor>, RuntimeError> {
        if plan.cluster.is_some() {
            // A cluster step: it joins the ranks' exchanges before and after the step.
            return Ok(self.run_plan_with(plan, feeds, &RunOptions::default(), None)?.0);
        }
        self.execute(plan, feeds, None, &StepControl::default())
    }

    /// Runs a plan as part of a step that is already running (a function body): the step's
    /// cancellation and deadline apply.
    pub(crate) fn run_plan_in_step(
        &self,
        plan: &ExecutionPlan,
        feeds: &[Tensor],
        step: Option<&StepControl>,
    ) -> Result<Vec<Tensor>, RuntimeError> {
        match step {
            Some(step) => self.execute(plan, feeds, None, step),
            None => self.execute(plan, feeds, None, &StepControl::default()),
        }
    }

    /// Runs one step with TensorFlow's `RunOptions`: with `trace_level` above `NO_TRACE` the
    /// returned `RunMetadata.step_stats` has a `NodeExecStats` per executed node; with
    /// `output_partition_graphs` it holds the graph each device ran (after optimization; one
    /// CPU device today, every node's device set to its full name).
    pub fn run_with_options(
        &self,
        feeds: &[(&str, Tensor)],
        fetches: &[&str],
        targets: &[&str],
        options: &RunOptions,
    ) -> Result<(Vec<Tensor>, RunMetadata), RuntimeError> {
        self.run_with(feeds, fetches, targets, options, None)
    }

    /// [`Session::run_with_options`] that `cancel` can stop from another thread (see
    /// [`Session::run_plan_with`]).
    pub fn run_with(
        &self,
        feeds: &[(&str, Tensor)],
        fetches: &[&str],
        targets: &[&str],
        options: &RunOptions,
        cancel: Option<&Cancellation>,
    ) -> Result<(Vec<Tensor>, RunMetadata), RuntimeError> {
        let names: Vec<&str> = feeds.iter().map(|(n, _)| *n).collect();
        let plan = self.plan(&names, fetches, targets)?;
        let values: Vec<Tensor> = feeds.iter().map(|(_, t)| t.clone()).collect();
        self.run_plan_with(&plan, &values, options, cancel)
    }

    /// [`Session::run_plan`] with `RunOptions` and `RunMetadata`.
    pub fn run_plan_with_options(
        &self,
        plan: &ExecutionPlan,
        feeds: &[Tensor],
        options: &RunOptions,
    ) -> Result<(Vec<Tensor>, RunMetadata), RuntimeError> {
        self.run_plan_with(plan, feeds, options, None)
    }

    /// Runs one step recording step stats (as `FULL_TRACE`), returned unconverted: the
    /// recording costs a few tens of ns per node inside the step; TensorFlow's protos are made
    /// only when the caller asks for them ([`StepTrace::into_step_stats`]).
    ///
    /// [`StepTrace::into_step_stats`]: crate::StepTrace::into_step_stats
    pub fn run_plan_traced(
        &self,
        plan: &ExecutionPlan,
        feeds: &[Tensor],
    ) -> Result<(Vec<Tensor>, crate::StepTrace), RuntimeError> {
        if plan.cluster.is_some() {
            return Err(RuntimeError::Cluster(
                "run_plan_traced records one process's step; in a cluster run the step with run_plan_with and \
                 FULL_TRACE, which gathers every rank's step stats to rank 0"
                    .into(),
            ));
        }
        let tracer = crate::trace::Tracer::new();
        let out = self.execute(plan, feeds, Some(&tracer), &StepControl::default())?;
        Ok((out, crate::StepTrace { graph: plan.graph().clone(), labels: plan.timeline_labels().clone(), tracer }))
    }

    /// [`Session::run_plan_with_options`] that `cancel` can stop from another thread. The
    /// step also stops after `options.timeout_in_ms` (when positive). Either way it fails with
    /// [`RuntimeError::Interrupted`], naming the nodes still running; a kernel that has
    /// started finishes first, loops stop between iterations.
    pub fn run_plan_with(
        &self,
        plan: &ExecutionPlan,
        feeds: &[Tensor],
        options: &RunOptions,
        cancel: Option<&Cancellation>,
    ) -> Result<(Vec<Tensor>, RunMetadata), RuntimeError> {
        let step = StepControl::new(cancel.cloned(), options.timeout_in_ms.max(0) as u64);
        let want = Record {
            trace: options.trace_level != run_options::TraceLevel::NoTrace as i32,
            partitions: options.output_partition_graphs,
        };
        let record = cluster_begin(plan, want)?;
        let tracer = record.trace.then(crate::trace::Tracer::new);
        let out = self.execute(plan, feeds, tracer.as_ref(), &step)?;
        let mut meta = RunMetadata::default();
        if let Some(t) = tracer {
            meta.step_stats = Some(t.finish(plan.graph(), plan.timeline_labels(), CPU0));
        }
        if record.partitions {
            if plan.partitions.is_empty() && plan.cluster.is_none() {
                let mut def = plan.graph().to_graph_def();
                for n in &mut def.node {
                    if n.device.is_empty() {
                        n.device = CPU0.into();
                    }
                }
                meta.partition_graphs.push(def);
            } else {
                meta.partition_graphs.extend(plan.partitions.iter().map(|(_, g)| g.clone()));
            }
        }
        if record.trace || record.partitions {
            meta = cluster_end(plan, meta)?;
        }
        Ok((out, meta))
    }

    fn execute(
        &self,
        plan: &ExecutionPlan,
        feeds: &[Tensor],
        tracer: Option<&crate::trace::Tracer>,
        step: &StepControl,
    ) -> Result<Vec<Tensor>, RuntimeError> {
        static RUN: ferroflow_profiler::LazyName = ferroflow_profiler::LazyName::new();
        let _profiled = ferroflow_profiler::run_scope(&RUN, || "Session::run".into());
        if feeds.len() != plan.feed_specs.len() {
            return Err(RuntimeError::FeedCount { expected: plan.feed_specs.len(), got: feeds.len() });
        }
        for ((name, dtype, shape), t) in plan.feed_specs.iter().zip(feeds) {
            if t.dtype() != *dtype {
                return Err(RuntimeError::FeedDType { tensor: name.clone(), expected: *dtype, got: t.dtype() });
            }
            if !shape.is_compatible_with(t.dims()) {
                return Err(RuntimeError::FeedShape {
                    tensor: name.clone(),
                    expected: shape.clone(),
                    got: t.dims().to_vec(),
                });
            }
        }
        let _limit = ferroflow_tensor::limit::scoped(self.env.options.memory_limit_bytes);
        let ctx = self.env.kernel_context(step);
        if plan.control_flow {
            let limit = self.env.options.max_loop_iterations;
            let run = || crate::dynamic::execute(plan, &plan.graph, feeds, &ctx, limit, tracer);
            // The interpreter runs on one thread; run it on an intra-op thread so kernels that
            // split their work share that pool instead of adding threads to the cores.
            return match self.env.intra_op.as_deref() {
                Some(pool) => pool.install(run),
                None => run(),
            };
        }
        executor::execute(plan, &plan.graph, feeds, &self.env.inter_op, ctx, tracer)
    }
}

/// The deepest chain of nested function calls a plan instantiates (each level compiles a
/// child plan on the stack).
const MAX_CALL_DEPTH: usize = 64;

/// A function body: a child session over the function's graph, sharing the caller's pools,
/// and its compiled plan.
struct ChildFunction {
    session: Session,
    plan: Arc<ExecutionPlan>,
}

impl FunctionBody for ChildFunction {
    fn run(&self, ctx: &KernelContext, args: &[Tensor]) -> KResult<Vec<Tensor>> {
        self.session.run_plan_in_step(&self.plan, args, ctx.step).map_err(|e| KernelError::Function(Box::new(e)))
    }
}

impl FunctionLibraryRuntime for Session {
    fn instantiate(
        &self,
        call_site: &Node,
        library: &FunctionDefLibrary,
        name: &str,
        call: &Attrs,
    ) -> Result<Box<dyn FunctionBody>, RuntimeError> {
        let err = |source: FunctionDefError| RuntimeError::Function {
            node: call_site.name.clone(),
            op: call_site.op.clone(),
            source: Box::new(source),
        };
        let stack = &self.env.call_stack;
        if stack.iter().any(|f| f == name) {
            return Err(err(FunctionDefError::Recursion { name: name.to_string(), chain: stack.join(" -> ") }));
        }
        if stack.len() >= MAX_CALL_DEPTH {
            let outer = stack.first().map_or("", String::as_str);
            return Err(err(FunctionDefError::TooDeep {
                name: name.to_string(),
                outer: outer.to_string(),
                limit: MAX_CALL_DEPTH,
            }));
        }
        let FunctionGraph { graph, feeds, fetches, targets } = function_graph(library, name, call).map_err(err)?;
        let mut env = self.env.clone();
        env.call_stack.push(name.to_string());
        let session = Session::child(graph, env)?;
        fn refs(v: &[String]) -> Vec<&str> {
            v.iter().map(String::as_str).collect()
        }
        let plan = session.plan(&refs(&feeds), &refs(&fetches), &refs(&targets))?;
        Ok(Box::new(ChildFunction { session, plan }))
    }

    fn max_loop_iterations(&self) -> u64 {
        self.env.options.max_loop_iterations
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferroflow_ops::Scope;
    use ferroflow_ops::{Ops, RawOps};
    use ferroflow_tensor::DType;

    #[test]
    fn feeds_prune_and_validate() {
        let s = Scope::new();
        let x = s.placeholder(DType::Float, &Shape::new(vec![None, Some(2)])).unwrap();
        let two = s.scalar(2.0f32).unwrap();
        let y = s.mul(x, two).unwrap();
        let z = s.add_v2(y, y).unwrap();
        let sess = Session::new(s.graph(), SessionOptions::default()).unwrap();
        let feed = Tensor::from_vec(&[1, 2], vec![1.0f32, 3.0]).unwrap();
        let r = sess.run(&[("Placeholder:0", feed.clone())], &["add:0", "mul"], &[]).unwrap();
        assert_eq!(r[0].as_slice::<f32>().unwrap(), &[4.0, 12.0]);
        assert_eq!(r[1].as_slice::<f32>().unwrap(), &[2.0, 6.0]);
        // Feeding an intermediate tensor cuts the graph there: the placeholder is not needed.
        let r = sess.run(&[("mul:0", feed.clone())], &["add:0"], &[]).unwrap();
        assert_eq!(r[0].as_slice::<f32>().unwrap(), &[2.0, 6.0]);
        // Fetching a fed tensor returns the feed.
        assert_eq!(sess.run(&[("mul:0", feed.clone())], &["mul:0"], &[]).unwrap()[0], feed);

        let e = sess.run(&[("Placeholder:0", Tensor::scalar(1i32))], &["add:0"], &[]).unwrap_err().to_string();
        assert!(e.contains("feed 'Placeholder:0'") && e.contains("float") && e.contains("int32"), "{e}");
        let bad = Tensor::from_vec(&[3], vec![1.0f32; 3]).unwrap();
        let e = sess.run(&[("Placeholder:0", bad)], &["add:0"], &[]).unwrap_err().to_string();
        assert!(e.contains("expected shape [?,2], got [3]"), "{e}");
        let e = sess.run(&[], &["add:0"], &[]).unwrap_err().to_string();
        assert!(e.contains("You must feed a value for placeholder tensor 'Placeholder'"), "{e}");
        let e = sess.run(&[], &["nope:0"], &[]).unwrap_err().to_string();
        assert!(e.contains("fetch 'nope:0'") && e.contains("no node named 'nope'"), "{e}");
        let e = sess.run(&[], &["add:1"], &[]).unwrap_err().to_string();
        assert!(e.contains("has 1 output"), "{e}");
        let _ = z;
    }

    #[test]
    fn wide_and_deep_graphs_run_in_parallel_correctly() {
        let s = Scope::new();
        let x = s.placeholder(DType::Float, &Shape::scalar()).unwrap();
        let mut outs = Vec::new();
        for i in 0..300 {
            let c = s.scalar(i as f32).unwrap();
            let mut v = s.add_v2(x, c).unwrap();
            for _ in 0..5 {
                v = s.unary("Neg", v).unwrap();
            }
            outs.push(v);
        }
        let total = s.pack_with(&outs, ferroflow_ops::attrs::Pack::new().axis(0)).unwrap();
        let sum = s.reduce("Sum", total, &[0], false).unwrap();
        let g = s.graph();
        let name = g.output_name(sum);
        let sess =
            Session::new(g, SessionOptions { inter_op_threads: 2, intra_op_threads: 1, ..Default::default() }).unwrap();
        for _ in 0..20 {
            let r = sess.run(&[("Placeholder:0", Tensor::scalar(1.0f32))], &[&name], &[]).unwrap();
            // Five negations: -(1 + i) summed over i = 0..300.
            assert_eq!(r[0].scalar_value::<f32>().unwrap(), -(300.0 + 299.0 * 300.0 / 2.0));
        }
    }

    #[test]
    fn chains_hand_tensors_over_without_slots() {
        let s = Scope::new();
        let x = s.placeholder(DType::Float, &Shape::unknown()).unwrap();
        let a = s.unary("Neg", x).unwrap();
        let b = s.unary("Square", a).unwrap(); // fetched: its output must reach the slot
        let c = s.unary("Neg", b).unwrap();
        let d = s.unary("Neg", c).unwrap(); // two readers
        let e = s.add_v2(d, d).unwrap();
        let r = s.reshape(e, &[2, 2]).unwrap(); // fails unless fed 4 elements
        let f = s.unary("Neg", r).unwrap();
        let g = s.graph();
        let names: Vec<String> = [b, f].iter().map(|&o| g.output_name(o)).collect();
        let fetch: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut options = SessionOptions::default();
        options.optimizer.enabled = false; // it would fuse the chain
        let sess = Session::new(g, options).unwrap();
        let plan = sess.plan(&["Placeholder:0"], &fetch, &[]).unwrap();
        let handing: Vec<&str> = plan
            .nodes
            .iter()
            .filter(|n| n.hand_off)
            .map(|n| plan.graph().node(n.graph_id as usize).name.as_str())
            .collect();
        // Neg → Square, Neg_1 → Neg_2 and Reshape → Neg_3 hand over; Square is fetched, `d`
        // has two readers, `add` feeds a Reshape with a second input (its shape).
        assert_eq!(handing, ["Neg", "Neg_1", "Reshape"], "{handing:?}");
        for _ in 0..3 {
            let bad = Tensor::from_vec(&[3], vec![1.0f32, 2.0, 3.0]).unwrap();
            let err = sess.run_plan(&plan, &[bad]).unwrap_err().to_string();
            assert!(err.contains("Reshape"), "{err}");
            let ok = Tensor::from_vec(&[4], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
            let out = sess.run_plan(&plan, &[ok]).unwrap();
            assert_eq!(out[0].as_slice::<f32>().unwrap(), &[1.0, 4.0, 9.0, 16.0]);
            assert_eq!(out[1].as_slice::<f32>().unwrap(), &[-2.0, -8.0, -18.0, -32.0]);
            assert_eq!(out[1].dims(), &[2, 2]);
        }
    }

    #[test]
    fn kernel_errors_name_the_node() {
        let s = Scope::new();
        let a = s.constant_from(&[2, 3], &[1.0f32; 6]).unwrap();
        let b = s.constant_from(&[2, 3], &[1.0f32; 6]).unwrap();
        let m = s.with_name("mm").matmul(a, b, false, false);
        // The builder checks dtypes only; the session's shape inference rejects the shapes.
        let g = s.graph();
        let e = match Session::new(g, SessionOptions::default()) {
            Err(e) => e.to_string(),
            Ok(sess) => sess.run(&[], &["mm:0"], &[]).unwrap_err().to_string(),
        };
        assert!(e.contains("'mm'") && e.contains("inner dimensions"), "{e}");
        let _ = m;
    }
}
