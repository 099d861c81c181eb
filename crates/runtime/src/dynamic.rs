//! The executor for graphs with TensorFlow 1 control flow (`Switch`, `Merge`, `Enter`,
//! `Exit`, `NextIteration`, `LoopCond`): values carry a frame and iteration, untaken
//! branches carry *dead* tokens, and loops run by feeding `NextIteration` values into the
//! next iteration of their frame — TensorFlow's semantics.
//!
//! It runs on the calling thread, one node at a time, with the same kernels as the parallel
//! executor. Plans without these ops never come here.
use ferroflow_proto::attr::AttrMap;
use std::collections::{HashMap, VecDeque};

use ferroflow_graph::{Graph, NodeId};
use ferroflow_kernels::{KernelContext, KernelError};
use ferroflow_ops::ControlFlow;
use ferroflow_tensor::Tensor;

use crate::plan::{ExecutionPlan, Source};
use crate::RuntimeError;

/// A frame instance (0 is the root) and an iteration within it.
type Ctx = (usize, u64);

/// A value flowing along an edge: a tensor, or dead (its branch was not taken).
#[derive(Clone)]
enum Token {
    Live(Tensor),
    Dead,
}

struct FrameInstance {
    parent: Ctx,
    /// Values of constant `Enter`s, re-delivered to every iteration.
    constants: Vec<(usize, Token)>,
    /// Highest iteration started.
    iterations: u64,
}

/// Inputs gathered for one plan node in one context.
#[derive(Default)]
struct Pending {
    data: Vec<Option<Token>>,
    controls: usize,
    dead_controls: bool,
    fired: bool,
    dead_arrivals: usize,
    /// Merges: every input that arrived (live, dead or control); the entry is dropped once
    /// all that can arrive in its context have.
    arrivals: usize,
}

struct Interpreter<'a> {
    plan: &'a ExecutionPlan,
    graph: &'a Graph,
    /// For each plan node: consumers as (plan node, input slot or None for control).
    consumers: Vec<Vec<(usize, Option<usize>)>>,
    /// For each plan node: its data inputs that come along a loop back edge (from
    /// `NextIteration`).
    back_edges: Vec<usize>,
    /// For each plan node: its data inputs from constant `Enter`s (delivered in every
    /// iteration).
    constant_inputs: Vec<usize>,
    frames: Vec<FrameInstance>,
    frame_ids: HashMap<(Ctx, String), usize>,
    pending: HashMap<(usize, Ctx), Pending>,
    ready: VecDeque<(usize, Ctx, Vec<Token>, bool)>,
    results: HashMap<(usize, usize), Tensor>,
    /// The (plan node, output) pairs the step fetches.
    fetched: std::collections::HashSet<(usize, usize)>,
    limit: u64,
    tracer: Option<&'a crate::trace::Tracer>,
    /// While a profile runs: the run's id and each plan node's event name.
    profile: Option<(i64, &'a [ferroflow_profiler::NameId])>,
}

/// The name and op of plan node `p`.
fn who(graph: &Graph, plan: &ExecutionPlan, p: usize) -> (String, String) {
    let n = graph.node(plan.nodes[p].graph_id as usize);
    (n.name.clone(), n.op.clone())
}

/// A control-flow node used wrongly.
fn error(graph: &Graph, plan: &ExecutionPlan, p: usize, reason: String) -> RuntimeError {
    let (node, op) = who(graph, plan, p);
    RuntimeError::ControlFlow { node, op, reason }
}

/// A kernel's error, with its node.
fn kernel_error(graph: &Graph, plan: &ExecutionPlan, p: usize, e: KernelError) -> RuntimeError {
    let (node, op) = who(graph, plan, p);
    RuntimeError::from_kernel(&node, &op, &plan.step_name, e)
}

