//! What one run of a plan writes — an output slot per tensor, a pending-input count per
//! node, dead flags for plans with conditionals — kept by the plan between runs
//! ([`SpareBuffers`]), so a run allocates nothing proportional to the graph.
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32};
use std::sync::Mutex;

use ferroflow_tensor::Tensor;

/// One output slot of a run.
pub(crate) struct Slot {
    pub value: UnsafeCell<Option<Tensor>>,
    pub readers_left: AtomicU32,
}

/// Per-run slot and dependency-count storage.
pub(crate) struct RunBuffers {
    pub slots: Vec<Slot>,
    pub pending: Vec<AtomicU32>,
    /// Plans with conditionals: which slots hold dead values (their branch was not taken).
    pub dead: Vec<AtomicBool>,
    /// Plans with conditionals: nodes that received a dead control (or data) input.
    pub dead_in: Vec<AtomicBool>,
}

/// What a plan's runs start from: each slot's readers, each node's pending edges, and
/// whether the plan has conditionals (dead flags).
pub(crate) struct StartState<'a, P> {
    pub readers: &'a [u32],
    pub pending: P,
    pub conditional: bool,
}

impl RunBuffers {
    fn new<P: ExactSizeIterator<Item = u32>>(start: StartState<P>) -> RunBuffers {
        let flags = |n: usize| {
            if start.conditional {
                (0..n).map(|_| AtomicBool::new(false)).collect()
            } else {
                Vec::new()
            }
        };
        let nodes = start.pending.len();
        RunBuffers {
            slots: start
                .readers
                .iter()
                .map(|&r| Slot { value: UnsafeCell::new(None), readers_left: AtomicU32::new(r) })
                .collect(),
            pending: start.pending.map(AtomicU32::new).collect(),
            dead: flags(start.readers.len()),
            dead_in: flags(nodes),
        }
    }

    /// Restores the start-of-run state (drops values an aborted run left behind).
    fn reset<P: Iterator<Item = u32>>(&mut self, start: StartState<P>) {
        for (slot, &readers) in self.slots.iter_mut().zip(start.readers) {
            *slot.value.get_mut() = None;
            *slot.readers_left.get_mut() = readers;
        }
        for (p, n) in self.pending.iter_mut().zip(start.pending) {
            *p.get_mut() = n;
        }
        for d in self.dead.iter_mut().chain(self.dead_in.iter_mut()) {
            *d.get_mut() = false;
        }
    }
}

/// Run buffers returned by finished runs of one plan, for its next runs.
#[derive(Default)]
pub(crate) struct SpareBuffers(Mutex<Vec<RunBuffers>>);

impl SpareBuffers {
    /// Buffers in the start-of-run state (a spare one reset, or new ones).
    pub fn take<P: ExactSizeIterator<Item = u32>>(&self, start: StartState<P>) -> RunBuffers {
        match self.0.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            Some(mut b) => {
                b.reset(start);
                b
            }
            None => RunBuffers::new(start),
        }
    }

    /// Keeps a finished run's buffers.
    pub fn put(&self, buffers: RunBuffers) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(buffers);
    }
}
