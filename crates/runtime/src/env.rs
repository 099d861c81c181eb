//! What a session shares with the sessions of the functions it calls: thread pools, options,
//! session state, and the chain of functions being instantiated (to reject recursion).
use std::sync::Arc;

use ferroflow_kernels::resource::ResourceMgr;
use ferroflow_kernels::step::StepControl;
use ferroflow_kernels::KernelContext;

use crate::{RuntimeError, SessionOptions};

/// The runtime environment of a top-level session and every function body it runs.
#[derive(Clone)]
pub(crate) struct RuntimeEnv {
    /// Runs independent nodes.
    pub inter_op: Arc<rayon::ThreadPool>,
    /// Where kernels split their work: the inter-op pool itself when the thread counts are
    /// equal, a pool of its own otherwise, none for one thread.
    pub intra_op: Option<Arc<rayon::ThreadPool>>,
    pub options: SessionOptions,
    /// The functions being instantiated, outermost first.
    pub call_stack: Vec<String>,
    /// Variables and random states: one manager per top-level session, shared with the
    /// functions it calls.
    pub resources: Arc<ResourceMgr>,
}

/// The most threads one pool may have: far more than any machine has cores, few enough to
/// start in moments (a typo of `1000000` fails at once instead of spawning for a minute).
pub const MAX_THREADS: usize = 4096;

/// `n`, or one per core for 0.
fn threads(n: usize) -> usize {
    if n == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        n
    }
}

impl RuntimeEnv {
    /// Starts the thread pools `options` ask for.
    pub fn new(options: SessionOptions) -> Result<RuntimeEnv, RuntimeError> {
        for (option, n) in
            [("inter_op_threads", options.inter_op_threads), ("intra_op_threads", options.intra_op_threads)]
        {
            if n > MAX_THREADS {
                return Err(RuntimeError::Options {
                    option,
                    reason: format!("{n} threads asked for; at most {MAX_THREADS} (0 means one per core)"),
                });
            }
        }
        let limit = options.memory_limit_bytes;
        let pool = |n: usize, name: &'static str| ferroflow_kernels::thread_pool(n, name, limit);
        let inter = threads(options.inter_op_threads);
        let inter_op = Arc::new(pool(inter, "inter")?);
        // With as many intra-op as inter-op threads, kernels split their work on the inter-op
        // pool itself (rayon's work stealing): a second pool would put twice as many threads
        // on the cores, and their spinning and wake-ups cost more than they give.
        let intra_op = match threads(options.intra_op_threads) {
            0 | 1 => None,
            n if n == inter => Some(inter_op.clone()),
            n => Some(Arc::new(pool(n, "intra")?)),
        };
        Ok(RuntimeEnv { inter_op, intra_op, options, call_stack: Vec::new(), resources: Arc::default() })
    }

    /// What kernels get: the intra-op pool, the session's state and the step's control.
    pub fn kernel_context<'a>(&'a self, step: &'a StepControl) -> KernelContext<'a> {
        KernelContext { intra_op: self.intra_op.as_deref(), resources: Some(&self.resources), step: Some(step) }
    }
}