impl Interpreter<'_> {
    fn node(&self, p: usize) -> &ferroflow_graph::Node {
        self.graph.node(self.plan.nodes[p].graph_id as usize)
    }

    fn data_inputs(&self, p: usize) -> &[Source] {
        let (a, b) = self.plan.nodes[p].inputs;
        &self.plan.input_sources[a as usize..b as usize]
    }

    /// Delivers output `index` of `p` (or its control signal) in `ctx` to its consumers.
    fn emit(&mut self, p: usize, index: Option<usize>, ctx: Ctx, token: Token) -> Result<(), RuntimeError> {
        if let (Some(i), Token::Live(t)) = (index, &token) {
            // Keep only fetched values: holding every output would keep buffers (and
            // variable reads) alive for the whole step, forcing copies on update.
            if ctx.0 == 0 && self.fetched.contains(&(p, i)) {
                self.results.insert((p, i), t.clone());
            }
        }
        for k in 0..self.consumers[p].len() {
            let (c, slot) = self.consumers[p][k];
            let from_output = match slot {
                Some(s) => {
                    let src = self.data_inputs(c)[s];
                    matches!(src, Source::Slot(x) if Some(x - self.plan.nodes[p].first_slot as usize) == index)
                }
                None => index.is_none(),
            };
            if from_output {
                self.deliver(c, slot, ctx, token.clone())?;
            }
        }
        Ok(())
    }

    fn deliver(&mut self, c: usize, slot: Option<usize>, ctx: Ctx, token: Token) -> Result<(), RuntimeError> {
        let n_data = self.data_inputs(c).len();
        let n_ctrl = self.node(c).control_inputs.len();
        let is_merge = self.plan.nodes[c].role == Some(ControlFlow::Merge);
        let back = self.back_edges[c];
        // Inputs that can arrive at a Merge: forward edges in iteration 0, back edges (and
        // constant Enters, which reach every iteration) later; controls in each.
        let expected = if back == 0 || ctx.1 == 0 { n_data - back } else { back + self.constant_inputs[c] };
        // Feeds count as already arrived.
        let fed = self.data_inputs(c).iter().filter(|s| matches!(s, Source::Feed(_))).count();
        let key = (c, ctx);
        let entry =
            self.pending.entry(key).or_insert_with(|| Pending { data: vec![None; n_data], ..Default::default() });
        entry.arrivals += 1;
        if entry.fired {
            // Only a Merge stays after firing: the rest of its inputs are still to come.
            if entry.arrivals >= expected + n_ctrl {
                self.pending.remove(&key);
            }
            return Ok(());
        }
        match slot {
            Some(s) => entry.data[s] = Some(token.clone()),
            None => {
                entry.controls += 1;
                entry.dead_controls |= matches!(token, Token::Dead);
            }
        }
        if is_merge {
            if let (Some(s), Token::Live(_)) = (slot, &token) {
                entry.fired = true;
                let value = entry.data[s].take().expect("just stored");
                if entry.arrivals >= expected + n_ctrl {
                    self.pending.remove(&key);
                }
                self.ready.push_back((c, ctx, vec![value, Token::Live(Tensor::scalar(s as i32))], false));
                return Ok(());
            }
            entry.dead_arrivals += 1;
            if entry.dead_arrivals >= expected + n_ctrl {
                self.pending.remove(&key);
                self.ready.push_back((c, ctx, vec![Token::Dead, Token::Dead], true));
            }
            return Ok(());
        }
        let arrived = entry.data.iter().filter(|d| d.is_some()).count();
        if arrived + fed == n_data && entry.controls == n_ctrl {
            // Every input has arrived: nothing more comes for this context.
            let entry = self.pending.remove(&key).expect("present");
            let dead = entry.dead_controls || entry.data.iter().any(|d| matches!(d, Some(Token::Dead)));
            let inputs = entry.data.into_iter().map(|d| d.unwrap_or(Token::Dead)).collect();
            self.ready.push_back((c, ctx, inputs, dead));
        }
        Ok(())
    }

    fn frame(&mut self, parent: Ctx, name: &str) -> usize {
        if let Some(&id) = self.frame_ids.get(&(parent, name.to_string())) {
            return id;
        }
        self.frames.push(FrameInstance { parent, constants: Vec::new(), iterations: 0 });
        let id = self.frames.len() - 1;
        self.frame_ids.insert((parent, name.to_string()), id);
        id
    }

    fn run(&mut self, feeds: &[Tensor], ctx: &KernelContext) -> Result<(), RuntimeError> {
        // Start: nodes with no inputs from plan nodes, with their feeds.
        for p in 0..self.plan.nodes.len() {
            if self.plan.nodes[p].pending == 0 {
                let inputs = self.data_inputs(p).iter().map(|s| match s {
                    Source::Feed(f) => Token::Live(feeds[*f].clone()),
                    Source::Const(c) => Token::Live(self.plan.constants[*c].clone()),
                    Source::Slot(_) => Token::Dead,
                });
                self.ready.push_back((p, (0, 0), inputs.collect(), false));
            }
        }
        let mut scratch_in = Vec::new();
        let mut scratch_out = Vec::new();
        // This loop runs its ops back to back: one clock read per profiled op.
        let mut chain = None;
        let bounded = ctx.step.filter(|s| s.is_bounded());
        while let Some((p, c, mut inputs, dead)) = self.ready.pop_front() {
            if let Some(Err(i)) = bounded.map(|s| s.check()) {
                let mut running = vec![p];
                running.extend(self.ready.iter().take(3).map(|r| r.0));
                let running = running.into_iter().map(|q| {
                    let (node, op) = who(self.graph, self.plan, q);
                    format!("{node} ({op})")
                });
                return Err(RuntimeError::interrupted(i, &self.plan.step_name, running.collect()));
            }
            // Feeds are live in every context.
            for (i, s) in self.data_inputs(p).to_vec().into_iter().enumerate() {
                if let Source::Feed(f) = s {
                    inputs[i] = Token::Live(feeds[f].clone());
                }
            }
            let n_out = self.plan.nodes[p].output_types.len();
            match self.plan.nodes[p].role {
                Some(ControlFlow::Merge) => {
                    self.emit(p, Some(0), c, inputs[0].clone())?;
                    self.emit(p, Some(1), c, inputs[1].clone())?;
                    self.emit(p, None, c, if dead { Token::Dead } else { Token::Live(Tensor::scalar(0i32)) })?;
                }
                Some(ControlFlow::Switch) => {
                    let (t_false, t_true) = match (&inputs[0], &inputs[1], dead) {
                        (Token::Live(d), Token::Live(pred), false) => {
                            let pred = pred.scalar_value::<bool>().map_err(|e| {
                                error(self.graph, self.plan, p, format!("pred must be a scalar bool: {e}"))
                            })?;
                            if pred {
                                (Token::Dead, Token::Live(d.clone()))
                            } else {
                                (Token::Live(d.clone()), Token::Dead)
                            }
                        }
                        _ => (Token::Dead, Token::Dead),
                    };
                    self.emit(p, Some(0), c, t_false)?;
                    self.emit(p, Some(1), c, t_true)?;
                    self.emit(p, None, c, if dead { Token::Dead } else { Token::Live(Tensor::scalar(0i32)) })?;
                }
                Some(ControlFlow::Enter) => {
                    let name = match self.node(p).attrs.attr_value("frame_name") {
                        Some(ferroflow_proto::attr_value::Value::S(s)) => String::from_utf8_lossy(s).into_owned(),
                        _ => return Err(error(self.graph, self.plan, p, "Enter needs a frame_name".into())),
                    };
                    let constant = matches!(
                        self.node(p).attrs.attr_value("is_constant"),
                        Some(ferroflow_proto::attr_value::Value::B(true))
                    );
                    let f = self.frame(c, &name);
                    let token = if dead { Token::Dead } else { inputs[0].clone() };
                    // An Enter's control edges, like its output, lie inside the frame (TF2's
                    // lowered loops hang their body's and cond's input NoOps on them).
                    if constant {
                        self.frames[f].constants.push((p, token.clone()));
                        for it in 0..=self.frames[f].iterations {
                            self.emit(p, Some(0), (f, it), token.clone())?;
                            self.emit(p, None, (f, it), signal_of(&token))?;
                        }
                    } else {
                        let signal = signal_of(&token);
                        self.emit(p, Some(0), (f, 0), token)?;
                        self.emit(p, None, (f, 0), signal)?;
                    }
                }
                Some(ControlFlow::Exit) => {
                    if c.0 == 0 {
                        return Err(error(self.graph, self.plan, p, "Exit outside of any loop frame".into()));
                    }
                    if !dead {
                        let parent = self.frames[c.0].parent;
                        self.emit(p, Some(0), parent, inputs[0].clone())?;
                        self.emit(p, None, parent, Token::Live(Tensor::scalar(0i32)))?;
                    }
                }
                Some(ControlFlow::NextIteration) => {
                    if c.0 == 0 {
                        return Err(error(
                            self.graph,
                            self.plan,
                            p,
                            "NextIteration outside of any loop frame (no Enter leads here)".into(),
                        ));
                    }
                    if !dead {
                        let next = c.1 + 1;
                        if self.limit > 0 && next > self.limit {
                            let (node, op) = who(self.graph, self.plan, p);
                            return Err(RuntimeError::LoopLimit { node, op, limit: self.limit });
                        }
                        let f = c.0;
                        if next > self.frames[f].iterations {
                            self.frames[f].iterations = next;
                            for (q, tok) in self.frames[f].constants.clone() {
                                let signal = signal_of(&tok);
                                self.emit(q, Some(0), (f, next), tok)?;
                                self.emit(q, None, (f, next), signal)?;
                            }
                        }
                        self.emit(p, Some(0), (f, next), inputs[0].clone())?;
                    }
                }
                Some(ControlFlow::LoopCond) => {
                    let t = if dead { Token::Dead } else { inputs[0].clone() };
                    let signal = if dead { Token::Dead } else { Token::Live(Tensor::scalar(0i32)) };
                    self.emit(p, Some(0), c, t)?;
                    self.emit(p, None, c, signal)?;
                }
                None if dead => {
                    for i in 0..n_out {
                        self.emit(p, Some(i), c, Token::Dead)?;
                    }
                    self.emit(p, None, c, Token::Dead)?;
                }
                None => {
                    scratch_in.clear();
                    for t in inputs {
                        match t {
                            Token::Live(t) => scratch_in.push(t),
                            Token::Dead => unreachable!("dead inputs take the branch above"),
                        }
                    }
                    let node = &self.plan.nodes[p];
                    let start = self.tracer.map(|t| t.now());
                    crate::executor::profiled(self.profile, p, &mut chain, || {
                        node.kernel.compute(ctx, &mut scratch_in, &mut scratch_out)
                    })
                    .map_err(|e| kernel_error(self.graph, self.plan, p, e))?;
                    if let (Some(t), Some(start)) = (self.tracer, start) {
                        let end = t.now();
                        let timing = crate::trace::Timing { start, op_start: start, op_end: end, end };
                        t.record(node.graph_id as usize, timing, &scratch_out);
                    }
                    let types = &self.plan.nodes[p].output_types;
                    if scratch_out.len() != n_out || scratch_out.iter().zip(types).any(|(t, d)| t.dtype() != *d) {
                        let (node, op) = who(self.graph, self.plan, p);
                        let got = scratch_out.drain(..).map(|t| t.dtype()).collect();
                        return Err(RuntimeError::KernelOutputs { node, op, expected: types.to_vec(), got });
                    }
                    for (i, t) in scratch_out.drain(..).enumerate() {
                        self.emit(p, Some(i), c, Token::Live(t))?;
                    }
                    self.emit(p, None, c, Token::Live(Tensor::scalar(0i32)))?;
                }
            }
        }
        Ok(())
    }
}

