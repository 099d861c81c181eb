use std::path::PathBuf;

use ferroflow_graph::io::GraphFileError;
use ferroflow_graph::GraphError;
use ferroflow_kernels::KernelError;
pub use ferroflow_ops::functions::FunctionDefError;
use ferroflow_optimize::OptimizeError;
use ferroflow_tensor::{DType, Shape};

use crate::partition::PartitionError;
use crate::placer::PlacementError;

/// An error building a plan or running a step. Each variant names the tensor, node or file at
/// fault and carries what was expected as typed fields.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The graph is invalid (including shape inference: the node and op whose shapes do not
    /// fit).
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// A feed, fetch or target names a tensor or node the graph does not have.
    #[error("{what} '{name}': {source}")]
    NoSuchTensor {
        /// `feed`, `fetch` or `target`.
        what: &'static str,
        /// The name as given.
        name: String,
        /// Why it does not resolve.
        source: Box<GraphError>,
    },
    /// A tensor fed twice in one step.
    #[error("feed '{tensor}': fed more than once")]
    FedTwice {
        /// The fed tensor.
        tensor: String,
    },
    /// A feed of the wrong dtype.
    #[error("feed '{tensor}': expected a {expected} tensor, got {got}")]
    FeedDType {
        /// The fed tensor.
        tensor: String,
        /// The tensor's dtype in the graph.
        expected: DType,
        /// The fed value's.
        got: DType,
    },
    /// A feed of a shape the tensor cannot have.
    #[error("feed '{tensor}': expected shape {expected}, got {got:?}")]
    FeedShape {
        /// The fed tensor.
        tensor: String,
        /// The tensor's (partially known) shape in the graph.
        expected: Shape,
        /// The fed value's.
        got: Vec<usize>,
    },
    /// A plan run with the wrong number of feeds.
    #[error("feed '<all>': the plan takes {expected} feeds, got {got}")]
    FeedCount {
        /// Feeds the plan was compiled for.
        expected: usize,
        /// Feeds given.
        got: usize,
    },
    /// A fetched tensor that no live path computed (an untaken branch).
    #[error(
        "fetch '{tensor}': it was never computed: its branch was not taken, or a Merge never received a live input"
    )]
    DeadFetch {
        /// The tensor.
        tensor: String,
    },
    /// A plan with more nodes than the executor can index.
    #[error("fetch '{fetches}': a plan of {nodes} nodes is too large")]
    PlanTooLarge {
        /// The fetches of the signature.
        fetches: String,
        /// Its node count.
        nodes: usize,
    },
    /// A kernel could not be created or failed while running.
    #[error("node '{node}' ({op}): {source}")]
    Kernel {
        /// The node.
        node: String,
        /// Its op.
        op: String,
        /// The kernel's error.
        source: Box<KernelError>,
    },
    /// A kernel returned outputs that do not match its op's signature.
    #[error("node '{node}' ({op}): kernel produced outputs of types {got:?}, the op declares {expected:?}")]
    KernelOutputs {
        /// The node.
        node: String,
        /// Its op.
        op: String,
        /// The dtypes the op declares.
        expected: Vec<DType>,
        /// The dtypes the kernel returned.
        got: Vec<DType>,
    },
    /// A TensorFlow 1 loop ran past `SessionOptions::max_loop_iterations`.
    #[error("node '{node}' ({op}): the loop ran {limit} iterations, the limit set by max_loop_iterations")]
    LoopLimit {
        /// The node that would start the next iteration.
        node: String,
        /// Its op.
        op: String,
        /// The limit.
        limit: u64,
    },
    /// The step was cancelled or ran past `RunOptions.timeout_in_ms`.
    #[error("{interrupt}: {step} stopped{}", still_running(running))]
    Interrupted {
        /// Why.
        interrupt: ferroflow_kernels::step::Interrupt,
        /// The step in words (what it fetches and runs).
        step: String,
        /// The nodes running or about to run when it stopped (`name (Op)`, outermost call
        /// first for nodes inside functions: `loop (While) > body/add (AddV2)`).
        running: Vec<String>,
    },
    /// A TensorFlow 1 control-flow node used outside its frame, or with bad inputs.
    #[error("node '{node}' ({op}): {reason}")]
    ControlFlow {
        /// The node.
        node: String,
        /// Its op.
        op: String,
        /// What is wrong.
        reason: String,
    },
    /// A function-calling node whose function cannot be instantiated.
    #[error("node '{node}' ({op}): {source}")]
    Function {
        /// The calling node.
        node: String,
        /// Its op.
        op: String,
        /// What is wrong (the function is named in it).
        source: Box<FunctionDefError>,
    },
    /// The ranks of a cluster disagree about a step, or cannot exchange what it needs.
    #[error("cluster step: {0}")]
    Cluster(String),
    /// The graph optimizer failed (with `fail_on_pass_error`).
    #[error("optimizer: {0}")]
    Optimizer(#[from] OptimizeError),
    /// A node cannot be placed on the session's devices.
    #[error(transparent)]
    Placement(#[from] PlacementError),
    /// A placed graph cannot be partitioned.
    #[error(transparent)]
    Partition(#[from] PartitionError),
    /// `_Send`/`_Recv` pairs that do not match.
    #[error(transparent)]
    Rendezvous(#[from] RendezvousError),
    /// A file could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A graph file could not be written.
    #[error(transparent)]
    GraphFile(#[from] GraphFileError),
    /// A session option out of range.
    #[error("session option {option}: {reason}")]
    Options {
        /// The option.
        option: &'static str,
        /// What is wrong and what is allowed.
        reason: String,
    },
    /// A thread pool could not be started.
    #[error("cannot start thread pool: {0}")]
    ThreadPool(#[from] rayon::ThreadPoolBuildError),
}

/// `; still running: a (Op), b (Op)` for the first few nodes, or nothing.
fn still_running(nodes: &[String]) -> String {
    if nodes.is_empty() {
        return String::new();
    }
    let shown = nodes.iter().take(4).map(String::as_str).collect::<Vec<_>>().join(", ");
    match nodes.len().saturating_sub(4) {
        0 => format!("; still running: {shown}"),
        more => format!("; still running: {shown} and {more} more"),
    }
}

impl RuntimeError {
    /// Whether a node ran past the end of a sequence (`IteratorGetNext` after the last
    /// element: TensorFlow's `OutOfRangeError`, which input loops stop on).
    pub fn is_out_of_range(&self) -> bool {
        matches!(self, RuntimeError::Kernel { source, .. } if matches!(**source, KernelError::OutOfRange(_)))
    }

    /// The error for a step stopped by `interrupt` while `running` (`name (Op)` each) ran.
    /// A stop inside a function body keeps the body's nodes, under the calling node.
    pub(crate) fn interrupted(
        interrupt: ferroflow_kernels::step::Interrupt,
        step: &str,
        running: Vec<String>,
    ) -> RuntimeError {
        RuntimeError::Interrupted { interrupt, step: step.to_string(), running }
    }

    /// A kernel's error for node `node` (`op`); a function body's stop stays a stop, with
    /// the calling node in front of the body's running nodes.
    pub(crate) fn from_kernel(node: &str, op: &str, step: &str, e: KernelError) -> RuntimeError {
        match e {
            KernelError::Interrupted(i) => RuntimeError::interrupted(i, step, vec![format!("{node} ({op})")]),
            KernelError::Function(inner) => match inner.downcast::<RuntimeError>() {
                Ok(inner) => match *inner {
                    RuntimeError::Interrupted { interrupt, running, .. } => {
                        let running = if running.is_empty() {
                            vec![format!("{node} ({op})")]
                        } else {
                            running.into_iter().map(|r| format!("{node} ({op}) > {r}")).collect()
                        };
                        RuntimeError::interrupted(interrupt, step, running)
                    }
                    other => RuntimeError::Kernel {
                        node: node.to_string(),
                        op: op.to_string(),
                        source: Box::new(KernelError::Function(Box::new(other))),
                    },
                },
                Err(inner) => RuntimeError::Kernel {
                    node: node.to_string(),
                    op: op.to_string(),
                    source: Box::new(KernelError::Function(inner)),
                },
            },
            e => RuntimeError::Kernel { node: node.to_string(), op: op.to_string(), source: Box::new(e) },
        }
    }
}

/// `_Send`/`_Recv` pairs that do not match.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RendezvousError {
    /// Two `_Send`s of one tensor name.
    #[error("rendezvous: tensor_name '{tensor}' is sent twice: by '{first}' and by '{second}'")]
    SentTwice {
        /// The tensor name.
        tensor: String,
        /// One `_Send`.
        first: String,
        /// The other.
        second: String,
    },
    /// A `_Recv` whose tensor no `_Send` sends.
    #[error("rendezvous: _Recv '{recv}' waits for tensor_name '{tensor}', which no _Send sends")]
    NoSend {
        /// The `_Recv`.
        recv: String,
        /// The tensor name it waits for.
        tensor: String,
    },
}
