//! The executor: runs a plan's nodes as their inputs become ready. A thread that finishes a
//! node runs one newly ready successor itself and hands the rest to the inter-op pool, so a
//! chain runs without any thread hand-off and independent branches run in parallel.
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;

use ferroflow_graph::Graph;
use ferroflow_kernels::{KernelContext, KernelError};
use ferroflow_tensor::Tensor;

use ferroflow_kernels::step::StepControl;

use crate::buffers::{RunBuffers, Slot, StartState};
use crate::plan::{CondKind, ExecutionPlan, Source, SINGLE_EDGE};
use crate::RuntimeError;

/// The state of one run of a plan.
struct RunState<'a> {
    plan: &'a ExecutionPlan,
    graph: &'a Graph,
    feeds: &'a [Tensor],
    slots: Vec<Slot>,
    pending: Vec<AtomicU32>,
    dead: Vec<AtomicBool>,
    dead_in: Vec<AtomicBool>,
    abort: AtomicBool,
    error: Mutex<Option<RuntimeError>>,
    ctx: KernelContext<'a>,
    threads: usize,
    tracer: Option<&'a crate::trace::Tracer>,
    /// While a profile runs: the run's id and each plan node's event name.
    profile: Option<(i64, &'a [ferroflow_profiler::NameId])>,
    /// The step's control when it can stop early (checked before each node).
    bounded: Option<&'a StepControl>,
    /// With `bounded`: the node each pool thread is running (plan index + 1; 0 for none),
    /// one cache line each, and a last entry for threads outside the pool.
    running: Vec<Running>,
}

/// A thread's running node, alone on its cache line.
#[repr(align(64))]
struct Running(AtomicU32);

// SAFETY: slots are accessed under the happens-before discipline documented on `read_input`
// and `run_node`: a slot is written once by its producer before the producer's Release
// decrement of its consumers' pending counts, read by consumers only after their Acquire
// observation of zero pending, and taken only by its last reader after all other readers'
// Release decrements of `readers_left`. Everything else is atomics or a Mutex.
unsafe impl Sync for RunState<'_> {}

