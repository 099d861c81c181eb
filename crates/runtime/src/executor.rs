//! The executor: runs a plan's nodes as their inputs become ready. A thread that finishes a
//! node runs one newly ready successor itself and hands the rest to the inter-op pool, so a
//! chain runs without any thread hand-off and independent branches run in parallel.
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;

use ferroflow_graph::Graph;
use ferroflow_kernels::{Inputs, KernelContext};
use ferroflow_tensor::Tensor;

use crate::plan::{ExecutionPlan, Source};
use crate::RuntimeError;

/// One output slot of a run.
struct Slot {
    value: UnsafeCell<Option<Tensor>>,
    readers_left: AtomicU32,
}

/// The state of one run of a plan.
struct RunState<'a> {
    plan: &'a ExecutionPlan,
    graph: &'a Graph,
    feeds: &'a [Tensor],
    slots: Vec<Slot>,
    pending: Vec<AtomicU32>,
    abort: AtomicBool,
    error: Mutex<Option<RuntimeError>>,
    ctx: KernelContext<'a>,
    threads: usize,
}

// SAFETY: slots are accessed under the happens-before discipline documented on `read_input`
// and `run_node`: a slot is written once by its producer before the producer's Release
// decrement of its consumers' pending counts, read by consumers only after their Acquire
// observation of zero pending, and taken only by its last reader after all other readers'
// Release decrements of `readers_left`. Everything else is atomics or a Mutex.
unsafe impl Sync for RunState<'_> {}

impl RunState<'_> {
    fn read_input(&self, src: Source) -> Tensor {
        match src {
            Source::Feed(i) => self.feeds[i].clone(),
            Source::Slot(s) => {
                let slot = &self.slots[s];
                if self.plan.fetched[s] {
                    // SAFETY: the producer finished writing before this node became ready,
                    // and fetched slots are never taken during the run.
                    return unsafe { (*slot.value.get()).clone() }
                        .expect("producer wrote its outputs");
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

    /// Runs node `p` and then, inline, one ready successor at a time; other ready
    /// successors are spawned onto the pool.
    fn run_from<'s>(&'s self, mut p: usize, scope: &rayon::Scope<'s>) {
        let mut ready = Vec::new();
        loop {
            if self.abort.load(Ordering::Acquire) {
                return;
            }
            if let Err(e) = self.run_node(p) {
                self.fail(e);
                return;
            }
            ready.clear();
            for &s in &self.plan.nodes[p].successors {
                if self.pending[s].fetch_sub(1, Ordering::AcqRel) == 1 {
                    ready.push(s);
                }
            }
            let Some((&first, rest)) = ready.split_first() else {
                return;
            };
            self.spawn_all(rest, scope);
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
                for p in group {
                    self.run_from(p, s);
                }
            });
        }
    }

    fn run_node(&self, p: usize) -> Result<(), RuntimeError> {
        let node = &self.plan.nodes[p];
        let inputs: Inputs = node.inputs.iter().map(|&s| self.read_input(s)).collect();
        let outputs = node.kernel.compute(&self.ctx, inputs).map_err(|source| {
            let n = self.graph.node(node.graph_id);
            RuntimeError::Kernel {
                node: n.name.clone(),
                op: n.op.clone(),
                source: Box::new(source),
            }
        })?;
        if outputs.len() != node.num_outputs {
            let n = self.graph.node(node.graph_id);
            return Err(RuntimeError::Kernel {
                node: n.name.clone(),
                op: n.op.clone(),
                source: Box::new(ferroflow_kernels::KernelError::InvalidArgument(format!(
                    "kernel produced {} outputs, the op has {}",
                    outputs.len(),
                    node.num_outputs
                ))),
            });
        }
        let types = &self.graph.node(node.graph_id).types.outputs;
        for (i, t) in outputs.into_iter().enumerate() {
            if t.dtype() != types[i] {
                let n = self.graph.node(node.graph_id);
                return Err(RuntimeError::Kernel {
                    node: n.name.clone(),
                    op: n.op.clone(),
                    source: Box::new(ferroflow_kernels::KernelError::InvalidArgument(format!(
                        "output {i} is {}, the op declares {}",
                        t.dtype(),
                        types[i]
                    ))),
                });
            }
            let slot = node.first_slot + i;
            if self.plan.readers[slot] > 0 || self.plan.fetched[slot] {
                // SAFETY: only this node writes its slots, before announcing completion.
                unsafe { *self.slots[slot].value.get() = Some(t) };
            }
        }
        Ok(())
    }
}

/// Runs `plan` once with `feeds` (in plan feed order); returns the fetched tensors.
pub(crate) fn execute(
    plan: &ExecutionPlan,
    graph: &Graph,
    feeds: &[Tensor],
    pool: &rayon::ThreadPool,
    intra_op: Option<&rayon::ThreadPool>,
) -> Result<Vec<Tensor>, RuntimeError> {
    let state = RunState {
        plan,
        graph,
        feeds,
        slots: (0..plan.num_slots)
            .map(|s| Slot {
                value: UnsafeCell::new(None),
                readers_left: AtomicU32::new(plan.readers[s]),
            })
            .collect(),
        pending: plan
            .nodes
            .iter()
            .map(|n| AtomicU32::new(n.pending))
            .collect(),
        abort: AtomicBool::new(false),
        error: Mutex::new(None),
        ctx: KernelContext { intra_op },
        threads: pool.current_num_threads().max(1),
    };
    if !plan.roots.is_empty() {
        let st = &state;
        pool.in_place_scope(|scope| {
            let (&first, rest) = plan.roots.split_first().expect("non-empty");
            st.spawn_all(rest, scope);
            st.run_from(first, scope);
        });
    }
    if let Some(e) = state.error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let mut slots = state.slots;
    Ok(plan
        .fetches
        .iter()
        .map(|&src| match src {
            Source::Feed(i) => feeds[i].clone(),
            Source::Slot(s) => slots[s]
                .value
                .get_mut()
                .clone()
                .expect("every fetched node ran"),
        })
        .collect())
}
