use ferroflow_graph::GraphError;
use ferroflow_kernels::KernelError;

/// An error building a plan or running a step. Each variant names the tensor or node at fault.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The graph is invalid.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// A feed that does not fit its tensor.
    #[error("feed '{tensor}': {reason}")]
    Feed {
        /// The fed tensor name.
        tensor: String,
        /// What is wrong.
        reason: String,
    },
    /// A fetch or target that does not exist.
    #[error("fetch '{tensor}': {reason}")]
    Fetch {
        /// The fetched tensor or target name.
        tensor: String,
        /// What is wrong.
        reason: String,
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
    /// The graph optimizer failed (with `fail_on_pass_error`).
    #[error("optimizer: {0}")]
    Optimizer(String),
    /// `_Send`/`_Recv` pairs that do not match.
    #[error("rendezvous: {0}")]
    Rendezvous(String),
    /// Placement or partitioning failed.
    #[error("{0}")]
    Placement(String),
    /// A file could not be written.
    #[error("{0}")]
    Io(String),
    /// A thread pool could not be started.
    #[error("cannot start thread pool: {0}")]
    ThreadPool(String),
}