impl RunState<'_> {
    #[inline(always)]
    fn read_input(&self, src: Source) -> Tensor {
        match src {
            Source::Feed(i) => self.feeds[i].clone(),
            Source::Const(c) => self.plan.constants[c].clone(),
            Source::Slot(s) => {
                let slot = &self.slots[s];
                if self.plan.fetched[s] {
                    // SAFETY: the producer finished writing before this node became ready,
                    // and fetched slots are never taken during the run.
                    return unsafe { (*slot.value.get()).clone() }.expect("producer wrote its outputs");
                }
                // Clone before announcing the read; the last reader (which sees 1) then
                // knows every other reader has finished cloning and may take the value.
                if slot.readers_left.load(Ordering::Acquire) == 1 {
                    // SAFETY: we are the only remaining reader (the count only drops), all
                    // earlier readers' clones happened before their decrements, which the
                    // Acquire load observed.
                    let taken = unsafe { (*slot.value.get()).take() };
                    slot.readers_left.store(0, Ordering::Release);
                    return taken.expect("producer wrote its outputs");
                }
                // SAFETY: shared read of a fully written slot (see above).
                let v = unsafe { (*slot.value.get()).clone() }.expect("producer wrote its outputs");
                if slot.readers_left.fetch_sub(1, Ordering::AcqRel) == 1 {
                    // We became the last reader after cloning: drop the slot's copy.
                    // SAFETY: all other readers have decremented, so none is still reading.
                    unsafe { *slot.value.get() = None };
                }
                v
            }
        }
    }

    fn fail(&self, e: RuntimeError) {
        self.abort.store(true, Ordering::Release);
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert(e);
    }

    /// `name (Op)` of plan node `p`.
    fn who(&self, p: usize) -> String {
        let n = self.graph.node(self.plan.nodes[p].graph_id as usize);
        format!("{} ({})", n.name, n.op)
    }

    /// Fails the step if it is cancelled or past its deadline, naming `p` (about to run) and
    /// the nodes other threads are running; else marks `p` as this thread's running node.
    /// Out of line: unbounded steps (the common case) pay only the branch that skips it.
    #[cold]
    #[inline(never)]
    fn check_step(&self, step: &StepControl, p: usize) -> bool {
        let mine = &self.running[rayon::current_thread_index().map_or(self.threads, |i| i.min(self.threads))].0;
        if let Err(i) = step.check() {
            mine.store(0, Ordering::Relaxed);
            let mut running = vec![self.who(p)];
            running.extend(self.running.iter().filter_map(|r| match r.0.load(Ordering::Relaxed) {
                0 => None,
                q => Some(self.who(q as usize - 1)),
            }));
            self.fail(RuntimeError::interrupted(i, &self.plan.step_name, running));
            return false;
        }
        mine.store(p as u32 + 1, Ordering::Relaxed);
        true
    }

    /// Marks this thread as running no node (bounded steps only).
    #[cold]
    #[inline(never)]
    fn clear_running(&self) {
        self.running[rayon::current_thread_index().map_or(self.threads, |i| i.min(self.threads))]
            .0
            .store(0, Ordering::Relaxed);
    }

    /// Runs node `p` and then, inline, one ready successor at a time; other ready
    /// successors are spawned onto the pool.
    fn run_from<'s>(&'s self, mut p: usize, scope: &rayon::Scope<'s>, scratch: &mut Scratch) {
        let _run = self.profile.map(|(run, _)| ferroflow_profiler::enter_run(run));
        scratch.chain = None;
        scratch.trace.break_chain();
        // Whether `scratch.outputs` holds the previous node's output for `p` (a hand-off).
        let mut handed = false;
        loop {
            if self.abort.load(Ordering::Acquire) {
                scratch.outputs.clear();
                return;
            }
            if let Some(step) = self.bounded {
                if !self.check_step(step, p) {
                    scratch.outputs.clear();
                    return;
                }
            }
            let result = if self.plan.cond_kinds.is_empty() {
                self.run_node(p, handed, scratch).map(|h| {
                    handed = h;
                    false
                })
            } else {
                self.run_cond(p, scratch)
            };
            let node_dead = match result {
                Ok(d) => d,
                Err(e) => {
                    self.fail(e);
                    return;
                }
            };
            let (a, b) = self.plan.nodes[p].successors;
            if handed {
                // The one successor, ready by this node alone (see `PlanNode::hand_off`).
                p = (self.plan.successor_list[a as usize] & !SINGLE_EDGE) as usize;
                continue;
            }
            let ready = &mut scratch.ready;
            ready.clear();
            for &s in &self.plan.successor_list[a as usize..b as usize] {
                let single = s & SINGLE_EDGE != 0;
                let s = (s & !SINGLE_EDGE) as usize;
                if node_dead {
                    // Published by the Release in the decrement below (or program order when
                    // this thread runs the successor itself).
                    self.dead_in[s].store(true, Ordering::Relaxed);
                }
                if single || self.pending[s].fetch_sub(1, Ordering::AcqRel) == 1 {
                    ready.push(s);
                }
            }
            let Some((&first, rest)) = ready.split_first() else {
                if self.bounded.is_some() {
                    self.clear_running();
                }
                return;
            };
            if !rest.is_empty() {
                let rest = rest.to_vec();
                self.spawn_all(&rest, scope);
            }
            p = first;
        }
    }

    /// Spawns ready nodes; many tiny ones are grouped so a wide graph costs a few spawns
    /// per thread rather than one per node.
    fn spawn_all<'s>(&'s self, nodes: &[usize], scope: &rayon::Scope<'s>) {
        if nodes.is_empty() {
            return;
        }
        let threads = self.threads;
        let chunk = nodes.len().div_ceil(threads * 4).max(1);
        for group in nodes.chunks(chunk) {
            let group = group.to_vec();
            scope.spawn(move |s| {
                let mut scratch = Scratch::default();
                for p in group {
                    self.run_from(p, s, &mut scratch);
                }
                if let Some(t) = self.tracer {
                    t.absorb(&mut scratch.trace);
                }
            });
        }
    }

    fn kernel_error(&self, p: usize, e: KernelError) -> RuntimeError {
        let n = self.graph.node(self.plan.nodes[p].graph_id as usize);
        RuntimeError::from_kernel(&n.name, &n.op, &self.plan.step_name, e)
    }

    /// Runs one node of a plan with conditionals; returns whether the node is dead (then
    /// every output is dead and its successors see a dead input). Dead values are never
    /// computed: a node with a dead input only releases its live inputs.
    fn run_cond(&self, p: usize, scratch: &mut Scratch) -> Result<bool, RuntimeError> {
        let node = &self.plan.nodes[p];
        let (a, b) = node.inputs;
        let srcs = &self.plan.input_sources[a as usize..b as usize];
        let is_dead = |s: &Source| matches!(*s, Source::Slot(x) if self.dead[x].load(Ordering::Relaxed));
        let first = node.first_slot as usize;
        let mark_dead = |n: usize| {
            for i in 0..n {
                self.dead[first + i].store(true, Ordering::Relaxed);
            }
        };
        let store = |i: usize, t: Tensor| {
            if self.plan.readers[first + i] > 0 || self.plan.fetched[first + i] {
                // SAFETY: only this node writes its slots, before announcing completion.
                unsafe { *self.slots[first + i].value.get() = Some(t) };
            }
        };
        match self.plan.cond_kinds[p] {
            CondKind::Merge => {
                let mut chosen = None;
                for (i, s) in srcs.iter().enumerate() {
                    if !is_dead(s) {
                        let t = self.read_input(*s);
                        chosen.get_or_insert((i, t));
                    }
                }
                match chosen {
                    Some((i, t)) => {
                        store(0, t);
                        store(1, Tensor::scalar(i as i32));
                        Ok(false)
                    }
                    None => {
                        mark_dead(2);
                        Ok(true)
                    }
                }
            }
            kind => {
                if self.dead_in[p].load(Ordering::Relaxed) || srcs.iter().any(is_dead) {
                    for s in srcs.iter().filter(|s| !is_dead(s)) {
                        drop(self.read_input(*s));
                    }
                    mark_dead(node.output_types.len());
                    return Ok(true);
                }
                if kind == CondKind::Switch {
                    let data = self.read_input(srcs[0]);
                    let pred = self.read_input(srcs[1]);
                    let pred = pred.scalar_value::<bool>().map_err(|e| {
                        self.kernel_error(p, KernelError::InvalidArgument(format!("pred must be a scalar bool: {e}")))
                    })?;
                    let (live, dead) = if pred { (1, 0) } else { (0, 1) };
                    self.dead[first + dead].store(true, Ordering::Relaxed);
                    store(live, data);
                    return Ok(false);
                }
                self.run_node(p, false, scratch).map(|_| false)
            }
        }
    }

    /// Runs one node, using `scratch` (kept by the calling thread) for its inputs and outputs;
    /// with `handed`, its one input is the tensor `scratch.outputs` holds. Returns whether it
    /// left its output there for its successor (a hand-off, see `PlanNode::hand_off`).
    fn run_node(&self, p: usize, handed: bool, scratch: &mut Scratch) -> Result<bool, RuntimeError> {
        let node = &self.plan.nodes[p];
        let (a, b) = node.inputs;
        let start = self.tracer.map(|_| scratch.trace.start());
        if handed {
            std::mem::swap(&mut scratch.inputs, &mut scratch.outputs);
        } else {
            scratch.inputs.extend(self.plan.input_sources[a as usize..b as usize].iter().map(|&s| self.read_input(s)));
        }
        let op_start = self.tracer.map(|t| t.now());
        let result = profiled(self.profile, p, &mut scratch.chain, || {
            node.kernel.compute(&self.ctx, &mut scratch.inputs, &mut scratch.outputs)
        });
        if let (Some(start), Some(op_start)) = (start, op_start) {
            scratch.trace.record(node.graph_id as usize, start, op_start, &scratch.outputs);
        }
        scratch.inputs.clear();
        // A kernel that stopped its loops early (a product cut short, see `matmul`) may
        // return normally; what it made must not reach a fetch.
        let result = match (result, self.ctx.step.filter(|s| s.is_bounded())) {
            (Ok(()), Some(step)) => step.check().map_err(Into::into),
            (r, _) => r,
        };
        if let Err(e) = result {
            scratch.outputs.clear();
            return Err(self.kernel_error(p, e));
        }
        let types = &node.output_types;
        if scratch.outputs.len() != types.len() || scratch.outputs.iter().zip(types).any(|(t, d)| t.dtype() != *d) {
            let n = self.graph.node(node.graph_id as usize);
            let got = scratch.outputs.drain(..).map(|t| t.dtype()).collect();
            return Err(RuntimeError::KernelOutputs {
                node: n.name.clone(),
                op: n.op.clone(),
                expected: types.to_vec(),
                got,
            });
        }
        if node.hand_off {
            return Ok(true);
        }
        for (i, t) in scratch.outputs.drain(..).enumerate() {
            let slot = node.first_slot as usize + i;
            if self.plan.readers[slot] > 0 || self.plan.fetched[slot] {
                // SAFETY: only this node writes its slots, before announcing completion.
                unsafe { *self.slots[slot].value.get() = Some(t) };
            }
        }
        Ok(false)
    }
}