/// Runs a plan that contains v1 control flow.
pub(crate) fn execute(
    plan: &ExecutionPlan,
    graph: &Graph,
    feeds: &[Tensor],
    ctx: &KernelContext,
    limit: u64,
    tracer: Option<&crate::trace::Tracer>,
) -> Result<Vec<Tensor>, RuntimeError> {
    let plan_index: HashMap<NodeId, usize> =
        plan.nodes.iter().enumerate().map(|(p, n)| (n.graph_id as usize, p)).collect();
    let mut consumers = vec![Vec::new(); plan.nodes.len()];
    for (c, n) in plan.nodes.iter().enumerate() {
        let node = graph.node(n.graph_id as usize);
        let (a, _) = n.inputs;
        for (s, o) in node.inputs.iter().enumerate() {
            if let (Source::Slot(_), Some(&p)) = (plan.input_sources[a as usize + s], plan_index.get(&o.node)) {
                consumers[p].push((c, Some(s)));
            }
        }
        for ctrl in &node.control_inputs {
            if let Some(&p) = plan_index.get(ctrl) {
                consumers[p].push((c, None));
            }
        }
    }
    let back_edges = plan
        .nodes
        .iter()
        .map(|n| {
            let inputs = &graph.node(n.graph_id as usize).inputs;
            let from_next = |o: &&ferroflow_graph::Output| {
                plan_index.get(&o.node).is_some_and(|&q| plan.nodes[q].role == Some(ControlFlow::NextIteration))
            };
            if n.role == Some(ControlFlow::Merge) {
                inputs.iter().filter(from_next).count()
            } else {
                0
            }
        })
        .collect();
    let is_constant_enter = |q: usize| {
        plan.nodes[q].role == Some(ControlFlow::Enter)
            && matches!(
                graph.node(plan.nodes[q].graph_id as usize).attrs.attr_value("is_constant"),
                Some(ferroflow_proto::attr_value::Value::B(true))
            )
    };
    let constant_inputs = plan
        .nodes
        .iter()
        .map(|n| {
            let inputs = &graph.node(n.graph_id as usize).inputs;
            inputs.iter().filter(|o| plan_index.get(&o.node).is_some_and(|&q| is_constant_enter(q))).count()
        })
        .collect();
    let mut it = Interpreter {
        plan,
        graph,
        consumers,
        back_edges,
        constant_inputs,
        frames: vec![FrameInstance { parent: (0, 0), constants: Vec::new(), iterations: 0 }],
        frame_ids: HashMap::new(),
        pending: HashMap::new(),
        ready: VecDeque::new(),
        results: HashMap::new(),
        fetched: plan
            .fetches
            .iter()
            .filter_map(|src| match *src {
                Source::Slot(s) => {
                    let p = plan.nodes.iter().rposition(|n| (n.first_slot as usize) <= s)?;
                    Some((p, s - plan.nodes[p].first_slot as usize))
                }
                _ => None,
            })
            .collect(),
        limit,
        tracer,
        profile: ferroflow_profiler::enabled().then(|| (crate::executor::run_id(), plan.profile_names())),
    };
    let _run = it.profile.map(|(run, _)| ferroflow_profiler::enter_run(run));
    it.run(feeds, ctx)?;
    plan.fetches
        .iter()
        .map(|src| match *src {
            Source::Feed(f) => Ok(feeds[f].clone()),
            Source::Const(c) => Ok(plan.constants[c].clone()),
            Source::Slot(s) => {
                let p = plan.nodes.iter().rposition(|n| (n.first_slot as usize) <= s).expect("slot belongs to a node");
                let index = s - plan.nodes[p].first_slot as usize;
                it.results.get(&(p, index)).cloned().ok_or_else(|| {
                    let n = graph.node(plan.nodes[p].graph_id as usize);
                    RuntimeError::DeadFetch { tensor: format!("{}:{index}", n.name) }
                })
            }
        })
        .collect()
}

/// The control signal that goes with a value: dead with it, else live.
fn signal_of(token: &Token) -> Token {
    match token {
        Token::Dead => Token::Dead,
        Token::Live(_) => Token::Live(Tensor::scalar(0i32)),
    }
}