/// Buffers a thread reuses from node to node: kernel inputs and outputs, ready successors.
#[derive(Default)]
struct Scratch {
    inputs: Vec<Tensor>,
    outputs: Vec<Tensor>,
    ready: Vec<usize>,
    /// When profiling: the tick the previous op this thread ran back to back ended at.
    chain: Option<u64>,
    /// When tracing (FULL_TRACE): this task's step stats, handed to the tracer at its end.
    trace: crate::trace::LocalRecords,
}

/// The profiled run this execution belongs to: the caller's (a function body run from a
/// kernel, or a session run), or a new one.
pub(crate) fn run_id() -> i64 {
    match ferroflow_profiler::current_run() {
        0 => ferroflow_profiler::new_run_id(),
        run => run,
    }
}

/// Runs plan node `p`'s `compute`, recorded as an op event of the run while a profile runs
/// (the thread has entered the run, see `run_from`, so function bodies it runs join it).
///
/// One clock read per op: on a thread that runs ops back to back, an op's event starts where
/// the previous one's ended (`chain`; the executor's bookkeeping between them, reading inputs
/// and readying successors, tens of ns, counts in the second op), so an event costs one
/// counter read and the record. The first op a thread runs after being idle reads the clock
/// at its start.
#[inline]
pub(crate) fn profiled<R>(
    profile: Option<(i64, &[ferroflow_profiler::NameId])>,
    p: usize,
    chain: &mut Option<u64>,
    compute: impl FnOnce() -> R,
) -> R {
    let Some((run, names)) = profile else { return compute() };
    let t0 = chain.take().unwrap_or_else(ferroflow_profiler::clock::ticks);
    let r = compute();
    let t1 = ferroflow_profiler::clock::ticks();
    ferroflow_profiler::record(names[p], ferroflow_profiler::Kind::Op, t0, t1, run);
    *chain = Some(t1);
    r
}

/// Runs `plan` once with `feeds` (in plan feed order); returns the fetched tensors.
pub(crate) fn execute(
    plan: &ExecutionPlan,
    graph: &Graph,
    feeds: &[Tensor],
    pool: &rayon::ThreadPool,
    ctx: KernelContext,
    tracer: Option<&crate::trace::Tracer>,
) -> Result<Vec<Tensor>, RuntimeError> {
    let buffers = plan.spare_buffers.take(StartState {
        readers: &plan.readers,
        pending: plan.nodes.iter().map(|n| n.pending),
        conditional: !plan.cond_kinds.is_empty(),
    });
    let threads = pool.current_num_threads().max(1);
    let bounded = ctx.step.filter(|s| s.is_bounded());
    let state = RunState {
        plan,
        graph,
        feeds,
        slots: buffers.slots,
        pending: buffers.pending,
        dead: buffers.dead,
        dead_in: buffers.dead_in,
        abort: AtomicBool::new(false),
        error: Mutex::new(None),
        ctx,
        threads,
        tracer,
        profile: ferroflow_profiler::enabled().then(|| (run_id(), plan.profile_names())),
        bounded,
        running: match bounded {
            Some(_) => (0..=threads).map(|_| Running(AtomicU32::new(0))).collect(),
            None => Vec::new(),
        },
    };
    if !plan.roots.is_empty() {
        let st = &state;
        let body_done = AtomicBool::new(false);
        // A step of large kernels on a pool that is also the intra-op pool keeps the other
        // threads awake for the kernels' split halves: waking a sleeping thread costs 30–45 us
        // on this machine kind (a VM), as long as a small kernel's whole run. MobileNetV2 at
        // batch 1 on 2 threads: 10.9 ms -> 9.2 ms.
        let spin = plan.splits_work && threads > 1 && st.ctx.intra_op.is_some_and(|p| std::ptr::eq(p, pool));
        let body = || {
            pool.in_place_scope(|scope| {
                if spin {
                    let done = &body_done;
                    for _ in 1..threads {
                        scope.spawn(move |_| spin_for_work(done));
                    }
                }
                let (&first, rest) = plan.roots.split_first().expect("non-empty");
                st.spawn_all(rest, scope);
                let mut scratch = Scratch::default();
                st.run_from(first, scope, &mut scratch);
                if let Some(t) = st.tracer {
                    t.absorb(&mut scratch.trace);
                }
                body_done.store(true, Ordering::Release);
            })
        };
        if spin {
            // Such a step runs on a pool thread, not the caller's: a kernel called from outside
            // the pool hands its split halves to the pool and sleeps until they are done (and a
            // third thread competes for 2 cores), about 280 context switches per ResNet50
            // step at batch 1. On the pool its halves run inline: ResNet50 at batch 1 on 2
            // threads 30.7-31.5 -> 26.5-28.1 ms, MobileNetV2 5.0 -> 4.3 ms; one hand-over per
            // step. Small steps stay on the caller (a hand-over costs as much as they do).
            pool.install(body);
        } else {
            body();
        }
    }
    if let Some(e) = state.error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let mut slots = state.slots;
    let mut dead = state.dead;
    let results = plan
        .fetches
        .iter()
        .map(|&src| match src {
            Source::Feed(i) => Ok(feeds[i].clone()),
            Source::Const(c) => Ok(plan.constants[c].clone()),
            Source::Slot(s) => match slots[s].value.get_mut().clone() {
                Some(t) => Ok(t),
                None if dead.get_mut(s).is_some_and(|d| *d.get_mut()) => {
                    let p = plan.nodes.iter().rposition(|n| (n.first_slot as usize) <= s).expect("slot has a node");
                    let n = graph.node(plan.nodes[p].graph_id as usize);
                    Err(RuntimeError::DeadFetch {
                        tensor: format!("{}:{}", n.name, s - plan.nodes[p].first_slot as usize),
                    })
                }
                None => unreachable!("every fetched node ran"),
            },
        })
        .collect::<Result<Vec<Tensor>, RuntimeError>>();
    plan.spare_buffers.put(RunBuffers { slots, pending: state.pending, dead, dead_in: state.dead_in });
    results
}

/// How long a pool thread of a running step keeps looking for work before it leaves the pool
/// to sleep.
const SPIN: std::time::Duration = std::time::Duration::from_micros(1000);

/// A pool thread kept awake while a step runs: it runs whatever work appears (a kernel's
/// split half, a ready node) at once instead of being woken for it, until the step's first
/// task has returned or it has found nothing for [`SPIN`].
fn spin_for_work(done: &AtomicBool) {
    let mut idle_since = std::time::Instant::now();
    loop {
        match rayon::yield_now() {
            Some(rayon::Yield::Executed) => idle_since = std::time::Instant::now(),
            _ => {
                if done.load(Ordering::Acquire) || idle_since.elapsed() > SPIN {
                    return;
                }
                std::hint::spin_loop();
            }
        }
    }
}
